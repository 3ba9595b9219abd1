"""The max message size (``--max-message-size``, Pulsar's ``maxMessageSize``): advertised in CONNECTED, official
clients batch and chunk by it, frames up to it plus Pulsar's 10 KiB of padding are taken and larger ones close the
connection, and no payload is decompressed beyond it."""

from __future__ import annotations

import json
import struct
import time
import urllib.request
import zlib
from collections.abc import Callable

import pulsar
import pytest

from tests.conftest import make_client
from tests.server_process import ServerProcess
from tests.test_bad_input import RawConnection
from tests.txn_harness import Scenario, txn_harness_fixture  # noqa: F401 (the txn_harness fixture)
from wire.commands import make
from wire.framing import DEFAULT_MAX_MESSAGE_SIZE, MESSAGE_SIZE_FRAME_PADDING, encode_payload_command, make_body
from wire.pulsar_api_pb2 import BaseCommand, CompressionType, MessageMetadata, ServerError

T = BaseCommand
#: A small max message size keeps the frames of these tests small.
SMALL = 20_000


@pytest.fixture
def small_server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory("--max-message-size", str(SMALL))


def _producer(conn: RawConnection, topic: str) -> str:
    conn.send(T.PRODUCER, topic=topic, producer_id=1, request_id=1)
    return conn.expect(T.PRODUCER_SUCCESS).producer_success.producer_name


def _send_of_total(name: str, total: int, **metadata: object) -> bytes:
    """A SEND frame whose ``totalSize`` field is ``total``."""
    meta = MessageMetadata(producer_name=name, sequence_id=0, publish_time=int(time.time() * 1000), **metadata)
    command = make(T.SEND, producer_id=1, sequence_id=0, num_messages=1)
    empty = encode_payload_command(command, make_body(meta, b""))
    data = encode_payload_command(command, make_body(meta, b"x" * (total + 4 - len(empty))))
    assert struct.unpack_from(">I", data)[0] == total
    return data


def _stats(server: ServerProcess, topic: str, kind: str) -> dict:
    path = topic.replace("persistent://", "persistent/")
    with urllib.request.urlopen(f"{server.admin_url}/admin/v2/{path}/{kind}", timeout=10) as reply:
        return json.load(reply)


def test_connected_advertises_the_setting(small_server: ServerProcess) -> None:
    conn = RawConnection(small_server.port)
    try:
        assert conn.handshake().connected.max_message_size == SMALL
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("max_message_size", "extra"), [(SMALL, ("--max-message-size", str(SMALL))), (DEFAULT_MAX_MESSAGE_SIZE, ())]
)
def test_largest_frame_is_taken_and_one_byte_more_closes(
    server_factory: Callable[..., ServerProcess], topic: str, max_message_size: int, extra: tuple[str, ...]
) -> None:
    """As Pulsar's frame decoder: a frame of up to max message size + 10 KiB, its 4-byte size field included."""
    server = server_factory(*extra)
    largest = max_message_size + MESSAGE_SIZE_FRAME_PADDING - 4
    conn = RawConnection(server.port)
    try:
        conn.handshake()
        name = _producer(conn, topic)
        conn.send_raw(_send_of_total(name, largest))
        assert conn.expect(T.SEND_RECEIPT).send_receipt.message_id.entryId == 0
    finally:
        conn.close()
    conn = RawConnection(server.port)
    try:
        conn.handshake()
        name = _producer(conn, topic)
        conn.send_raw(_send_of_total(name, largest + 1)[:64])  # the size field is enough: the server closes
        conn.assert_closed_by_server()
    finally:
        conn.close()
    assert f"frame size {largest + 1} outside 4..{largest}" in server.log()


def test_python_client_refuses_a_larger_message_and_chunks_it(small_server: ServerProcess, topic: str) -> None:
    client = make_client(small_server.url)
    try:
        consumer = client.subscribe(topic, "s")
        plain = client.create_producer(topic, batching_enabled=False)
        with pytest.raises(pulsar.MessageTooBig):
            plain.send(b"a" * (SMALL + 1))
        plain.send(b"a" * (SMALL - 200))  # the client counts the metadata in
        chunked = client.create_producer(topic, batching_enabled=False, chunking_enabled=True)
        big = bytes(range(256)) * 200  # 51,200 bytes: three chunks
        chunked.send(big)
        assert consumer.receive(10_000).data() == b"a" * (SMALL - 200)
        assert consumer.receive(10_000).data() == big
        assert _stats(small_server, topic, "internalStats")["numberOfEntries"] == 1 + 3
    finally:
        client.close()


