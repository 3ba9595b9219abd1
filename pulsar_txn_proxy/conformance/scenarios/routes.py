"""Admin routes beyond the everyday ones (issue 23): every topic policy Pulsar has (set, read, applied, removed, and
the limits a client meets on PRODUCER and SUBSCRIBE), dynamic broker settings, namespace replication clusters,
affinity groups, failure domains, topic properties and internal info, shadow topics, schema metadata, JSON bodies read
as Jackson reads them, topic stats fields, peeking a subscription that does not exist, and transaction metadata names.

The route inventory itself (every Pulsar route resolves to its own path here, or answers 501) is
tests/test_route_inventory.py.
"""

from __future__ import annotations

import time
from typing import Any

import pulsar

from pulsar_txn_proxy.conformance.framework import (
    QUIET_MS,
    SETTLE_S,
    AdminAnswer,
    Outcome,
    Run,
    drain,
    receive_n,
    scenario,
    send_all,
    until,
)
from pulsar_txn_proxy.conformance.scenarios.topic_policies import _answer, _namespace, _settled
from pulsar_txn_proxy.conformance.scenarios.txn_coordinator import Raw, Txns
from wire.pulsar_api_pb2 import TxnAction

#: ``endpoint: (method, a value to set)`` for every topic policy beyond the five the everyday scenarios cover.
POLICY_VALUES: dict[str, tuple[str, Any]] = {
    "maxProducers": ("POST", 3),
    "maxConsumers": ("POST", 2),
    "maxConsumersPerSubscription": ("POST", 1),
    "maxUnackedMessagesOnConsumer": ("POST", 10),
    "maxUnackedMessagesOnSubscription": ("POST", 20),
    "maxMessageSize": ("POST", 1024),
    "maxSubscriptionsPerTopic": ("POST", 2),
    "persistence": (
        "POST",
        {
            "bookkeeperEnsemble": 1,
            "bookkeeperWriteQuorum": 1,
            "bookkeeperAckQuorum": 1,
            "managedLedgerMaxMarkDeleteRate": 2.0,
        },
    ),
    "delayedDelivery": ("POST", {"tickTime": 500, "active": False, "maxDeliveryDelayInMillis": 0}),
    "inactiveTopicPolicies": (
        "POST",
        {
            "inactiveTopicDeleteMode": "delete_when_subscriptions_caught_up",
            "maxInactiveDurationSeconds": 100,
            "deleteWhileInactive": True,
        },
    ),
    "subscriptionTypesEnabled": ("POST", ["Exclusive", "Shared"]),
    "publishRate": ("POST", {"publishThrottlingRateInMsg": 10, "publishThrottlingRateInByte": 1000}),
    "dispatchRate": (
        "POST",
        {
            "dispatchThrottlingRateInMsg": 10,
            "dispatchThrottlingRateInByte": 0,
            "relativeToPublishRate": False,
            "ratePeriodInSecond": 0,
        },
    ),
    "subscriptionDispatchRate": (
        "POST",
        {
            "dispatchThrottlingRateInMsg": 0,
            "dispatchThrottlingRateInByte": 100,
            "relativeToPublishRate": False,
            "ratePeriodInSecond": 0,
        },
    ),
    "replicatorDispatchRate": (
        "POST",
        {
            "dispatchThrottlingRateInMsg": 5,
            "dispatchThrottlingRateInByte": 0,
            "relativeToPublishRate": False,
            "ratePeriodInSecond": 0,
        },
    ),
    "subscribeRate": ("POST", {"subscribeThrottlingRatePerConsumer": 3, "ratePeriodInSecond": 30}),
    "deduplicationSnapshotInterval": ("POST", 60),
    "autoSubscriptionCreation": ("POST", {"allowAutoSubscriptionCreation": False}),
    "replication": ("POST", ["standalone"]),
    "schemaCompatibilityStrategy": ("PUT", "BACKWARD"),
    "schemaValidationEnforced": ("POST", True),
    "sub-a/dispatchRate": (
        "POST",
        {
            "dispatchThrottlingRateInMsg": 7,
            "dispatchThrottlingRateInByte": 0,
            "relativeToPublishRate": False,
            "ratePeriodInSecond": 0,
        },
    ),
}

