"""Commits that fail (a full disk) in the middle of transactions and deduplication, on the engine with a manual clock.

Each case was found by the simulator (tests/sim; its seeds are kept in tests/test_sim.py): a transaction whose end
was lost must stay open to consumers and retryable, a sequence id is taken as stored only by the commit that
stores it, and a transaction-buffer snapshot lost with its commit must not leave recovery without a start.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engine.broker import Broker, BrokerConfig
from engine.clock import ManualClock
from engine.coordinator import END_RETRY_SECONDS
from engine.errors import BrokerError
from engine.store import Store, StoreFullError
from engine.subscription import Consumer, SubType
from engine.topic import AccessMode, Producer
from engine.transactions import TxnAction, TxnId, TxnStatus
from engine.txn_buffer import SnapshotPolicy
from tests.test_engine_transactions import TOPIC, Harness, Sink
from wire.pulsar_api_pb2 import ServerError


class FailableCommits:
    """Commits inline unless told to fail the next ones, or to hold them until :meth:`release`."""

    def __init__(self) -> None:
        self.fail_next = 0
        self.holding = False
        self.held: list[tuple[Callable[[], None], Callable[[BaseException | None], None]]] = []

    def run(self, work: Callable[[], None], done: Callable[[BaseException | None], None], small: bool) -> None:
        if self.holding:
            self.held.append((work, done))
            return
        self._run(work, done)

    def _run(self, work: Callable[[], None], done: Callable[[BaseException | None], None]) -> None:
        if self.fail_next:
            self.fail_next -= 1
            done(StoreFullError("No space left on device for the store (database or disk is full)"))
            return
        work()
        done(None)

    def release(self) -> None:
        self.holding = False
        held, self.held = self.held, []
        for work, done in held:
            self._run(work, done)

    def drain(self) -> None:
        pass


class FailingHarness(Harness):
    """The engine test harness on commits that can fail."""

    def __init__(self, path: Path, **config: object) -> None:
        self.commits = FailableCommits()
        self.path = path
        self.clock = ManualClock()
        self.broker = Broker(
            Store(path / "store.sqlite"), self.clock, BrokerConfig(transaction_coordinators=2, **config), self.commits
        )
        self.sink = Sink()
        self.topic = self.broker.topic(TOPIC)
        self.producer = Producer(1, "p", AccessMode.SHARED, 0, self.sink)
        self.topic.add_producer(self.producer)
        self.seq = 0
        self.results: list[object] = []


def _restart(harness: FailingHarness, path: Path, **config: object) -> FailingHarness:
    """A new broker on what the store kept (a crash: nothing more is written)."""
    harness.broker.store.close()
    return FailingHarness(path, **config)


def _committed_txn_with_ack(h: FailingHarness) -> tuple[TxnId, object]:
    """A plain message m0 delivered to a consumer of "in"; a transaction that sends t1 and acknowledges m0."""
    h.send(b"m0")
    consumer = h.subscribe("in", SubType.SHARED)
    txn = h.new_txn()
    h.add_partition(txn)
    h.send(b"t1", txn)
    subscription = h.topic.subscriptions["in"]
    h.broker.coordinators.add_subscriptions(txn, [(TOPIC, "in")], h.results.append)
    subscription.pending_ack.acknowledge(txn, consumer, [(0, None, 1)], cumulative=False)
    h.run()
    return txn, subscription


def test_an_end_whose_commit_fails_is_answered_with_the_error_and_changes_nothing(tmp_path: Path) -> None:
    h = FailingHarness(tmp_path)
    txn, subscription = _committed_txn_with_ack(h)
    reader = h.subscribe("reader", SubType.EXCLUSIVE)
    assert h.sink.payloads() == [b"m0", b"m0"]
    h.commits.fail_next = 1
    h.end(txn, TxnAction.COMMIT)
    failure = h.results[-1]
    assert isinstance(failure, BrokerError) and failure.code == ServerError.PersistenceError
    # Nothing of the transaction is visible, its acknowledgement is still held, the coordinator still has it.
    h.subscribe("late", SubType.EXCLUSIVE)
    assert b"t1" not in h.sink.payloads()
    assert h.topic.txn_buffer.ongoing and not subscription.cursor.is_acked(0)  # type: ignore[attr-defined]
    assert subscription.pending_ack.txns  # type: ignore[attr-defined]
    assert h.broker.coordinators.meta(txn).status is TxnStatus.COMMITTING
    # The client's END_TXN again succeeds and ends it everywhere.
    h.end(txn, TxnAction.COMMIT)
    assert h.results[-1] is None
    assert h.sink.payloads().count(b"t1") == 3
    assert subscription.cursor.is_acked(0) and not subscription.pending_ack.txns  # type: ignore[attr-defined]
    assert reader is not None
    h.close()


def test_the_coordinator_ends_a_failed_end_again_by_itself(tmp_path: Path) -> None:
    h = FailingHarness(tmp_path)
    txn, subscription = _committed_txn_with_ack(h)
    h.commits.fail_next = 2
    h.end(txn, TxnAction.COMMIT)
    assert isinstance(h.results[-1], BrokerError)
    h.clock.advance(END_RETRY_SECONDS)  # the retry fails too
    assert h.broker.coordinators.live(txn) is not None
    h.clock.advance(END_RETRY_SECONDS)
    assert h.broker.coordinators.live(txn) is None
    assert subscription.cursor.is_acked(0)  # type: ignore[attr-defined]
    h = _restart(h, tmp_path)
    h.subscribe("in", SubType.SHARED)
    assert h.sink.payloads() == [b"t1"]  # "in" acknowledged m0 in the committed transaction
    h.subscribe("all", SubType.EXCLUSIVE)
    assert h.sink.payloads() == [b"t1", b"m0", b"t1"]
    h.close()


def test_a_restart_after_a_failed_end_aborts_the_transaction_whole(tmp_path: Path) -> None:
    h = FailingHarness(tmp_path)
    txn, _ = _committed_txn_with_ack(h)
    h.commits.fail_next = 1
    h.end(txn, TxnAction.COMMIT)
    assert isinstance(h.results[-1], BrokerError)
    h = _restart(h, tmp_path)
    h.subscribe("in", SubType.SHARED)
    assert h.sink.payloads() == []  # the recovered transaction is open: it holds m0, and t1 waits for it
    h.clock.advance(120)  # it times out and aborts: m0 comes back, t1 never comes
    h.subscribe("all", SubType.EXCLUSIVE)
    assert h.sink.payloads() == [b"m0", b"m0"]
    assert h.broker.coordinators.live(txn) is None
    h.close()


def test_a_failed_first_step_of_a_delayed_end_is_not_answered_with_success(tmp_path: Path) -> None:
    h = FailingHarness(tmp_path, txn_end_delay_ms=50)
    txn = h.new_txn()
    h.add_partition(txn)
    h.send(b"t1", txn)
    h.commits.fail_next = 1
    h.end(txn, TxnAction.COMMIT)
    h.clock.advance(0.1)
    assert isinstance(h.results[-1], BrokerError)
    assert h.broker.coordinators.meta(txn).status is TxnStatus.COMMITTING
    h.end(txn, TxnAction.COMMIT)
    h.clock.advance(0.1)
    assert h.results[-1] is None
    h.subscribe("all", SubType.EXCLUSIVE)
    assert h.sink.payloads() == [b"t1"]
    h.close()


def test_a_sequence_id_is_stored_only_by_the_commit_that_carries_it(tmp_path: Path) -> None:
    h = FailingHarness(tmp_path, deduplication=True)
    h.commits.holding = True
    h.send(b"a")  # sequence 1: its commit is in flight
    h.send(b"b")  # sequence 2: staged for the next commit
    h.commits.release()  # the first commit succeeds
    h.commits.fail_next = 1
    h.run()  # the second fails
    assert h.results[0] == 0 and isinstance(h.results[1], BrokerError), h.results
    assert h.topic.last_sequence_id("p") == 1
    # The resend of sequence 2 is stored, not dropped as a duplicate of what the failed commit lost.
    h.seq = 1
    h.send(b"b")
    assert h.results[-1] == 1, h.results
    h.close()


def test_a_snapshot_lost_with_its_commit_is_taken_again(tmp_path: Path) -> None:
    h = FailingHarness(tmp_path, snapshot_policy=SnapshotPolicy(1000, 5.0))
    txn = h.new_txn()
    h.add_partition(txn)
    h.commits.fail_next = 1
    h.send(b"lost", txn)  # the first transactional entry, with the first snapshot: both lost
    assert isinstance(h.results[-1], BrokerError)
    h.send(b"t1", txn)
    h.end(txn, TxnAction.ABORT)
    assert h.results[-1] is None
    h = _restart(h, tmp_path)
    h.subscribe("all", SubType.EXCLUSIVE)
    assert h.sink.payloads() == []  # the abort is recovered: t1 stays hidden
    h.close()


def test_a_transactional_ack_whose_record_is_lost_is_not_held(tmp_path: Path) -> None:
    h = FailingHarness(tmp_path)
    h.send(b"m0")
    consumer = h.subscribe("in", SubType.SHARED)
    subscription = h.topic.subscriptions["in"]
    txn = h.new_txn()
    h.broker.coordinators.add_subscriptions(txn, [(TOPIC, "in")], h.results.append)
    h.commits.fail_next = 1
    subscription.pending_ack.acknowledge(txn, consumer, [(0, None, 1)], cumulative=False)
    h.run()
    # As in Pulsar, which holds an acknowledgement once its record is written: nothing is held, and the consumer
    # holds m0 again, so that its redelivery request (the client's answer to the failed ACK) gives it back.
    assert not subscription.pending_ack.held and txn not in subscription.pending_ack.txns
    subscription.redeliver(consumer, [0])
    h.run()
    assert h.sink.payloads() == [b"m0", b"m0"]
    # The transaction commits without it: m0 stays unacknowledged.
    h.end(txn, TxnAction.COMMIT)
    assert h.results[-1] is None and not subscription.cursor.is_acked(0)
    h.close()


def test_a_topic_whose_write_failed_disconnects_its_producers(tmp_path: Path) -> None:
    h = FailingHarness(tmp_path, deduplication=True)
    closed: list[Producer] = []
    h.sink.close_producer = closed.append  # type: ignore[method-assign]
    h.commits.fail_next = 1
    h.send(b"a")  # sequence 1: lost
    assert isinstance(h.results[-1], BrokerError)
    # As Pulsar's addFailed fences the topic and disconnects its producers: a send of that producer already on its
    # way (sequence 2) finds no producer, and cannot be stored ahead of sequence 1's resend.
    assert closed == [h.producer] and h.producer not in h.topic.producers
    h.close()


def test_log_records_a_failed_commit_lost_are_written_again(tmp_path: Path) -> None:
    h = FailingHarness(tmp_path)
    h.new_txn()  # reserves a block of ids (answered once stored)
    txn = h.new_txn()  # answered at once from the block: its open record waits for a later commit
    h.commits.fail_next = 1
    h.send(b"plain")  # the commit that carries the open record fails
    h.add_partition(txn)
    h.send(b"t1", txn)  # a commit that succeeds
    assert h.results[-1] == 0
    h = _restart(h, tmp_path)
    # The coordinator knows the transaction after the restart: it ends it (a timeout aborts it), and t1 never blocks
    # the partition.
    assert h.broker.coordinators.live(txn) is not None
    h.send(b"after")
    h.clock.advance(120)
    h.subscribe("all", SubType.EXCLUSIVE)
    assert h.sink.payloads() == [b"after"]
    h.close()


@pytest.mark.parametrize("sub_type", [SubType.SHARED, SubType.FAILOVER])
def test_a_transactional_ack_lost_after_its_consumer_left_is_delivered_again(tmp_path: Path, sub_type: SubType) -> None:
    h = FailingHarness(tmp_path)
    h.send(b"m0")
    first = h.subscribe("in", sub_type)
    h.clock.advance(5)  # past a failover's wait
    assert h.sink.payloads() == [b"m0"]
    h.subscribe("in", sub_type)
    subscription = h.topic.subscriptions["in"]
    txn = h.new_txn()
    h.broker.coordinators.add_subscriptions(txn, [(TOPIC, "in")], h.results.append)
    h.commits.holding = True
    subscription.pending_ack.acknowledge(txn, first, [(0, None, 1)], cumulative=False)
    h.run()
    # The consumer leaves while the record of its acknowledgement is on its way: m0 is held, not among what it gives
    # back. Then the record is lost: m0 is held no more, and goes to the consumer left (found by the simulator, seed
    # 4831: it went to nobody until a restart).
    subscription.remove_consumer(first)
    h.clock.advance(5)
    h.commits.fail_next = 1
    h.commits.release()
    h.clock.advance(5)
    assert not subscription.pending_ack.held
    assert h.sink.payloads() == [b"m0", b"m0"]
    h.close()


def test_a_new_subscription_is_answered_once_stored_and_a_lost_one_again(tmp_path: Path) -> None:
    # Found by the simulator (seed 113185): a SUBSCRIBE creating a durable subscription was answered before its
    # cursor was stored, so a failed commit and a crash lost a subscription its client had been told of.
    h = FailingHarness(tmp_path)
    answers: list[BrokerError | None] = []
    consumer = Consumer(1, "c", h.sink)
    subscription = h.topic.subscribe(
        "new", SubType.EXCLUSIVE, consumer, durable=True, earliest=True, start_entry=None, sticky=False
    )
    h.commits.fail_next = 1
    h.topic.when_stored(subscription, answers.append)
    assert answers == []  # not before the commit
    h.run()
    assert isinstance(answers[0], BrokerError) and answers[0].code == ServerError.PersistenceError
    h.topic.when_stored(subscription, answers.append)  # the client subscribes again: the next commit stores it
    h.run()
    assert answers[1:] == [None]
    h.topic.when_stored(subscription, answers.append)  # stored: answered at once
    assert answers[2:] == [None]
    h = _restart(h, tmp_path)
    assert "new" in h.topic.subscriptions
    h.close()
