"""Transactional SENDs that arrive together in one read: every SEND is answered as if published alone, in the same
order, whatever its transaction's state and whatever comes between them (plain SENDs, SENDs of another transaction,
a bad checksum, the END_TXN of their transaction, a terminated topic).

The reference is the server that published each transactional SEND alone (main before transactional runs): these
tests passed there unchanged. Answers are compared as ``(type, sequence id, entry id or error, highest sequence id)``.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from pathlib import Path

from engine.broker import Broker, InlineCommits
from engine.clock import ManualClock
from engine.store import Store
from engine.topic import AccessMode, Producer
from engine.transactions import TxnId
from pulsar_txn_proxy.conformance.raw import RawConnection, add_partition, open_txn, rid, tc_connect, txn_fields
from tests.conftest import Server, make_client
from tests.test_bad_input import _producer, _send_frame
from tests.test_max_message_size import _policy
from wire.commands import NO_ID, frame, make
from wire.framing import MessageBody, encode_payload_command, make_body, parse_body
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata, ServerError, TxnAction

T = BaseCommand
NOT_ALLOWED, TERMINATED = ServerError.NotAllowedError, ServerError.TopicTerminatedError
Answer = tuple[int, int, int, int]


def _txn_send(
    name: str, sequence_id: int, payload: bytes, txn: tuple[int, int], corrupt: bool = False, pid: int = 1
) -> bytes:
    """A SEND of producer ``pid`` in ``txn``; ``corrupt`` spoils its CRC32C."""
    metadata = MessageMetadata(producer_name=name, sequence_id=sequence_id, publish_time=int(time.time() * 1000))
    metadata.txnid_most_bits, metadata.txnid_least_bits = txn
    body = make_body(metadata, payload)
    if corrupt:
        (crc,) = struct.unpack_from(">I", body, 2)
        body = body[:2] + struct.pack(">I", crc ^ 0xDEADBEEF) + body[6:]
    command = make(T.SEND, producer_id=pid, sequence_id=sequence_id, num_messages=1, **txn_fields(txn))
    return encode_payload_command(command, body)


def _connect(conn: RawConnection) -> None:
    """CONNECT, then TC_CLIENT_CONNECT to coordinator 0."""
    conn.handshake()
    assert not tc_connect(conn, 0).HasField("error")


def _end_frame(txn: tuple[int, int], action: int) -> bytes:
    return frame(T.END_TXN, request_id=rid(), txn_action=action, **txn_fields(txn))


def _answers(conn: RawConnection, count: int) -> list[Answer]:
    """The next ``count`` answers, each ``(type, sequence id, entry id or error code, highest sequence id)``."""
    answers = []
    for _ in range(count):
        command = conn.read().command
        if command.type == T.SEND_RECEIPT:
            r = command.send_receipt
            answers.append((T.SEND_RECEIPT, r.sequence_id, r.message_id.entryId, r.highest_sequence_id))
        elif command.type == T.SEND_ERROR:
            e = command.send_error
            answers.append((T.SEND_ERROR, e.sequence_id, e.error, -2))
        elif command.type == T.END_TXN_RESPONSE:
            answers.append((T.END_TXN_RESPONSE, -1, command.endTxnResponse.error, -2))
        else:
            answers.append((command.type, -1, -1, -2))
    return answers


def _visible(url: str, topic: str) -> list[bytes]:
    """The payloads a reader from the earliest message sees (committed and plain messages, in order)."""
    client = make_client(url)
    try:
        reader = client.create_reader(topic, _earliest())
        payloads = []
        while reader.has_message_available():
            payloads.append(reader.read_next(5000).data())
        return payloads
    finally:
        client.close()


def _earliest():  # type: ignore[no-untyped-def]
    import pulsar

    return pulsar.MessageId.earliest


def receipt(sequence_id: int, entry: int, highest: int = 0) -> Answer:
    return (T.SEND_RECEIPT, sequence_id, entry, highest)


def refused(sequence_id: int, code: int) -> Answer:
    return (T.SEND_ERROR, sequence_id, code, -2)


def test_runs_of_two_transactions_between_plain_sends(server_factory: Callable[..., Server], topic: str) -> None:
    server = server_factory("--deduplication")
    conn = RawConnection(server.port)
    try:
        _connect(conn)
        name = _producer(conn, topic, 1)
        a, b = open_txn(conn), open_txn(conn)
        for txn in (a, b):
            assert not add_partition(conn, txn, topic).HasField("error")
        frames = [
            _send_frame(1, name, 0, b"p0"),
            _txn_send(name, 1, b"a1", a),
            _txn_send(name, 2, b"a2", a),
            _txn_send(name, 3, b"b3", b),
            _txn_send(name, 4, b"a4", a),
            _send_frame(1, name, 5, b"p5"),
            _txn_send(name, 6, b"spoilt", a, corrupt=True),
            _txn_send(name, 7, b"a7", a),
            frame(T.PING),
            _txn_send(name, 8, b"a8", a),
            _txn_send(name, 8, b"a8 again", a),  # a resend: a duplicate
            _txn_send(name, 9, b"b9", b),
        ]
        conn.send_raw(b"".join(frames))
        answers = _answers(conn, 12)
        conn.send_raw(_end_frame(a, TxnAction.COMMIT) + _end_frame(b, TxnAction.ABORT))
        ends = _answers(conn, 2)
    finally:
        conn.close()
    assert answers == [
        refused(6, ServerError.ChecksumError),
        (T.PONG, -1, -1, -2),
        (T.SEND_RECEIPT, 0, 0, NO_ID),
        receipt(1, 1),
        receipt(2, 2),
        receipt(3, 3),
        receipt(4, 4),
        (T.SEND_RECEIPT, 5, 5, NO_ID),
        receipt(7, 6),
        receipt(8, 7),
        receipt(8, NO_ID),
        receipt(9, 8),
    ]
    assert ends == [(T.END_TXN_RESPONSE, -1, 0, -2)] * 2
    assert _visible(server.url, topic) == [b"p0", b"a1", b"a2", b"a4", b"p5", b"a7", b"a8"]


def test_a_too_large_send_in_a_run_of_the_open_transaction(server_factory: Callable[..., Server], topic: str) -> None:
    """A run of SENDs in the producer's open transaction (accepted without asking the coordinator again) still
    answers a SEND above the topic's max message size alone and at once; the others are stored in order."""
    server = server_factory()
    conn = RawConnection(server.port)
    try:
        _connect(conn)
        name = _producer(conn, topic, 1)
        assert _policy(server, topic, "POST", b"1000")[0] == 204  # type: ignore[arg-type]
        txn = open_txn(conn)
        assert not add_partition(conn, txn, topic).HasField("error")
        conn.send_raw(_txn_send(name, 0, b"t0", txn))
        assert _answers(conn, 1) == [receipt(0, 0)]
        frames = [
            _txn_send(name, 1, b"t1", txn),
            _txn_send(name, 2, b"x" * 2000, txn),
            _txn_send(name, 3, b"t3", txn),
        ]
        conn.send_raw(b"".join(frames))
        answers = _answers(conn, 3)
        conn.send_raw(_end_frame(txn, TxnAction.COMMIT))
        ends = _answers(conn, 1)
    finally:
        conn.close()
    assert answers == [refused(2, NOT_ALLOWED), receipt(1, 1), receipt(3, 2)]
    assert ends == [(T.END_TXN_RESPONSE, -1, 0, -2)]
    assert _visible(server.url, topic) == [b"t0", b"t1", b"t3"]


