"""The entry caches of all topics share one budget (``--managed-ledger-cache-size-mb``): memory does not grow with
the number of topics, and consumers of topics whose entries were evicted read them from the store. Through a real
server, the official client and ``/metrics``."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pulsar

from tests.conftest import make_client
from tests.server_process import ServerProcess
from tests.test_metrics import scrape, value

MIB = 1024 * 1024


def test_topics_share_one_cache_budget_and_evicted_entries_are_read_from_the_store(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory("--managed-ledger-cache-size-mb", "2")
    client = make_client(server.url)
    try:
        topics = [f"persistent://public/default/cache-{uuid.uuid4().hex[:8]}" for _ in range(6)]
        payload = b"x" * (64 * 1024)
        for index, topic in enumerate(topics):
            producer = client.create_producer(topic, batching_enabled=False)
            for n in range(16):  # 1 MiB per topic, 6 MiB in all
                producer.send(payload + f"{index}:{n}".encode())
            producer.close()

        _, samples = scrape(server.admin_url)
        used = value(samples, "pulsar_ml_cache_used_size", cluster="standalone")
        assert 0 < used <= 2 * MIB

        for index, topic in enumerate(topics):
            consumer = client.subscribe(
                topic, "s", initial_position=pulsar.InitialPosition.Earliest
            )
            got = [consumer.receive(timeout_millis=10_000).data()[len(payload):] for _ in range(16)]
            assert got == [f"{index}:{n}".encode() for n in range(16)]
            consumer.close()
    finally:
        client.close()
