"""A consumer that stops reading its socket: the server stops dispatching to it once its connection is backed up
(Twisted's producer/consumer flow control), so memory stays flat however much is published, others are served, and
the consumer gets every message, in order, when it reads again."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pulsar

from tests.conftest import Server, Witness, make_client
from tests.server_process import ServerProcess
from tests.test_bad_input import RawConnection
from wire.pulsar_api_pb2 import BaseCommand

T = BaseCommand
MESSAGES = 60_000
SIZE = 4096
UNBATCHED = {"batching_enabled": False, "max_pending_messages": 2000, "block_if_queue_full": True}


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_consumer_that_does_not_read_does_not_grow_the_server(
    server_factory: Callable[..., Server], topic: str
) -> None:
    server = server_factory()
    assert isinstance(server, ServerProcess) and server.process is not None
    witness = Witness(server.url)
    witness.check()
    stalled = RawConnection(server.port, timeout=30)
    stalled.handshake()
    stalled.send(T.SUBSCRIBE, topic=topic, subscription="s", subType=0, consumer_id=1, request_id=1,
                 initialPosition=1)
    stalled.expect(T.SUCCESS)
    # Permits for everything, and then no more reading from the socket.
    stalled.send(T.FLOW, consumer_id=1, messagePermits=MESSAGES)
    client = make_client(server.url)
    producer = client.create_producer(topic, **UNBATCHED)
    payload = b"x" * SIZE
    rss = []
    for _half in range(2):
        for i in range(MESSAGES // 2):
            producer.send_async(payload, None)
            if i % 1000 == 999:
                producer.flush()
                witness.check()
        producer.flush()
        time.sleep(1)
        rss.append(_rss_mib(server.process.pid))
    # Flat: once the first half filled what the server holds anyway (the log cache, the connection's buffers, one
    # dispatch pass, the allocator's pools), the second 117 MiB for the consumer that does not read add little (about
    # 20 MiB measured, levelling off). Without flow control each half adds what it publishes.
    assert rss[1] - rss[0] < 40, f"RSS went from {rss[0]:.0f} to {rss[1]:.0f} MiB"
    witness.check()

    # Reading again, the consumer gets every message once, in order.
    entries = []
    while len(entries) < MESSAGES:
        command = stalled.read().command
        assert command.type == T.MESSAGE, command
        entries.append(command.message.message_id.entryId)
    assert entries == list(range(MESSAGES))
    stalled.close()
    client.close()
    witness.check()
    witness.client.close()


def test_a_non_persistent_consumer_that_does_not_read_loses_messages_instead(
    server_factory: Callable[..., Server],
) -> None:
    server = server_factory()
    assert isinstance(server, ServerProcess) and server.process is not None
    topic = "non-persistent://public/default/stalled"
    stalled = RawConnection(server.port, timeout=30)
    stalled.handshake()
    stalled.send(T.SUBSCRIBE, topic=topic, subscription="s", subType=0, consumer_id=1, request_id=1)
    stalled.expect(T.SUCCESS)
    stalled.send(T.FLOW, consumer_id=1, messagePermits=MESSAGES)
    client = make_client(server.url)
    producer = client.create_producer(topic, **UNBATCHED)
    rss = []
    for _ in range(2):
        for _ in range(MESSAGES // 2000):
            for _ in range(1000):
                producer.send_async(b"x" * SIZE, None)
            producer.flush()
        time.sleep(1)
        rss.append(_rss_mib(server.process.pid))
    assert rss[1] - rss[0] < 16, f"RSS went from {rss[0]:.0f} to {rss[1]:.0f} MiB"
    # As Pulsar's non-persistent dispatcher: what the connection cannot take is dropped and counted.
    consumer = client.subscribe(topic, "other")
    producer.send(b"after")
    assert consumer.receive(5000).data() == b"after"
    client.close()
    stalled.close()


def test_flow_control_keeps_consumers_that_read_at_full_speed(server: ServerProcess, topic: str) -> None:
    client = make_client(server.url)
    producer = client.create_producer(topic, batching_enabled=True, block_if_queue_full=True)
    for i in range(20_000):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    received = [consumer.receive(5000).data() for _ in range(20_000)]
    assert received == [f"m{i}".encode() for i in range(20_000)]
    client.close()
