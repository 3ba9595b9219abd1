"""Topic policies: ``/admin/v2/persistent/{tenant}/{namespace}/{topic}/{policy}``, as ``pulsar-admin topicpolicies``
and the Java ``PulsarAdmin.topicPolicies()`` call them.

Set on a non-partitioned topic or a partitioned one (for all its partitions), never on one partition; the topic must
exist. GET answers the topic's own value (when unset: 200 or 204 without a body, as Pulsar's resource method for that
policy does); with ``applied=true``, the value in force: the topic's, else the namespace's, else the broker's default.
Shadow topics are refused (501) once their names check out. Paths, bodies, status codes and reasons follow Pulsar's
``PersistentTopics``; the limits among them are applied by the engine (``engine.limits.TopicLimits``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.backlog_quota import BacklogQuota, QuotaType, RetentionPolicy
from engine.errors import BrokerError
from engine.names import TopicName
from engine.namespaces import (
    MAX_UNACKED_PER_CONSUMER,
    MAX_UNACKED_PER_SUBSCRIPTION,
)
from proxy.admin.bodies import UnreadableBodyError, as_int, bean, unreadable
from proxy.admin.context import AdminContext
from proxy.admin.http import AdminError, Call, Reply, Router, absent_reply
from proxy.admin.tenants import (
    STRATEGY_ORDER,
    backlog_quota_of,
    check_boolean,
    check_entry_filters,
    check_integer,
    check_offload_policies,
    check_persistence,
    check_retention,
    check_subscription_types,
    enum_value,
)
from proxy.admin.topics import T, parse_topic, partitions_of

_MAX_MESSAGE_SIZE_REASON = (
    "topic-level maxMessageSize must be greater than or equal to 0 and must be smaller than that in the broker-level"
)
#: What a broker without settings of its own applies when neither the topic nor its namespace set a quota.
_DEFAULT_QUOTA = BacklogQuota(-1, -1, RetentionPolicy.PRODUCER_REQUEST_HOLD).to_policy()


@dataclass(frozen=True)
class TopicPolicy:
    """One policy: its ``TopicPolicies`` field, the namespace ``Policies`` field it overrides, and how it is set."""

    field: str
    #: The namespace's field; a ``*`` after it: a map of values by cluster name (rates).
    namespace_field: str | None
    #: The broker's value when neither level sets one (None: there is none).
    default: Callable[[AdminContext], Any]
    #: The value a set request carries (None: remove it).
    value: Callable[[Call], Any]
    #: The method that sets it.
    method: str = "POST"
    #: The status Pulsar answers a read of an unset value with (its resource methods differ: 200 or 204).
    unset_status: int = 200
    #: What a read of an unset value answers (before ``applied``): nothing, or a value (booleans read false).
    unset: Any = None
    #: Whether Pulsar removes it with DELETE (else a DELETE answers 405).
    removable: bool = True
    #: Whether a read of an unset value answers the namespace's value when the namespace holds one (applied or not).
    unset_reads_namespace: bool = False


def _from_query(name: str, check: Callable[[Any], Any]) -> Callable[[Call], Any]:
    def value(call: Call) -> Any:
        raw = call.integer(name)
        return None if raw is None else check(raw)

    return value


def _from_body(check: Callable[[Any], Any], required: bool = True, nulls: bool = False) -> Callable[[Call], Any]:
    """The policy a body sets: a null body removes it, or (``nulls``) goes to the check like any value."""

    def value(call: Call) -> Any:
        body = call.json(required=required)
        return None if body is None and not nulls else check(body)

    return value


def _retention(value: Any) -> Any:
    """Pulsar checks a topic's retention as the namespace's, but answers a bad one with 400, not 412 (a null one
    reads as no retention)."""
    if value is None:
        return {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}
    try:
        return check_retention(value)
    except UnreadableBodyError:
        raise
    except AdminError as exc:
        raise AdminError(400, exc.reason) from None


def _object_body(call: Call, kind: str) -> None:
    """Refuse a body that is not an object (or null) before anything else, as Jersey reads it first."""
    body = call.json(required=True)
    if body is not None and not isinstance(body, dict):
        raise unreadable(body, kind)


def _cluster_list(value: Any) -> Any:
    if value is not None and not isinstance(value, list):
        raise unreadable(value, "java.util.List")
    return value


def _bean(kind: str, fields: dict[str, Any]) -> Callable[[Any], Any]:
    """A bean body; a null one reads as the bean with its defaults (what Pulsar's topic resources store for it)."""
    return lambda value: bean({} if value is None else value, kind, fields)


def _count(reason: str) -> Callable[[Any], Any]:
    return check_integer(0, reason)


_DISPATCH_RATE = {
    "dispatchThrottlingRateInMsg": 0,
    "dispatchThrottlingRateInByte": 0,
    "relativeToPublishRate": False,
    "ratePeriodInSecond": 0,
}
#: The broker's dispatch rates when no level sets one (throttling off, one-second periods).
_BROKER_DISPATCH_RATE = {**_DISPATCH_RATE, "ratePeriodInSecond": 1}


#: The ``TopicPolicies`` field of per-subscription policies (a map by subscription name).
_SUBSCRIPTION_POLICIES = "subscriptionPolicies"


def _none(ctx: AdminContext) -> Any:
    return None


POLICIES: dict[str, TopicPolicy] = {
    "messageTTL": TopicPolicy(
        "messageTTLInSeconds",
        "message_ttl_in_seconds",
        lambda ctx: 0,
        # Pulsar reads the TTL from the query; a request without one removes it.
        _from_query("messageTTL", check_integer(0, "Invalid value for message TTL")),
    ),
    "retention": TopicPolicy(
        "retentionPolicies",
        "retention_policies",
        lambda ctx: {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0},
        _from_body(_retention, nulls=True),
    ),
    "deduplicationEnabled": TopicPolicy(
        "deduplicationEnabled",
        "deduplicationEnabled",
        lambda ctx: ctx.broker.config.deduplication,
        # An empty body removes it, as Pulsar reads a missing Boolean.
        _from_body(check_boolean, required=False),
    ),
    "compactionThreshold": TopicPolicy(
        "compactionThreshold",
        "compaction_threshold",
        lambda ctx: 0,
        _from_body(check_integer(0, "Invalid value for compactionThreshold"), nulls=True),
    ),
    "maxProducers": TopicPolicy(
        "maxProducerPerTopic",
        "max_producers_per_topic",
        lambda ctx: 0,
        _from_body(_count("maxProducers must be 0 or more"), nulls=True),
    ),
    "maxConsumers": TopicPolicy(
        "maxConsumerPerTopic",
        "max_consumers_per_topic",
        lambda ctx: 0,
        _from_body(_count("maxConsumers must be 0 or more"), nulls=True),
    ),
    "maxConsumersPerSubscription": TopicPolicy(
        "maxConsumersPerSubscription",
        "max_consumers_per_subscription",
        _none,
        _from_body(_count("Invalid value for maxConsumersPerSubscription"), nulls=True),
        unset_status=204,
    ),
    "maxUnackedMessagesOnConsumer": TopicPolicy(
        "maxUnackedMessagesOnConsumer",
        "max_unacked_messages_per_consumer",
        lambda ctx: MAX_UNACKED_PER_CONSUMER,
        _from_body(_count("maxUnackedNum must be 0 or more")),
    ),
    "maxUnackedMessagesOnSubscription": TopicPolicy(
        "maxUnackedMessagesOnSubscription",
        "max_unacked_messages_per_subscription",
        lambda ctx: MAX_UNACKED_PER_SUBSCRIPTION,
        _from_body(_count("maxUnackedNum must be 0 or more")),
    ),
    "maxMessageSize": TopicPolicy(
        "maxMessageSize",
        None,
        _none,
        _from_body(as_int, nulls=True),  # checked against the broker's limit in the handler
        unset_status=204,
    ),
    "maxSubscriptionsPerTopic": TopicPolicy(
        "maxSubscriptionsPerTopic",
        "max_subscriptions_per_topic",
        _none,
        _from_body(_count("maxSubscriptionsPerTopic must be 0 or more"), nulls=True),
        unset_status=204,
    ),
    "persistence": TopicPolicy(
        "persistence",
        "persistence",
        lambda ctx: {
            "bookkeeperEnsemble": 1,
            "bookkeeperWriteQuorum": 1,
            "bookkeeperAckQuorum": 1,
            "managedLedgerMaxMarkDeleteRate": 1.0,
        },
        _from_body(check_persistence, nulls=True),
    ),
    "delayedDelivery": TopicPolicy(
        "delayedDelivery",
        "delayed_delivery_policies",
        lambda ctx: {"tickTime": 1000, "active": True, "maxDeliveryDelayInMillis": 0},
        _from_body(_bean("DelayedDeliveryPolicies", {"tickTime": 0, "active": False, "maxDeliveryDelayInMillis": 0})),
    ),
    "inactiveTopicPolicies": TopicPolicy(
        "inactiveTopicPolicies",
        "inactive_topic_policies",
        lambda ctx: {
            "inactiveTopicDeleteMode": "delete_when_no_subscriptions",
            "maxInactiveDurationSeconds": 60,
            "deleteWhileInactive": False,
        },
        _from_body(
            _bean(
                "InactiveTopicPolicies",
                {"inactiveTopicDeleteMode": None, "maxInactiveDurationSeconds": 0, "deleteWhileInactive": False},
            )
        ),
    ),
    "subscriptionTypesEnabled": TopicPolicy(
        "subscriptionTypesEnabled",
        "subscription_types_enabled",
        _none,
        _from_body(check_subscription_types, nulls=True),
        unset_status=204,
        unset_reads_namespace=True,
    ),
    "publishRate": TopicPolicy(
        "publishRate",
        "publishMaxMessageRate*",
        _none,
        _from_body(
            _bean("PublishRate", {"publishThrottlingRateInMsg": -1, "publishThrottlingRateInByte": -1}), True, True
        ),
        unset_status=204,
    ),
    "dispatchRate": TopicPolicy(
        "dispatchRate",
        "topicDispatchRate*",
        lambda ctx: dict(_BROKER_DISPATCH_RATE),
        _from_body(_bean("DispatchRate", _DISPATCH_RATE), nulls=True),
    ),
    "subscriptionDispatchRate": TopicPolicy(
        "subscriptionDispatchRate",
        "subscriptionDispatchRate*",
        lambda ctx: dict(_BROKER_DISPATCH_RATE),
        _from_body(_bean("DispatchRate", _DISPATCH_RATE), nulls=True),
    ),
    "replicatorDispatchRate": TopicPolicy(
        "replicatorDispatchRate",
        "replicatorDispatchRate*",
        lambda ctx: dict(_BROKER_DISPATCH_RATE),
        _from_body(_bean("DispatchRate", _DISPATCH_RATE)),
    ),
    "subscribeRate": TopicPolicy(
        "subscribeRate",
        "clusterSubscribeRate*",
        lambda ctx: {"subscribeThrottlingRatePerConsumer": 0, "ratePeriodInSecond": 30},
        _from_body(
            _bean("SubscribeRate", {"subscribeThrottlingRatePerConsumer": -1, "ratePeriodInSecond": 30}), nulls=True
        ),
    ),
    "deduplicationSnapshotInterval": TopicPolicy(
        "deduplicationSnapshotIntervalSeconds",
        "deduplicationSnapshotIntervalSeconds",
        _none,
        _from_body(_count("interval must be 0 or more")),
    ),
    "offloadPolicies": TopicPolicy(
        "offloadPolicies",
        "offload_policies",
        _none,
        _from_body(check_offload_policies, nulls=True),
    ),
    "autoSubscriptionCreation": TopicPolicy(
        "autoSubscriptionCreation",
        "autoSubscriptionCreationOverride",
        lambda ctx: {"allowAutoSubscriptionCreation": True},
        _from_body(_bean("AutoSubscriptionCreationOverride", {"allowAutoSubscriptionCreation": False})),
    ),
    "replication": TopicPolicy(
        "replicationClusters",
        "replication_clusters",
        lambda ctx: [ctx.cluster],
        _from_body(_cluster_list, nulls=True),  # checked against the clusters in the handler
    ),
    "schemaCompatibilityStrategy": TopicPolicy(
        "schemaCompatibilityStrategy",
        "schema_compatibility_strategy",
        lambda ctx: "FULL",
        _from_body(enum_value(STRATEGY_ORDER, "SchemaCompatibilityStrategy")),
        method="PUT",
    ),
    "schemaValidationEnforced": TopicPolicy(
        "schemaValidationEnforced",
        "schema_validation_enforced",
        lambda ctx: False,
        _from_body(check_boolean),
        unset=False,
        removable=False,
    ),
    "entryFilters": TopicPolicy(
        "entryFilters",
        "entryFilters",
        lambda ctx: {"entryFilterNames": ""},
        _from_body(check_entry_filters),
    ),
    "dispatcherPauseOnAckStatePersistent": TopicPolicy(
        "dispatcherPauseOnAckStatePersistentEnabled",
        "dispatcherPauseOnAckStatePersistentEnabled",
        lambda ctx: False,
        # Setting it takes no body: it turns the pause on.
        lambda call: True,
        unset=False,
    ),
    "subscriptionExpirationTime": TopicPolicy(
        "subscriptionExpirationTimeMinutes",
        "subscription_expiration_time_minutes",
        lambda ctx: 0,
        _from_body(_count("SubscriptionExpirationTime must be 0 or more")),
    ),
}


def _exceeds_retention(quota: BacklogQuota, minutes: int, megabytes: int) -> bool:
    """Whether a quota allows more backlog than a retention of ``minutes`` and ``megabytes`` keeps (Pulsar refuses
    such a pair)."""
    return (megabytes > 0 and quota.limit_size >= megabytes * 1024 * 1024) or (
        minutes > 0 and quota.limit_time >= minutes * 60
    )


def register(router: Router, ctx: AdminContext) -> None:
    """Add the topic-policy routes."""
    broker = ctx.broker
    namespaces = broker.namespaces

    def topic_of(call: Call) -> TopicName:
        """The (partitioned) topic a policy request names, checked as Pulsar's ``preValidation`` does."""
        name = parse_topic(call)
        if name.partition_index >= 0:
            raise AdminError(412, "Not allowed to set/get topic policy for a partition")
        if name.namespace_name not in namespaces:
            raise AdminError(404, "Namespace does not exist")
        if name.domain != "persistent" or not (broker.partitions_of(name.full) or broker.exists(name.full)):
            raise AdminError(404, f"Topic {name.full} not found")
        return name

    def check(name: TopicName, policy: TopicPolicy, value: Any) -> None:
        """Pulsar's checks of a value against what else is set (retention, broker limits, clusters)."""
        if value is None and policy.field != "replicationClusters":
            return
        if policy.field == "retentionPolicies":
            minutes, megabytes = value["retentionTimeInMinutes"], value["retentionSizeInMB"]
            quotas = namespaces.backlog_quotas(name)
            if any(_exceeds_retention(quota, minutes, megabytes) for quota in quotas.values()):
                raise AdminError(
                    412,
                    "Retention Quota must exceed configured backlog quota for topic. "
                    "Please increase retention quota and retry",
                )
        elif policy.field == "maxMessageSize" and not 0 <= as_int(value) <= ctx.broker.config.max_message_size:
            raise AdminError(412, _MAX_MESSAGE_SIZE_REASON)
        elif policy.field == "replicationClusters":
            if value is not None and not isinstance(value, list):
                raise unreadable(value, "java.util.List")
            if not value:
                raise AdminError(412, "ClusterIds should not be null or empty")
            if ctx.cluster not in value:
                raise AdminError(
                    412, "Can not remove local cluster from the local topic-level replication clusters policy"
                )
            unknown = [c for c in value if c != ctx.cluster]
            if unknown:
                raise AdminError(404, f"Cluster {unknown[0]} does not exist")

    def policy_routes(endpoint: str, policy: TopicPolicy) -> None:
        def get(call: Call) -> Any:
            name = topic_of(call)
            if call.flag("applied"):
                value = namespaces.applied_policy(name, policy.field, policy.namespace_field)
                if value is None:
                    value = policy.default(ctx)
            else:
                value = namespaces.topic_policies(name.full).get(policy.field, policy.unset)
            if value is None and policy.unset_reads_namespace and policy.namespace_field is not None:
                value = namespaces.policy(name.namespace_name, policy.namespace_field)
            if value is None:
                return absent_reply() if policy.unset_status == 200 else Reply(204)
            return value

        def post(call: Call) -> Any:
            # Jersey reads the body before the resource runs: a body it cannot read is a 400 whatever the topic.
            try:
                value, refused = policy.value(call), None
            except UnreadableBodyError:
                raise
            except AdminError as exc:
                value, refused = None, exc
            name = topic_of(call)
            if refused is not None:
                raise refused
            if policy.field == "maxMessageSize" and value is not None:
                value = as_int(value)
            check(name, policy, value)
            namespaces.set_topic_policy(name.full, policy.field, value)
            return None

        def delete(call: Call) -> Any:
            namespaces.set_topic_policy(topic_of(call).full, policy.field, None)
            return None

        router.add("GET", f"{T}/{endpoint}", get)
        router.add(policy.method, f"{T}/{endpoint}", post)
        if policy.removable:
            router.add("DELETE", f"{T}/{endpoint}", delete)

    for endpoint, policy in POLICIES.items():
        policy_routes(endpoint, policy)

    def subscription_rates(name: TopicName) -> dict[str, Any]:
        return dict(namespaces.topic_policies(name.full).get(_SUBSCRIPTION_POLICIES) or {})

    @router.route("GET", T + "/{sub}/dispatchRate")
    def subscription_dispatch_rate(call: Call) -> Any:
        name = topic_of(call)
        value = subscription_rates(name).get(call["sub"], {}).get("dispatchRate")
        if value is None and call.flag("applied"):
            policy = POLICIES["subscriptionDispatchRate"]
            value = namespaces.applied_policy(name, policy.field, policy.namespace_field) or policy.default(ctx)
        return absent_reply() if value is None else value

    @router.route("POST", T + "/{sub}/dispatchRate")
    def set_subscription_dispatch_rate(call: Call) -> Any:
        _object_body(call, "DispatchRateImpl")
        name = topic_of(call)
        body = call.json(required=True)
        if body is None:
            return None  # Jackson reads null; Pulsar leaves the subscription's rate as it is
        value = bean(body, "DispatchRate", _DISPATCH_RATE)
        rates = subscription_rates(name)
        rates[call["sub"]] = {**rates.get(call["sub"], {}), "dispatchRate": value}
        namespaces.set_topic_policy(name.full, _SUBSCRIPTION_POLICIES, rates)
        return None

    @router.route("DELETE", T + "/{sub}/dispatchRate")
    def remove_subscription_dispatch_rate(call: Call) -> Any:
        name = topic_of(call)
        rates = subscription_rates(name)
        rates.pop(call["sub"], None)
        namespaces.set_topic_policy(name.full, _SUBSCRIPTION_POLICIES, rates or None)
        return None

    @router.route("GET", T + "/backlogQuotaMap")
    def backlog_quotas(call: Call) -> Any:
        name = topic_of(call)
        quotas = dict(namespaces.topic_policies(name.full).get("backLogQuotaMap") or {})
        if not quotas and call.flag("applied"):
            quotas = dict(namespaces.policy(name.namespace_name, "backlog_quota_map") or {})
            if not quotas:
                quotas = {kind.value: dict(_DEFAULT_QUOTA) for kind in QuotaType}
        return quotas

    @router.route("POST", T + "/backlogQuota")
    def set_backlog_quota(call: Call) -> Any:
        _object_body(call, "BacklogQuotaImpl")
        name = topic_of(call)
        kind, quota = backlog_quota_of(
            call, f"Set namespace[{name.namespace_name}] backlog quota failed because the data validation failed."
        )
        if quota is None:
            return None  # Jackson reads null; Pulsar leaves the topic's quotas as they are
        retention = namespaces.retention(name)
        if retention is not None and _exceeds_retention(quota, *retention):
            raise AdminError(
                412,
                "Backlog Quota exceeds configured retention quota for topic. Please increase retention quota and retry",
            )
        current = dict(namespaces.topic_policies(name.full).get("backLogQuotaMap") or {})
        current[kind] = quota.to_policy()
        namespaces.set_topic_policy(name.full, "backLogQuotaMap", current)
        return None

    @router.route("DELETE", T + "/backlogQuota")
    def remove_backlog_quota(call: Call) -> Any:
        name = topic_of(call)
        current = dict(namespaces.topic_policies(name.full).get("backLogQuotaMap") or {})
        current.pop(call.query.get("backlogQuotaType") or QuotaType.DESTINATION_STORAGE, None)
        namespaces.set_topic_policy(name.full, "backLogQuotaMap", current or None)
        return None

    @router.route("GET", T + "/shadowTopics")
    def shadow_topics(call: Call) -> Any:
        topic_of(call)
        return absent_reply()

    @router.route("PUT", T + "/shadowTopics")
    def set_shadow_topics(call: Call) -> Any:
        shadows = call.json(required=True)
        if shadows is not None and not isinstance(shadows, list):
            raise unreadable(shadows, "java.util.List")
        topic_of(call)
        if shadows and None in shadows:
            raise AdminError(500, "Request failed.")  # Pulsar's topic name parser fails on a null name
        if not shadows:
            raise AdminError(412, "Cannot specify empty shadow topics, please use remove command instead.")
        for shadow in shadows:
            try:
                shadow_name = TopicName.parse(str(shadow))
            except BrokerError:
                raise AdminError(412, f"Shadow topic [{shadow}] not exists.") from None
            if not (broker.exists(shadow_name.full) or partitions_of(ctx, shadow_name)):
                raise AdminError(412, f"Shadow topic [{shadow}] not exists.")
        raise AdminError(501, "Shadow topics (PIP-180) are not supported by this endpoint")

    @router.route("DELETE", T + "/shadowTopics")
    def remove_shadow_topics(call: Call) -> Any:
        topic_of(call)
        return None

    @router.route("DELETE", T + "/policies")
    def delete_all(call: Call) -> Any:
        namespaces.delete_topic_policies(topic_of(call).full)
        return None
