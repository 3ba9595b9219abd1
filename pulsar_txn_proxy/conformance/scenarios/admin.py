"""Admin REST API (``/admin/v2``) calls as ``pulsar-admin`` and the Java admin client make them."""

from __future__ import annotations

from typing import Any

import pulsar

from pulsar_txn_proxy.conformance.framework import (
    AdminAnswer,
    Outcome,
    Run,
    drain,
    receive_n,
    scenario,
    send_all,
    texts,
)

Earliest = pulsar.InitialPosition.Earliest
NS = "/admin/v2/persistent/public/default"


def _status(answer: AdminAnswer) -> int:
    return answer.status


def _mine(run: Run, names: Any) -> list[str] | Any:
    """The entries of a topic list that this run created (others share the namespace)."""
    if not isinstance(names, list):
        return names
    return sorted(n for n in names if run.suffix in n)


@scenario
def test_clusters_tenants_namespaces(run: Run) -> Outcome:
    """The standalone's cluster, tenants and namespaces; create, list and delete a tenant and a namespace."""
    tenant = run.name("tenant")
    outcome: dict[str, Any] = {
        "clusters": run.admin("GET", "/admin/v2/clusters").body,
        "public_namespaces": run.admin("GET", "/admin/v2/namespaces/public").body,
        "has_public_and_pulsar": {"public", "pulsar"} <= set(run.admin("GET", "/admin/v2/tenants").body or []),
        "create_tenant": _status(
            run.admin("PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [], "allowedClusters": ["standalone"]})
        ),
        "create_tenant_again": _status(
            run.admin("PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [], "allowedClusters": ["standalone"]})
        ),
        "tenant_info": run.admin("GET", f"/admin/v2/tenants/{tenant}").body,
        "create_namespace": _status(run.admin("PUT", f"/admin/v2/namespaces/{tenant}/ns")),
        "create_namespace_again": _status(run.admin("PUT", f"/admin/v2/namespaces/{tenant}/ns")),
        "namespaces": run.admin("GET", f"/admin/v2/namespaces/{tenant}").body,
        "delete_nonempty_tenant": _status(run.admin("DELETE", f"/admin/v2/tenants/{tenant}")),
        "unknown_tenant_namespaces": _status(run.admin("GET", f"/admin/v2/namespaces/{tenant}-none")),
    }
    client = run.client()
    producer = client.create_producer(f"persistent://{tenant}/ns/t")
    producer.send(b"x")
    outcome["topics_in_new_namespace"] = run.admin("GET", f"/admin/v2/persistent/{tenant}/ns").body
    outcome["delete_namespace_with_producer"] = _status(run.admin("DELETE", f"/admin/v2/namespaces/{tenant}/ns"))
    producer.close()
    # The standalone's forceDeleteNamespaceAllowed=false refuses forced deletes; a plain one takes idle topics too.
    outcome["delete_namespace_forced"] = _status(run.admin("DELETE", f"/admin/v2/namespaces/{tenant}/ns?force=true"))
    outcome["delete_namespace_with_topic"] = _status(run.admin("DELETE", f"/admin/v2/namespaces/{tenant}/ns"))
    outcome["delete_topic"] = _status(run.admin("DELETE", f"/admin/v2/persistent/{tenant}/ns/t"))
    outcome["delete_namespace"] = _status(run.admin("DELETE", f"/admin/v2/namespaces/{tenant}/ns"))
    outcome["namespaces_after_delete"] = run.admin("GET", f"/admin/v2/namespaces/{tenant}").body
    outcome["delete_tenant"] = _status(run.admin("DELETE", f"/admin/v2/tenants/{tenant}"))
    outcome["tenant_after_delete"] = _status(run.admin("GET", f"/admin/v2/tenants/{tenant}"))
    return outcome


@scenario
def test_partitioned_topic_lifecycle(run: Run) -> Outcome:
    """Create, read, grow, list and delete a partitioned topic; errors for duplicates and unknown topics."""
    name = run.name("pt")
    path = f"{NS}/{name}/partitions"
    outcome: dict[str, Any] = {
        "create": _status(run.admin("PUT", path, 2)),
        "create_again": _status(run.admin("PUT", path, 2)),
        "metadata": run.admin("GET", path).body,
        "grow": _status(run.admin("POST", path, 3)),
        "shrink": _status(run.admin("POST", path, 1)),
        "metadata_after_grow": run.admin("GET", path).body,
        "unknown_metadata": run.admin("GET", f"{NS}/{name}-none/partitions").summary(),
    }
    client = run.client()
    outcome["client_partitions"] = len(client.get_topic_partitions(f"persistent://public/default/{name}"))
    outcome["partitioned_list"] = _mine(run, run.admin("GET", f"{NS}/partitioned").body)
    outcome["delete"] = _status(run.admin("DELETE", path))
    outcome["metadata_after_delete"] = run.admin("GET", path).summary()
    outcome["partitioned_list_after_delete"] = _mine(run, run.admin("GET", f"{NS}/partitioned").body)
    return outcome


@scenario
def test_non_partitioned_topic_lifecycle(run: Run) -> Outcome:
    """Create, list, delete (refused while a producer is connected unless forced) a non-partitioned topic."""
    name = run.name("t")
    outcome: dict[str, Any] = {
        "create": _status(run.admin("PUT", f"{NS}/{name}")),
        "create_again": _status(run.admin("PUT", f"{NS}/{name}")),
        "metadata": run.admin("GET", f"{NS}/{name}/partitions").body,
        "listed": _mine(run, run.admin("GET", NS).body),
    }
    client = run.client()
    producer = client.create_producer(f"persistent://public/default/{name}")
    producer.send(b"x")
    outcome["delete_with_producer"] = _status(run.admin("DELETE", f"{NS}/{name}"))
    outcome["delete_forced"] = _status(run.admin("DELETE", f"{NS}/{name}?force=true"))
    outcome["send_after_forced_delete"] = run.attempt(lambda: producer.send(b"y") and "sent")
    outcome["listed_after_delete"] = _mine(run, run.admin("GET", NS).body)
    outcome["delete_unknown"] = _status(run.admin("DELETE", f"{NS}/{name}-none"))
    return outcome


@scenario
def test_topic_stats(run: Run) -> Outcome:
    """Stats of a topic with a producer, a backlogged subscription and a caught-up one."""
    client = run.client()
    topic = run.topic("t")
    name = topic.rsplit("/", 1)[1]
    behind = client.subscribe(topic, "behind", initial_position=Earliest)
    caught_up = client.subscribe(
        topic, "caught-up", consumer_type=pulsar.ConsumerType.Shared, initial_position=Earliest
    )
    producer = client.create_producer(topic, producer_name=run.name("prod"), batching_enabled=False)
    send_all(producer, [f"m{i}" for i in range(5)])
    for msg in receive_n(caught_up, 5):
        caught_up.acknowledge(msg)
    receive_n(behind, 2)
    drain(caught_up, 300)
    stats = run.admin("GET", f"{NS}/{name}/stats").body or {}
    subs = stats.get("subscriptions", {})
    return {
        "msgInCounter": stats.get("msgInCounter"),
        "publishers": [p.get("producerName") for p in stats.get("publishers", [])],
        "subscriptions": {
            sub: {
                "type": s.get("type"),
                "msgBacklog": s.get("msgBacklog"),
                "consumers": len(s.get("consumers", [])),
                "msgOutCounter": s.get("msgOutCounter"),
                "unackedMessages": s.get("unackedMessages"),
            }
            for sub, s in sorted(subs.items())
        },
        "subscriptions_list": sorted(run.admin("GET", f"{NS}/{name}/subscriptions").body or []),
        "unknown_topic_stats": _status(run.admin("GET", f"{NS}/{name}-none/stats")),
        "partitioned_stats_of_plain_topic": _status(run.admin("GET", f"{NS}/{name}/partitioned-stats")),
    }


@scenario
def test_subscription_admin(run: Run) -> Outcome:
    """Create a subscription, skip, reset by time, peek, clear backlog and delete it."""
    client = run.client()
    topic = run.topic("t")
    name = topic.rsplit("/", 1)[1]
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, [f"m{i}" for i in range(6)])
    base = f"{NS}/{name}/subscription"
    outcome: dict[str, Any] = {
        "create_at_earliest": _status(run.admin("PUT", f"{base}/sub", {"ledgerId": -1, "entryId": -1})),
        "create_again": _status(run.admin("PUT", f"{base}/sub", {"ledgerId": -1, "entryId": -1})),
        "create_at_latest": _status(run.admin("PUT", f"{base}/latest-sub")),
        "skip_2": _status(run.admin("POST", f"{base}/sub/skip/2")),
    }
    stats = (run.admin("GET", f"{NS}/{name}/stats").body or {}).get("subscriptions", {})
    outcome["backlogs"] = {s: v.get("msgBacklog") for s, v in sorted(stats.items())}
    consumer = client.subscribe(topic, "sub")
    outcome["after_skip"] = texts(drain(consumer, expect=4))
    consumer.close()
    outcome["reset_to_0"] = _status(run.admin("POST", f"{base}/sub/resetcursor/0"))
    consumer = client.subscribe(topic, "sub")
    outcome["after_reset"] = texts(drain(consumer, expect=6))
    consumer.close()
    outcome["clear_backlog"] = _status(run.admin("POST", f"{base}/sub/skip_all"))
    stats = (run.admin("GET", f"{NS}/{name}/stats").body or {}).get("subscriptions", {})
    outcome["backlog_after_clear"] = stats.get("sub", {}).get("msgBacklog")
    outcome["peek_latest_sub"] = run.admin("GET", f"{base}/latest-sub/position/1").status
    outcome["delete"] = _status(run.admin("DELETE", f"{base}/sub"))
    outcome["delete_unknown"] = _status(run.admin("DELETE", f"{base}/none"))
    outcome["subscriptions"] = sorted(run.admin("GET", f"{NS}/{name}/subscriptions").body or [])
    return outcome


@scenario
def test_terminate_and_last_message_id(run: Run) -> Outcome:
    """lastMessageId, then terminate: producers are refused, consumers still read to the end."""
    client = run.client()
    topic = run.topic("t")
    name = topic.rsplit("/", 1)[1]
    producer = client.create_producer(topic, batching_enabled=False)
    ids = send_all(producer, ["a", "b"])
    last = run.admin("GET", f"{NS}/{name}/lastMessageId").body or {}
    terminated = run.admin("POST", f"{NS}/{name}/terminate")
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    return {
        "last_entry_matches_send": (last.get("ledgerId"), last.get("entryId"))
        == (ids[-1].ledger_id(), ids[-1].entry_id()),
        "terminate": terminated.status,
        "terminated_at_last": isinstance(terminated.body, dict)
        and terminated.body.get("entryId") == last.get("entryId"),
        "send_after_terminate": run.attempt(lambda: producer.send(b"c") and "sent"),
        "new_producer": run.attempt(lambda: client.create_producer(topic) and "created"),
        "consumed": texts(drain(consumer, expect=2)),
    }


def _schema(answer: AdminAnswer) -> dict[str, Any]:
    """A schema answer without its timestamp (the registration time)."""
    summary = answer.summary()
    body = summary["body"]
    if isinstance(body, dict):
        body.pop("timestamp", None)
        for version in body.get("getSchemaResponses", []):
            version.pop("timestamp", None)
    return summary


@scenario
def test_schema_upload_list_and_delete(run: Run) -> Outcome:
    """``pulsar-admin schemas``: upload, read, list, test and delete a topic's schema, then a forced delete."""
    topic = run.name("schema")
    path = f"/admin/v2/schemas/public/default/{topic}"
    record = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
    v1 = {"type": "AVRO", "schema": record, "properties": {"k": "v"}}
    v2 = {**v1, "schema": record.replace("]}", ',{"name":"b","type":"int","default":1}]}')}
    return {
        "get_none": _schema(run.admin("GET", path + "/schema")),
        "list_none": _schema(run.admin("GET", path + "/schemas")),
        "delete_none": run.admin("DELETE", path + "/schema").summary(),
        "upload_v1": run.admin("POST", path + "/schema", v1).summary(),
        "upload_v1_again": run.admin("POST", path + "/schema", v1).summary(),
        "upload_v2": run.admin("POST", path + "/schema", v2).summary(),
        "latest": _schema(run.admin("GET", path + "/schema")),
        "version_0": _schema(run.admin("GET", path + "/schema/0")),
        "list": _schema(run.admin("GET", path + "/schemas")),
        "compatible": run.admin("POST", path + "/compatibility", v2).summary(),
        "delete": run.admin("DELETE", path + "/schema").summary(),
        "get_deleted": _schema(run.admin("GET", path + "/schema")),
        "get_marker_version": _schema(run.admin("GET", path + "/schema/2")),
        "list_deleted": _schema(run.admin("GET", path + "/schemas")),
        "delete_again": run.admin("DELETE", path + "/schema").summary(),
        "upload_after_delete": run.admin("POST", path + "/schema", {"type": "STRING", "schema": ""}).summary(),
        "delete_forced": run.admin("DELETE", path + "/schema?force=true").summary(),
        "get_after_forced": _schema(run.admin("GET", path + "/schema")),
        "upload_after_forced": run.admin("POST", path + "/schema", v1).summary(),
    }
