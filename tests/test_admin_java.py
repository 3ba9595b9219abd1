"""The admin REST API through the official Java ``PulsarAdmin`` client 4.2.4 (tests/admin-java).

Each test starts a private server with an admin port and runs one harness scenario in a JVM; the harness records
what ``PulsarAdmin`` returned (data objects as the client parsed them) or raised (exception type, HTTP status,
reason). The expected outcomes are what an Apache Pulsar broker answers for the same calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.maven import jar_classpath
from tests.server_process import ServerProcess
from tests.test_admin_http import http_json, start_admin_server, wait_for_admin
from tests.txn_harness import JVM_OPTIONS, class_data_sharing

ADMIN_JAVA = Path(__file__).resolve().parent / "admin-java"
MAIN_CLASS = "dev.pulsartxnproxy.admin.AdminHarness"

ServerFactory = Callable[..., ServerProcess]
Observations = dict[str, Any]


def build_admin_harness() -> str:
    """Build tests/admin-java unless it is up to date; the classpath to run it with."""
    return jar_classpath(ADMIN_JAVA, "admin-harness")


def run_admin(admin_url: str, service_url: str, scenario: str, *args: str) -> Observations:
    """Run one scenario and return its observations (raise with the output if it broke)."""
    classpath = build_admin_harness()
    jar = Path(classpath.split(os.pathsep)[0])
    # Class-data sharing archive dumped by the first run after a build, as tests/txn_harness.py does.
    with class_data_sharing(jar.parent / "harness.jsa", jar) as cds:
        command = ["java", *JVM_OPTIONS, cds, "-cp", classpath, MAIN_CLASS, admin_url, service_url, scenario, *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    parsed = json.loads(lines[-1]) if lines else None
    if result.returncode != 0 or not isinstance(parsed, dict) or "observations" in parsed:
        raise RuntimeError(f"scenario {scenario} failed:\n{result.stdout}\n{result.stderr[-10000:]}")
    return parsed


@pytest.fixture(scope="session", autouse=True)
def _harness_built() -> None:
    build_admin_harness()


def ok(observations: Observations, key: str) -> Any:
    """The result of a step that must have succeeded."""
    outcome = observations[key]
    assert "error" not in outcome, f"{key}: {outcome['error']}"
    return outcome["ok"]


def error(observations: Observations, key: str) -> dict[str, Any]:
    """The error of a step that must have failed."""
    outcome = observations[key]
    assert "error" in outcome, f"{key} succeeded with {outcome.get('ok')!r}"
    return outcome["error"]


def test_tenants_namespaces_and_policies(server_factory: ServerFactory) -> None:
    proc, admin_url = start_admin_server(server_factory)
    tenant = f"tenant-{uuid.uuid4().hex[:8]}"
    obs = run_admin(admin_url, proc.url, "tenants", tenant)

    assert ok(obs, "tenants_before") == ["public", "pulsar"]
    assert ok(obs, "create_tenant") is None
    assert error(obs, "create_tenant_again")["status"] == 409
    assert error(obs, "create_tenant_unknown_cluster")["status"] == 412
    assert ok(obs, "get_tenant") == {"adminRoles": ["role-a"], "allowedClusters": ["standalone"]}
    assert error(obs, "get_missing_tenant") == {
        "type": "NotFoundException",
        "status": 404,
        "message": "Tenant does not exist",
    }
    assert ok(obs, "get_updated_tenant")["adminRoles"] == ["role-b"]
    assert tenant in ok(obs, "tenants_after_create")

    assert error(obs, "create_namespace_again")["type"] == "ConflictException"
    assert error(obs, "create_namespace_missing_tenant")["status"] == 404
    assert ok(obs, "namespaces") == [f"{tenant}/ns1", f"{tenant}/ns2"]
    assert ok(obs, "get_ttl") == 120
    assert error(obs, "set_negative_ttl")["status"] == 412
    assert ok(obs, "get_deduplication") is True
    assert ok(obs, "get_retention") == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}
    assert error(obs, "set_bad_retention")["status"] == 412
    assert ok(obs, "get_auto_topic_creation") == {
        "allowAutoTopicCreation": True,
        "topicType": "partitioned",
        "defaultNumPartitions": 2,
    }
    assert error(obs, "set_bad_auto_topic_creation")["status"] == 412
    assert ok(obs, "get_schema_compatibility") == "BACKWARD"
    assert ok(obs, "get_max_producers") == 7
    policies = ok(obs, "policies")
    assert policies["message_ttl_in_seconds"] == 120
    assert policies["deduplicationEnabled"] is True
    assert policies["schema_compatibility_strategy"] == "BACKWARD"
    assert policies["max_producers_per_topic"] == 7
    assert ok(obs, "get_ttl_after_remove") is None

    assert error(obs, "delete_tenant_with_namespaces") == {
        "type": "ConflictException",
        "status": 409,
        "message": "The tenant still has active namespaces",
    }
    assert error(obs, "delete_missing_namespace")["status"] == 404
    assert ok(obs, "namespaces_after_delete") == []
    assert ok(obs, "tenants_after_delete") == ["public", "pulsar"]


def test_topics_subscriptions_and_messages(server_factory: ServerFactory) -> None:
    proc, admin_url = start_admin_server(server_factory)
    prefix = f"persistent://public/default/adm-{uuid.uuid4().hex[:8]}"
    part, plain = prefix + "-part", prefix + "-plain"
    obs = run_admin(admin_url, proc.url, "topics", prefix)

    assert error(obs, "create_partitioned_again")["status"] == 409
    assert ok(obs, "partitions") == 3
    assert ok(obs, "partitions_after_update") == 4
    assert error(obs, "shrink_partitions")["status"] == 422
    assert ok(obs, "partitioned_list") == [part]
    assert error(obs, "create_plain_again")["type"] == "ConflictException"
    assert sorted(ok(obs, "list")) == sorted([plain] + [f"{part}-partition-{i}" for i in range(4)])
    assert error(obs, "stats_missing")["status"] == 404

    assert error(obs, "create_subscription_again")["status"] == 409
    assert ok(obs, "subscriptions") == ["admin-sub", "latest-sub"]
    stats = ok(obs, "stats")
    assert stats["msgInCounter"] == 10
    assert stats["publishers"][0]["producerName"] == prefix + "-producer"
    assert stats["subscriptions"]["admin-sub"]["msgBacklog"] == 10
    assert stats["subscriptions"]["latest-sub"]["msgBacklog"] == 0
    assert stats["storageSize"] > 0

    internal = ok(obs, "internal_stats")
    ledger = int(obs["sent_ids"][0].split(":")[0])
    assert internal["numberOfEntries"] == 10
    assert internal["lastConfirmedEntry"] == f"{ledger}:9"
    assert internal["ledgers"] == [
        {"ledgerId": ledger, "entries": 10, "size": internal["totalSize"], "offloaded": False, "underReplicated": False}
    ]
    assert internal["currentLedgerEntries"] == 10
    assert internal["cursors"]["admin-sub"]["markDeletePosition"] == f"{ledger}:-1"
    assert ok(obs, "last_message_id") == obs["sent_ids"][-1]

    peeked = ok(obs, "peek")
    assert [m["data"] for m in peeked] == ["m0", "m1", "m2"]
    assert [m["id"] for m in peeked] == obs["sent_ids"][:3]
    assert peeked[1]["properties"] == {"index": "1"}
    assert ok(obs, "examine_earliest")["data"] == "m0"
    assert ok(obs, "examine_latest")["data"] == "m9"
    assert ok(obs, "skip") == 6
    assert [m["data"] for m in ok(obs, "peek_after_skip")] == ["m4"]
    assert ok(obs, "reset_to_earliest_by_id") == 10
    assert ok(obs, "reset_by_id") == 6
    assert ok(obs, "reset_by_future_time") == 0
    assert ok(obs, "reset_by_past_time") == 10
    assert ok(obs, "clear_backlog") == 0
    assert ok(obs, "expire_all") == 0
    # As Pulsar: peeking a subscription that does not exist creates it at the first entry.
    assert [m["data"] for m in ok(obs, "peek_missing_subscription")] == ["m0"]

    live = ok(obs, "stats_with_consumer")["subscriptions"]["live-sub"]
    assert live["consumers"][0]["consumerName"] == prefix + "-consumer"
    assert live["msgOutCounter"] == 10
    assert live["type"] == "Exclusive"
    assert ok(obs, "internal_stats_with_consumer")["cursors"]["live-sub"]["active"] is True
    assert error(obs, "delete_subscription_with_consumer")["status"] == 412
    assert ok(obs, "delete_subscription_forced") == ["admin-sub", "latest-sub", "nope"]  # "nope": made by the peek
    assert error(obs, "delete_missing_subscription")["status"] == 404

    assert ok(obs, "create_partitioned_subscription") == ["part-sub"]
    partitioned = ok(obs, "partitioned_stats")
    assert partitioned["metadata"]["partitions"] == 4
    assert partitioned["msgInCounter"] == 8
    assert partitioned["subscriptions"]["part-sub"]["msgBacklog"] == 8
    assert sum(p["msgInCounter"] for p in partitioned["partitions"].values()) == 8
    internal_parts = ok(obs, "partitioned_internal_stats")["partitions"]
    assert sum(p["numberOfEntries"] for p in internal_parts.values()) == 8
    assert error(obs, "peek_partitioned")["status"] == 405
    assert ok(obs, "compaction_status") == "NOT_RUN"

    assert error(obs, "delete_with_producer")["status"] == 412
    assert ok(obs, "terminate") == obs["sent_ids"][-1]
    # A consumer that has read everything is told the terminated topic has ended (REACHED_END_OF_TOPIC).
    assert (obs["end_of_topic_before"], obs["end_of_topic_after"]) == (False, True)
    assert error(obs, "send_after_terminate")["type"] == "TopicTerminatedException"
    assert error(obs, "create_producer_after_terminate")["type"] == "TopicTerminatedException"
    assert ok(obs, "internal_stats_terminated")["state"] == "Terminated"
    assert error(obs, "delete_partitioned_as_plain")["status"] == 409
    assert ok(obs, "delete_plain") is None
    assert error(obs, "stats_after_delete")["status"] == 404
    assert ok(obs, "delete_partitioned") is None
    assert error(obs, "partitions_after_delete")["status"] == 404
    assert ok(obs, "list_after_delete") == []


def test_transaction_inspection(server_factory: ServerFactory) -> None:
    # No timed buffer snapshot: the recovery figures checked at the end stay deterministic.
    proc, admin_url = start_admin_server(server_factory, "--txn-snapshot-interval-seconds", "600")
    topic = f"persistent://public/default/adm-txn-{uuid.uuid4().hex[:8]}"
    obs = run_admin(admin_url, proc.url, "transactions", topic)
    most, least = obs["txn_id"]
    ledger, entry = obs["acked"]
    assert entry == 0  # the first plain message, acknowledged in the transaction

    assert [c["id"] for c in ok(obs, "coordinators")] == list(range(16))
    by_id = ok(obs, "coordinator_stats_by_id")
    assert by_id["state"] == "Ready"
    assert by_id["ongoingTxnSize"] == 1
    assert by_id["leastSigBits"] == least
    assert ok(obs, "coordinator_stats")[str(most)] == by_id
    assert error(obs, "coordinator_stats_missing")["status"] == 404
    assert (
        ok(obs, "coordinator_internal_stats")["transactionLogStats"]["managedLedgerInternalStats"]["numberOfEntries"]
        >= 1
    )

    meta = ok(obs, "metadata")
    assert meta["txnId"] == f"({most},{least})"
    assert meta["status"] == "OPEN"
    assert meta["timeoutAt"] == 60_000  # Pulsar's coordinator keeps the timeout itself under this name
    assert meta["producedPartitions"][topic] == {"startPosition": f"{ledger}:3", "aborted": False}
    assert list(meta["ackedPartitions"][topic]) == ["txn-sub"]
    assert list(ok(obs, "slow")) == [f"({most},{least})"]
    assert ok(obs, "slow_none") == {}

    buffer = ok(obs, "buffer_stats")
    assert buffer["ongoingTxnSize"] == 1
    assert buffer["maxReadPosition"] == f"{ledger}:2"
    assert buffer["lowWaterMarks"] == {}  # learned from ends on the partition: none yet
    assert buffer["snapshotType"] == "Single"
    assert ok(obs, "buffer_internal_stats")["snapshotType"] == "Single"
    assert ok(obs, "in_buffer") == {"startPosition": f"{ledger}:3", "aborted": False}
    assert ok(obs, "pending_ack_stats")["ongoingTxnSize"] == 1
    internal = ok(obs, "pending_ack_internal_stats")["pendingAckLogStats"]
    assert internal["managedLedgerInternalStats"]["numberOfEntries"] == 1
    assert ok(obs, "position_pending") == {"state": "PendingAck"}
    assert ok(obs, "topic_stats_open")["ongoingTxnCount"] == 1

    assert error(obs, "metadata_after_commit")["status"] == 404
    assert ok(obs, "buffer_stats_after_commit")["ongoingTxnSize"] == 0
    assert ok(obs, "buffer_stats_after_commit")["maxReadPosition"] == f"{ledger}:5"
    assert ok(obs, "pending_ack_after_commit")["ongoingTxnSize"] == 0
    assert ok(obs, "position_after_commit") == {"state": "MarkDelete"}
    assert ok(obs, "abort_by_admin") is None
    assert error(obs, "metadata_after_abort")["status"] == 404
    assert ok(obs, "buffer_stats_after_abort")["totalAbortedTransactions"] == 2  # by admin, then by timeout
    assert error(obs, "metadata_after_timeout")["status"] == 404
    after = ok(obs, "topic_stats_after")
    assert (after["committedTxnCount"], after["abortedTxnCount"]) == (1, 2)
    assert obs["received_after"] == ["plain-1", "plain-2", "in-txn-0", "in-txn-1"]

    # Buffer stats carry Pulsar's fields only; the buffer's recovery figures are metrics of this endpoint's own.
    assert set(buffer) <= PULSAR_BUFFER_STATS_FIELDS, set(buffer) - PULSAR_BUFFER_STATS_FIELDS
    path = topic.removeprefix("persistent://")
    labels = {"cluster": "standalone", "namespace": "public/default", "topic": topic}
    assert _recovery_figures(admin_url, labels) == (0, 0, 1)
    last = int(http_json(f"{admin_url}/admin/v2/persistent/{path}/internalStats")["lastConfirmedEntry"].split(":")[1])
    proc.restart()
    wait_for_admin(admin_url)
    recovered = http_json(f"{admin_url}/admin/v3/transactions/transactionBufferStats/{path}")
    assert recovered["totalAbortedTransactions"] == 2
    # The only snapshot was taken before the first transactional entry (3); recovery replays the log after it.
    assert _recovery_figures(admin_url, labels) == (1, last - 2, 0)


#: The fields of Pulsar 4.2.4's ``TransactionBufferStats`` (lowWaterMarks only when asked for).
PULSAR_BUFFER_STATS_FIELDS = {
    "state", "maxReadPosition", "lastSnapshotTimestamps", "ongoingTxnSize", "recoverStartTime", "recoverEndTime",
    "totalAbortedTransactions", "snapshotType", "lowWaterMarks", "segmentsStats",
}


def _recovery_figures(admin_url: str, labels: dict[str, str]) -> tuple[float, ...]:
    """Recovered from a snapshot (1/0), entries replayed, snapshots taken: the buffer's recovery metrics."""
    with urllib.request.urlopen(admin_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    found = {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if labels.items() <= sample.labels.items()
    }
    names = ("pulsar_txn_proxy_tb_recovered_from_snapshot", "pulsar_txn_proxy_tb_replayed_entries",
             "pulsar_txn_proxy_tb_snapshots_total")
    return tuple(found[name] for name in names)


RECORD_V1 = '{"type":"record","name":"Point","fields":[{"name":"x","type":"int"}]}'
RECORD_V2 = (
    '{"type":"record","name":"Point","fields":[{"name":"x","type":"int"},{"name":"y","type":"int","default":0}]}'
)


def test_schemas_upload_list_test_and_delete(server_factory: ServerFactory) -> None:
    """The outcomes asserted are those of a Pulsar 4.2.4 standalone for the same scenario."""
    proc, admin_url = start_admin_server(server_factory)
    topic = f"persistent://public/default/adm-schema-{uuid.uuid4().hex[:8]}"
    obs = run_admin(admin_url, proc.url, "schemas", topic)

    assert error(obs, "get_none")["status"] == 404
    v1 = {"type": "AVRO", "schema": RECORD_V1, "properties": {"owner": "harness"}}
    v2 = {**v1, "schema": RECORD_V2}
    assert ok(obs, "latest_v1") == {"version": 0, "info": v1}
    ok(obs, "upload_v2_again")  # the same schema again: its version, not a new one
    assert ok(obs, "version_0") == v1
    assert ok(obs, "all") == [v1, v2]
    assert ok(obs, "test_compatible") == {"compatible": True, "strategy": "BACKWARD"}
    # Pulsar 4.2.4's check throws on an incompatible schema instead of answering false: a server error.
    assert error(obs, "test_incompatible")["status"] == 500
    assert error(obs, "upload_incompatible")["status"] == 409
    # A producer's schema meets the uploaded one: a STRING schema does not follow an AVRO one under BACKWARD.
    assert error(obs, "string_producer_refused")["type"] == "IncompatibleSchemaException"

    # Deleting adds a marker version: the schema is not found, the next one starts afresh, versions go on.
    ok(obs, "delete")
    assert error(obs, "get_deleted") == {"type": "NotFoundException", "status": 404, "message": "Schema not found"}
    assert ok(obs, "all_after_delete") == 0
    ok(obs, "string_producer_after_delete")
    string = {"type": "STRING", "schema": "", "properties": {}}
    assert ok(obs, "latest_after_producer") == {"version": 3, "info": string}
    # A forced deletion drops every version: numbering starts again.
    ok(obs, "delete_force")
    assert error(obs, "get_after_force")["status"] == 404
    assert ok(obs, "upload_after_force") == 0


def test_lookup_clusters_brokers_and_health(server_factory: ServerFactory) -> None:
    proc, admin_url = start_admin_server(server_factory)
    topic = f"persistent://public/default/adm-st-{uuid.uuid4().hex[:8]}"
    obs = run_admin(admin_url, proc.url, "status", topic)

    assert ok(obs, "lookup") == proc.url
    assert ok(obs, "lookup_partitioned") == {f"{topic}-part-partition-{i}": proc.url for i in range(2)}
    assert ok(obs, "clusters") == ["standalone"]
    cluster = ok(obs, "cluster")
    assert (cluster["serviceUrl"], cluster["brokerServiceUrl"]) == (admin_url, proc.url)
    assert error(obs, "cluster_missing")["status"] == 404
    assert ok(obs, "brokers") == [admin_url.removeprefix("http://")]
    assert ok(obs, "leader")["serviceUrl"] == admin_url
    assert ok(obs, "health") == "ok"
    assert ok(obs, "version").startswith("pulsar-txn-proxy")
    assert ok(obs, "runtime_configuration")["clusterName"] == "standalone"


def test_topic_policies(server_factory: ServerFactory) -> None:
    proc, admin_url = start_admin_server(server_factory)
    topic = f"persistent://public/default/adm-tp-{uuid.uuid4().hex[:8]}"
    obs = run_admin(admin_url, proc.url, "topicPolicies", topic)

    assert ok(obs, "create_partitioned") is None
    assert ok(obs, "get_ttl_unset") is None  # the topic sets no TTL of its own
    assert ok(obs, "set_ttl") is None
    assert ok(obs, "get_ttl") == 30
    assert ok(obs, "get_ttl_applied") == 30
    assert ok(obs, "set_retention") is None
    assert ok(obs, "get_retention") == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}
    assert ok(obs, "set_deduplication") is None
    assert ok(obs, "get_deduplication") is True
    assert ok(obs, "set_compaction_threshold") is None
    assert ok(obs, "get_compaction_threshold") == 1048576
    assert ok(obs, "set_backlog_quota") is None
    quota = {"limit": 10485760, "limitSize": 10485760, "limitTime": -1, "policy": "producer_exception"}
    assert ok(obs, "get_backlog_quota_map") == {"destination_storage": quota}
    assert ok(obs, "get_backlog_quota_map_applied") == {"destination_storage": quota}

    assert error(obs, "set_ttl_on_partition") == {
        "type": "PreconditionFailedException",
        "status": 412,
        "message": "Not allowed to set/get topic policy for a partition",
    }
    assert error(obs, "get_ttl_missing_topic") == {
        "type": "NotFoundException",
        "status": 404,
        "message": f"Topic {topic}-missing not found",
    }

    assert ok(obs, "remove_ttl") is None
    assert ok(obs, "get_ttl_after_remove") is None
    for key in ("remove_backlog_quota", "remove_retention", "remove_deduplication", "remove_compaction_threshold"):
        assert ok(obs, key) is None
    assert ok(obs, "get_retention_after_remove") is None