#: Values Pulsar refuses (or reads as Jackson does), by endpoint.
BAD_VALUES: list[tuple[str, str, Any]] = [
    ("POST", "maxProducers", -1),
    ("POST", "maxProducers", "4"),
    ("POST", "maxProducers", True),
    ("POST", "maxProducers", "x"),
    ("POST", "maxConsumers", -1),
    ("POST", "maxConsumersPerSubscription", -1),
    ("POST", "maxUnackedMessagesOnConsumer", -1),
    ("POST", "maxMessageSize", 5 * 1024 * 1024),
    ("POST", "maxMessageSize", 5 * 1024 * 1024 + 1),
    ("POST", "maxMessageSize", -1),
    ("POST", "maxSubscriptionsPerTopic", -1),
    ("POST", "persistence", {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1}),
    ("POST", "deduplicationSnapshotInterval", -1),
    ("POST", "replication", []),
    ("POST", "replication", ["nope"]),
    ("POST", "entryFilters", {"entryFilterNames": ""}),
    ("POST", "entryFilters", {"entryFilterNames": "x"}),
]


def _status(answer: AdminAnswer) -> int:
    return answer.status


def _plain_topic(run: Run, namespace: str, tag: str) -> tuple[str, str]:
    """A new non-partitioned topic of the namespace: its name and admin path."""
    base = f"/admin/v2/persistent/{namespace}/{tag}"
    if run.admin("PUT", base).status >= 300:
        raise RuntimeError(f"creating {base} failed")
    return f"persistent://{namespace}/{tag}", base


#: Policies whose value is a set: Pulsar answers its members in no particular order (seen both ways on 4.2.4).
SET_VALUED = {"subscriptionTypesEnabled"}


#: What Pulsar 4.2.4 answers for a removed topic policy where it is not no content (what ``_settled`` waits for).
REMOVED: dict[str, Any] = {"subscriptionTypesEnabled": [], "schemaValidationEnforced": True}


@scenario
def test_every_topic_policy(run: Run) -> Outcome:
    """Each topic policy: unset (and applied: the broker's value), set, read, applied, removed; bad values."""
    namespace = _namespace(run, "policies")
    _, base = _plain_topic(run, namespace, "t")
    outcome: dict[str, Any] = {}
    for endpoint, (method, value) in POLICY_VALUES.items():
        path = f"{base}/{endpoint}"
        outcome[endpoint] = {
            "unset": _answer(run.admin("GET", path)),
            "unset_applied": _answer(run.admin("GET", path + "?applied=true")),
            "set": run.admin(method, path, value).status,
            "get": _settled(run, path, value, unordered=endpoint in SET_VALUED),
            "applied": _settled(run, path + "?applied=true", value, unordered=endpoint in SET_VALUED),
            "remove": run.admin("DELETE", path).status,
            "after_remove": _settled(run, path, REMOVED.get(endpoint)),
        }
    outcome["bad_values"] = [
        {"endpoint": endpoint, "value": value, "answer": run.admin(method, f"{base}/{endpoint}", value).status}
        for method, endpoint, value in BAD_VALUES
    ]
    outcome["coerced_max_producers"] = _settled(run, f"{base}/maxProducers", 4)
    run.admin("POST", f"/admin/v2/namespaces/{namespace}/maxConsumersPerTopic", 9)
    outcome["namespace_value_applied"] = _settled(run, f"{base}/maxConsumers?applied=true", 9)
    for endpoint in ("offloadPolicies", "entryFilters", "dispatcherPauseOnAckStatePersistent", "shadowTopics"):
        outcome[f"unset_{endpoint}"] = _answer(run.admin("GET", f"{base}/{endpoint}"))
    outcome["partition"] = _answer(run.admin("GET", f"/admin/v2/persistent/{namespace}/t-partition-0/maxProducers"))
    outcome["missing_topic"] = _answer(run.admin("GET", f"/admin/v2/persistent/{namespace}/none/maxProducers"))
    return outcome


