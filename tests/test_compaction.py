"""Topic compaction through the official client and the admin API: restarts, large and partitioned topics, the
namespace's compaction threshold.

What Pulsar itself answers (latest value per key, batches, transactions) is in the conformance suite
(tests/conformance/test_compaction.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pulsar

from tests.conftest import make_client
from tests.server_process import ServerProcess
from tests.test_admin_http import Http, http_json, start_admin_server

ServerFactory = Callable[..., ServerProcess]


def _topic(tag: str) -> str:
    return f"persistent://public/default/compaction-{tag}-{uuid.uuid4().hex[:8]}"


def _path(topic: str) -> str:
    return "/admin/v2/" + topic.replace("://", "/")


def _status(admin_url: str, topic: str) -> str:
    return http_json(admin_url + _path(topic) + "/compaction")["status"]


def compact(admin_url: str, topic: str, timeout: float = 60) -> dict[str, Any]:
    """Trigger a compaction and wait until it is no longer RUNNING; its last status."""
    assert Http(admin_url).request("PUT", _path(topic) + "/compaction")[0] == 204
    deadline = time.monotonic() + timeout
    while _status(admin_url, topic) == "RUNNING":
        assert time.monotonic() < deadline, "compaction still running"
        time.sleep(0.05)
    return http_json(admin_url + _path(topic) + "/compaction")


def read_compacted(url: str, topic: str) -> list[tuple[str, str]]:
    """``(key, value)`` of every message a reader of the compacted topic gets, from the start."""
    client = make_client(url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True)
        out = []
        while True:
            try:
                message = reader.read_next(1000)
            except pulsar.Timeout:
                return out
            out.append((message.partition_key(), message.data().decode()))
    finally:
        client.close()


def test_compacted_view_survives_a_kill(server_factory: ServerFactory) -> None:
    proc, admin_url = start_admin_server(server_factory)
    topic = _topic("kill")
    client = make_client(proc.url)
    producer = client.create_producer(topic, batching_enabled=False)
    for key, value in [("a", "a1"), ("b", "b1"), ("a", "a2")]:
        producer.send(value.encode(), partition_key=key)
    client.close()
    assert compact(admin_url, topic)["status"] == "SUCCESS"
    ledger = http_json(admin_url + _path(topic) + "/internalStats")["compactedLedger"]
    assert ledger["entries"] == 2

    proc.kill()
    proc.restart()
    # The view and the __compaction cursor are durable; the status of the last run is not (as in Pulsar).
    assert read_compacted(proc.url, topic) == [("b", "b1"), ("a", "a2")]
    assert _status(admin_url, topic) == "NOT_RUN"
    assert http_json(admin_url + _path(topic) + "/internalStats")["compactedLedger"] == ledger
    assert "__compaction" in http_json(admin_url + _path(topic) + "/subscriptions")

    # A compaction after the restart builds on the stored view.
    client = make_client(proc.url)
    client.create_producer(topic, batching_enabled=False).send(b"", partition_key="b")
    client.close()
    assert compact(admin_url, topic)["status"] == "SUCCESS"
    assert read_compacted(proc.url, topic) == [("a", "a2")]


def test_large_topic_compacts_in_steps_while_publishing_goes_on(server_factory: ServerFactory) -> None:
    proc, admin_url = start_admin_server(server_factory)
    topic = _topic("large")
    client = make_client(proc.url)
    producer = client.create_producer(
        topic, batching_enabled=False, max_pending_messages=5000, block_if_queue_full=True
    )
    entries, keys = 20_000, 500
    for i in range(entries):
        producer.send_async(f"v{i}".encode(), None, partition_key=f"k{i % keys}")
    producer.flush()
    http = Http(admin_url)
    assert http.request("PUT", _path(topic) + "/compaction")[0] == 204
    # A second trigger while the first runs is refused, as by Pulsar.
    assert http.request("PUT", _path(topic) + "/compaction")[0] == 409
    # The compaction runs in steps between other work: a publish meanwhile is answered before it ends.
    producer.send(b"during", partition_key="other")
    assert _status(admin_url, topic) == "RUNNING"
    client.close()
    while _status(admin_url, topic) == "RUNNING":
        time.sleep(0.05)
    view = read_compacted(proc.url, topic)
    latest = {f"k{i % keys}": f"v{i}" for i in range(entries)}
    # The message published during the compaction came after its horizon: it follows the view.
    assert view[:-1] == sorted(latest.items(), key=lambda item: int(item[1][1:]))
    assert view[-1] == ("other", "during")
    assert http_json(admin_url + _path(topic) + "/internalStats")["compactedLedger"]["entries"] == keys


def test_changed_batches_keep_their_codec(server_factory: ServerFactory) -> None:
    """A batch that loses messages to compaction is compressed again with its producer's codec, every codec."""
    proc, admin_url = start_admin_server(server_factory)
    client = make_client(proc.url)
    filler = "x" * 2000
    sizes = {}
    for codec in ("NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY"):
        topic = _topic(codec.lower())
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=40,
            batching_max_publish_delay_ms=60_000,
            compression_type=getattr(pulsar.CompressionType, codec),
        )
        for i in range(40):
            producer.send_async(f"v{i}-{filler}".encode(), None, partition_key=f"k{i % 10}")
        producer.flush()
        assert compact(admin_url, topic)["status"] == "SUCCESS"
        ledger = http_json(admin_url + _path(topic) + "/internalStats")["compactedLedger"]
        assert ledger["entries"] == 1
        sizes[codec] = ledger["size"]
        # The Python client delivers the compacted-out messages of a batch as empty ones.
        kept = [(key, value) for key, value in read_compacted(proc.url, topic) if value]
        assert kept == [(f"k{i % 10}", f"v{i}-{filler}") for i in range(30, 40)]
    client.close()
    # Ten kept values of 2 KB: about 20 KB uncompressed, a small fraction of it compressed.
    assert sizes["NONE"] > 20_000
    assert all(size < 2_000 for codec, size in sizes.items() if codec != "NONE"), sizes


