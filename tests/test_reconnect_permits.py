"""Flow control over partly acknowledged batches: a delivery takes the permits of the messages the client gets.

The Java client 4.2.4 skips the messages that a MESSAGE's ack set marks acknowledged without returning their permits
(its ``receiveIndividualMessagesFromBatch``), and Pulsar does not count them. Counting them left a consumer that
reconnected to a partly acknowledged batch (after a restart, in the consume-transform-produce loop of issue 19) with
no permits on the server and none to send: it never received again. The conformance scenario
``reconnect.partial_batch_permits`` checks the same through the Java client against Pulsar 4.2.4.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.subscription import Consumer, SubType
from tests.test_engine_transactions import TOPIC, Harness
from wire.framing import make_body
from wire.pulsar_api_pb2 import MessageMetadata

BATCH = 10


def _send_batch(h: Harness) -> None:
    h.seq += 1
    meta = MessageMetadata(producer_name="p", sequence_id=h.seq, publish_time=1, num_messages_in_batch=BATCH)
    h.topic.publish(h.producer, h.seq, -1, make_body(meta, b"batch"), meta, h.results.append)
    h.run()


def _resubscribe(h: Harness, permits: int, sub_type: SubType = SubType.FAILOVER) -> Consumer:
    consumer = Consumer(99, "again", h.sink)
    sub = h.topic.subscribe("sub", sub_type, consumer, durable=True, earliest=True, start_entry=None,
                            sticky=False)
    sub.flow(consumer, permits)
    h.run()
    return consumer


@pytest.mark.parametrize("sub_type", [SubType.FAILOVER, SubType.SHARED])
def test_acknowledged_batch_indexes_take_no_permits(tmp_path: Path, sub_type: SubType) -> None:
    h = Harness(tmp_path)
    _send_batch(h)
    h.send(b"after")
    first = h.subscribe("sub", sub_type)
    sub = first.subscription
    assert sub is not None
    # Indexes 0..7 acknowledged; 8 and 9 (bits set) still unacknowledged.
    sub.acknowledge(first, [(0, 0b11 << 8)], cumulative=False)
    sub.remove_consumer(first)
    h.sink.received.clear()
    again = _resubscribe(h, permits=3, sub_type=sub_type)
    # The batch's two messages and the next entry: three permits, none left.
    assert h.sink.payloads() == [b"batch", b"after"]
    assert again.permits == 0


def test_indexes_held_by_a_transaction_take_no_permits(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    _send_batch(h)
    h.send(b"after")
    first = h.subscribe("sub", SubType.FAILOVER)
    sub = first.subscription
    assert sub is not None
    txn = h.new_txn()
    h.broker.coordinators.add_subscriptions(txn, [(TOPIC, "sub")], h.results.append)
    # The transaction acknowledges indexes 0..7 (still unacknowledged in its ack set: 8 and 9).
    sub.pending_ack.acknowledge(txn, first, [(0, 0b11 << 8, BATCH)], cumulative=False)
    sub.remove_consumer(first)
    h.sink.received.clear()
    again = _resubscribe(h, permits=3)
    assert h.sink.payloads() == [b"batch", b"after"]
    assert again.permits == 0
