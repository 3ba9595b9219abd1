"""The transaction engine on its own, with a manual clock: coordinator, buffer, pending ack, recovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.broker import Broker, BrokerConfig
from engine.clock import ManualClock
from engine.errors import BrokerError
from engine.store import Store
from engine.subscription import Consumer, Delivery, SubType
from engine.topic import AccessMode, Producer
from engine.transactions import TxnAction, TxnId
from engine.txn_buffer import SnapshotPolicy
from wire.framing import make_body
from wire.pulsar_api_pb2 import MessageMetadata, ServerError

TOPIC = "persistent://public/default/engine-txn"


class Sink:
    """Records what the engine sends to a consumer or producer connection."""

    writable = True

    def __init__(self) -> None:
        self.received: list[tuple[bytes, int]] = []

    def deliver(self, consumer: Consumer, deliveries: list[Delivery]) -> None:
        for d in deliveries:
            self.received.append((_payload(d.entry.body), d.redelivery_count))

    def active_consumer_change(self, consumer: Consumer, is_active: bool) -> None:
        pass

    def close_consumer(self, consumer: Consumer) -> None:
        pass

    def close_producer(self, producer: Producer) -> None:
        pass

    def producer_ready(self, producer: Producer) -> None:
        pass

    def payloads(self) -> list[bytes]:
        return [p for p, _ in self.received]


def _payload(body: bytes) -> bytes:
    size = int.from_bytes(body[6:10], "big")
    return body[10 + size :]


class Harness:
    """A broker on a store in ``path`` with a manual clock."""

    def __init__(self, path: Path, clock: ManualClock | None = None, **config: object) -> None:
        self.path = path
        self.clock = clock or ManualClock()
        self.broker = Broker(
            Store(path / "store.sqlite"), self.clock, BrokerConfig(transaction_coordinators=2, **config)
        )
        self.sink = Sink()
        self.topic = self.broker.topic(TOPIC)
        self.producer = Producer(1, "p", AccessMode.SHARED, 0, self.sink)
        self.topic.add_producer(self.producer)
        self.seq = 0
        self.results: list[object] = []

    def run(self) -> None:
        self.clock.advance(0)

    def send(self, payload: bytes, txn: TxnId | None = None) -> None:
        self.seq += 1
        meta = MessageMetadata(producer_name="p", sequence_id=self.seq, publish_time=1)
        if txn is not None:
            meta.txnid_most_bits, meta.txnid_least_bits = txn
        self.topic.publish(
            self.producer, self.seq, -1, make_body(meta, payload), meta, self.results.append, txn
        )
        self.run()

    def new_txn(self, timeout_ms: int = 60_000) -> TxnId:
        box: list[TxnId] = []
        self.broker.coordinators.new_txn(0, timeout_ms, box.append)
        self.run()
        return box[0]

    def add_partition(self, txn: TxnId) -> None:
        self.broker.coordinators.add_partitions(txn, [TOPIC], self.results.append)
        self.run()

    def end(self, txn: TxnId, action: TxnAction) -> None:
        self.broker.coordinators.end(txn, action, self.results.append)
        self.run()

    def subscribe(
        self, name: str = "sub", sub_type: SubType = SubType.SHARED, permits: int = 1000
    ) -> Consumer:
        consumer = Consumer(len(self.topic.subscriptions) + 1, f"c-{name}", self.sink)
        sub = self.topic.subscribe(
            name, sub_type, consumer, durable=True, earliest=True, start_entry=None, sticky=False
        )
        sub.flow(consumer, permits)
        self.run()
        return consumer

    def close(self) -> None:
        self.broker.store.close()


def test_commit_makes_messages_visible_in_log_order(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.subscribe()
    txn = h.new_txn()
    h.add_partition(txn)
    h.send(b"t1", txn)
    h.send(b"plain-1")
    assert h.sink.payloads() == []
    assert h.topic.read_limit == -1
    h.end(txn, TxnAction.COMMIT)
    assert h.sink.payloads() == [b"t1", b"plain-1"]


def test_abort_hides_messages_and_unblocks_the_topic(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.subscribe()
    txn = h.new_txn()
    h.add_partition(txn)
    h.send(b"t1", txn)
    h.send(b"plain-1")
    h.end(txn, TxnAction.ABORT)
    assert h.sink.payloads() == [b"plain-1"]
    with pytest.raises(BrokerError) as err:
        h.end(txn, TxnAction.COMMIT)
    assert err.value.code == ServerError.TransactionNotFound


def test_timeout_aborts_and_releases_pending_acks(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.send(b"m1")
    consumer = h.subscribe()
    sub = consumer.subscription
    assert sub is not None
    txn = h.new_txn(timeout_ms=2000)
    sub.pending_ack.acknowledge(txn, consumer, [(0, None, 1)], cumulative=False)
    other = h.new_txn()
    with pytest.raises(BrokerError) as err:
        sub.pending_ack.acknowledge(other, consumer, [(0, None, 1)], cumulative=False)
    assert err.value.code == ServerError.TransactionConflict
    h.clock.advance(2.5)
    assert h.broker.coordinators.coordinators[0].stats.timed_out == 1
    assert h.sink.received[-1] == (b"m1", 1)


def test_timeouts_run_on_monotonic_time_across_wall_clock_steps(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    coordinator = h.broker.coordinators.coordinators[0]
    first = h.new_txn(timeout_ms=2000)
    h.clock.step_wall(-3600)
    h.clock.advance(2.5)
    assert coordinator.stats.timed_out == 1
    assert h.broker.coordinators.active() == 0
    second = h.new_txn(timeout_ms=2000)
    h.clock.step_wall(+3600)
    h.clock.advance(1)
    assert coordinator.stats.timed_out == 1
    h.clock.advance(1.5)
    assert coordinator.stats.timed_out == 2
    assert first != second


def test_restart_finishes_committing_and_times_out_open(tmp_path: Path) -> None:
    h = Harness(tmp_path, txn_end_delay_ms=10_000)
    open_txn = h.new_txn(timeout_ms=5000)
    h.add_partition(open_txn)
    h.send(b"open-1", open_txn)
    committing = h.new_txn()
    h.add_partition(committing)
    h.send(b"c-1", committing)
    h.broker.coordinators.end(committing, TxnAction.COMMIT, h.results.append)
    h.broker.flush()  # COMMITTING is durable; the second step waits for the delay
    h.close()

    clock = ManualClock(h.clock.now() + 10)
    again = Harness(tmp_path, clock)
    again.subscribe()
    clock.advance(0)
    # The COMMITTING transaction was finished by recovery: its message is visible.
    assert again.sink.payloads() == [b"c-1"]
    # The open transaction's time ran out while the server was down: it is aborted.
    assert again.broker.coordinators.active() == 0
    assert b"open-1" not in again.sink.payloads()
    again.send(b"after")
    assert again.sink.payloads()[-1] == b"after"
    assert b"c-1" in again.sink.payloads()


def test_recovery_replays_only_after_the_snapshot(tmp_path: Path) -> None:
    h = Harness(tmp_path, snapshot_policy=SnapshotPolicy(max_changes=1, interval_seconds=60))
    txn = h.new_txn()
    h.add_partition(txn)
    h.send(b"t", txn)
    h.end(txn, TxnAction.ABORT)
    for i in range(50):
        h.send(f"plain-{i}".encode())
    h.close()
    again = Harness(tmp_path, ManualClock(h.clock.now()))
    tb = again.topic.txn_buffer
    assert tb.recovered_from_snapshot
    assert tb.replayed_entries <= 52
    assert TxnId(*txn) in tb.aborted
    again.subscribe()
    assert again.sink.payloads()[0] == b"plain-0"


@pytest.mark.parametrize("timeout_ms", [0, -1, 99])
def test_timeout_below_the_tick_times_out_as_the_txn_opens(tmp_path: Path, timeout_ms: int) -> None:
    """As Pulsar's coordinator: an end within the tick finds the timeout's abort in flight (a commit: expecting
    COMMITTING; an abort joins it and finds it ABORTED first), later ones nothing."""
    h = Harness(tmp_path)
    txn = h.new_txn(timeout_ms)
    for action, expected, actual in ((TxnAction.ABORT, "ABORTING", "ABORTED"), (TxnAction.COMMIT, "COMMITTING",
                                                                               "ABORTING")):
        with pytest.raises(BrokerError) as raised:
            h.end(txn, action)
        assert raised.value.code == ServerError.InvalidTxnStatus
        assert raised.value.message == f"Expect Txn `{txn}` to be in {expected} status but it is in {actual} status"
    h.clock.advance(0.1)
    with pytest.raises(BrokerError) as raised:
        h.end(txn, TxnAction.ABORT)
    assert raised.value.message == f"The transaction with this txdID `{txn}`not found "
    assert h.broker.coordinators.coordinators[0].stats.timed_out == 1
    other = h.new_txn(100)
    h.end(other, TxnAction.ABORT)
    assert h.results[-1] is None
    h.close()


def test_late_entry_of_an_aborted_txn_holds_nothing_back(tmp_path: Path) -> None:
    """A send in a transaction aborted on the partition is stored, never delivered, and never bounds the reads."""
    h = Harness(tmp_path)
    h.subscribe()
    txn = h.new_txn()
    h.add_partition(txn)
    h.send(b"t-0", txn)
    h.end(txn, TxnAction.ABORT)
    h.send(b"late", txn)
    h.send(b"p-0")
    assert h.topic.txn_buffer.ongoing == {}
    assert h.sink.payloads() == [b"p-0"]
    h.close()
