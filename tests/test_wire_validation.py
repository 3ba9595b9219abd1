"""Fields read at the wire boundary as Pulsar 4.2.4's broker reads them (issue 20, items 2-5, 7-9).

What Pulsar does was checked on a standalone with the same raw frames: strings that are not UTF-8 are decoded
with U+FFFD (a topic, producer, subscription or schema name so spelled is served); a ``uint64`` is a Java
``long`` (a publish time of 2^64-1 is -1, and is stored; SEEK to it succeeds); a FLOW whose permits are not a
positive Java ``int`` closes the connection; an invalid namespace in GET_TOPICS_OF_NAMESPACE closes it; a batch
count of -2^31 gives batch index -1 in GET_LAST_MESSAGE_ID; the admin API writes far dates as Java does.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable

import pytest

from tests.conftest import Server, Witness
from tests.server_process import ServerProcess
from tests.test_admin_http import Http
from tests.test_bad_input import RawConnection, _producer, assert_logged_close
from wire.commands import make
from wire.compression import CompressionError, decompress
from wire.framing import encode_command, encode_payload_command, make_body, parse_body
from wire.pulsar_api_pb2 import BaseCommand, CommandAck, CompressionType, MessageMetadata
from wire.validate import MAX_BATCH_MESSAGES, check_command

T = BaseCommand
MARK = b"~~~"
NOT_UTF8 = b"\xff\xfe\xfd"
REPLACED = "\ufffd\ufffd\ufffd"
U64_MAX = (1 << 64) - 1


def _not_utf8(command: BaseCommand) -> bytes:
    """The command's frame with each ``~~~`` in its strings replaced by three bytes that are not UTF-8."""
    data = encode_command(command)
    assert MARK in data
    return data.replace(MARK, NOT_UTF8)


def _send(conn: RawConnection, name: str, sequence_id: int, **fields: object) -> BaseCommand:
    """SEND one message with metadata ``fields`` from producer 1; the answer."""
    metadata = MessageMetadata(producer_name=name, sequence_id=sequence_id, publish_time=int(time.time() * 1000))
    for key, value in fields.items():
        setattr(metadata, key, value)
    command = make(T.SEND, producer_id=1, sequence_id=sequence_id, num_messages=1)
    conn.send_raw(encode_payload_command(command, make_body(metadata, b"m")))
    return conn.read().command


@pytest.fixture
def raw(server: ServerProcess) -> RawConnection:
    conn = RawConnection(server.port)
    conn.handshake()
    yield conn
    conn.close()


# -- strings ---------------------------------------------------------------------------------------


