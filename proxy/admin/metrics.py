"""``GET /metrics``: the Prometheus text format, with Pulsar's metric names where Pulsar has them.

The engine's figures, read at scrape time (the few Pulsar has no name for under ``pulsar_txn_proxy_``): per loaded
topic (labels ``cluster``, ``namespace``, ``topic``, as Pulsar's topic-level metrics), per subscription (plus
``subscription``), per transaction coordinator (``coordinator_id``), and the broker-wide publish latency histogram:
how long publishes wait for the group commit that makes them durable, in milliseconds, in the buckets of Pulsar's
``pulsar_storage_write_latency_le_*``.

A scrape reads the engine in the reactor thread into plain tuples (fast), then writes the text in a worker thread,
so that a large scrape does not hold up message traffic: the families with a sample per topic or subscription with
:mod:`proxy.admin.exposition`, the others through ``prometheus_client``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from twisted.internet import threads

from proxy.admin import exposition
from proxy.admin.context import AdminContext
from proxy.admin.http import Call, Reply, Router

_TOPIC = ["cluster", "namespace", "topic"]
_SUBSCRIPTION = [*_TOPIC, "subscription"]
_COORDINATOR = ["cluster", "coordinator_id"]
#: The classic text format, as Pulsar serves it (every Prometheus version reads it).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Metric and label names here are all valid as they are: skip prometheus_client's per-sample escaping work.
_ESCAPING = "allow-utf-8"

#: Per-topic gauges and counters: ``(name, kind, help)``, in the order of :attr:`Snapshot.topics` values.
TOPIC_METRICS = (
    ("pulsar_subscriptions_count", "gauge", "Subscriptions of the topic"),
    ("pulsar_producers_count", "gauge", "Producers connected to the topic"),
    ("pulsar_consumers_count", "gauge", "Consumers connected to the topic"),
    ("pulsar_rate_in", "gauge", "Messages published per second"),
    ("pulsar_rate_out", "gauge", "Messages dispatched per second"),
    ("pulsar_throughput_in", "gauge", "Bytes published per second"),
    ("pulsar_throughput_out", "gauge", "Bytes dispatched per second"),
    ("pulsar_storage_size", "gauge", "Bytes stored in the topic's log"),
    ("pulsar_msg_backlog", "gauge", "Entries not yet acknowledged, summed over subscriptions"),
    ("pulsar_in_messages_total", "counter", "Messages published since the topic was loaded"),
    ("pulsar_in_bytes_total", "counter", "Bytes published since the topic was loaded"),
    ("pulsar_out_messages_total", "counter", "Messages dispatched since the topic was loaded"),
    ("pulsar_out_bytes_total", "counter", "Bytes dispatched since the topic was loaded"),
    ("pulsar_txn_tb_active_total", "gauge", "Open transactions with entries in the topic"),
    # The transaction buffer's recovery, which Pulsar does not report: this endpoint's own names.
    ("pulsar_txn_proxy_tb_recovered_from_snapshot", "gauge", "1 if the buffer was recovered from a snapshot"),
    ("pulsar_txn_proxy_tb_replayed_entries", "gauge", "Entries the buffer's recovery read after its snapshot"),
    ("pulsar_txn_proxy_tb_snapshots_total", "counter", "Snapshots the buffer took since the topic was loaded"),
)
#: Per-subscription gauges, in the order of :attr:`Snapshot.subscriptions` values.
SUBSCRIPTION_METRICS = (
    ("pulsar_subscription_back_log", "gauge", "Entries the subscription has not acknowledged"),
    ("pulsar_subscription_msg_rate_out", "gauge", "Messages dispatched per second"),
    ("pulsar_subscription_msg_throughput_out", "gauge", "Bytes dispatched per second"),
    ("pulsar_subscription_unacked_messages", "gauge", "Entries delivered and not acknowledged"),
    ("pulsar_subscription_consumers_count", "gauge", "Consumers of the subscription"),
)
#: Per-coordinator figures: ``(name, kind, help)``, in the order of :attr:`Snapshot.coordinators` values.
COORDINATOR_METRICS = (
    ("pulsar_txn_active_count", "gauge", "Open transactions"),
    ("pulsar_txn_created_total", "counter", "Transactions opened"),
    ("pulsar_txn_committed_total", "counter", "Transactions committed"),
    ("pulsar_txn_aborted_total", "counter", "Transactions aborted"),
    ("pulsar_txn_timeout_total", "counter", "Transactions timed out"),
)


@dataclass
class Snapshot:
    """The engine's figures at one instant, as label values and numbers only."""

    cluster: str
    topics: list[tuple[list[str], tuple[float, ...]]] = field(default_factory=list)
    subscriptions: list[tuple[list[str], tuple[float, ...]]] = field(default_factory=list)
    coordinators: list[tuple[list[str], tuple[float, ...]]] = field(default_factory=list)
    per_namespace: dict[str, int] = field(default_factory=dict)
    latency: list[tuple[float, int]] = field(default_factory=list)
    latency_sum: float = 0.0
    #: Bytes of entries held in the topics' caches.
    cache_used: int = 0


