"""Topic compaction: triggered and watched over the admin API, read by consumers and readers that read compacted."""

from __future__ import annotations

import time
from typing import Any

import pulsar

from pulsar_txn_proxy.conformance.framework import Outcome, Run, drain, scenario, texts
from pulsar_txn_proxy.conformance.harness import run_scenario

Earliest = pulsar.InitialPosition.Earliest
NS = "/admin/v2/persistent/public/default"


def _path(run: Run, tag: str) -> str:
    return f"{NS}/{tag}-{run.suffix}"


def _compact(run: Run, path: str) -> dict[str, Any]:
    """Trigger a compaction and wait until it is no longer RUNNING; the trigger's status and the last status."""
    trigger = run.admin("PUT", f"{path}/compaction").status
    deadline = time.monotonic() + 30
    while True:
        status = run.admin("GET", f"{path}/compaction").body
        if status.get("status") != "RUNNING" or time.monotonic() > deadline:
            return {"trigger": trigger, "status": status}
        time.sleep(0.1)


def _send(producer: pulsar.Producer, messages: list[tuple[str | None, str]]) -> None:
    for key, value in messages:
        if key is None:
            producer.send(value.encode())
        else:
            producer.send(value.encode(), partition_key=key)


def _compacted(client: pulsar.Client, topic: str) -> pulsar.Reader:
    return client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)


def _ledger_entries(run: Run, path: str) -> int:
    """Entries of the topic's compacted ledger (-1: none)."""
    return run.admin("GET", f"{path}/internalStats").body["compactedLedger"]["entries"]


def _removed_events(run: Run, path: str) -> int:
    return run.admin("GET", f"{path}/stats").body["compaction"]["lastCompactionRemovedEventCount"]


def _unbatched(run: Run, tag: str) -> tuple[pulsar.Client, str, str, pulsar.Producer]:
    """A client, a fresh topic, its admin path, and a producer without batching."""
    client = run.client()
    topic = run.topic(tag)
    return client, topic, _path(run, tag), client.create_producer(topic, batching_enabled=False)


@scenario
def test_compaction_keeps_the_latest_message_of_each_key(run: Run) -> Outcome:
    """Latest value per key; an empty payload deletes its key; messages without a key go; later messages follow."""
    client, topic, path, producer = _unbatched(run, "t")
    _send(producer, [("a", "a1"), ("b", "b1"), ("c", "c1"), ("a", "a2"), (None, "loose"), ("b", ""), ("d", "d1")])
    outcome: dict[str, Any] = {"status_before": run.admin("GET", f"{path}/compaction").body}
    outcome["compaction"] = _compact(run, path)
    reader = _compacted(client, topic)
    outcome["compacted"] = [run.msg(m) for m in drain(reader, expect=3)]
    outcome["compacted_has_more"] = reader.has_message_available()
    outcome["plain"] = texts(drain(client.create_reader(topic, pulsar.MessageId.earliest), expect=7))
    consumer = client.subscribe(topic, run.name("sub"), initial_position=Earliest, is_read_compacted=True)
    outcome["consumer"] = texts(drain(consumer, expect=3))
    _send(producer, [("a", "a3"), ("c", "")])
    outcome["compacted_then_new"] = texts(drain(_compacted(client, topic), expect=5))
    outcome["shared_read_compacted"] = run.attempt(
        lambda: client.subscribe(
            topic, run.name("shared"), consumer_type=pulsar.ConsumerType.Shared, is_read_compacted=True
        )
    )
    names = run.admin("GET", f"{path}/subscriptions").body
    # Readers' subscriptions have random names: count them.
    outcome["subscriptions"] = sorted(n for n in names if not n.startswith("reader-"))
    outcome["reader_subscriptions"] = sum(1 for n in names if n.startswith("reader-"))
    outcome["compacted_ledger_entries"] = _ledger_entries(run, path)
    outcome["removed_events"] = _removed_events(run, path)
    backlog = run.admin("GET", f"{path}/stats").body["subscriptions"]["__compaction"]["msgBacklog"]
    outcome["compaction_backlog"] = backlog
    return outcome


