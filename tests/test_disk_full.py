"""A full disk under the store: sends fail with Pulsar's PersistenceError naming the cause, what is stored stays
readable, the server starts on the full disk, and writes resume by themselves once space comes back.

The store lives on a small tmpfs mounted for the test (the tests run as root, as CI does); a filler file takes the
space that is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from tests.conftest import Server, make_client
from tests.server_process import ServerProcess
from tests.test_bad_input import RawConnection, _producer, _send_frame
from wire.pulsar_api_pb2 import BaseCommand, ServerError

T = BaseCommand


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.fail(f"this test mounts a small tmpfs and needs root: {result.stderr.strip()}", pytrace=False)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> Path:
    """Take every free byte of ``disk`` with one file; its path."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def _send_until_refused(conn: RawConnection, name: str, first_sequence: int) -> tuple[int, BaseCommand]:
    """SEND 16 KiB messages until one is refused; (messages stored meanwhile, the SEND_ERROR)."""
    for stored, sequence_id in enumerate(range(first_sequence, first_sequence + 10_000)):
        conn.send_raw(_send_frame(1, name, sequence_id, b"x" * 16384))
        answer = conn.read().command
        if answer.type == T.SEND_ERROR:
            return stored, answer
        assert answer.type == T.SEND_RECEIPT, answer
    raise AssertionError("the disk never filled")


def _receive_all(consumer: pulsar.Consumer) -> list[bytes]:
    received = []
    while True:
        try:
            message = consumer.receive(1500)
        except pulsar.Timeout:
            return received
        consumer.acknowledge(message)
        received.append(message.data())


def test_a_full_disk_refuses_writes_keeps_reads_and_recovers(
    server_factory: Callable[..., Server], small_disk: Path, topic: str
) -> None:
    server = server_factory("--data-dir", str(small_disk / "data"))
    assert isinstance(server, ServerProcess)
    client = make_client(server.url)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(f"kept-{i}".encode())
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    for _ in range(5):
        consumer.acknowledge(consumer.receive(5000))
    time.sleep(0.3)  # those acknowledgements are committed

    filler = _fill(small_disk)
    raw = RawConnection(server.port)
    raw.handshake()
    name = _producer(raw, topic)
    _, refused = _send_until_refused(raw, name, 0)
    error = refused.send_error
    assert error.error == ServerError.PersistenceError
    assert "No space left on device" in error.message
    # As Pulsar's PersistentTopic.addFailed: a topic whose write failed disconnects its producers (the clients create
    # them again and resend in order), so a send already on its way cannot be stored ahead of the lost ones.
    assert raw.expect(T.CLOSE_PRODUCER).close_producer.producer_id == 1
    raw.assert_open()
    # A transaction whose id could not be made durable is refused with that error, not answered with the id.
    raw.send(T.TC_CLIENT_CONNECT_REQUEST, tc_id=0, request_id=1)
    raw.expect(T.TC_CLIENT_CONNECT_RESPONSE)
    raw.send(T.NEW_TXN, tc_id=0, request_id=2, txn_ttl_millis=60_000)
    new_txn = raw.expect(T.NEW_TXN_RESPONSE).newTxnResponse
    assert (new_txn.error, new_txn.HasField("txnid_least_bits")) == (ServerError.PersistenceError, False)
    raw.assert_open()
    # What is stored is still delivered.
    kept = [f"kept-{i}".encode() for i in range(5, 20)]
    assert _receive_all(consumer)[:15] == kept
    client.close()
    raw.close()

    # The server starts on the full disk and serves what it has.
    server.kill()
    server.start()
    assert "Traceback" not in server.log().split("serving pulsar://")[-1]
    client = make_client(server.url)
    # Acknowledged before the disk filled: not delivered again.
    assert client.subscribe(topic, "s").receive(5000).data() == b"kept-5"
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [reader.read_next(5000).data() for _ in range(20)] == [f"kept-{i}".encode() for i in range(20)]

    # Space comes back: writes resume without a restart.
    filler.unlink()
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=10_000)
    producer.send(b"after")
    consumer = client.subscribe(topic, "after", initial_position=pulsar.InitialPosition.Earliest)
    assert _receive_all(consumer)[-1] == b"after"
    client.close()


def _official_client(url: str) -> object:
    return make_client(url)


def _pulsar_txn_client(url: str) -> object:
    import pulsar_txn

    return pulsar_txn.Client(url, operation_timeout_seconds=10)


@pytest.mark.parametrize("new_client", [_official_client, _pulsar_txn_client], ids=["pulsar-client", "pulsar_txn"])
def test_sends_while_the_disk_is_full_complete_once_it_frees(
    server_factory: Callable[..., Server], small_disk: Path, topic: str, new_client: Callable[[str], object]
) -> None:
    """One script, the official client and pulsar_txn: a SEND_ERROR (PersistenceError) fails no send; the client
    reconnects and sends again until the disk has room, and each message is stored once, in order."""
    server = server_factory("--data-dir", str(small_disk / "data"))
    client: Any = new_client(server.url)
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=60_000)
    producer.send(b"before")
    filler = _fill(small_disk)
    results: list[str] = []
    done = threading.Event()
    count = 5

    def callback(result: object, _message_id: object) -> None:
        results.append(str(result).rsplit(".", 1)[-1])
        if len(results) == count:
            done.set()

    for i in range(count):
        producer.send_async(f"m{i}".encode() * 512, callback)
    time.sleep(3)  # refused meanwhile: sent again and again, failed to nobody
    assert results == []
    filler.unlink()
    assert done.wait(30), results
    assert results == ["Ok"] * count
    client.close()
    reader_client = make_client(server.url)
    reader = reader_client.create_reader(topic, pulsar.MessageId.earliest)
    stored = []
    with contextlib.suppress(pulsar.Timeout):
        while True:
            stored.append(reader.read_next(2000).data())
    assert stored == [b"before"] + [f"m{i}".encode() * 512 for i in range(count)]
    reader_client.close()


@pytest.mark.parametrize("module_name", ["pulsar.asyncio", "pulsar_txn.asyncio"])
def test_asyncio_sends_while_the_disk_is_full_complete_once_it_frees(
    server_factory: Callable[..., Server], small_disk: Path, topic: str, module_name: str
) -> None:
    """The same with the asyncio APIs: the awaited sends neither fail nor finish while the disk is full."""
    pulsar_asyncio = importlib.import_module(module_name)
    server = server_factory("--data-dir", str(small_disk / "data"))
    count = 5

    async def script() -> None:
        client = pulsar_asyncio.Client(server.url, operation_timeout_seconds=10)
        producer = await client.create_producer(topic, batching_enabled=False, send_timeout_millis=60_000)
        await producer.send(b"before")
        filler = _fill(small_disk)
        sends = [asyncio.ensure_future(producer.send(f"m{i}".encode() * 512)) for i in range(count)]
        await asyncio.sleep(3)  # refused meanwhile: sent again and again, failed to nobody
        assert [send.done() for send in sends] == [False] * count
        filler.unlink()
        await asyncio.wait_for(asyncio.gather(*sends), 30)
        await client.close()

    asyncio.run(script())
    reader_client = make_client(server.url)
    reader = reader_client.create_reader(topic, pulsar.MessageId.earliest)
    stored = []
    with contextlib.suppress(pulsar.Timeout):
        while True:
            stored.append(reader.read_next(2000).data())
    assert stored == [b"before"] + [f"m{i}".encode() * 512 for i in range(count)]
    reader_client.close()