def snapshot(ctx: AdminContext) -> Snapshot:
    """Read the engine (in the reactor thread)."""
    broker = ctx.broker
    stats = broker.stats
    cluster = ctx.cluster
    out = Snapshot(cluster, cache_used=broker.entry_cache.used)
    for topic in list(broker.topics.values()):
        namespace = topic.name.namespace_name
        out.per_namespace[namespace] = out.per_namespace.get(namespace, 0) + 1
        labels = [cluster, namespace, topic.name.full]
        _, size = stats.storage.of(topic)
        rate_in, throughput_in = stats.rates.of(topic, (topic.messages_in, topic.bytes_in))
        msgs_out = bytes_out = consumers = backlog = 0
        rate_out = throughput_out = 0.0
        for name, sub in list(topic.subscriptions.items()):
            sub_rate, sub_throughput = stats.rates.of(sub, (sub.messages_out, sub.bytes_out))
            pending = sub.backlog()
            backlog += pending
            msgs_out += sub.messages_out
            bytes_out += sub.bytes_out
            rate_out += sub_rate
            throughput_out += sub_throughput
            consumers += len(sub.consumers)
            unacked = 0 if sub.single_active else sum(len(c.pending) for c in sub.consumers)
            values = (pending, sub_rate, sub_throughput, unacked, len(sub.consumers))
            out.subscriptions.append(([*labels, name], values))
        figures = (
            len(topic.subscriptions),
            len(topic.producers),
            consumers,
            rate_in,
            rate_out,
            throughput_in,
            throughput_out,
            size,
            backlog,
            topic.messages_in,
            topic.bytes_in,
            msgs_out,
            bytes_out,
            len(topic.txn_buffer.ongoing),
            int(topic.txn_buffer.recovered_from_snapshot),
            topic.txn_buffer.replayed_entries,
            topic.txn_buffer.snapshots_taken,
        )
        out.topics.append((labels, figures))
    for c in broker.coordinators.coordinators:
        values = (len(c.txns), c.stats.created, c.stats.committed, c.stats.aborted, c.stats.timed_out)
        out.coordinators.append(([cluster, str(c.tc_id)], values))
    out.latency = stats.publish_latency.cumulative()
    out.latency_sum = stats.publish_latency.sum_ms
    return out


def _family(name: str, kind: str, doc: str, labels: list[str]) -> GaugeMetricFamily | CounterMetricFamily:
    if kind == "counter":
        return CounterMetricFamily(name, doc, labels=labels)
    return GaugeMetricFamily(name, doc, labels=labels)


class SnapshotCollector:
    """The ``prometheus_client`` collector of one scrape: the families of a :class:`Snapshot` with few samples."""

    def __init__(self, taken: Snapshot) -> None:
        self.taken = taken

    def collect(self) -> Iterator[Metric]:
        taken = self.taken
        topics_count = GaugeMetricFamily(
            "pulsar_topics_count", "Loaded topic partitions per namespace", labels=["cluster", "namespace"]
        )
        for namespace, count in sorted(taken.per_namespace.items()):
            topics_count.add_metric([taken.cluster, namespace], count)
        yield topics_count
        cache = GaugeMetricFamily(
            "pulsar_ml_cache_used_size", "Bytes of entries the topics keep in memory", labels=["cluster"]
        )
        cache.add_metric([taken.cluster], taken.cache_used)
        yield cache
        for index, (name, kind, doc) in enumerate(COORDINATOR_METRICS):
            family = _family(name, kind, doc, _COORDINATOR)
            for values, figures in taken.coordinators:
                family.add_metric(values, figures[index])
            yield family
        latency = HistogramMetricFamily(
            "pulsar_storage_write_latency",
            "Milliseconds publishes waited for the group commit that made them durable",
            labels=["cluster"],
        )
        buckets = [("+Inf" if bound == float("inf") else str(bound), count) for bound, count in taken.latency]
        latency.add_metric([taken.cluster], buckets, taken.latency_sum)
        yield latency


def render(taken: Snapshot) -> bytes:
    """The text of one scrape (in a worker thread)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(taken))
    per_topic = exposition.families(TOPIC_METRICS, _TOPIC, taken.topics)
    per_subscription = exposition.families(SUBSCRIPTION_METRICS, _SUBSCRIPTION, taken.subscriptions)
    return generate_latest(registry, escaping=_ESCAPING) + (per_topic + per_subscription).encode()


def register(router: Router, ctx: AdminContext) -> None:
    """Add ``GET /metrics``."""

    def scrape(call: Call) -> Any:
        taken = snapshot(ctx)
        return threads.deferToThread(render, taken).addCallback(lambda text: Reply(200, text, CONTENT_TYPE))

    router.add("GET", "/metrics", scrape)