def test_sends_around_the_end_of_their_transaction(server_factory: Callable[..., Server], topic: str) -> None:
    server = server_factory()
    conn = RawConnection(server.port)
    try:
        _connect(conn)
        name = _producer(conn, topic, 1)
        txn = open_txn(conn)
        assert not add_partition(conn, txn, topic).HasField("error")
        frames = [
            _txn_send(name, 0, b"t0", txn),
            _txn_send(name, 1, b"t1", txn),
            _end_frame(txn, TxnAction.COMMIT),
            _txn_send(name, 2, b"t2", txn),  # its marker is staged: refused
            _txn_send(name, 3, b"t3", txn),
            _send_frame(1, name, 4, b"p4"),
            _txn_send(name, 5, b"t5", txn),
        ]
        conn.send_raw(b"".join(frames))
        answers = _answers(conn, 7)
        # Once the end is durable: refused too.
        conn.send_raw(_txn_send(name, 6, b"t6", txn) + _txn_send(name, 7, b"t7", txn))
        later = _answers(conn, 2)
    finally:
        conn.close()
    assert answers == [
        refused(2, NOT_ALLOWED),
        refused(3, NOT_ALLOWED),
        refused(5, NOT_ALLOWED),
        receipt(0, 0),
        receipt(1, 1),
        (T.END_TXN_RESPONSE, -1, 0, -2),
        (T.SEND_RECEIPT, 4, 3, NO_ID),
    ]
    assert later == [refused(6, NOT_ALLOWED), refused(7, NOT_ALLOWED)]
    assert _visible(server.url, topic) == [b"t0", b"t1", b"p4"]


