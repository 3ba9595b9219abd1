"""Pending acks inside batches and after aborts, on the engine with a manual clock (issue 19, defects 2 and 3).

The differential proof against Pulsar 4.2.4 is tests/conformance/test_txn_acks.py; these pin the engine state it
rests on: the cursor after a cumulative txn ack inside a batch commits (also across a restart), no redelivery after
an aborted cumulative ack, and one redelivery (counted once) per entry after aborted batch-index acks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.clock import ManualClock
from engine.errors import BrokerError
from engine.subscription import Consumer, SubType
from engine.transactions import TxnAction
from tests.test_engine_transactions import Harness
from wire.framing import make_body
from wire.pulsar_api_pb2 import MessageMetadata, ServerError


def _send_batch(h: Harness, size: int) -> None:
    """One entry holding a batch of ``size`` messages (the engine looks at the metadata's count only)."""
    h.seq += 1
    meta = MessageMetadata(producer_name="p", sequence_id=h.seq, publish_time=1, num_messages_in_batch=size)
    h.topic.publish(h.producer, h.seq, -1, make_body(meta, b"batch"), meta, h.results.append, None)
    h.run()


def _subscription(consumer: Consumer):  # type: ignore[no-untyped-def]
    sub = consumer.subscription
    assert sub is not None
    return sub


def test_cumulative_ack_inside_a_batch_commits_only_up_to_its_index_across_a_restart(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.send(b"plain")
    _send_batch(h, 5)
    consumer = h.subscribe(sub_type=SubType.EXCLUSIVE)
    txn = h.new_txn()
    # Up to index 2 of entry 1: indexes 3 and 4 stay unacknowledged (bits set), as the Java client sends it.
    _subscription(consumer).pending_ack.acknowledge(txn, consumer, [(1, 0b11000, 5)], cumulative=True)
    h.broker.flush()
    h.close()

    again = Harness(tmp_path, ManualClock(h.clock.now()))
    consumer = again.subscribe(sub_type=SubType.EXCLUSIVE)
    sub = _subscription(consumer)
    again.end(txn, TxnAction.COMMIT)
    assert sub.cursor.mark_delete == 0
    assert sub.cursor.unacked_mask(1) == 0b11000


def test_aborted_cumulative_ack_redelivers_nothing(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.send(b"m0")
    h.send(b"m1")
    consumer = h.subscribe(sub_type=SubType.FAILOVER)
    assert h.sink.payloads() == [b"m0", b"m1"]
    txn = h.new_txn()
    _subscription(consumer).pending_ack.acknowledge(txn, consumer, [(1, None, 0)], cumulative=True)
    h.end(txn, TxnAction.ABORT)
    assert h.sink.payloads() == [b"m0", b"m1"]
    # The consumer asks: everything comes back, nothing was hidden by the released ack.
    _subscription(consumer).redeliver(consumer, None)
    h.run()
    assert h.sink.payloads() == [b"m0", b"m1", b"m0", b"m1"]


def test_aborted_batch_index_acks_redeliver_each_entry_once(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    _send_batch(h, 5)
    consumer = h.subscribe(sub_type=SubType.SHARED)
    sub = _subscription(consumer)
    txn = h.new_txn()
    for index in (1, 3, 4):
        sub.pending_ack.acknowledge(txn, consumer, [(0, 0b11111 & ~(1 << index), 5)], cumulative=False)
    h.end(txn, TxnAction.ABORT)
    assert h.sink.received == [(b"batch", 0), (b"batch", 1)]


def test_a_transaction_may_acknowledge_its_own_held_indexes_again(tmp_path: Path) -> None:
    """The Go client acknowledges a batch message by message in a transaction, each ack set including the indexes
    acknowledged before (Pulsar 4.2.4 accepts them, tests/conformance/test_go_client.py::test_txn_batch_ack_commit);
    another transaction's ack of a held index is still a conflict."""
    h = Harness(tmp_path)
    _send_batch(h, 4)
    consumer = h.subscribe(sub_type=SubType.SHARED)
    pending = _subscription(consumer).pending_ack
    txn, other = h.new_txn(), h.new_txn()
    pending.acknowledge(txn, consumer, [(0, 0b1110, 4)], cumulative=False)
    pending.acknowledge(txn, consumer, [(0, 0b1100, 4)], cumulative=False)
    with pytest.raises(BrokerError) as err:
        pending.acknowledge(other, consumer, [(0, 0b1101, 4)], cumulative=False)
    assert err.value.code == ServerError.TransactionConflict
    h.end(txn, TxnAction.COMMIT)
    assert _subscription(consumer).cursor.unacked_mask(0) == 0b1100