def _policy_in_force(run: Run, base: str, endpoint: str, value: Any) -> int:
    """Set a topic policy and wait until it is in force (Pulsar applies topic policies a moment after the call)."""
    status = run.admin("POST", f"{base}/{endpoint}", value).status
    _settled(run, f"{base}/{endpoint}", value)
    time.sleep(1.0)
    return status


@scenario
def test_topic_limits_on_producers_and_consumers(run: Run) -> Outcome:
    """Max producers, max consumers (per topic and per subscription), max subscriptions and the subscription types
    enabled, as clients meet them on PRODUCER and SUBSCRIBE."""
    namespace = _namespace(run, "limits")
    client = run.client()
    outcome: dict[str, Any] = {}

    topic, base = _plain_topic(run, namespace, "producers")
    outcome["set_max_producers"] = _policy_in_force(run, base, "maxProducers", 1)
    client.create_producer(topic)
    outcome["second_producer"] = run.attempt(lambda: client.create_producer(topic) and "created")

    topic, base = _plain_topic(run, namespace, "consumers")
    outcome["set_max_consumers"] = _policy_in_force(run, base, "maxConsumers", 1)
    client.subscribe(topic, "a")
    outcome["second_consumer"] = run.attempt(lambda: client.subscribe(topic, "b") and "subscribed")

    topic, base = _plain_topic(run, namespace, "per-subscription")
    outcome["set_max_per_subscription"] = _policy_in_force(run, base, "maxConsumersPerSubscription", 1)
    shared = pulsar.ConsumerType.Shared
    client.subscribe(topic, "a", consumer_type=shared)
    outcome["second_on_subscription"] = run.attempt(
        lambda: client.subscribe(topic, "a", consumer_type=shared) and "subscribed"
    )
    outcome["other_subscription"] = run.attempt(lambda: client.subscribe(topic, "b") and "subscribed")

    topic, base = _plain_topic(run, namespace, "subscriptions")
    outcome["set_max_subscriptions"] = _policy_in_force(run, base, "maxSubscriptionsPerTopic", 1)
    client.subscribe(topic, "a")
    outcome["second_subscription"] = run.attempt(lambda: client.subscribe(topic, "b") and "subscribed")

    topic, base = _plain_topic(run, namespace, "types")
    outcome["set_types"] = _policy_in_force(run, base, "subscriptionTypesEnabled", ["Shared"])
    outcome["exclusive"] = run.attempt(lambda: client.subscribe(topic, "a") and "subscribed")
    outcome["shared"] = run.attempt(lambda: client.subscribe(topic, "b", consumer_type=shared) and "subscribed")
    return outcome


@scenario
def test_max_unacked_messages_on_a_consumer(run: Run) -> Outcome:
    """A Shared consumer gets no more than the topic's max unacked messages until it acknowledges."""
    namespace = _namespace(run, "unacked")
    topic, base = _plain_topic(run, namespace, "t")
    outcome: dict[str, Any] = {"set": _policy_in_force(run, base, "maxUnackedMessagesOnConsumer", 2)}
    client = run.client()
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10)
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, [f"m{i}" for i in range(5)])
    first = drain(consumer, 1500, expect=2)
    outcome["before_ack"] = len(first)
    for message in first:
        consumer.acknowledge(message)
    outcome["after_ack"] = len(receive_n(consumer, 2))
    stats = run.admin("GET", f"{base}/stats").body or {}
    consumers = stats.get("subscriptions", {}).get("s", {}).get("consumers", [])
    outcome["blocked_flag"] = [c.get("blockedConsumerOnUnackedMsgs") for c in consumers]
    return outcome


