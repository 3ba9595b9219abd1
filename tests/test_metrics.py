"""``GET /metrics``: Prometheus text with Pulsar's metric names, read back with ``prometheus_client``'s parser.

Traffic comes from the official Python client; transactions from the Java admin harness (tests/admin-java),
whose ``transactions`` scenario commits one transaction, aborts one through the admin API and lets one time out.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Callable

import pulsar
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import make_client
from tests.server_process import ServerProcess
from tests.test_admin_http import Http, http_json, start_admin_server
from tests.test_admin_java import run_admin

ServerFactory = Callable[..., ServerProcess]
Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(admin_url: str) -> tuple[str, Samples]:
    """The content type and every sample, by sample name."""
    with urllib.request.urlopen(admin_url + "/metrics", timeout=10) as response:
        content_type = response.headers["Content-Type"]
        text = response.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return content_type, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels include ``labels``."""
    matching = [v for found, v in samples.get(name, []) if labels.items() <= found.items()]
    assert len(matching) == 1, f"{name}{labels}: {matching}"
    return matching[0]


def test_topic_and_subscription_metrics_follow_traffic(server_factory: ServerFactory) -> None:
    proc, admin_url = start_admin_server(server_factory)
    topic = f"persistent://public/default/metrics-{uuid.uuid4().hex[:8]}"
    client = make_client(proc.url)
    try:
        consumer = client.subscribe(topic, "reader", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(20):
            producer.send(f"payload-{i:02d}".encode())
        for _ in range(5):
            consumer.acknowledge(consumer.receive(5000))
        # Acknowledgements are sent in the background; wait until the broker has all five.
        deadline = time.monotonic() + 5
        stats_url = f"{admin_url}/admin/v2/{topic.replace('://', '/')}/stats"
        while http_json(stats_url)["subscriptions"]["reader"]["msgBacklog"] != 15 and time.monotonic() < deadline:
            time.sleep(0.05)
        content_type, samples = scrape(admin_url)
        stats = http_json(stats_url)
    finally:
        client.close()

    assert content_type.startswith("text/plain; version=0.0.4")
    labels = {"cluster": "standalone", "namespace": "public/default", "topic": topic}
    assert value(samples, "pulsar_in_messages_total", **labels) == 20
    assert value(samples, "pulsar_in_bytes_total", **labels) == stats["bytesInCounter"]
    assert value(samples, "pulsar_out_messages_total", **labels) == stats["msgOutCounter"] >= 5
    assert value(samples, "pulsar_storage_size", **labels) == stats["storageSize"] > 0
    assert value(samples, "pulsar_subscription_back_log", subscription="reader", **labels) == 15
    assert value(samples, "pulsar_msg_backlog", **labels) == 15
    assert value(samples, "pulsar_producers_count", **labels) == 1
    assert value(samples, "pulsar_consumers_count", **labels) == 1
    assert value(samples, "pulsar_subscriptions_count", **labels) == 1
    assert value(samples, "pulsar_topics_count", cluster="standalone", namespace="public/default") >= 1

    # Every publish waited for a group commit: the histogram counts them, cumulatively per bucket.
    count = value(samples, "pulsar_storage_write_latency_count", cluster="standalone")
    assert count >= 20
    buckets = sorted((float(found["le"]), v) for found, v in samples["pulsar_storage_write_latency_bucket"])
    assert buckets[-1] == (float("inf"), count)
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)
    assert value(samples, "pulsar_storage_write_latency_sum", cluster="standalone") > 0


def test_transaction_metrics_count_commits_aborts_and_timeouts(server_factory: ServerFactory) -> None:
    proc, admin_url = start_admin_server(server_factory)
    _, before = scrape(admin_url)
    assert sum(v for _, v in before["pulsar_txn_active_count"]) == 0
    assert len(before["pulsar_txn_active_count"]) == 16  # one per coordinator
    topic = f"persistent://public/default/metrics-txn-{uuid.uuid4().hex[:8]}"
    run_admin(admin_url, proc.url, "transactions", topic)
    _, samples = scrape(admin_url)

    def total(name: str) -> float:
        return sum(v for _, v in samples[name])

    assert total("pulsar_txn_created_total") == 3
    assert total("pulsar_txn_committed_total") == 1
    assert total("pulsar_txn_aborted_total") == 2
    assert total("pulsar_txn_timeout_total") == 1
    assert total("pulsar_txn_active_count") == 0


def test_metrics_cover_every_loaded_topic(server_factory: ServerFactory) -> None:
    _, admin_url = start_admin_server(server_factory)
    http = Http(admin_url)
    names = [f"persistent://public/default/many-{i}-{uuid.uuid4().hex[:6]}" for i in range(100)]
    for name in names:
        assert http.request("PUT", "/admin/v2/" + name.replace("://", "/"))[0] == 204
    _, samples = scrape(admin_url)
    reported = {labels["topic"] for labels, _ in samples["pulsar_storage_size"]}
    assert set(names) <= reported
    assert value(samples, "pulsar_topics_count", cluster="standalone", namespace="public/default") == len(reported)


def test_label_values_are_escaped_and_large_figures_exact(server_factory: ServerFactory) -> None:
    proc, admin_url = start_admin_server(server_factory)
    topic = f"persistent://public/default/metrics-escape-{uuid.uuid4().hex[:8]}"
    # Quotes, a backslash and a line break must be escaped in a label value, or the text no longer parses.
    awkward = 'sub "quoted" back\\slash\nnext line'
    client = make_client(proc.url)
    try:
        client.subscribe(topic, awkward, initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        for _ in range(12):
            producer.send(b"z" * 100_000)
        _, samples = scrape(admin_url)
        stats = http_json(f"{admin_url}/admin/v2/{topic.replace('://', '/')}/stats")
    finally:
        client.close()

    labels = {"cluster": "standalone", "namespace": "public/default", "topic": topic}
    assert value(samples, "pulsar_subscription_back_log", subscription=awkward, **labels) == 12
    # Over a million: written in Go's exponent form, and still exact.
    assert value(samples, "pulsar_storage_size", **labels) == stats["storageSize"] > 1_200_000
    assert value(samples, "pulsar_in_bytes_total", **labels) == stats["bytesInCounter"] > 1_200_000