def test_compaction_of_a_partitioned_topic_compacts_every_partition(server_factory: ServerFactory) -> None:
    proc, admin_url = start_admin_server(server_factory)
    topic = _topic("partitioned")
    http = Http(admin_url)
    assert http.request("PUT", _path(topic) + "/partitions", 2)[0] == 204
    client = make_client(proc.url)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(40):
        producer.send(f"v{i}".encode(), partition_key=f"k{i % 4}")
    client.close()
    assert http.request("PUT", _path(topic) + "/compaction")[0] == 204
    partitions = [f"{topic}-partition-{index}" for index in range(2)]
    for partition in partitions:
        while _status(admin_url, partition) == "RUNNING":
            time.sleep(0.05)
    found = sorted(pair for partition in partitions for pair in read_compacted(proc.url, partition))
    assert found == [("k0", "v36"), ("k1", "v37"), ("k2", "v38"), ("k3", "v39")]


def test_compaction_threshold_of_a_namespace_starts_compactions(server_factory: ServerFactory) -> None:
    proc, admin_url = start_admin_server(server_factory, "--policy-check-interval-seconds", "1")
    http = Http(admin_url)
    namespace = f"public/compact-{uuid.uuid4().hex[:6]}"
    assert http.request("PUT", f"/admin/v2/namespaces/{namespace}")[0] == 204
    assert http.request("PUT", f"/admin/v2/namespaces/{namespace}/compactionThreshold", 1000)[0] == 204
    small = f"persistent://{namespace}/small"
    large = f"persistent://{namespace}/large"
    client = make_client(proc.url)
    client.create_producer(small, batching_enabled=False).send(b"s" * 100, partition_key="k")
    producer = client.create_producer(large, batching_enabled=False)
    for i in range(20):
        producer.send(f"{i}".encode() * 100, partition_key=f"k{i % 2}")
    client.close()
    deadline = time.monotonic() + 15
    while _status(admin_url, large) != "SUCCESS":
        assert time.monotonic() < deadline, "no compaction started"
        time.sleep(0.1)
    assert [key for key, _ in read_compacted(proc.url, large)] == ["k0", "k1"]
    # 100 bytes stay under the threshold: that topic is left alone.
    assert _status(admin_url, small) == "NOT_RUN"
