"""SENDs that arrive together in one read: the server publishes a producer's plain SENDs in a row as one run; every
SEND is still answered as if handled alone, in the same order, whatever comes between them.

The reference is the server before runs (each SEND published as it was read): the answers to one read's frames are
a SEND_ERROR for a bad checksum and the answers to other commands at once, then each receipt once its entry is
durable, in the order of the SENDs of each producer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from engine.broker import Broker, InlineCommits
from engine.clock import ManualClock
from engine.errors import BrokerError
from engine.store import Store
from engine.topic import AccessMode, Producer
from pulsar_txn_proxy.conformance.raw import RawConnection
from tests.conftest import Server
from tests.server_process import ServerProcess
from tests.test_bad_input import _producer, _send_frame
from wire.commands import NO_ID, frame, make
from wire.framing import MessageBody, encode_payload_command, make_body, parse_body
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata, ServerError

T = BaseCommand


def _answers(conn: RawConnection, count: int) -> list[BaseCommand]:
    return [conn.read().command for _ in range(count)]


def test_sends_in_one_read_are_answered_each_in_order(server_factory: Callable[..., Server], topic: str) -> None:
    server = server_factory("--deduplication")
    conn = RawConnection(server.port)
    try:
        conn.handshake()
        first = _producer(conn, topic, 1)
        second = _producer(conn, topic + "-2", 2)
        frames = [
            _send_frame(1, first, 0, b"a"),
            _send_frame(1, first, 1, b"b"),
            _send_frame(1, first, 2, b"spoilt", corrupt=True),
            _send_frame(1, first, 3, b"c"),
            _send_frame(2, second, 0, b"x"),
            _send_frame(1, first, 4, b"d"),
            frame(T.PING),
            _send_frame(1, first, 5, b"e"),
            _send_frame(1, first, 5, b"e again"),  # a resend: a duplicate
            _send_frame(2, second, 1, b"y"),
        ]
        conn.send_raw(b"".join(frames))
        answers = _answers(conn, 10)
    finally:
        conn.close()
    # Answered during the read, before any receipt (those wait for the commit): the checksum error and the PONG.
    assert [a.type for a in answers[:2]] == [T.SEND_ERROR, T.PONG]
    error = answers[0].send_error
    assert (error.producer_id, error.sequence_id, error.error) == (1, 2, ServerError.ChecksumError)
    receipts = [a.send_receipt for a in answers[2:]]
    assert all(a.type == T.SEND_RECEIPT for a in answers[2:])
    by_producer: dict[int, list[tuple[int, int]]] = {1: [], 2: []}
    for receipt in receipts:
        by_producer[receipt.producer_id].append((receipt.sequence_id, receipt.message_id.entryId))
    # Each producer's entries in the order sent, without a hole where the spoilt one was; the resend a duplicate.
    assert by_producer[1] == [(0, 0), (1, 1), (3, 2), (4, 3), (5, 4), (5, NO_ID)]
    assert by_producer[2] == [(0, 0), (1, 1)]
    assert all(r.highest_sequence_id == NO_ID for r in receipts)


def test_a_transactional_send_between_plain_ones_keeps_its_place(server: ServerProcess, topic: str) -> None:
    conn = RawConnection(server.port)
    try:
        conn.handshake()
        name = _producer(conn, topic, 1)
        now = int(time.time() * 1000)
        meta = MessageMetadata(producer_name=name, sequence_id=1, publish_time=now)
        in_txn = encode_payload_command(
            make(T.SEND, producer_id=1, sequence_id=1, num_messages=1, txnid_most_bits=0, txnid_least_bits=12345),
            make_body(meta, b"t"),
        )
        conn.send_raw(_send_frame(1, name, 0, b"a") + in_txn + _send_frame(1, name, 2, b"b"))
        answers = _answers(conn, 3)
    finally:
        conn.close()
    # The transactional SEND ends the run before it and is published alone, as any SEND was before runs: stored (a
    # transaction this server never opened is aborted at once: its abort marker is entry 2), its receipt echoing its
    # highest sequence id as 0, as Pulsar's does; the plain ones around it stored in their places.
    assert [a.type for a in answers] == [T.SEND_RECEIPT] * 3
    assert [
        (r.sequence_id, r.message_id.entryId, r.highest_sequence_id) for r in (a.send_receipt for a in answers)
    ] == [(0, 0, NO_ID), (1, 1, 0), (2, 3, NO_ID)]


def test_a_run_is_answered_and_counted_message_by_message(tmp_path: Path) -> None:
    """Engine level: a run's results are each message's, as publish gives them (a terminated topic refuses each);
    the publish latency histogram counts the run's messages, not its one completion."""
    clock = ManualClock()
    broker = Broker(Store(tmp_path / "store.sqlite"), clock, commits=InlineCommits())
    topic = broker.topic("persistent://public/default/runs")
    producer = Producer(1, "p", AccessMode.SHARED, 0, _Sink())
    topic.add_producer(producer)

    def sends(first: int, count: int) -> list[tuple[int, int, MessageBody]]:
        metas = [MessageMetadata(producer_name="p", sequence_id=s, publish_time=1) for s in range(first, first + count)]
        return [(m.sequence_id, NO_ID, parse_body(make_body(m, b"m"))) for m in metas]

    single: list[object] = []
    for seq, _, message in sends(0, 2):
        topic.publish(producer, seq, -1, message.body, message.metadata, single.append)
    clock.advance(0)
    runs: list[object] = []
    topic.publish_run(producer, sends(2, 3), runs.append)
    clock.advance(0)
    assert single == [0, 1]
    assert runs == [[2, 3, 4]]
    assert broker.stats.publish_latency.count == 5
    broker.terminate(topic)
    topic.publish_run(producer, sends(5, 2), runs.append)
    clock.advance(0)
    refused = runs[-1]
    assert isinstance(refused, list) and len(refused) == 2
    assert all(isinstance(r, BrokerError) and r.code == ServerError.TopicTerminatedError for r in refused)
    assert broker.stats.publish_latency.count == 7


class _Sink:
    def close_producer(self, producer: Producer) -> None:
        pass

    def producer_ready(self, producer: Producer) -> None:
        pass
