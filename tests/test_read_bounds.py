"""Reads of large entries from the store are bounded in bytes (Pulsar's dispatcherMaxReadSizeBytes): a consumer's
FLOW or a redelivery over a backlog of large, evicted entries reads a few MiB at a time, between turns of the event
loop, instead of 200 entries at once (found by the fuzz run: a single read of up to a GiB held up every client for
0.4 s and more). The engine with a manual clock, and a real server with the official client."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pulsar
import pytest

from engine.subscription import DISPATCH_BYTES, SubType
from tests.conftest import make_client
from tests.server_process import ServerProcess
from tests.test_engine_transactions import Harness

ENTRY = 512 * 1024
COUNT = 40


def _spy_reads(harness: Harness) -> list[int]:
    """Bytes each store read returned, recorded as the engine reads."""
    store, sizes = harness.broker.store, []

    def spied(read: Callable[..., list[tuple[int, bytes]]]) -> Callable[..., list[tuple[int, bytes]]]:
        def recorded(*args: object) -> list[tuple[int, bytes]]:
            rows = read(*args)
            sizes.append(sum(len(body) for _, body in rows))
            return rows

        return recorded

    store.read, store.read_ids = spied(store.read), spied(store.read_ids)  # type: ignore[method-assign]
    return sizes


def _large_backlog(tmp_path: Path) -> Harness:
    """COUNT entries of ENTRY bytes, nearly all evicted from a 1 MiB entry cache."""
    harness = Harness(tmp_path, entry_cache_bytes=1024 * 1024)
    for n in range(COUNT):
        harness.send(f"{n:04}".encode() + b"x" * ENTRY)
    return harness


def test_a_flow_over_large_evicted_entries_reads_them_a_few_mib_at_a_time(tmp_path: Path) -> None:
    harness = _large_backlog(tmp_path)
    sizes = _spy_reads(harness)
    harness.subscribe("exclusive", SubType.EXCLUSIVE, permits=1000)
    for _ in range(COUNT):
        harness.run()
    assert [p[:4] for p in harness.sink.payloads()] == [f"{n:04}".encode() for n in range(COUNT)]
    assert sizes and max(sizes) <= DISPATCH_BYTES + ENTRY + 1024, sizes
    harness.close()


def test_a_redelivery_of_large_evicted_entries_reads_them_a_few_mib_at_a_time(tmp_path: Path) -> None:
    harness = _large_backlog(tmp_path)
    consumer = harness.subscribe("shared", SubType.SHARED, permits=1000)
    for _ in range(COUNT):
        harness.run()
    assert len(harness.sink.payloads()) == COUNT
    sizes = _spy_reads(harness)
    harness.topic.subscriptions["shared"].redeliver(consumer, None)
    for _ in range(COUNT):
        harness.run()
    payloads = harness.sink.payloads()[COUNT:]
    assert [p[:4] for p in payloads] == [f"{n:04}".encode() for n in range(COUNT)]
    assert sizes and max(sizes) <= DISPATCH_BYTES + ENTRY + 1024, sizes
    harness.close()


@pytest.mark.parametrize("sub_type", [SubType.EXCLUSIVE, SubType.SHARED], ids=["exclusive", "shared"])
def test_a_pass_over_acknowledged_entries_reads_a_few_mib_a_turn(tmp_path: Path, sub_type: SubType) -> None:
    """Entries acknowledged ahead of the mark-delete position are passed over; the reading that takes counts against
    the pass's bytes as delivering does (before, one FLOW read the whole backlog in one call)."""
    harness = _large_backlog(tmp_path)
    consumer = harness.subscribe("s", sub_type, permits=0)
    subscription = harness.topic.subscriptions["s"]
    subscription.acknowledge(consumer, [(entry_id, None) for entry_id in range(COUNT - 1)], cumulative=False)
    sizes = _spy_reads(harness)
    subscription.flow(consumer, 10)
    assert sum(sizes) <= DISPATCH_BYTES + ENTRY + 1024, sizes
    for _ in range(COUNT):
        harness.run()
    assert [p[:4] for p in harness.sink.payloads()] == [f"{COUNT - 1:04}".encode()]
    harness.close()


def test_the_last_message_id_reads_only_the_last_entry(tmp_path: Path) -> None:
    harness = _large_backlog(tmp_path)
    sizes = _spy_reads(harness)
    last = harness.topic.last_entry()
    assert last is not None and last.entry_id == COUNT - 1
    assert sum(sizes) <= ENTRY + 1024, sizes
    harness.close()


def test_a_consumer_gets_every_large_message_of_an_evicted_backlog_in_order(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory("--managed-ledger-cache-size-mb", "1")
    client = make_client(server.url)
    try:
        topic = "persistent://public/default/large-backlog"
        producer = client.create_producer(topic, batching_enabled=False)
        for n in range(COUNT):
            producer.send(f"{n:04}".encode() + b"y" * ENTRY)
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        got = [consumer.receive(timeout_millis=10_000).data()[:4] for _ in range(COUNT)]
        assert got == [f"{n:04}".encode() for n in range(COUNT)]
    finally:
        client.close()
