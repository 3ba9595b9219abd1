"""SENDs with odd metadata from a raw socket: each is stored as Pulsar stores it, and nothing else suffers.

What Pulsar 4.2.4 does was checked on a standalone with the same frames: both messages below are plain messages,
delivered at once with the ids that follow each other.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pulsar

from pulsar_txn import Client
from spark.reader import EARLIEST, PartitionReader, Position
from tests.conftest import Server, Witness, make_client
from tests.server_process import ServerProcess
from tests.test_bad_input import RawConnection, _producer
from wire.commands import make
from wire.framing import encode_payload_command, make_body
from wire.pulsar_api_pb2 import BaseCommand, MessageIdData, MessageMetadata

T = BaseCommand


def _send(conn: RawConnection, name: str, sequence_id: int, payload: bytes, metadata: bytes | None = None) -> int:
    """SEND one message (``metadata`` as raw bytes, else plain); the entry id of its receipt."""
    return _receipt(conn, name, sequence_id, payload, metadata).entryId


def _receipt(
    conn: RawConnection, name: str, sequence_id: int, payload: bytes, metadata: bytes | None = None
) -> MessageIdData:
    """SEND one message (``metadata`` as raw bytes, else plain); the id of its receipt."""
    if metadata is None:
        metadata = MessageMetadata(
            producer_name=name, sequence_id=sequence_id, publish_time=int(time.time() * 1000)
        ).SerializeToString()
    command = make(T.SEND, producer_id=1, sequence_id=sequence_id, num_messages=1)
    conn.send_raw(encode_payload_command(command, make_body(metadata, payload)))
    return conn.expect(T.SEND_RECEIPT).send_receipt.message_id


def _drain(url: str, topic: str, subscription: str) -> list[bytes]:
    client = make_client(url)
    try:
        consumer = client.subscribe(topic, subscription, initial_position=pulsar.InitialPosition.Earliest)
        received = []
        while True:
            try:
                received.append(consumer.receive(1000).data())
            except pulsar.Timeout:
                return received
    finally:
        client.close()


def test_a_plain_send_naming_a_transaction_is_a_plain_message(
    server_factory: Callable[..., Server], topic: str
) -> None:
    server = server_factory()
    assert isinstance(server, ServerProcess)
    conn = RawConnection(server.port)
    conn.handshake()
    name = _producer(conn, topic)
    metadata = MessageMetadata(
        producer_name=name, sequence_id=0, publish_time=int(time.time() * 1000), txnid_most_bits=0,
        txnid_least_bits=987654,
    )
    assert _send(conn, name, 0, b"names-a-txn", metadata.SerializeToString()) == 0
    assert _send(conn, name, 1, b"plain") == 1
    conn.close()
    # Not held behind a transaction nobody ends: readable at once, and after a restart.
    assert _drain(server.url, topic, "before") == [b"names-a-txn", b"plain"]
    server.kill()
    server.start()
    assert _drain(server.url, topic, "after") == [b"names-a-txn", b"plain"]


def test_a_partition_key_that_is_not_utf8_is_stored_without_a_hole(
    server: ServerProcess, witness: Witness, topic: str
) -> None:
    raw = RawConnection(server.port)
    raw.handshake()
    name = _producer(raw, topic)
    metadata = MessageMetadata(
        producer_name=name, sequence_id=1, publish_time=int(time.time() * 1000), partition_key="k"
    ).SerializeToString()
    bad_key = metadata.replace(b"\x01k", b"\x01\xff")
    assert bad_key != metadata
    assert [_send(raw, name, 0, b"a"), _send(raw, name, 1, b"bad-key", bad_key), _send(raw, name, 2, b"c")] == [
        0, 1, 2,
    ]
    raw.assert_open()
    raw.close()
    assert _drain(server.url, topic, "s") == [b"a", b"bad-key", b"c"]
    assert "Traceback" not in server.log()


def test_the_spark_reader_reads_keys_that_are_not_utf8_or_not_base64(server: ServerProcess, topic: str) -> None:
    """The connector's reader gives such keys as the bytes they were, instead of failing the partition's read."""
    raw = RawConnection(server.port)
    raw.handshake()
    name = _producer(raw, topic)

    def keyed(sequence_id: int, key: str, b64: bool) -> bytes:
        return MessageMetadata(
            producer_name=name, sequence_id=sequence_id, publish_time=int(time.time() * 1000), partition_key=key,
            partition_key_b64_encoded=b64,
        ).SerializeToString()

    not_utf8 = keyed(0, "k", False).replace(b"\x01k", b"\x01\xff")
    _send(raw, name, 0, b"not-utf8", not_utf8)
    _send(raw, name, 1, b"not-base64", keyed(1, "a*b", True))
    last = _receipt(raw, name, 2, b"base64", keyed(2, "aGk=", True))
    raw.close()
    with Client(server.url) as client:
        until = Position(last.ledgerId, last.entryId, 0)
        read = PartitionReader(client, topic, EARLIEST, until, poll_timeout=10).messages()
        assert [(m.value, m.key) for m in read] == [(b"not-utf8", b"\xff"), (b"not-base64", b"a*b"), (b"base64", b"hi")]