@scenario
def test_dynamic_broker_configuration(run: Run) -> Outcome:
    """The dynamic settings' names; one set, reported in values and runtime, and removed; a static one refused."""
    name = "loadBalancerSheddingGracePeriodMinutes"
    names = run.admin("GET", "/admin/v2/brokers/configuration")
    outcome: dict[str, Any] = {
        "names": sorted(names.body) if names.status == 200 else names.status,
        "set": _answer(run.admin("POST", f"/admin/v2/brokers/configuration/{name}/31")),
        "values": run.admin("GET", "/admin/v2/brokers/configuration/values").body.get(name),
        "runtime": run.admin("GET", "/admin/v2/brokers/configuration/runtime").body.get(name),
        "delete": _answer(run.admin("DELETE", f"/admin/v2/brokers/configuration/{name}")),
        "values_after_delete": name in run.admin("GET", "/admin/v2/brokers/configuration/values").body,
        "static": _answer(run.admin("POST", "/admin/v2/brokers/configuration/clusterName/other")),
        "delete_static": _answer(run.admin("DELETE", "/admin/v2/brokers/configuration/clusterName")),
        "unknown": _answer(run.admin("POST", "/admin/v2/brokers/configuration/noSuchSetting/1")),
    }
    brokers = run.admin("GET", "/admin/v2/brokers/standalone").body or []
    owned = run.admin("GET", f"/admin/v2/brokers/standalone/{brokers[0]}/ownedNamespaces") if brokers else None
    outcome["owned_namespaces"] = owned.status if owned else None
    unknown = run.admin("GET", "/admin/v2/brokers/standalone/127.0.0.1:9/ownedNamespaces")
    outcome["owned_unknown_broker"] = unknown.status
    return outcome


