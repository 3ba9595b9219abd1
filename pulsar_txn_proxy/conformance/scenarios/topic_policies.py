"""Topic policies (``/admin/v2/persistent/{tenant}/{namespace}/{topic}/{policy}``): set, read, applied values, and
what a topic's own backlog quota and deduplication switch change for its clients.

Pulsar keeps topic policies in a system topic and applies them a moment after the call returns; each read here
waits (up to 10 s) for the value the scenario expects, and records what it found last.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pulsar

from pulsar_txn_proxy.conformance.framework import AdminAnswer, Outcome, Run, drain, scenario, until
from pulsar_txn_proxy.conformance.scenarios.backlog_quota import new_producer

PAYLOAD = b"x" * 200


def _namespace(run: Run, tag: str) -> str:
    namespace, status = run.namespace(tag)
    if status >= 300:
        raise RuntimeError(f"creating namespace {namespace} failed: {status}")
    return namespace


def _settled(run: Run, path: str, expected: Any, unordered: bool = False) -> dict[str, Any]:
    """GET ``path`` until its body is ``expected`` (None: no content) or ``SETTLE_S`` has passed; the last answer.
    ``unordered``: the value is a set (Pulsar lists a Java Set in no particular order), compared and shown sorted."""

    def get() -> AdminAnswer:
        answer = run.admin("GET", path)
        if unordered and isinstance(answer.body, list):
            answer.body = sorted(answer.body)
        return answer

    return _answer(until(get, lambda answer: answer.body == expected, every=0.2))


def _answer(answer: AdminAnswer) -> dict[str, Any]:
    """Status and body, error reasons included."""
    return {"status": answer.status, "body": answer.body}


def _cycle(run: Run, base: str, endpoint: str, value: Any, query: str = "") -> dict[str, Any]:
    """Unset, set, read, read applied, remove, read again: one policy of one topic."""
    path = f"{base}/{endpoint}"
    body = None if query else value
    return {
        "unset": _answer(run.admin("GET", path)),
        "set": run.admin("POST", path + query, body).status,
        "get": _settled(run, path, value),
        "applied": _settled(run, path + "?applied=true", value),
        "remove": run.admin("DELETE", path).status,
        "after_remove": _settled(run, path, None),
    }


@scenario
def test_set_read_and_remove(run: Run) -> Outcome:
    """Each applied policy on a non-partitioned and a partitioned topic; values in force from the namespace and the
    broker; bad values, a partition, a missing topic; a deleted topic's policies go with it."""
    namespace = _namespace(run, "tp")
    outcome: dict[str, Any] = {}
    for kind in ("plain", "partitioned"):
        base = f"/admin/v2/persistent/{namespace}/{kind}"
        if kind == "plain":
            outcome["create_plain"] = run.admin("PUT", base).status
        else:
            outcome["create_partitioned"] = run.admin("PUT", f"{base}/partitions", 2).status
        outcome[kind] = {
            "messageTTL": _cycle(run, base, "messageTTL", 30, "?messageTTL=30"),
            "retention": _cycle(run, base, "retention", {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}),
            "deduplicationEnabled": _cycle(run, base, "deduplicationEnabled", True),
            "compactionThreshold": _cycle(run, base, "compactionThreshold", 1048576),
        }
    base = f"/admin/v2/persistent/{namespace}/plain"
    outcome["broker_defaults"] = {
        endpoint: _answer(run.admin("GET", f"{base}/{endpoint}?applied=true"))
        for endpoint in ("messageTTL", "retention", "deduplicationEnabled", "compactionThreshold", "backlogQuotaMap")
    }
    run.admin("POST", f"/admin/v2/namespaces/{namespace}/messageTTL", 100)
    outcome["namespace_ttl_applied"] = _settled(run, f"{base}/messageTTL?applied=true", 100)
    run.admin("POST", f"{base}/messageTTL?messageTTL=5")
    outcome["topic_ttl_wins"] = _settled(run, f"{base}/messageTTL?applied=true", 5)
    outcome["bad_values"] = {
        "negative_ttl": _answer(run.admin("POST", f"{base}/messageTTL?messageTTL=-1")),
        "negative_compaction_threshold": run.admin("POST", f"{base}/compactionThreshold", -1).status,
        "one_zero_retention_limit": run.admin(
            "POST", f"{base}/retention", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 10}
        ).status,
    }
    outcome["partition"] = _answer(
        run.admin("GET", f"/admin/v2/persistent/{namespace}/partitioned-partition-0/messageTTL")
    )
    outcome["missing_topic"] = _answer(run.admin("GET", f"/admin/v2/persistent/{namespace}/missing/messageTTL"))
    outcome["missing_topic_set"] = run.admin(
        "POST", f"/admin/v2/persistent/{namespace}/missing/messageTTL?messageTTL=1"
    ).status
    outcome["delete_all"] = run.admin("DELETE", f"{base}/policies").status
    outcome["after_delete_all"] = _settled(run, f"{base}/messageTTL", None)
    run.admin("POST", f"{base}/messageTTL?messageTTL=7")
    outcome["before_topic_delete"] = _settled(run, f"{base}/messageTTL", 7)
    outcome["delete_topic"] = run.admin("DELETE", base).status
    outcome["recreate_topic"] = run.admin("PUT", base).status
    outcome["after_recreate"] = _settled(run, f"{base}/messageTTL", None)
    return outcome