def test_python_client_refuses_a_batch_beyond_the_setting(small_server: ServerProcess, topic: str) -> None:
    """The Python client (C++) does not split a batch at the advertised size: it fails the batch."""
    client = make_client(small_server.url)
    try:
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=1000,
            batching_max_allowed_size_in_bytes=1024 * 1024,
            batching_max_publish_delay_ms=60_000,
        )
        for i in range(30):
            producer.send_async(bytes([i]) * 1000, None)
        with pytest.raises(pulsar.MessageTooBig):
            producer.flush()
        # The producer still works; flush, not a blocking send, which would wait out the 60 s batch delay.
        results: list[pulsar.Result] = []
        producer.send_async(b"small", lambda result, _msg_id: results.append(result))
        producer.flush()
        assert results == [pulsar.Result.Ok]
    finally:
        client.close()


def test_java_client_batches_and_chunks_by_the_setting(
    small_server: ServerProcess, topic: str, txn_harness: Scenario
) -> None:
    """The Java client fills batches up to the advertised size, refuses a message over it and chunks by it."""
    obs = txn_harness(small_server.url, "max_size_batches", topic, "1100", "100")
    assert obs["advertised"] == SMALL
    # 100 messages of 1,100 bytes: the client adds messages while their payloads fit in 20,000 bytes.
    assert obs["batches"] == 6
    assert obs["largest_batch"] == 18
    assert obs["too_big"]["type"] == "InvalidMessageException"
    assert obs["received"] == 101
    assert obs["chunked_whole"] is True


def test_examine_does_not_decompress_beyond_the_setting(small_server: ServerProcess, topic: str) -> None:
    """A payload declaring more uncompressed bytes than the max message size is not decompressed."""
    data = b"z" * (SMALL + 1)
    conn = RawConnection(small_server.port)
    try:
        conn.handshake()
        name = _producer(conn, topic)
        meta = MessageMetadata(
            producer_name=name,
            sequence_id=0,
            publish_time=int(time.time() * 1000),
            compression=CompressionType.ZLIB,
            uncompressed_size=len(data),
        )
        command = make(T.SEND, producer_id=1, sequence_id=0, num_messages=1)
        conn.send_raw(encode_payload_command(command, make_body(meta, zlib.compress(data))))
        conn.expect(T.SEND_RECEIPT)
    finally:
        conn.close()
    path = topic.replace("persistent://", "persistent/")
    url = f"{small_server.admin_url}/admin/v2/{path}/examinemessage?initialPosition=earliest&messagePosition=1"
    with pytest.raises(urllib.error.HTTPError) as failure:
        urllib.request.urlopen(url, timeout=10)
    assert failure.value.code == 500
    assert f"exceeds the max message size {SMALL}" in failure.value.read().decode()


def _policy(server: ServerProcess, topic: str, method: str, body: bytes | None = None) -> tuple[int, bytes]:
    path = topic.replace("persistent://", "persistent/")
    request = urllib.request.Request(
        f"{server.admin_url}/admin/v2/{path}/maxMessageSize",
        data=body,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_topic_max_message_size_policy(small_server: ServerProcess, topic: str) -> None:
    """A topic's own max message size (0 up to the broker's) fails larger SENDs alone, with Pulsar's answer."""
    conn = RawConnection(small_server.port)
    try:
        conn.handshake()
        name = _producer(conn, topic)
        assert _policy(small_server, topic, "POST", b"-1")[0] == 412
        assert _policy(small_server, topic, "POST", str(SMALL + 1).encode())[0] == 412
        assert _policy(small_server, topic, "POST", b"1000")[0] == 204
        assert _policy(small_server, topic, "GET") == (200, b"1000")
        conn.send_raw(_send_of_total(name, 900))
        assert conn.expect(T.SEND_RECEIPT).send_receipt.message_id.entryId == 0
        conn.send_raw(_send_of_total(name, 2000))
        error = conn.expect(T.SEND_ERROR).send_error
        assert (error.error, error.message) == (ServerError.NotAllowedError, "Exceed maximum message size")
        conn.assert_open()
        assert _policy(small_server, topic, "DELETE")[0] == 204
        conn.send_raw(_send_of_total(name, 2000))
        assert conn.expect(T.SEND_RECEIPT).send_receipt.message_id.entryId == 1
    finally:
        conn.close()