@scenario
def test_namespace_clusters_and_affinity(run: Run) -> Outcome:
    """A namespace created as ``pulsar-admin namespaces create`` does (an empty replication cluster list) replicates
    to the standalone cluster; bookie and anti affinity groups; the dispatcher pause switch."""
    tenant = run.name("ns")
    run.admin("PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [], "allowedClusters": ["standalone"]})
    ns = f"/admin/v2/namespaces/{tenant}/ns"
    affinity = {"bookkeeperAffinityGroupPrimary": "group-a"}
    outcome: dict[str, Any] = {
        "create": run.admin("PUT", ns, {"replication_clusters": [], "bundles": None}).status,
        "clusters": _answer(run.admin("GET", ns + "/replication")),
        "policies_clusters": (run.admin("GET", ns).body or {}).get("replication_clusters"),
        "bookie_affinity_unset": _answer(run.admin("GET", ns + "/persistence/bookieAffinity")),
        "set_bookie_affinity": run.admin("POST", ns + "/persistence/bookieAffinity", affinity).status,
        "bookie_affinity": _answer(run.admin("GET", ns + "/persistence/bookieAffinity")),
        "remove_bookie_affinity": run.admin("DELETE", ns + "/persistence/bookieAffinity").status,
        "anti_affinity_unset": _answer(run.admin("GET", ns + "/antiAffinity")),
        "set_anti_affinity": run.admin("POST", ns + "/antiAffinity", "group-b").status,
        "anti_affinity": _answer(run.admin("GET", ns + "/antiAffinity")),
        "anti_affinity_namespaces": _answer(
            run.admin("GET", f"/admin/v2/namespaces/standalone/antiAffinity/group-b?tenant={tenant}")
        ),
        "remove_anti_affinity": run.admin("DELETE", ns + "/antiAffinity").status,
        "pause_unset": _answer(run.admin("GET", ns + "/dispatcherPauseOnAckStatePersistent")),
        "set_pause": run.admin("POST", ns + "/dispatcherPauseOnAckStatePersistent").status,
        "pause": _answer(run.admin("GET", ns + "/dispatcherPauseOnAckStatePersistent")),
    }
    return outcome


@scenario
def test_failure_domains(run: Run) -> Outcome:
    """Create, list, read and delete a failure domain of the cluster."""
    domain = run.name("domain")
    path = f"/admin/v2/clusters/standalone/failureDomains/{domain}"
    brokers = run.admin("GET", "/admin/v2/brokers/standalone").body or []
    listed = run.admin("GET", "/admin/v2/clusters/standalone/failureDomains")
    outcome: dict[str, Any] = {
        "list_status": listed.status,
        "create": run.admin("POST", path, {"brokers": brokers}).status,
        "get": _answer(run.admin("GET", path)) == {"status": 200, "body": {"brokers": brokers}},
        "listed": domain in (run.admin("GET", "/admin/v2/clusters/standalone/failureDomains").body or {}),
        "get_missing": _answer(run.admin("GET", path + "-none")),
        "delete": _answer(run.admin("DELETE", path)),
        "delete_again": _answer(run.admin("DELETE", path)),
        "unknown_cluster": run.admin("GET", "/admin/v2/clusters/none/failureDomains").status,
    }
    return outcome


@scenario
def test_topic_properties_info_and_shadows(run: Run) -> Outcome:
    """Topic properties of a non-partitioned and a partitioned topic; internal info; shadow topics."""
    namespace = _namespace(run, "props")
    _, base = _plain_topic(run, namespace, "plain")
    parted = f"/admin/v2/persistent/{namespace}/parted"
    run.admin("PUT", parted + "/partitions", 2)
    outcome: dict[str, Any] = {}
    for kind, path in (("plain", base), ("partitioned", parted)):
        outcome[kind] = {
            "unset": _answer(run.admin("GET", path + "/properties")),
            "update": run.admin("PUT", path + "/properties", {"a": "1", "b": "2"}).status,
            "get": _answer(run.admin("GET", path + "/properties")),
            "remove_a": run.admin("DELETE", path + "/properties?key=a").status,
            "remove_unknown": run.admin("DELETE", path + "/properties?key=zz").status,
            "after_remove": _answer(run.admin("GET", path + "/properties")),
            "bad_body": run.admin("PUT", path + "/properties", "x").status,
        }
    outcome["partition_properties"] = _answer(run.admin("GET", parted + "-partition-0/properties"))
    outcome["missing_properties"] = run.admin("GET", base + "-none/properties").status
    info = run.admin("GET", base + "/internal-info")
    outcome["info_fields"] = sorted(info.body) if info.status == 200 else info.status
    outcome["info_properties"] = info.body.get("properties") if info.status == 200 else None
    parted_info = run.admin("GET", parted + "/internal-info").body or {}
    outcome["partitioned_info"] = {
        "version": parted_info.get("version"),
        "partitions": len(parted_info.get("partitions", {})),
    }
    outcome["shadows"] = {
        "get": _answer(run.admin("GET", base + "/shadowTopics")),
        "set_missing": _answer(run.admin("PUT", base + "/shadowTopics", [f"persistent://{namespace}/none"])),
        "set_empty": _answer(run.admin("PUT", base + "/shadowTopics", [])),
        "remove": run.admin("DELETE", base + "/shadowTopics").status,
        "missing_topic": run.admin("GET", base + "-none/shadowTopics").status,
        "partition": run.admin("GET", parted + "-partition-0/shadowTopics").status,
    }
    return outcome


@scenario
def test_schema_metadata_and_version(run: Run) -> Outcome:
    """``schemas metadata`` and the version of a schema, before and after one is registered."""
    topic = run.name("schema")
    path = f"/admin/v2/schemas/public/default/{topic}"
    record = {
        "type": "AVRO",
        "schema": '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}',
        "properties": {},
    }
    outcome: dict[str, Any] = {"metadata_none": _answer(run.admin("GET", path + "/metadata"))}
    outcome["upload"] = run.admin("POST", path + "/schema", record).status
    metadata = run.admin("GET", path + "/metadata").body or {}
    outcome["metadata_versions"] = [entry.get("version") for entry in metadata.get("index", [])]
    outcome["metadata_info_version"] = metadata.get("info", {}).get("version")
    outcome["version_of_registered"] = _answer(run.admin("POST", path + "/version", record))
    outcome["version_of_other"] = _answer(
        run.admin("POST", path + "/version", {"type": "STRING", "schema": "", "properties": {}})
    )
    schema = run.admin("GET", path + "/schema").body or {}
    outcome["timestamp_is_a_date"] = isinstance(schema.get("timestamp"), int) and schema["timestamp"] > 1.6e12
    return outcome


@scenario
def test_json_bodies_as_jackson_reads_them(run: Run) -> Outcome:
    """Partition counts and policy values sent as strings or with a fraction, as the Rust client's helpers do."""
    ns = "/admin/v2/persistent/public/default"
    answers = {}
    for tag, body in (("string", "3"), ("fraction", 2.0), ("object", {"partitions": 2}), ("word", "three")):
        name = run.name(f"parts-{tag}")
        answers[tag] = {
            "create": run.admin("PUT", f"{ns}/{name}/partitions", body).status,
            "partitions": run.admin("GET", f"{ns}/{name}/partitions").body,
        }
    namespace = _namespace(run, "coerce")
    answers["ttl_string"] = run.admin("POST", f"/admin/v2/namespaces/{namespace}/messageTTL", "30").status
    answers["ttl"] = _answer(run.admin("GET", f"/admin/v2/namespaces/{namespace}/messageTTL"))
    answers["deduplication_string"] = run.admin(
        "POST", f"/admin/v2/namespaces/{namespace}/deduplication", "true"
    ).status
    answers["deduplication"] = _answer(run.admin("GET", f"/admin/v2/namespaces/{namespace}/deduplication"))
    override = {"allowAutoTopicCreation": "true", "topicType": "partitioned", "defaultNumPartitions": "2"}
    answers["auto_creation_strings"] = run.admin(
        "POST", f"/admin/v2/namespaces/{namespace}/autoTopicCreation", override
    ).status
    answers["auto_creation"] = _answer(run.admin("GET", f"/admin/v2/namespaces/{namespace}/autoTopicCreation"))
    return answers


@scenario
def test_stats_fields_and_peeking_a_missing_subscription(run: Run) -> Outcome:
    """Producer and consumer metadata, the topic's creation time and the last flow's time in topic stats; peeking a
    subscription that does not exist."""
    client = run.client()
    topic = run.topic("t")
    name = topic.rsplit("/", 1)[1]
    base = f"/admin/v2/persistent/public/default/{name}"
    producer = client.create_producer(topic, batching_enabled=False, properties={"app": "p"})
    consumer = client.subscribe(topic, "s", properties={"app": "c"}, initial_position=pulsar.InitialPosition.Earliest)
    send_all(producer, ["m0", "m1", "m2"])
    receive_n(consumer, 3)
    time.sleep(0.5)
    stats = run.admin("GET", base + "/stats").body or {}
    sub = stats.get("subscriptions", {}).get("s", {})
    outcome: dict[str, Any] = {
        "producer_metadata": [p.get("metadata") for p in stats.get("publishers", [])],
        "consumer_metadata": [c.get("metadata") for c in sub.get("consumers", [])],
        "creation_is_a_date": stats.get("topicCreationTimeStamp", 0) > 1.6e12,
        "consumer_flow_is_a_date": [c.get("lastConsumedFlowTimestamp", 0) > 1.6e12 for c in sub.get("consumers", [])],
        "subscription_flow_is_a_date": sub.get("lastConsumedFlowTimestamp", 0) > 1.6e12,
    }
    peeked = []
    for position in (1, 2, 3, 4):
        answer = run.admin("GET", f"{base}/subscription/none/position/{position}")
        peeked.append(answer.body if answer.status == 200 else answer.status)
    outcome["peek_missing_subscription"] = peeked
    outcome["subscriptions_after_peek"] = sorted(run.admin("GET", base + "/subscriptions").body or [])
    return outcome


@scenario
def test_transaction_metadata_keeps_partition_names(run: Run) -> Outcome:
    """A transaction that added a partition under its short name is reported under that name, as Pulsar does."""
    txns = Txns()
    raw = Raw(run, txns)
    topic = run.topic("t")
    short = topic.rsplit("/", 1)[1]
    try:
        raw.producer(topic, 1)
        txn, _ = raw.new_txn(45_000)
        added = raw.add_partition(txn, short)
        meta = run.admin("GET", f"/admin/v3/transactions/transactionMetadata/{txn[0]}/{txn[1]}")
        produced = sorted((meta.body or {}).get("producedPartitions", {})) if meta.status == 200 else meta.status
        raw.end(txn, TxnAction.ABORT)
    finally:
        raw.close()
    # Both names of the topic normalise to <t>: compare the name itself.
    return {"add_partition": added, "named_as_added": produced == [short], "full_name": produced == [topic]}


@scenario
def test_max_message_size_of_a_topic(run: Run) -> Outcome:
    """A topic's max message size: a send within it is stored, one beyond it refused (raw protocol: the Python client
    never completes a refused send)."""
    namespace = _namespace(run, "size")
    topic, base = _plain_topic(run, namespace, "t")
    outcome: dict[str, Any] = {"set": _policy_in_force(run, base, "maxMessageSize", 1000)}
    raw = Raw(run, Txns())
    try:
        name = raw.producer(topic, 1)
        outcome["within"] = "entry" in raw.send(1, name, 0, b"x" * 900)
        outcome["beyond"] = raw.send(1, name, 1, b"x" * 2000)
        outcome["after"] = "entry" in raw.send(1, name, 2, b"y")
    finally:
        raw.close()
    return outcome


def _next_of(consumers: list[pulsar.Consumer], timeout: float) -> tuple[pulsar.Consumer, pulsar.Message] | None:
    """The next message any of ``consumers`` gets within ``timeout`` seconds, with its consumer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for consumer in consumers:
            try:
                return consumer, consumer.receive(50)
            except pulsar.Timeout:
                pass
    return None


@scenario
def test_max_unacked_messages_on_a_subscription(run: Run) -> Outcome:
    """A Shared subscription's consumers together get no more than its max unacked messages until they acknowledge.

    Pulsar checks the limit after each read and a read may take the subscription beyond it, so the first messages go
    one at a time, each once it has been dispatched (one entry per read), until the limit is reached and the stats
    say the subscription is blocked; the rest, sent then, are held back until acknowledgements free it."""
    namespace = _namespace(run, "sub-unacked")
    topic, base = _plain_topic(run, namespace, "t")
    outcome: dict[str, Any] = {"set": _policy_in_force(run, base, "maxUnackedMessagesOnSubscription", 3)}
    client = run.client()
    shared = pulsar.ConsumerType.Shared
    consumers = [client.subscribe(topic, "s", consumer_type=shared, receiver_queue_size=10) for _ in range(2)]
    producer = client.create_producer(topic, batching_enabled=False)
    received = []
    for i in range(3):
        producer.send(f"m{i}".encode())
        got = _next_of(consumers, SETTLE_S)
        if got is not None:
            received.append(got)
    outcome["dispatched_one_at_a_time"] = len(received)

    def blocked() -> Any:
        stats = run.admin("GET", f"{base}/stats").body or {}
        return stats.get("subscriptions", {}).get("s", {}).get("blockedSubscriptionOnUnackedMsgs")

    outcome["blocked_flag"] = until(blocked, lambda flag: flag is True)
    send_all(producer, [f"m{i}" for i in range(3, 8)])
    # Nothing may come while the subscription is blocked (watched for QUIET_MS on each consumer).
    outcome["held_back"] = sum(len(drain(consumer)) for consumer in consumers) == 0
    # Acknowledgements free it: the other 5 come (the waits end as soon as they have).
    total = len(received)
    while received and total < 8:
        for consumer, message in received:
            consumer.acknowledge(message)
        received = []
        while (got := _next_of(consumers, SETTLE_S if not received else QUIET_MS / 1000)) is not None:
            received.append(got)
        total += len(received)
    outcome["all_after_acks"] = total + sum(len(drain(consumer)) for consumer in consumers)
    return outcome


@scenario
def test_max_unacked_set_while_consumers_are_attached(run: Run) -> Outcome:
    """A max unacked messages policy set after a Shared consumer subscribed holds it back as well."""
    namespace = _namespace(run, "late-unacked")
    topic, base = _plain_topic(run, namespace, "t")
    client = run.client()
    consumer = client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=10)
    outcome: dict[str, Any] = {"set": _policy_in_force(run, base, "maxUnackedMessagesOnConsumer", 2)}
    producer = client.create_producer(topic, batching_enabled=False)
    send_all(producer, [f"m{i}" for i in range(5)])
    first = drain(consumer, 1500, expect=2)
    outcome["before_ack"] = len(first)
    for message in first:
        consumer.acknowledge(message)
    outcome["after_ack"] = len(receive_n(consumer, 2))
    return outcome


@scenario
def test_namespace_limits_on_a_non_persistent_topic(run: Run) -> Outcome:
    """A namespace's max consumers per topic and subscription types hold on its non-persistent topics too."""
    namespace = _namespace(run, "np-limits")
    ns = f"/admin/v2/namespaces/{namespace}"
    outcome: dict[str, Any] = {
        "set_max_consumers": run.admin("POST", ns + "/maxConsumersPerTopic", 1).status,
        "set_types": run.admin("POST", ns + "/subscriptionTypesEnabled", ["Exclusive", "Shared"]).status,
    }
    client = run.client()
    topic = f"non-persistent://{namespace}/t"
    client.subscribe(topic, "a")

    def second_consumer() -> Any:
        """A consumer on a second subscription; closed again when it is accepted (the policy may not be in force
        yet: Pulsar applies a namespace's policies a moment after the call), so that the next try meets one."""
        answer = run.attempt(lambda: client.subscribe(topic, "b"))
        if "ok" in answer:
            answer["ok"].close()
            return {"ok": "subscribed"}
        return answer

    outcome["second_consumer"] = until(second_consumer, lambda answer: "error" in answer, every=0.5)
    other = f"non-persistent://{namespace}/other"
    failover = pulsar.ConsumerType.Failover
    outcome["failover"] = run.attempt(lambda: client.subscribe(other, "c", consumer_type=failover) and "subscribed")
    return outcome


@scenario
def test_last_publish_timestamp(run: Run) -> Outcome:
    """lastPublishTimeStamp in topic and partitioned-topic stats (the Go admin client's TestTopicStatsTimestamps and
    TestPartitionedTopicStatsTimestamps): 0 before any message, then the time of the last publish."""
    client = run.client()
    out: dict[str, Any] = {}
    for label, partitions in (("topic", 0), ("partitioned", 2)):
        topic = run.topic(label)
        base = f"/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}"
        if partitions:
            run.admin("PUT", base + "/partitions", partitions)
        else:
            run.admin("PUT", base)
        stats_path = base + ("/partitioned-stats" if partitions else "/stats")
        before = (run.admin("GET", stats_path).body or {}).get("lastPublishTimeStamp")
        started = int(time.time() * 1000) - 1000
        producer = client.create_producer(topic, batching_enabled=False)
        send_all(producer, ["m0", "m1"])
        after = (run.admin("GET", stats_path).body or {}).get("lastPublishTimeStamp")
        out[label] = {
            "before": before,
            "after_is_recent": isinstance(after, int) and started <= after <= int(time.time() * 1000) + 1000,
        }
    return out


@scenario
def test_namespace_policy_answers_of_the_go_admin_suite(run: Run) -> Outcome:
    """What the Go admin client's namespace tests read: refusals of negative values in Pulsar's words (its
    TestNamespaces_SetSubscriptionExpirationTime), the status of setting offloadThresholdInSeconds, and the bookie
    affinity group of a namespace without and with loaded topics (its TestNamespaces_BookieAffinityGroup reads
    public/default, which has topics: no group is 200 without a body there)."""
    namespace = _namespace(run, "goadmin")
    base = f"/admin/v2/namespaces/{namespace}"
    out: dict[str, Any] = {}
    for route in ("subscriptionExpirationTime", "deduplicationSnapshotInterval", "messageTTL"):
        out[f"{route} -60"] = _answer(run.admin("POST", f"{base}/{route}", -60))
    out["offloadThresholdInSeconds set"] = run.admin("PUT", f"{base}/offloadThresholdInSeconds", 100).status
    affinity = base + "/persistence/bookieAffinity"
    out["affinity without topics"] = _answer(run.admin("GET", affinity))
    run.admin("PUT", f"/admin/v2/persistent/{namespace}/t")
    out["affinity with a topic"] = _answer(run.admin("GET", affinity))
    group = {"bookkeeperAffinityGroupPrimary": "primary-group", "bookkeeperAffinityGroupSecondary": "secondary-group"}
    out["set"] = run.admin("POST", affinity, group).status
    out["affinity set"] = _answer(run.admin("GET", affinity))
    out["delete"] = run.admin("DELETE", affinity).status
    out["affinity deleted"] = _answer(run.admin("GET", affinity))
    return out