@scenario
def test_backlog_quota_of_a_topic(run: Run) -> Outcome:
    """A topic's own backlog quota: quotas map, the retention it must stay under, and new producers refused on that
    topic only, until the quota is removed."""
    namespace = _namespace(run, "tbq")
    topic, other = f"persistent://{namespace}/t", f"persistent://{namespace}/other"
    base = f"/admin/v2/persistent/{namespace}/t"
    client = run.client()
    consumers = [client.subscribe(name, run.name("slow")) for name in (topic, other)]
    quota = {"limitSize": 2048, "limitTime": -1, "policy": "producer_exception"}
    outcome: dict[str, Any] = {
        "map_unset": _answer(run.admin("GET", f"{base}/backlogQuotaMap")),
        "set": run.admin("POST", f"{base}/backlogQuota?backlogQuotaType=destination_storage", quota).status,
        "map": _settled(run, f"{base}/backlogQuotaMap", {"destination_storage": {**quota, "limit": 2048}}),
        "retention_over_quota": run.admin(
            "POST", f"{base}/retention", {"retentionTimeInMinutes": 1, "retentionSizeInMB": 1}
        ).status,
    }
    age_quota = {"limitSize": -1, "limitTime": 120, "policy": "producer_exception"}
    outcome["age_quota_over_retention"] = _answer(
        run.admin("POST", f"{base}/backlogQuota?backlogQuotaType=message_age", age_quota)
    )
    outcome["remove_retention"] = run.admin("DELETE", f"{base}/retention").status
    outcome["map_with_one_quota"] = _settled(run, f"{base}/backlogQuotaMap", outcome["map"]["body"])
    for name in (topic, other):
        producer = client.create_producer(name, batching_enabled=False)
        for _ in range(20):
            producer.send(PAYLOAD)
        producer.close()
    # Refused once the topic has the quota in force (Pulsar applies a topic policy a moment after the call).
    outcome["new_producer"] = until(partial(new_producer, client, topic), lambda result: result != "created")
    outcome["new_producer_other_topic"] = new_producer(client, other)
    outcome["remove"] = run.admin("DELETE", f"{base}/backlogQuota?backlogQuotaType=destination_storage").status
    outcome["map_after_remove"] = _settled(run, f"{base}/backlogQuotaMap", {})
    outcome["new_producer_after_remove"] = _eventually_created(client, topic)
    for consumer in consumers:
        consumer.close()
    return outcome


@scenario
def test_deduplication_of_a_topic(run: Run) -> Outcome:
    """A topic's own deduplication switch: re-sent sequence ids are dropped there and kept on a topic without it."""
    namespace = _namespace(run, "tdd")
    client = run.client()
    outcome: dict[str, Any] = {}
    for tag, enabled in (("on", True), ("off", None)):
        base = f"/admin/v2/persistent/{namespace}/{tag}"
        run.admin("PUT", base)
        if enabled:
            run.admin("POST", f"{base}/deduplicationEnabled", enabled)
            outcome["enabled"] = _settled(run, f"{base}/deduplicationEnabled", enabled)
            # In force once the topic says so (Pulsar applies a topic policy a moment after the call).
            until(partial(_deduplication_status, run, base), lambda status: status == "Enabled")
        topic = f"persistent://{namespace}/{tag}"
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        producer = client.create_producer(topic, producer_name=run.name(f"p-{tag}"), batching_enabled=False)
        for sequence_id in (0, 1, 2, 1, 2, 3):
            producer.send(f"m{sequence_id}".encode(), sequence_id=sequence_id)
        outcome[tag] = [m.data().decode() for m in drain(reader, expect=4)]
    return outcome


def _deduplication_status(run: Run, base: str) -> Any:
    """The topic stats' ``deduplicationStatus``."""
    return (run.admin("GET", f"{base}/stats").body or {}).get("deduplicationStatus")


def _eventually_created(client: pulsar.Client, topic: str) -> str:
    """A new producer once one is created, or the last refusal after ``SETTLE_S``."""
    return until(partial(new_producer, client, topic), lambda result: result == "created", every=0.5)
