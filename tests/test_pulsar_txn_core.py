"""pulsar_txn's sans-I/O core on simulated time: no socket, no thread, no sleep. The test plays the broker with the
project's wire codec: it decodes what the core transmits and feeds it encoded answers."""

from __future__ import annotations

import pytest

from pulsar_txn.core.connection import Closed, Connected, Connection, HandleClosed, SendDone
from pulsar_txn.core.consumer import ConsumerConfig, ConsumerCore
from pulsar_txn.core.producer import OutMessage, ProducerConfig, ProducerCore
from pulsar_txn.core.transaction import TransactionCore, TxnId, TxnState
from pulsar_txn.exceptions import ConnectError, InvalidTxnStatusError, Timeout, TopicNotFound
from pulsar_txn.message import Message
from wire.batch import build_batch, split_batch
from wire.commands import frame, make
from wire.framing import FrameDecoder, encode_payload_command, make_body, parse_body
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata, ServerError, SingleMessageMetadata

T = BaseCommand


class Broker:
    """Decodes what a core transmits."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder()

    def read(self, conn: Connection) -> list:
        return list(self.decoder.feed(conn.poll_transmit()))


def events(conn: Connection) -> list:
    out = []
    while (event := conn.poll_event()) is not None:
        out.append(event)
    return out


def connected(now: float = 0.0) -> tuple[Connection, Broker]:
    conn = Connection("pulsar://sim:6650", now)
    broker = Broker()
    [connect] = broker.read(conn)
    assert connect.command.type == T.CONNECT
    conn.handle_bytes(frame(T.CONNECTED, server_version="sim", protocol_version=21), now)
    assert isinstance(events(conn)[0], Connected)
    return conn, broker


def test_requests_are_answered_or_time_out() -> None:
    conn, broker = connected()
    first = conn.request(T.LOOKUP, 0.0, topic="a")
    second = conn.request(T.LOOKUP, 0.0, topic="b")
    sent = broker.read(conn)
    assert [f.command.lookupTopic.topic for f in sent] == ["a", "b"]
    conn.handle_bytes(
        frame(T.LOOKUP_RESPONSE, request_id=first, response=2, error=ServerError.TopicNotFound, message="no"), 1.0
    )
    [answer] = events(conn)
    assert answer.request_id == first and isinstance(answer.error, TopicNotFound)
    assert conn.poll_timeout() == 30.0
    conn.handle_timeout(29.9)
    assert events(conn) == []
    conn.handle_timeout(30.0)
    [late] = events(conn)
    assert late.request_id == second and isinstance(late.error, Timeout)


def test_keepalive_pings_then_closes() -> None:
    conn, broker = connected()
    conn.handle_timeout(30.0)
    assert [f.command.type for f in broker.read(conn)] == [T.PING]
    conn.handle_bytes(frame(T.PONG), 31.0)  # an answer resets the timer
    conn.handle_timeout(60.0)
    assert broker.read(conn) == []
    conn.handle_timeout(61.0)
    assert [f.command.type for f in broker.read(conn)] == [T.PING]
    conn.handle_timeout(91.0)
    [closed] = events(conn)
    assert isinstance(closed, Closed) and isinstance(closed.error, ConnectError)


def test_broker_pings_are_answered_and_a_garbled_frame_closes() -> None:
    conn, broker = connected()
    conn.handle_bytes(frame(T.PING), 1.0)
    [pong] = broker.read(conn)
    # Pulsar's decoder rejects a PONG without its (empty) ``pong`` field and closes the connection.
    assert pong.command.type == T.PONG and pong.command.HasField("pong")
    conn.handle_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x09xxxxx", 2.0)
    assert isinstance(events(conn)[-1], Closed)


def _producer(conn: Connection, **config: object) -> ProducerCore:
    core = ProducerCore("persistent://public/default/t", -1, ProducerConfig(**config), 0.0)
    response = make(T.PRODUCER_SUCCESS, request_id=1, producer_name="p-1", last_sequence_id=-1).producer_success
    core.attach(conn, 7, response, 0.0)
    return core


def test_batches_leave_at_the_publish_delay_and_receipts_name_each_message() -> None:
    conn, broker = connected()
    core = _producer(conn, batching_enabled=True, batching_max_publish_delay_ms=10)
    core.send(OutMessage(b"a", token="A", properties={"k": "v"}), 0.0)
    core.send(OutMessage(b"b", token="B", partition_key="key"), 0.001)
    assert broker.read(conn) == []
    assert conn.poll_timeout() == pytest.approx(0.010)
    conn.handle_timeout(0.010)
    [send] = broker.read(conn)
    assert send.command.send.num_messages == 2 and send.command.send.highest_sequence_id == 1
    body = parse_body(send.body)
    singles = split_batch(body.payload, body.metadata.num_messages_in_batch)
    assert [(s.sequence_id, p) for s, p in singles] == [(0, b"a"), (1, b"b")]
    assert singles[1][0].partition_key == "key"
    conn.handle_bytes(
        frame(
            T.SEND_RECEIPT,
            producer_id=7,
            sequence_id=0,
            highest_sequence_id=1,
            message_id={"ledgerId": 3, "entryId": 9},
        ),
        0.02,
    )
    done = events(conn)
    assert [(e.token, e.message_id) for e in done] == [("A", (3, 9, -1, 0, 2)), ("B", (3, 9, -1, 1, 2))]
    assert core.pending_count == 0


def _batches(broker: Broker, conn: Connection) -> list[tuple[int, int, list[tuple[SingleMessageMetadata, bytes]]]]:
    """(sequence_id, highest_sequence_id, messages) of each SEND the core transmitted."""
    out = []
    for sent in broker.read(conn):
        body = parse_body(sent.body)
        singles = split_batch(body.payload, body.metadata.num_messages_in_batch)
        assert build_batch(singles) == body.payload  # the bytes protobuf writes for the same metadata
        assert sent.command.send.num_messages == len(singles)
        out.append((body.metadata.sequence_id, sent.command.send.highest_sequence_id, singles))
    return out


@pytest.mark.parametrize("first", [0, 100, 16250, (1 << 21) - 300])
def test_payloads_alone_and_detailed_messages_share_batches_with_protobufs_encoding(first: int) -> None:
    """Batches of payloads alone (of one size and of several, their sequence ids crossing where a varint grows) and
    batches mixing them with messages that carry metadata or their own sequence id: every message keeps its payload,
    sequence id and metadata; a transaction change starts a new batch; counts and receipts match."""
    conn, broker = connected()
    core = _producer(conn, batching_enabled=True, batching_max_messages=500, initial_sequence_id=first - 1)
    payloads = [b"%05d" % i for i in range(500)]  # one size: the table path
    for i, payload in enumerate(payloads):
        assert core.send_payload(payload, i, 0.0) == (i in (0, 499))  # opened; full, so sent
    assert core.pending_count == 500
    [(sequence, highest, singles)] = _batches(broker, conn)
    assert (sequence, highest) == (first, first + 499)
    assert [(s.sequence_id, s.payload_size, p) for s, p in singles] == [
        (first + i, 5, p) for i, p in enumerate(payloads)
    ]
    assert not any(s.HasField("partition_key") or s.properties for s, _ in singles)
    mixed = [b"x" * (i % 3) for i in range(200)]  # several sizes, one with properties, one with its own sequence id
    for i, payload in enumerate(mixed):
        if i == 7:
            core.send(OutMessage(payload, token="P", properties={"k": "v"}), 0.0)
        elif i == 8:
            core.send(OutMessage(payload, token="S", sequence_id=first + 10_000), 0.0)
        else:
            core.send_payload(payload, None, 0.0)
    txn = TransactionCore(TxnId(1, 2), 60000, opened_at=0.0)
    assert core.send(OutMessage(b"t", token="T", txn=txn), 0.0)  # a transaction: the open batch leaves first
    core.flush(0.0)
    [(sequence, highest, singles), (txn_sequence, _, [(txn_single, txn_payload)])] = _batches(broker, conn)
    expected = [first + 500 + i for i in range(8)] + [first + 10_000 + i for i in range(192)]
    assert (sequence, highest) == (first + 500, expected[-1])
    assert [(s.sequence_id, p) for s, p in singles] == list(zip(expected, mixed, strict=True))
    assert [(kv.key, kv.value) for kv in singles[7][0].properties] == [("k", "v")]
    assert (txn_sequence, txn_single.sequence_id, txn_payload) == (expected[-1] + 1,) * 2 + (b"t",)
    assert core.pending_count == 701 and txn.ops == 1
    for entry_id, sequence_id in ((1, first), (2, first + 500)):
        receipt = {"ledgerId": 3, "entryId": entry_id}
        conn.handle_bytes(frame(T.SEND_RECEIPT, producer_id=7, sequence_id=sequence_id, message_id=receipt), 1.0)
    done = [(e.token, e.message_id) for e in events(conn)]
    assert done[:500] == [(i, (3, 1, -1, i, 500)) for i in range(500)]
    assert done[500:] == [("P", (3, 2, -1, 7, 200)), ("S", (3, 2, -1, 8, 200))]
    assert core.pending_count == 1
    core.send(OutMessage(b"d", token="D", txn=txn), 0.0)
    assert core.discard(txn) == ["D"] and core.pending_count == 1
    core.send_payload(b"k", "K", 0.0)
    assert [e.token for e in core.fail_pending(Timeout("t"))] == ["T", "K"]
    assert core.pending_count == 0 and (txn.ops, txn.failed_ops) == (0, 1)


def test_entries_in_flight_are_sent_again_after_a_reconnection_and_time_out() -> None:
    conn, broker = connected()
    core = _producer(conn, send_timeout_millis=5000)
    core.send(OutMessage(b"x", token="X"), 0.0)
    assert len(broker.read(conn)) == 1
    conn.close(ConnectError("gone"))
    assert any(isinstance(e, HandleClosed) and e.handle is core for e in events(conn))
    assert core.conn is None
    again, broker2 = connected(1.0)
    response = make(T.PRODUCER_SUCCESS, request_id=1, producer_name="p-1", last_sequence_id=-1).producer_success
    core.attach(again, 8, response, 1.0)
    [resent] = broker2.read(again)
    assert resent.command.send.producer_id == 8 and resent.command.send.sequence_id == 0
    again.handle_timeout(5.0)
    [failed] = [e for e in events(again) if isinstance(e, SendDone)]
    assert failed.token == "X" and isinstance(failed.error, Timeout)


def _message(consumer_id: int, entry: int, payloads: list[bytes], epoch: int | None = None) -> bytes:
    meta = MessageMetadata(producer_name="p", sequence_id=entry, publish_time=1)
    if len(payloads) > 1:
        meta.num_messages_in_batch = len(payloads)
        payload = build_batch((SingleMessageMetadata(payload_size=len(p)), p) for p in payloads)
    else:
        payload = payloads[0]
    fields: dict[str, object] = {"consumer_id": consumer_id, "message_id": {"ledgerId": 1, "entryId": entry}}
    if epoch is not None:
        fields["consumer_epoch"] = epoch
    return encode_payload_command(make(T.MESSAGE, **fields), make_body(meta, payload))


def test_consumer_permits_epochs_and_batch_acks() -> None:
    conn, broker = connected()
    core = ConsumerCore("persistent://public/default/t", -1, ConsumerConfig("s", receiver_queue_size=4))
    core.attach(conn, 5)
    [flow] = broker.read(conn)
    assert flow.command.flow.messagePermits == 4
    conn.handle_bytes(_message(5, 0, [b"a", b"b"], epoch=0) + _message(5, 1, [b"c"], epoch=0), 0.0)
    assert [m.payload for m in core.incoming] == [b"a", b"b", b"c"]
    first = core.take()
    second = core.take()
    [flow] = broker.read(conn)  # half the queue consumed: the permits go back
    assert flow.command.flow.messagePermits == 2
    core.ack(first.position, first.batch_size, first.batch, False, 0.0)
    assert broker.read(conn) == []  # the batch is acknowledged once all its messages are
    core.ack(second.position, second.batch_size, second.batch, False, 0.0)
    assert broker.read(conn) == []  # acknowledgements are grouped for 100 ms
    conn.handle_timeout(0.1)
    [ack] = broker.read(conn)
    assert ack.command.ack.message_id[0].entryId == 0
    core.redeliver_all()
    sent = broker.read(conn)
    assert sent[0].command.type == T.REDELIVER_UNACKNOWLEDGED_MESSAGES
    assert sent[0].command.redeliverUnacknowledgedMessages.consumer_epoch == 1
    assert not core.incoming
    conn.handle_bytes(_message(5, 1, [b"c"], epoch=0), 0.1)  # dispatched before the request: dropped
    assert not core.incoming
    conn.handle_bytes(_message(5, 1, [b"c"], epoch=1), 0.2)
    assert [m.payload for m in core.incoming] == [b"c"]


def test_negative_acks_wait_their_delay() -> None:
    conn, broker = connected()
    core = ConsumerCore("persistent://public/default/t", -1, ConsumerConfig("s", negative_ack_redelivery_delay_ms=1000))
    core.attach(conn, 5)
    broker.read(conn)
    core.negative_ack(1, 4, 10.0)
    assert conn.poll_timeout() == 11.0
    conn.handle_timeout(10.5)
    assert broker.read(conn) == []
    conn.handle_timeout(11.0)
    [redeliver] = broker.read(conn)
    assert [m.entryId for m in redeliver.command.redeliverUnacknowledgedMessages.message_ids] == [4]


def test_transaction_state_machine() -> None:
    txn = TransactionCore(TxnId(1, 2), 1000, opened_at=100.0)
    txn.check_open(100.9)
    assert txn.state(101.0) is TxnState.TIME_OUT
    with pytest.raises(InvalidTxnStatusError):
        txn.check_open(101.0)
    with pytest.raises(InvalidTxnStatusError):
        txn.begin_end(True, 101.0)
    txn.begin_end(False, 101.0)  # an abort is still allowed
    txn.ended(False, ok=True)
    assert txn.state(102.0) is TxnState.ABORTED
    committing = TransactionCore(TxnId(1, 3), 60000, opened_at=0.0)
    committing.begin_end(True, 1.0)
    committing.begin_end(False, 1.0)  # a commit with failed operations aborts instead
    assert committing.state(1.0) is TxnState.ABORTING


def test_batch_messages_keep_their_own_metadata() -> None:
    """Messages of a batch with and without properties and keys, payloads of 0, 127, 128 and 20000 bytes: each
    keeps its payload, key, properties and event time (metadata without them is read only when asked for)."""
    conn, broker = connected()
    core = ConsumerCore("persistent://public/default/t", -1, ConsumerConfig("s"))
    core.attach(conn, 5)
    broker.read(conn)
    singles = [
        (SingleMessageMetadata(sequence_id=1), b""),
        (SingleMessageMetadata(sequence_id=2, event_time=7), b"a" * 127),
        (SingleMessageMetadata(partition_key="k", properties=[{"key": "p", "value": "1"}]), b"b" * 128),
        (SingleMessageMetadata(ordering_key=b"o", sequence_id=4), b"c" * 20000),
    ]
    meta = MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, num_messages_in_batch=len(singles))
    body = make_body(meta, build_batch(singles))
    conn.handle_bytes(
        encode_payload_command(make(T.MESSAGE, consumer_id=5, message_id={"ledgerId": 1, "entryId": 0}), body), 0.0
    )
    got = [core.take() for _ in singles]
    assert [m.payload for m in got] == [p for _, p in singles]
    assert [m.single.HasField("partition_key") for m in got] == [False, False, True, False]
    assert [m.single.HasField("ordering_key") for m in got] == [False, False, False, True]
    assert [m.position for m in got] == [(1, 0, i) for i in range(4)]
    # The same through the shell's message class, which the core queues directly.
    core.message_type = Message
    conn.handle_bytes(
        encode_payload_command(make(T.MESSAGE, consumer_id=5, message_id={"ledgerId": 1, "entryId": 1}), body), 0.0
    )
    got = [core.take() for _ in singles]
    assert all(type(m) is Message for m in got)
    assert [m.data() for m in got] == [p for _, p in singles]
    assert [m.partition_key() for m in got] == ["", "", "k", ""]
    assert [m.properties() for m in got] == [{}, {}, {"p": "1"}, {}]
    assert [m.event_timestamp() for m in got] == [0, 7, 0, 0]
    assert [m.ordering_key() for m in got] == ["", "", "", "o"]
    assert [m.publish_timestamp() for m in got] == [1] * 4
    assert [m.producer_name() for m in got] == ["p"] * 4
    assert [str(m.message_id()) for m in got] == [f"(1,1,-1,{i})" for i in range(4)]


def test_publish_times_come_from_the_producers_wall_clock() -> None:
    """No clock is read inside the core: the shell (or a simulation) gives the producer its wall clock."""
    conn, broker = connected()
    core = _producer(conn, batching_enabled=True)
    core.wall_clock = lambda: 1_800_000_000.25
    core.send(OutMessage(b"a", token="A"), 0.0)
    core.flush(0.0)
    core.send(OutMessage(b"b", token="B", deliver_at=5), 0.0)  # a message of its own
    assert [parse_body(f.body).metadata.publish_time for f in broker.read(conn)] == [1_800_000_000_250] * 2


def _send_error(code: int, sequence_id: int) -> bytes:
    return frame(T.SEND_ERROR, producer_id=7, sequence_id=sequence_id, error=code, message="from the broker")


def _reattach(core: ProducerCore) -> tuple[Connection, Broker]:
    again, broker = connected(1.0)
    response = make(T.PRODUCER_SUCCESS, request_id=1, producer_name="p-1", last_sequence_id=-1).producer_success
    core.attach(again, 8, response, 1.0)
    return again, broker


@pytest.mark.parametrize("code", [ServerError.PersistenceError, ServerError.ServiceNotReady, ServerError.UnknownError])
def test_a_transient_send_error_reconnects_and_sends_everything_in_flight_again(code: int) -> None:
    """As the official clients: no message fails; the connection closes, the producer registers again and sends
    what was in flight, in order and with its sequence ids."""
    conn, broker = connected()
    core = _producer(conn)
    for token in "ABC":
        core.send(OutMessage(token.encode(), token=token), 0.0)
    assert len(broker.read(conn)) == 3
    conn.handle_bytes(_send_error(code, 0), 0.1)
    seen = events(conn)
    assert not [e for e in seen if isinstance(e, SendDone)]
    assert any(isinstance(e, Closed) for e in seen) and any(isinstance(e, HandleClosed) for e in seen)
    assert core.conn is None and core.pending_count == 3
    again, broker2 = _reattach(core)
    assert [f.command.send.sequence_id for f in broker2.read(again)] == [0, 1, 2]
    for sequence_id in range(3):
        receipt = {"ledgerId": 3, "entryId": 5 + sequence_id}
        again.handle_bytes(frame(T.SEND_RECEIPT, producer_id=8, sequence_id=sequence_id, message_id=receipt), 1.1)
    done = [e for e in events(again) if isinstance(e, SendDone)]
    assert [(e.token, e.error) for e in done] == [("A", None), ("B", None), ("C", None)] and core.pending_count == 0


def test_a_receipt_out_of_order_reconnects_and_one_for_a_failed_entry_is_ignored() -> None:
    """As the Java client: a receipt past the oldest entry in flight closes the connection and everything in flight
    is sent again (nothing is reported done without its own receipt); a receipt older than the oldest is ignored."""
    conn, broker = connected()
    core = _producer(conn)
    for token in "AB":
        core.send(OutMessage(token.encode(), token=token), 0.0)
    assert len(broker.read(conn)) == 2
    conn.handle_bytes(
        frame(T.SEND_RECEIPT, producer_id=7, sequence_id=1, message_id={"ledgerId": 3, "entryId": 1}), 0.1
    )
    seen = events(conn)
    assert not [e for e in seen if isinstance(e, SendDone)] and any(isinstance(e, Closed) for e in seen)
    assert core.pending_count == 2
    again, broker2 = _reattach(core)
    assert [f.command.send.sequence_id for f in broker2.read(again)] == [0, 1]
    for sequence_id in (0, 0, 1):  # the second receipt for 0 is for nothing in flight
        receipt = {"ledgerId": 3, "entryId": sequence_id}
        again.handle_bytes(frame(T.SEND_RECEIPT, producer_id=8, sequence_id=sequence_id, message_id=receipt), 1.1)
    done = [e for e in events(again) if isinstance(e, SendDone)]
    assert [(e.token, e.error, e.message_id[1]) for e in done] == [("A", None, 0), ("B", None, 1)]
    assert core.pending_count == 0 and core.conn is again


def test_a_send_error_not_allowed_fails_that_entry_alone_and_counts_against_its_transaction() -> None:
    """A send into a transaction the partition knows ended: the broker answers NotAllowedError; the Java client
    fails that message (so the user sees it) and keeps the others in flight."""
    conn, broker = connected()
    core = _producer(conn)
    txn = TransactionCore(TxnId(1, 2), 60000, opened_at=0.0)
    core.send(OutMessage(b"a", token="A", txn=txn), 0.0)
    core.send(OutMessage(b"b", token="B"), 0.0)
    broker.read(conn)
    conn.handle_bytes(_send_error(ServerError.NotAllowedError, 0), 0.1)
    [failed] = [e for e in events(conn) if isinstance(e, SendDone)]
    assert failed.token == "A" and type(failed.error).__name__ == "NotAllowedError"
    assert conn.ready and core.conn is conn and core.pending_count == 1
    assert txn.ops == 0 and txn.failed_ops == 1


def test_a_send_error_topic_terminated_fails_everything_and_later_sends() -> None:
    conn, broker = connected()
    core = _producer(conn)
    core.send(OutMessage(b"a", token="A"), 0.0)
    core.send(OutMessage(b"b", token="B"), 0.0)
    broker.read(conn)
    conn.handle_bytes(_send_error(ServerError.TopicTerminatedError, 0), 0.1)
    failed = [e for e in events(conn) if isinstance(e, SendDone)]
    assert [e.token for e in failed] == ["A", "B"]
    assert all(type(e.error).__name__ == "TopicTerminated" for e in failed)
    with pytest.raises(Exception, match="terminated") as raised:
        core.send(OutMessage(b"c", token="C"), 0.2)
    assert type(raised.value).__name__ == "TopicTerminated"


def test_a_checksum_error_fails_a_corrupt_entry_alone_and_resends_a_sound_one() -> None:
    conn, broker = connected()
    core = _producer(conn)
    core.send(OutMessage(b"a", token="A"), 0.0)
    core.send(OutMessage(b"b", token="B"), 0.0)
    broker.read(conn)
    # Corrupted here (as memory going bad would): the broker's ChecksumError fails it alone.
    head = core._pending[0]
    head.body = head.body[:-1] + bytes([head.body[-1] ^ 0xFF])
    conn.handle_bytes(_send_error(ServerError.ChecksumError, 0), 0.1)
    [failed] = [e for e in events(conn) if isinstance(e, SendDone)]
    assert failed.token == "A" and type(failed.error).__name__ == "ChecksumError"
    assert conn.ready and core.pending_count == 1
    # Sound here (corrupted on the way): sent again over a new connection.
    conn.handle_bytes(_send_error(ServerError.ChecksumError, 1), 0.2)
    assert not [e for e in events(conn) if isinstance(e, SendDone)]
    assert core.conn is None and core.pending_count == 1
    again, broker2 = _reattach(core)
    [resent] = broker2.read(again)
    assert resent.command.send.sequence_id == 1 and parse_body(resent.body).checksum_ok