@scenario
def test_compaction_again_reads_the_previous_view_and_what_came_after(run: Run) -> Outcome:
    """A second compaction starts from the first one's view; with nothing new it succeeds and changes nothing."""
    client, topic, path, producer = _unbatched(run, "t")
    _send(producer, [("x", "x1"), ("y", "y1"), ("x", "x2")])
    outcome: dict[str, Any] = {"first": _compact(run, path)}
    outcome["again_with_nothing_new"] = _compact(run, path)
    _send(producer, [("y", "y2"), ("z", "z1"), ("x", "")])
    outcome["second"] = _compact(run, path)
    reader = _compacted(client, topic)
    outcome["compacted"] = [run.msg(m) for m in drain(reader, expect=2)]
    # The last message deleted its key: a reader of the compacted view has nothing more to wait for.
    outcome["compacted_has_more"] = reader.has_message_available()
    outcome["compacted_ledger_entries"] = _ledger_entries(run, path)
    return outcome


@scenario
def test_compaction_of_batches(run: Run) -> Outcome:
    """In a batch, the messages that are not the latest of their key are compacted out, keeping the batch indexes;
    compressed batches too."""
    client = run.client()
    outcome: dict[str, Any] = {}
    for name, compression in [
        ("none", pulsar.CompressionType.NONE),
        ("lz4", pulsar.CompressionType.LZ4),
        ("zlib", pulsar.CompressionType.ZLib),
        ("zstd", pulsar.CompressionType.ZSTD),
        ("snappy", pulsar.CompressionType.SNAPPY),
    ]:
        topic = run.topic(name)
        path = _path(run, name)
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=6,
            batching_max_publish_delay_ms=60_000,
            compression_type=compression,
        )
        for i, key in enumerate(["k1", "k2", "k1", "k3", "k2", "k1"]):
            producer.send_async(f"v{i}".encode(), None, partition_key=key)
        producer.flush()
        outcome[name] = {
            "compaction": _compact(run, path),
            "compacted": [run.msg(m) for m in drain(_compacted(client, topic), expect=6)],
            "plain": texts(drain(client.create_reader(topic, pulsar.MessageId.earliest), expect=6)),
            "compacted_ledger_entries": _ledger_entries(run, path),
        }
    return outcome


@scenario
def test_compaction_status_of_missing_topic_and_empty_topic(run: Run) -> Outcome:
    """Status and trigger on a topic that does not exist, and on one without messages."""
    topic = run.topic("empty")
    client = run.client()
    client.create_producer(topic).close()
    return {
        "missing_status": run.admin("GET", f"{_path(run, 'missing')}/compaction").status,
        "missing_trigger": run.admin("PUT", f"{_path(run, 'missing')}/compaction").status,
        "empty": _compact(run, _path(run, "empty")),
    }


@scenario
def test_compaction_after_transactions(run: Run) -> Outcome:
    """Keyed messages of a committed and of an aborted transaction (official Java client), then a compaction."""
    outcome: dict[str, Any] = {}
    for mode in ("unbatched", "batched"):
        topic = run.topic(mode)
        path = _path(run, mode)
        obs = run_scenario(run.target.service_url, "keyed_txns", topic, *(["batched"] if mode == "batched" else []))
        result: dict[str, Any] = {"commit_error": obs["commit_error"], "abort_error": obs["abort_error"]}
        result["compaction"] = _compact(run, path)
        # Sorted: the Java client may send a transaction's first messages in either order (it sends them once the
        # partition is registered, as their futures complete), so what is kept is compared, not where.
        result["compacted"] = sorted(
            [m.partition_key(), m.data().decode()] for m in drain(_compacted(run.client(), topic), expect=3)
        )
        result["removed_events"] = _removed_events(run, path)
        if mode == "unbatched":
            # Batched, the client splits those messages into one or two batches, as they come.
            result["compacted_ledger_entries"] = _ledger_entries(run, path)
        outcome[mode] = result
    return outcome