def test_names_that_are_not_utf8_are_read_with_replacement_characters(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    raw.send_raw(_not_utf8(make(T.LOOKUP, topic=topic + "~~~", request_id=1)))
    assert raw.expect(T.LOOKUP_RESPONSE).lookupTopicResponse.response == 1  # Connect
    raw.send_raw(_not_utf8(make(T.PARTITIONED_METADATA, topic=topic + "~~~", request_id=2)))
    assert raw.expect(T.PARTITIONED_METADATA_RESPONSE).partitionMetadataResponse.response == 0  # Success
    raw.send_raw(_not_utf8(make(T.PRODUCER, topic=topic + "~~~", producer_id=1, request_id=3, producer_name="p~~~")))
    assert raw.expect(T.PRODUCER_SUCCESS).producer_success.producer_name == "p" + REPLACED
    raw.send_raw(
        _not_utf8(
            make(
                T.SUBSCRIBE,
                topic=topic,
                subscription="s~~~",
                consumer_name="c~~~",
                subType=0,
                consumer_id=1,
                request_id=4,
            )
        )
    )
    assert raw.expect(T.SUCCESS).success.request_id == 4
    raw.assert_open()


def test_a_schema_name_that_is_not_utf8_does_not_break_get_schema(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    raw.send_raw(
        _not_utf8(
            make(
                T.GET_OR_CREATE_SCHEMA,
                topic=topic,
                request_id=1,
                schema={"name": "n~~~", "schema_data": b"", "type": 1, "properties": [{"key": "k~~~", "value": "v"}]},
            )
        )
    )
    assert not raw.expect(T.GET_OR_CREATE_SCHEMA_RESPONSE).getOrCreateSchemaResponse.HasField("error_code")
    for request_id in (2, 3):  # and again: it is not a one-off
        raw.send(T.GET_SCHEMA, topic=topic, request_id=request_id)
        response = raw.expect(T.GET_SCHEMA_RESPONSE).getSchemaResponse
        assert not response.HasField("error_code")
        assert [kv.key for kv in response.schema.properties] == ["k" + REPLACED]


def test_an_invalid_namespace_closes_the_connection(
    server: ServerProcess, witness: Witness, raw: RawConnection
) -> None:
    raw.send_raw(_not_utf8(make(T.GET_TOPICS_OF_NAMESPACE, namespace="public/default~~~", request_id=1)))
    raw.assert_closed_by_server()
    assert_logged_close(server, raw, "invalid namespace name")


# -- numbers -------------------------------------------------------------------------------------------


def test_publish_times_beyond_a_java_long_are_stored_beside_other_sends(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    name = _producer(raw, topic)
    for sequence_id, publish_time in enumerate([U64_MAX, 1 << 63, int(time.time() * 1000)]):
        answer = _send(raw, name, sequence_id, publish_time=publish_time)
        assert answer.type == T.SEND_RECEIPT, answer
        assert answer.send_receipt.message_id.entryId == sequence_id
    status, headers, _ = Http(server.admin_url).request(
        "GET",
        f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/examinemessage"
        "?initialPosition=earliest&messagePosition=1",
    )
    assert status == 200
    assert headers["X-Pulsar-publish-time"] == "1969-12-31T23:59:59.999Z"  # as Pulsar 4.2.4 writes -1


def test_far_dates_in_examined_messages_are_written_as_pulsar_writes_them(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    name = _producer(raw, topic)
    answer = _send(raw, name, 0, deliver_at_time=(1 << 63) - 1, event_time=1 << 63, publish_time=253402300800000)
    assert answer.type == T.SEND_RECEIPT
    status, headers, _ = Http(server.admin_url).request(
        "GET",
        f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/examinemessage"
        "?initialPosition=earliest&messagePosition=1",
    )
    assert status == 200
    assert headers["X-Pulsar-deliver-at-time"] == "+292278994-08-17T07:12:55.807Z"
    assert headers["X-Pulsar-event-time"] == "-292275055-05-16T16:47:04.192Z"
    assert headers["X-Pulsar-publish-time"] == "+10000-01-01T00:00:00Z"


def test_seek_to_a_publish_time_beyond_a_java_long(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    name = _producer(raw, topic)
    assert _send(raw, name, 0).type == T.SEND_RECEIPT
    raw.send(T.SUBSCRIBE, topic=topic, subscription="s", subType=0, consumer_id=5, request_id=2)
    raw.expect(T.SUCCESS)
    raw.send(T.SEEK, consumer_id=5, request_id=3, message_publish_time=U64_MAX)
    assert raw.expect(T.CLOSE_CONSUMER).close_consumer.consumer_id == 5
    assert raw.expect(T.SUCCESS).success.request_id == 3
    raw.assert_open()


def test_a_negative_batch_count_gives_batch_index_minus_one(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    name = _producer(raw, topic)
    assert _send(raw, name, 0, num_messages_in_batch=-(1 << 31)).type == T.SEND_RECEIPT
    raw.send(T.SUBSCRIBE, topic=topic, subscription="s", subType=0, consumer_id=5, request_id=2, initialPosition=1)
    raw.expect(T.SUCCESS)
    raw.send(T.GET_LAST_MESSAGE_ID, consumer_id=5, request_id=3)
    last = raw.expect(T.GET_LAST_MESSAGE_ID_RESPONSE).getLastMessageIdResponse.last_message_id
    assert last.entryId == 0
    assert (last.batch_index if last.HasField("batch_index") else -1) == -1
    raw.send(T.FLOW, consumer_id=5, messagePermits=10)
    assert raw.expect(T.MESSAGE).message.message_id.entryId == 0


@pytest.mark.parametrize("permits", [0, 1 << 31, U64_MAX >> 32])
def test_flow_permits_that_are_not_a_positive_java_int_close_the_connection(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str, permits: int
) -> None:
    raw.send(T.FLOW, consumer_id=77, messagePermits=permits)  # an unknown consumer: ignored, as by Pulsar
    raw.assert_open()
    raw.send(T.SUBSCRIBE, topic=topic, subscription="s", subType=0, consumer_id=5, request_id=2)
    raw.expect(T.SUCCESS)
    raw.send(T.FLOW, consumer_id=5, messagePermits=permits)
    raw.assert_closed_by_server()
    assert_logged_close(server, raw, "permits: the count must be positive")


def test_sequence_ids_are_compared_as_java_longs_by_deduplication(
    server_factory: Callable[..., Server], topic: str
) -> None:
    server = server_factory("--deduplication")
    conn = RawConnection(server.port)
    conn.handshake()
    name = _producer(conn, topic)
    # 2^64-1 is -1 to Pulsar: not above the last sequence id (-1), so a duplicate, answered without a position.
    command = make(T.SEND, producer_id=1, sequence_id=U64_MAX, num_messages=1)
    metadata = MessageMetadata(producer_name=name, sequence_id=U64_MAX, publish_time=int(time.time() * 1000))
    conn.send_raw(encode_payload_command(command, make_body(metadata, b"dup")))
    receipt = conn.expect(T.SEND_RECEIPT).send_receipt
    assert (receipt.sequence_id, receipt.message_id.entryId) == (U64_MAX, U64_MAX)
    assert _send(conn, name, 0).send_receipt.message_id.entryId == 0
    conn.close()


# -- sizes ---------------------------------------------------------------------------------------------


def test_a_huge_declared_uncompressed_size_is_refused_before_allocating() -> None:
    tracemalloc.start()
    try:
        for codec in (CompressionType.LZ4, CompressionType.ZSTD, CompressionType.SNAPPY, CompressionType.ZLIB):
            with pytest.raises(CompressionError, match="exceeds the max message size"):
                decompress(codec, b"\0" * 16, (1 << 32) - 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_a_huge_declared_uncompressed_size_fails_examine_alone(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    name = _producer(raw, topic)
    answer = _send(raw, name, 0, compression=CompressionType.LZ4, uncompressed_size=(1 << 32) - 1)
    assert answer.type == T.SEND_RECEIPT
    status, _, body = Http(server.admin_url).request(
        "GET",
        f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/examinemessage"
        "?initialPosition=earliest&messagePosition=1",
    )
    assert status == 500
    assert b"exceeds the max message size" in body


def test_an_ack_batch_size_is_bounded() -> None:
    command = make(
        T.ACK,
        consumer_id=1,
        ack_type=CommandAck.Individual,
        message_id=[
            {"ledgerId": 1, "entryId": 0, "batch_size": (1 << 31) - 1},
            {"ledgerId": 1, "entryId": 1, "batch_size": 3},
        ],
    )
    check_command(command)
    assert [mid.batch_size for mid in command.ack.message_id] == [MAX_BATCH_MESSAGES, 3]


# -- transaction ids ---------------------------------------------------------------------------------


def test_ending_a_transaction_that_holds_nothing_does_not_fail_the_commit_of_others(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    """Pulsar answers END_TXN_ON_SUBSCRIPTION for an id it does not know with success; a send sharing the commit
    with it is stored (a txn id beyond a Java long used to fail the whole commit)."""
    name = _producer(raw, topic)
    raw.send(T.SUBSCRIBE, topic=topic, subscription="s", subType=0, consumer_id=5, request_id=2)
    raw.expect(T.SUCCESS)
    end = make(
        T.END_TXN_ON_SUBSCRIPTION,
        request_id=3,
        txnid_most_bits=U64_MAX,
        txnid_least_bits=U64_MAX,
        txn_action=1,
        subscription={"topic": topic, "subscription": "s"},
    )
    metadata = MessageMetadata(producer_name=name, sequence_id=0, publish_time=int(time.time() * 1000))
    send = encode_payload_command(make(T.SEND, producer_id=1, sequence_id=0, num_messages=1), make_body(metadata, b"m"))
    raw.send_raw(encode_command(end) + send)  # one read: one commit
    answers = {raw.read().command.type for _ in range(2)}
    assert answers == {T.END_TXN_ON_SUBSCRIPTION_RESPONSE, T.SEND_RECEIPT}


def test_a_transactional_ack_with_a_huge_batch_size_allocates_nothing_in_proportion(
    server_factory: Callable[..., Server], topic: str
) -> None:
    """batch_size 2^31-1 used to become a mask of 2^31 bits (256 MiB) in the pending ack, then at commit."""
    server = server_factory()
    assert isinstance(server, ServerProcess) and server.process is not None
    conn = RawConnection(server.port)
    conn.handshake()
    name = _producer(conn, topic)
    assert _send(conn, name, 0).type == T.SEND_RECEIPT
    conn.send(T.SUBSCRIBE, topic=topic, subscription="sub", subType=1, consumer_id=5, request_id=2, initialPosition=1)
    conn.expect(T.SUCCESS)
    conn.send(T.FLOW, consumer_id=5, messagePermits=10)
    message_id = conn.expect(T.MESSAGE).message.message_id
    conn.send(T.TC_CLIENT_CONNECT_REQUEST, request_id=3, tc_id=0)
    conn.expect(T.TC_CLIENT_CONNECT_RESPONSE)
    conn.send(T.NEW_TXN, request_id=4, tc_id=0, txn_ttl_millis=60_000)
    new = conn.expect(T.NEW_TXN_RESPONSE).newTxnResponse
    txn = {"txnid_most_bits": new.txnid_most_bits, "txnid_least_bits": new.txnid_least_bits}
    conn.send(T.ADD_SUBSCRIPTION_TO_TXN, request_id=5, subscription=[{"topic": topic, "subscription": "sub"}], **txn)
    assert not conn.expect(T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE).addSubscriptionToTxnResponse.HasField("error")
    before = _rss_peak_mib(server.process.pid)
    ack = {"ledgerId": message_id.ledgerId, "entryId": message_id.entryId, "batch_size": (1 << 31) - 1, "ack_set": [-2]}
    conn.send(T.ACK, consumer_id=5, ack_type=CommandAck.Individual, message_id=[ack], request_id=6, **txn)
    assert not conn.expect(T.ACK_RESPONSE).ackResponse.HasField("error")
    conn.send(T.END_TXN, request_id=7, txn_action=0, **txn)  # commit
    assert not conn.expect(T.END_TXN_RESPONSE).endTxnResponse.HasField("error")
    conn.assert_open()
    assert _rss_peak_mib(server.process.pid) - before < 64
    conn.close()


def _rss_peak_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:"))


def test_body_with_metadata_missing_required_fields_round_trips() -> None:
    """A body the server rebuilds keeps metadata without its required fields as the client sent it (Pulsar stores
    such a SEND); building it once raised EncodeError and closed the connection."""
    metadata = MessageMetadata(sequence_id=3, txnid_most_bits=1, txnid_least_bits=2)
    parsed = parse_body(make_body(metadata, b"payload"))
    assert parsed.checksum_ok
    assert not parsed.metadata.HasField("producer_name")
    assert (parsed.metadata.sequence_id, parsed.metadata.txnid_least_bits) == (3, 2)


def test_a_negative_deliver_at_time_is_examined_as_a_date(
    server: ServerProcess, witness: Witness, raw: RawConnection, topic: str
) -> None:
    """``deliver_at_time`` is an int64: -1 is a Java long already (it once went through the uint64 conversion,
    ValueError)."""
    name = _producer(raw, topic)
    assert _send(raw, name, 0, deliver_at_time=-1).type == T.SEND_RECEIPT
    status, headers, _ = Http(server.admin_url).request(
        "GET",
        f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/examinemessage"
        "?initialPosition=earliest&messagePosition=1",
    )
    assert status == 200
    assert headers["X-Pulsar-deliver-at-time"] == "1969-12-31T23:59:59.999Z"
