"""Topic policies applied by this endpoint: a topic's own message TTL, retention, compaction threshold, backlog quota
and deduplication win over its namespace's; they are durable and leave with the topic.

The admin surface is compared with Pulsar in tests/conformance/test_topic_policies.py (which also covers a topic's
backlog quota and deduplication switch as clients see them); Pulsar's periodic checks for TTL, retention and
compaction run every minute or more, so those effects are checked here, with a policy check every second.
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
from tests.test_compaction import read_compacted

ServerFactory = Callable[..., ServerProcess]
Earliest = pulsar.InitialPosition.Earliest


def _path(topic: str) -> str:
    return "/admin/v2/" + topic.replace("://", "/")


def _namespace(http: Http, **policies: Any) -> str:
    """A new namespace of ``public`` with the given namespace policies (endpoint: body)."""
    namespace = f"public/tp-{uuid.uuid4().hex[:8]}"
    assert http.request("PUT", f"/admin/v2/namespaces/{namespace}")[0] == 204
    for endpoint, body in policies.items():
        assert http.request("POST", f"/admin/v2/namespaces/{namespace}/{endpoint}", body)[0] == 204
    return namespace


def _wait_for(condition: Callable[[], bool], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def _stats(url: str, topic: str) -> dict[str, Any]:
    return http_json(url + _path(topic) + "/stats")


def test_topic_ttl_and_retention_win_over_the_namespace(server_factory: ServerFactory) -> None:
    # Ledgers of one entry: retention deletes whole closed ledgers, so here any acknowledged entry may go.
    proc, url = start_admin_server(
        server_factory,
        "--policy-check-interval-seconds",
        "1",
        "--managed-ledger-max-entries-per-ledger",
        "1",
        "--managed-ledger-min-ledger-rollover-time-minutes",
        "0",
    )
    http = Http(url)
    # The namespace keeps everything for an hour; one topic of each kind expires its messages after a second, and
    # one keeps no acknowledged data.
    namespace = _namespace(http, messageTTL=3600, retention={"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
    expiring, partitioned, kept, trimmed = (f"persistent://{namespace}/{n}" for n in ("e", "p", "k", "t"))
    assert http.request("PUT", _path(partitioned) + "/partitions", 2)[0] == 204
    client = make_client(proc.url)
    try:
        for topic in (expiring, partitioned, kept, trimmed):
            consumer = client.subscribe(topic, "s", initial_position=Earliest)
            producer = client.create_producer(topic, batching_enabled=False)
            for i in range(6):
                producer.send(f"m{i}".encode(), partition_key=f"k{i}")
            if topic in (kept, trimmed):
                for _ in range(4):
                    consumer.acknowledge(consumer.receive(5000))
            consumer.close()
        for topic in (expiring, partitioned):
            assert http.request("POST", _path(topic) + "/messageTTL?messageTTL=1")[0] == 204
        assert (
            http.request("POST", _path(trimmed) + "/retention", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})[
                0
            ]
            == 204
        )

        def backlog(topic: str) -> int:
            return _stats(url, topic)["subscriptions"]["s"]["msgBacklog"]

        def stored(topic: str) -> int:
            return http_json(url + _path(topic) + "/internalStats")["numberOfEntries"]

        _wait_for(lambda: backlog(expiring) == 0)
        _wait_for(lambda: all(backlog(f"{partitioned}-partition-{i}") == 0 for i in range(2)))
        _wait_for(lambda: stored(trimmed) == 2)
        # The namespace's TTL and retention hold for the topic without policies of its own.
        assert (backlog(kept), stored(kept)) == (2, 6)
        assert backlog(trimmed) == 2
    finally:
        client.close()


def test_topic_compaction_threshold_starts_compactions(server_factory: ServerFactory) -> None:
    proc, url = start_admin_server(server_factory, "--policy-check-interval-seconds", "1")
    http = Http(url)
    namespace = _namespace(http)
    compacted, other = f"persistent://{namespace}/c", f"persistent://{namespace}/o"
    client = make_client(proc.url)
    for topic in (compacted, other):
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(20):
            producer.send(f"{i}".encode() * 100, partition_key=f"k{i % 2}")
    client.close()
    assert http.request("POST", _path(compacted) + "/compactionThreshold", 1000)[0] == 204

    def status(topic: str) -> str:
        return http_json(url + _path(topic) + "/compaction")["status"]

    _wait_for(lambda: status(compacted) == "SUCCESS")
    assert [key for key, _ in read_compacted(proc.url, compacted)] == ["k0", "k1"]
    assert status(other) == "NOT_RUN"


def test_topic_backlog_quota_and_deduplication_apply_to_that_topic_only(server_factory: ServerFactory) -> None:
    proc, url = start_admin_server(server_factory)
    http = Http(url)
    namespace = _namespace(http)
    quoted, free = f"persistent://{namespace}/q", f"persistent://{namespace}/f"
    quota = {"limitSize": 1024, "policy": "producer_exception"}
    assert http.request("POST", _path(quoted) + "/backlogQuota", quota)[0] == 404  # the topic does not exist yet
    client = make_client(proc.url)
    try:
        for topic in (quoted, free):
            client.subscribe(topic, "slow")
            producer = client.create_producer(topic, batching_enabled=False, producer_name=f"p-{topic[-1]}")
            for sequence_id in range(10):
                producer.send(b"x" * 200, sequence_id=sequence_id)
            producer.close()
        assert http.request("POST", _path(quoted) + "/backlogQuota", quota)[0] == 204
        assert http.request("POST", _path(quoted) + "/deduplicationEnabled", True)[0] == 204
        try:
            client.create_producer(quoted)
            raise AssertionError("a producer was created over the topic's backlog quota")
        except pulsar.ProducerBlockedQuotaExceededException:
            pass
        assert _stats(url, quoted)["backlogQuotaLimitSize"] == 1024
        # The other topic of the namespace has neither the quota nor deduplication.
        producer = client.create_producer(free, producer_name="p-f")
        producer.send(b"again", sequence_id=3)
        assert _stats(url, free)["subscriptions"]["slow"]["msgBacklog"] == 11
        assert _stats(url, free)["deduplicationStatus"] == "Disabled"
        assert _stats(url, quoted)["deduplicationStatus"] == "Enabled"
    finally:
        client.close()


def test_topic_policies_are_durable_and_leave_with_the_topic(server_factory: ServerFactory) -> None:
    proc, url = start_admin_server(server_factory)
    http = Http(url)
    namespace = _namespace(http)
    partitioned = f"persistent://{namespace}/p"
    assert http.request("PUT", _path(partitioned) + "/partitions", 2)[0] == 204
    assert http.request("POST", _path(partitioned) + "/deduplicationEnabled", True)[0] == 204
    assert http.request("POST", _path(partitioned) + "/messageTTL?messageTTL=30")[0] == 204
    proc.kill()
    proc.restart()
    assert http.json("GET", _path(partitioned) + "/messageTTL") == (200, 30)
    # Deduplication still applies to every partition after the restart: a re-sent sequence id is dropped.
    client = make_client(proc.url)
    try:
        reader = client.create_reader(f"{partitioned}-partition-1", pulsar.MessageId.earliest)
        producer = client.create_producer(f"{partitioned}-partition-1", producer_name="p", batching_enabled=False)
        for sequence_id in (0, 1, 1, 2):
            producer.send(f"m{sequence_id}".encode(), sequence_id=sequence_id)
        received = []
        while True:
            try:
                received.append(reader.read_next(500).data())
            except pulsar.Timeout:
                break
        assert received == [b"m0", b"m1", b"m2"]
        producer.close()
        reader.close()
    finally:
        client.close()
    assert http.request("DELETE", _path(partitioned) + "/partitions")[0] == 204
    assert http.request("PUT", _path(partitioned) + "/partitions", 2)[0] == 204
    assert http.json("GET", _path(partitioned) + "/messageTTL") == (200, None)