def test_unknown_aborted_and_unregistered_transactions(server_factory: Callable[..., Server], topic: str) -> None:
    server = server_factory()
    conn = RawConnection(server.port)
    try:
        _connect(conn)
        name = _producer(conn, topic, 1)
        aborted, unregistered = open_txn(conn), open_txn(conn)
        assert not add_partition(conn, aborted, topic).HasField("error")
        conn.send_raw(_end_frame(aborted, TxnAction.ABORT))
        assert _answers(conn, 1) == [(T.END_TXN_RESPONSE, -1, 0, -2)]
        unknown = (0, 987_654_321)
        frames = [
            # Never opened: stored and aborted at once (its abort marker follows the first).
            _txn_send(name, 0, b"u0", unknown),
            _txn_send(name, 1, b"u1", unknown),
            _txn_send(name, 2, b"u2", unknown),
            # Aborted: its partition learned the low-water mark from the marker.
            _txn_send(name, 3, b"x3", aborted),
            _txn_send(name, 4, b"x4", aborted),
            # Open, its partition never added: the send enlists it.
            _txn_send(name, 5, b"r5", unregistered),
            _txn_send(name, 6, b"r6", unregistered),
            _txn_send(name, 7, b"r7", unregistered),
        ]
        conn.send_raw(b"".join(frames))
        answers = _answers(conn, 8)
        conn.send_raw(_end_frame(unregistered, TxnAction.COMMIT))
        assert _answers(conn, 1) == [(T.END_TXN_RESPONSE, -1, 0, -2)]
    finally:
        conn.close()
    # Entry 0 is the aborted transaction's marker, entry 2 the abort marker the unknown transaction's first entry
    # stages (so that it holds back no reads): the next sends' entries come after it. The aborted transaction's sends
    # are stored and never delivered, as Pulsar's partition accepts them.
    assert answers == [
        receipt(0, 1),
        receipt(1, 3),
        receipt(2, 4),
        receipt(3, 5),
        receipt(4, 6),
        receipt(5, 7),
        receipt(6, 8),
        receipt(7, 9),
    ]
    assert _visible(server.url, topic) == [b"r5", b"r6", b"r7"]


def test_sends_in_a_timed_out_transaction(server_factory: Callable[..., Server], topic: str) -> None:
    server = server_factory()
    conn = RawConnection(server.port)
    try:
        _connect(conn)
        name = _producer(conn, topic, 1)
        txn = open_txn(conn, ttl_ms=300)
        assert not add_partition(conn, txn, topic).HasField("error")
        conn.send_raw(_txn_send(name, 0, b"t0", txn))
        assert _answers(conn, 1) == [receipt(0, 0)]
        time.sleep(1.5)  # the server's own timeout: a wall-clock wait is the only way to reach it from outside
        conn.send_raw(b"".join(_txn_send(name, s, b"late", txn) for s in (1, 2, 3)))
        answers = _answers(conn, 3)
    finally:
        conn.close()
    # Stored after the abort marker of the timeout (entry 1), and never delivered, as Pulsar's partition does.
    assert answers == [receipt(1, 2), receipt(2, 3), receipt(3, 4)]
    assert _visible(server.url, topic) == []


def test_transactional_sends_to_a_terminated_topic(tmp_path: Path) -> None:
    """Engine level (terminating a topic closes its producers, so a client cannot reach this): each send of a run in
    a transaction is refused as :meth:`Topic.publish` refuses one (a new entry point: not in the reference)."""
    clock = ManualClock()
    broker = Broker(Store(tmp_path / "store.sqlite"), clock, commits=InlineCommits())
    topic = broker.topic("persistent://public/default/terminated")
    producer = Producer(1, "p", AccessMode.SHARED, 0, _Sink())
    topic.add_producer(producer)
    txn = TxnId(0, 1)

    def sends(first: int, count: int) -> list[tuple[int, int, MessageBody]]:
        metas = [MessageMetadata(producer_name="p", sequence_id=s, publish_time=1) for s in range(first, first + count)]
        return [(m.sequence_id, 0, parse_body(make_body(m, b"m"))) for m in metas]

    broker.terminate(topic)
    single: list[object] = []
    runs: list[object] = []
    for seq, highest, message in sends(0, 2):
        topic.publish(producer, seq, highest, message.body, message.metadata, single.append, txn)
    topic.publish_txn_run(producer, txn, sends(2, 2), runs.append)
    clock.advance(0)
    assert [r.code for r in single] == [TERMINATED] * 2  # type: ignore[attr-defined]
    assert len(runs) == 1 and [r.code for r in runs[0]] == [TERMINATED] * 2  # type: ignore[attr-defined,union-attr]
    assert topic.next_entry_id == 0


class _Sink:
    def close_producer(self, producer: Producer) -> None:
        pass

    def producer_ready(self, producer: Producer) -> None:
        pass


def test_transactional_sends_to_a_non_persistent_topic_close_the_connection(
    server_factory: Callable[..., Server],
) -> None:
    server = server_factory()
    conn = RawConnection(server.port)
    try:
        _connect(conn)
        topic = f"non-persistent://public/default/np-{rid()}-{time.time_ns()}"
        name = _producer(conn, topic, 1)
        txn = open_txn(conn)
        conn.send_raw(_txn_send(name, 0, b"t0", txn) + _txn_send(name, 1, b"t1", txn))
        conn.assert_closed_by_server()
    finally:
        conn.close()
