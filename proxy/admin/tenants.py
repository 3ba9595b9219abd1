"""Tenants, namespaces and namespace policies: ``/admin/v2/tenants`` and ``/admin/v2/namespaces``.

Paths, bodies, status codes and reasons follow Pulsar's ``TenantsBase`` and ``NamespacesBase``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.backlog_quota import BacklogQuota, QuotaType
from engine.namespaces import valid_name
from engine.subscription import Subscription
from engine.subscription_types import SUBSCRIPTION_TYPES
from proxy.admin.bodies import UnreadableBodyError, as_bool, as_int, as_object, as_string, bean, string_map, unreadable
from proxy.admin.context import AdminContext
from proxy.admin.http import AdminError, Call, Router, absent_reply, text_reply
from proxy.admin.topics import namespace_topics

V2 = "/admin/v2"
NS = V2 + "/namespaces/{tenant}/{namespace}"

Check = Callable[[Any], Any]
#: Namespace policies kept by this module under Pulsar's names (the bookie affinity group is a local policy there).
_BOOKIE_AFFINITY = "bookieAffinityGroup"
_ANTI_AFFINITY = "antiAffinityGroup"
_DISPATCHER_PAUSE = "dispatcherPauseOnAckStatePersistentEnabled"


def check_integer(minimum: int | None, reason: str) -> Check:
    """A check of an integer body: 400 if it is no integer, 412 with ``reason`` if it is under ``minimum``."""

    def check(value: Any) -> Any:
        value = as_int(value)
        if minimum is not None and value < minimum:
            raise AdminError(412, reason)
        return value

    return check


def check_boolean(value: Any) -> Any:
    """A boolean body (400 if it is none)."""
    return as_bool(value)


def _of_type(kind: type, label: str) -> Check:
    def check(value: Any) -> Any:
        if not isinstance(value, kind):
            raise UnreadableBodyError(400, f"Cannot deserialize value {value!r} as {label}")
        return value

    return check


def check_retention(value: Any) -> Any:
    """A ``RetentionPolicies`` body, normalised (400 if unreadable, 412 with Pulsar's reasons if invalid)."""
    if not isinstance(value, dict):
        raise UnreadableBodyError(400, "Cannot deserialize the body as RetentionPolicies")
    time, size = as_int(value.get("retentionTimeInMinutes") or 0), as_int(value.get("retentionSizeInMB") or 0, "long")
    if size < -1:
        raise AdminError(412, "Invalid retention policy: size limit must be >= -1")
    if time < -1:
        raise AdminError(412, "Invalid retention policy: time limit must be >= -1")
    if (time == 0) != (size == 0):
        raise AdminError(
            412,
            "Invalid retention policy: Setting a single time or size limit to 0 is invalid when one of the limits"
            " has a non-zero value. Use the value of -1 instead of 0 to ignore a specific limit. To disable"
            " retention both limits must be set to 0.",
        )
    return {"retentionTimeInMinutes": time, "retentionSizeInMB": size}


def _auto_topic_creation(value: Any) -> Any:
    fields = {"allowAutoTopicCreation": False, "topicType": None, "defaultNumPartitions": None}
    value = bean(value, "AutoTopicCreationOverride", fields)
    if value.get("defaultNumPartitions") is not None:
        value["defaultNumPartitions"] = as_int(value["defaultNumPartitions"])
    problem = None
    if value.get("allowAutoTopicCreation"):
        kind, partitions = value.get("topicType"), value.get("defaultNumPartitions")
        if kind not in ("partitioned", "non-partitioned"):
            problem = f"Unknown topic type [{kind}]"
        elif kind == "partitioned" and partitions is None:
            problem = "[defaultNumPartitions] cannot be null when the type is partitioned."
        elif kind == "partitioned" and (not isinstance(partitions, int) or partitions < 1):
            problem = "[defaultNumPartitions] cannot be less than 1 for partition type."
        elif kind == "non-partitioned" and partitions is not None:
            problem = "[defaultNumPartitions] is not allowed to be set when the type is non-partition."
    if problem is not None:
        raise AdminError(412, f"Invalid configuration for autoTopicCreationOverride. the detail is {problem}")
    return value


def enum_value(names: list[str], kind: str) -> Check:
    """A Java enum as Pulsar's Jackson reads one: its name, or its ordinal as a number; an unknown name (or another
    case) reads as null (``READ_UNKNOWN_ENUM_VALUES_AS_NULL``); anything else is a 400."""

    def check(value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value < len(names):
                raise unreadable(value, kind)
            return names[value]
        if value is not None and not isinstance(value, str):
            raise unreadable(value, kind)
        return value if value in names else None

    return check


#: Pulsar's SchemaCompatibilityStrategy in declaration order (ordinals).
STRATEGY_ORDER = [
    "UNDEFINED",
    "ALWAYS_INCOMPATIBLE",
    "ALWAYS_COMPATIBLE",
    "BACKWARD",
    "FORWARD",
    "FULL",
    "BACKWARD_TRANSITIVE",
    "FORWARD_TRANSITIVE",
    "FULL_TRANSITIVE",
]
_AUTO_UPDATE_ORDER = [
    "AutoUpdateDisabled",
    "Backward",
    "Forward",
    "Full",
    "AlwaysCompatible",
    "BackwardTransitive",
    "ForwardTransitive",
    "FullTransitive",
]
_AUTH_MODES = ["None", "Prefix"]


def _strategy(value: Any) -> Any:
    # Unknown (and null) read as null, which Pulsar stores as UNDEFINED.
    return enum_value(STRATEGY_ORDER, "SchemaCompatibilityStrategy")(value) or "UNDEFINED"


def _auth_mode(value: Any) -> Any:
    return enum_value(_AUTH_MODES, "SubscriptionAuthMode")(value) or "None"


def check_persistence(value: Any) -> Any:
    """A ``PersistencePolicies`` body; Pulsar refuses quorums that cannot work (and a null body) with 400."""
    if value is None:
        raise AdminError(400, "PersistencePolicies must not be null")
    fields = {
        "bookkeeperEnsemble": 2,
        "bookkeeperWriteQuorum": 2,
        "bookkeeperAckQuorum": 2,
        "managedLedgerMaxMarkDeleteRate": -1.0,
    }
    policy = bean(value, "PersistencePolicies", fields)
    ensemble, write, ack = (policy[k] for k in list(fields)[:3])
    if not ensemble >= write >= ack > 0:
        raise AdminError(400, f"Bookkeeper Ensemble ({ensemble}) >= WriteQuorum ({write}) >= AckQuorum ({ack})")
    return policy


def check_subscription_types(value: Any) -> Any:
    """A set of subscription type names; an unknown one (or a null set) fails in Pulsar with a 500."""
    if value is None:
        raise AdminError(500, "Request failed.")
    if not isinstance(value, list):
        raise unreadable(value, "java.util.Set<SubscriptionType>")
    unknown = [t for t in value if t not in SUBSCRIPTION_TYPES]
    if unknown:
        # Pulsar reads an unknown name as null and fails on it with a NullPointerException (500).
        raise AdminError(500, f"Unknown subscription type: {unknown[0]}")
    return [t for t in SUBSCRIPTION_TYPES if t in value]  # in declaration order, as Pulsar writes the set


def check_entry_filters(value: Any) -> Any:
    """An ``EntryFilters`` body: none is installed here, as on a standalone Pulsar, so every name is not found."""
    names = bean(value, "EntryFilters", {"entryFilterNames": ""}).get("entryFilterNames") or ""
    if not names.strip():
        raise AdminError(400, "entryFilterNames can't be empty. To remove entry filters use the remove method.")
    raise AdminError(400, f"Entry filter '{names.split(',')[0].strip()}' not found")


#: The offload drivers Pulsar knows.
_OFFLOAD_DRIVERS = ("S3", "aws-s3", "google-cloud-storage", "filesystem", "azureblob", "aliyun-oss")


def check_offload_policies(value: Any) -> Any:
    """An ``OffloadPolicies`` body: one naming a driver Pulsar knows is kept; the others fail as Pulsar's do."""
    if value is None:
        raise AdminError(412, "The offloadPolicies must be specified for namespace offload.")
    policy = as_object(value, "OffloadPoliciesImpl")
    if policy.get("managedLedgerOffloadDriver") not in _OFFLOAD_DRIVERS:
        raise AdminError(412, f"The driver is not supported, support value: {','.join(_OFFLOAD_DRIVERS)}")
    return policy


def _string_set(value: Any) -> Any:
    if not isinstance(value, list):
        raise unreadable(value, "java.util.Set")
    return [as_string(item) for item in value]


#: Policies that are lists of clusters: the statuses Pulsar refuses an empty and a null list with.
_CLUSTER_LISTS = {"replication": (412, 412), "allowedClusters": (400, 500)}


def _clusters(value: Any, cluster: str, empty: int, null: int) -> Any:
    """A list of cluster names: Pulsar refuses a null or empty one (with the given statuses), and one naming a
    cluster it does not have with 403."""
    if value is None:
        raise AdminError(null, "ClusterIds should not be null or empty")
    if not isinstance(value, list):
        raise unreadable(value, "java.util.List")
    if not value:
        raise AdminError(empty, "ClusterIds should not be null or empty")
    names = [as_string(item) for item in value]
    unknown = [name for name in names if name != cluster]
    if unknown:
        raise AdminError(403, f"Invalid cluster id '{unknown[0]}'")
    return names


def _boxed_integer(minimum: int, reason: str) -> Check:
    """An ``Integer`` body: null stays null (the policy removed)."""
    check = check_integer(minimum, reason)
    return lambda value: None if value is None else check(value)


def backlog_quota_of(call: Call, invalid: str) -> tuple[str, BacklogQuota | None]:
    """The quota type (``backlogQuotaType``, destination_storage by default) and the quota a set request carries
    (None for a null body); a quota that cannot be read is a 400 whose reason starts with ``invalid``."""
    body = call.json(required=True)
    kind = call.query.get("backlogQuotaType") or QuotaType.DESTINATION_STORAGE
    if body is None:
        return kind, None
    body = _of_type(dict, "BacklogQuota")(body)
    if kind not in QuotaType.__members__.values():
        raise AdminError(400, f"Invalid backlog quota type: {kind}")
    if body.get("policy") is None:
        raise AdminError(400, f"{invalid} the attribute policy cannot be null")
    try:
        return kind, BacklogQuota.from_policy(body)
    except (TypeError, ValueError) as exc:
        raise AdminError(400, f"{invalid} {exc}") from None


#: ``endpoint: (Policies field, method that sets it, check of the body)``. GET returns the field (200 without a
#: body when unset), DELETE removes it. The first five change the engine's behaviour; the others are stored.
POLICIES: dict[str, tuple[str, str, Check]] = {
    "messageTTL": (
        "message_ttl_in_seconds",
        "POST",
        check_integer(0, "Invalid value for message TTL, message TTL must >= 0"),
    ),
    "deduplication": ("deduplicationEnabled", "POST", check_boolean),
    "retention": ("retention_policies", "POST", check_retention),
    "autoTopicCreation": ("autoTopicCreationOverride", "POST", _auto_topic_creation),
    "schemaCompatibilityStrategy": ("schema_compatibility_strategy", "PUT", _strategy),
    "autoSubscriptionCreation": (
        "autoSubscriptionCreationOverride",
        "POST",
        lambda value: bean(value, "AutoSubscriptionCreationOverride", {"allowAutoSubscriptionCreation": False}),
    ),
    "schemaValidationEnforced": ("schema_validation_enforced", "POST", check_boolean),
    "isAllowAutoUpdateSchema": ("is_allow_auto_update_schema", "POST", check_boolean),
    "schemaAutoUpdateCompatibilityStrategy": (
        "schema_auto_update_compatibility_strategy",
        "PUT",
        enum_value(_AUTO_UPDATE_ORDER, "SchemaAutoUpdateCompatibilityStrategy"),
    ),
    "subscriptionExpirationTime": (
        "subscription_expiration_time_minutes",
        "POST",
        check_integer(0, "Invalid value for subscription expiration time"),
    ),
    "persistence": ("persistence", "POST", check_persistence),
    "delayedDelivery": (
        "delayed_delivery_policies",
        "POST",
        lambda value: bean(
            value, "DelayedDeliveryPolicies", {"tickTime": 0, "active": False, "maxDeliveryDelayInMillis": 0}
        ),
    ),
    "inactiveTopicPolicies": (
        "inactive_topic_policies",
        "POST",
        lambda value: bean(
            value,
            "InactiveTopicPolicies",
            {"inactiveTopicDeleteMode": None, "maxInactiveDurationSeconds": 0, "deleteWhileInactive": False},
        ),
    ),
    "offloadPolicies": ("offload_policies", "POST", check_offload_policies),
    "entryFilters": ("entryFilters", "POST", check_entry_filters),
    "subscriptionTypesEnabled": ("subscription_types_enabled", "POST", check_subscription_types),
    "allowedTopicPropertyKeysForMetrics": ("allowed_topic_property_keys_for_metrics", "POST", _string_set),
    # Checked against this endpoint's cluster (see _CLUSTER_LISTS).
    "replication": ("replication_clusters", "POST", lambda value: value),
    "allowedClusters": ("allowed_clusters", "POST", lambda value: value),
    "encryptionRequired": ("encryption_required", "POST", check_boolean),
    "subscriptionAuthMode": ("subscription_auth_mode", "POST", _auth_mode),
    "deduplicationSnapshotInterval": (
        "deduplicationSnapshotIntervalSeconds",
        "POST",
        _boxed_integer(0, "interval must be greater than or equal to 0"),
    ),
    "compactionThreshold": ("compaction_threshold", "PUT", check_integer(0, "compactionThreshold must be 0 or more")),
    "offloadThreshold": ("offload_threshold", "PUT", check_integer(None, "")),
    "offloadThresholdInSeconds": ("offload_threshold_in_seconds", "PUT", check_integer(None, "")),
    "offloadDeletionLagMs": ("offload_deletion_lag_ms", "PUT", check_integer(None, "")),
    "maxProducersPerTopic": (
        "max_producers_per_topic",
        "POST",
        check_integer(0, "maxProducersPerTopic must be 0 or more"),
    ),
    "maxConsumersPerTopic": (
        "max_consumers_per_topic",
        "POST",
        check_integer(0, "maxConsumersPerTopic must be 0 or more"),
    ),
    "maxConsumersPerSubscription": (
        "max_consumers_per_subscription",
        "POST",
        check_integer(0, "maxConsumersPerSubscription must be 0 or more"),
    ),
    "maxUnackedMessagesPerConsumer": (
        "max_unacked_messages_per_consumer",
        "POST",
        check_integer(0, "maxUnackedMessagesPerConsumer must be 0 or more"),
    ),
    "maxUnackedMessagesPerSubscription": (
        "max_unacked_messages_per_subscription",
        "POST",
        check_integer(0, "maxUnackedMessagesPerSubscription must be 0 or more"),
    ),
    "maxSubscriptionsPerTopic": (
        "max_subscriptions_per_topic",
        "POST",
        check_integer(0, "maxSubscriptionsPerTopic must be 0 or more"),
    ),
    "maxTopicsPerNamespace": (
        "max_topics_per_namespace",
        "POST",
        check_integer(0, "maxTopicsPerNamespace must be 0 or more"),
    ),
}

#: Policies a null body removes (objects and boxed values: Jackson reads null, and Pulsar stores it).
_NULL_REMOVES = {
    "autoSubscriptionCreation",
    "autoTopicCreation",
    "delayedDelivery",
    "inactiveTopicPolicies",
    "entryFilters",
    "retention",
    "allowedTopicPropertyKeysForMetrics",
}

#: Policies whose GET answers 204 (not 200 without a body) when they are not set.
_ABSENT_204 = {"schemaAutoUpdateCompatibilityStrategy"}

#: Policies whose set answers 200 (without a body) on Pulsar.
_ANSWERED_200 = {"offloadThresholdInSeconds", "replication", "allowedClusters"}

#: Policies Pulsar has no DELETE for (they are set to another value instead; a DELETE answers 405).
_NOT_REMOVED = {
    "allowedClusters",
    "deduplicationSnapshotInterval",
    "encryptionRequired",
    "isAllowAutoUpdateSchema",
    "offloadPolicies",
    "offloadThreshold",
    "offloadThresholdInSeconds",
    "replication",
    "schemaAutoUpdateCompatibilityStrategy",
    "schemaCompatibilityStrategy",
    "schemaValidationEnforced",
    "subscriptionAuthMode",
}

#: Rate policies kept per cluster: ``endpoint: Policies field`` (a map keyed by the cluster name).
CLUSTER_POLICIES = {
    "dispatchRate": "topicDispatchRate",
    "subscriptionDispatchRate": "subscriptionDispatchRate",
    "replicatorDispatchRate": "replicatorDispatchRate",
    "publishRate": "publishMaxMessageRate",
    "subscribeRate": "clusterSubscribeRate",
}


_DISPATCH_RATE = {
    "dispatchThrottlingRateInMsg": 0,
    "dispatchThrottlingRateInByte": 0,
    "relativeToPublishRate": False,
    "ratePeriodInSecond": 0,
}
#: The bean each rate policy is read as, with the defaults of a missing field.
_RATE_BEANS: dict[str, tuple[str, dict[str, Any]]] = {
    "dispatchRate": ("DispatchRate", _DISPATCH_RATE),
    "subscriptionDispatchRate": ("DispatchRate", _DISPATCH_RATE),
    "replicatorDispatchRate": ("DispatchRate", _DISPATCH_RATE),
    "publishRate": ("PublishRate", {"publishThrottlingRateInMsg": -1, "publishThrottlingRateInByte": -1}),
    "subscribeRate": ("SubscribeRate", {"subscribeThrottlingRatePerConsumer": -1, "ratePeriodInSecond": 30}),
}


def register(router: Router, ctx: AdminContext) -> None:
    """Add the tenant and namespace routes."""
    namespaces = ctx.broker.namespaces

    def tenant_info(value: Any) -> dict[str, Any]:
        if value is not None and not isinstance(value, dict):
            raise AdminError(400, f"Cannot construct instance of `TenantInfoImpl` from {value!r}")
        clusters = value.get("allowedClusters") if isinstance(value, dict) else None
        if not clusters or any(not isinstance(c, str) or not c.strip() for c in clusters):
            raise AdminError(412, "Clusters can not be empty")
        unknown = sorted(c for c in clusters if c != ctx.cluster)
        if unknown:
            raise AdminError(412, "Clusters do not exist")
        return {"adminRoles": list(value.get("adminRoles") or []), "allowedClusters": list(clusters)}

    def require_tenant(tenant: str) -> None:
        if tenant not in namespaces.tenants:
            raise AdminError(404, "Tenant does not exist")

    def require_namespace(call: Call) -> str:
        namespace = f"{call['tenant']}/{call['namespace']}"
        if namespace not in namespaces:
            raise AdminError(404, "Namespace does not exist")
        return namespace

    # -- tenants -----------------------------------------------------------------------------

    @router.route("GET", V2 + "/tenants")
    def list_tenants(call: Call) -> Any:
        return sorted(namespaces.tenants)

    @router.route("GET", V2 + "/tenants/{tenant}")
    def get_tenant(call: Call) -> Any:
        require_tenant(call["tenant"])
        return namespaces.tenants[call["tenant"]]

    @router.route("PUT", V2 + "/tenants/{tenant}")
    def create_tenant(call: Call) -> Any:
        info = tenant_info(call.json())
        tenant = call["tenant"]
        if not valid_name(tenant):
            raise AdminError(412, "Tenant name is not valid")
        if tenant in namespaces.tenants:
            raise AdminError(409, "Tenant already exist")
        namespaces.create_tenant(tenant, info)
        return None

    @router.route("POST", V2 + "/tenants/{tenant}")
    def update_tenant(call: Call) -> Any:
        info = tenant_info(call.json())
        tenant = call["tenant"]
        if tenant not in namespaces.tenants:
            raise AdminError(404, f"Tenant {tenant} not found")
        namespaces.create_tenant(tenant, info)
        return None

    @router.route("DELETE", V2 + "/tenants/{tenant}")
    def delete_tenant(call: Call) -> Any:
        tenant = call["tenant"]
        if tenant not in namespaces.tenants:
            raise AdminError(404, "Tenant doesn't exist")
        if call.flag("force"):
            # A standalone Pulsar runs with forceDeleteTenantAllowed=false.
            raise AdminError(405, "Broker doesn't allow forced deletion of tenants")
        if namespaces.names(tenant):
            raise AdminError(409, "The tenant still has active namespaces")
        namespaces.delete_tenant(tenant)
        return None

    # -- namespaces ---------------------------------------------------------------------------

    @router.route("GET", V2 + "/namespaces/{tenant}")
    def list_namespaces(call: Call) -> Any:
        require_tenant(call["tenant"])
        return namespaces.names(call["tenant"])

    @router.route("PUT", NS)
    def create_namespace(call: Call) -> Any:
        body = call.json()
        if body is not None and not isinstance(body, dict):
            raise AdminError(400, "Cannot deserialize the body as Policies")
        tenant, local = call["tenant"], call["namespace"]
        if not valid_name(local):
            raise AdminError(412, "Namespace name is not valid")
        require_tenant(tenant)
        namespace = f"{tenant}/{local}"
        if namespace in namespaces:
            raise AdminError(409, "Namespace already exists")
        given = {k: v for k, v in (body or {}).items() if v is not None and k != "deleted"}
        for cluster in given.get("replication_clusters") or []:
            if cluster != ctx.cluster:
                raise AdminError(412, f"Cluster {cluster} does not exist.")
        # As Pulsar's Policies of a namespace created through the API: an empty set of subscription types.
        given.setdefault("subscription_types_enabled", [])
        if not given.get("replication_clusters"):
            # As Pulsar: a namespace created without replication clusters replicates to its own cluster.
            given.pop("replication_clusters", None)
        for key in ("messageTTL", "retention", "autoTopicCreation", "schemaCompatibilityStrategy"):
            field, _, check = POLICIES[key]
            if given.get(field) is not None:
                given[field] = check(given[field])
        namespaces.create_namespace(namespace, given)
        return None

    @router.route("GET", NS)
    def get_policies(call: Call) -> Any:
        return namespaces.policies(require_namespace(call))

    @router.route("DELETE", NS)
    def delete_namespace(call: Call) -> Any:
        namespace = require_namespace(call)
        if call.flag("force"):
            # A standalone Pulsar runs with forceDeleteNamespaceAllowed=false.
            raise AdminError(405, "Broker doesn't allow forced deletion of namespaces")
        if namespace_topics(ctx, namespace) or ctx.broker.partitioned_topics(namespace):
            raise AdminError(409, "Cannot delete non empty namespace")
        namespaces.delete_namespace(namespace)
        return None

    @router.route("GET", NS + "/topics")
    def topics_of(call: Call) -> Any:
        namespace = require_namespace(call)
        mode = (call.query.get("mode") or "PERSISTENT").upper()
        return [] if mode == "NON_PERSISTENT" else namespace_topics(ctx, namespace)

    @router.route("GET", NS + "/bundles")
    def bundles(call: Call) -> Any:
        return namespaces.policies(require_namespace(call))["bundles"]

    @router.route("PUT", NS + "/unload")
    def unload(call: Call) -> Any:
        namespace = require_namespace(call)
        for name in list(ctx.broker.topics):
            if ctx.broker.topics[name].name.namespace_name == namespace:
                ctx.broker.unload(ctx.broker.topics[name])
        return None

    # -- policies -----------------------------------------------------------------------------

    def policy_routes(endpoint: str, field: str, method: str, check: Check) -> None:
        def get(call: Call) -> Any:
            value = namespaces.policies(require_namespace(call)).get(field)
            if value is None and endpoint in _ABSENT_204:
                return None
            return absent_reply() if value is None else value

        def put(call: Call) -> Any:
            namespace = require_namespace(call)
            body = call.json(required=True)
            if endpoint in _CLUSTER_LISTS:
                value = _clusters(body, ctx.cluster, *_CLUSTER_LISTS[endpoint])
            else:
                value = None if body is None and endpoint in _NULL_REMOVES else check(body)
            namespaces.set_policy(namespace, field, value)
            # Pulsar's resource for this one answers 200 without a body, the others 204.
            return absent_reply() if endpoint in _ANSWERED_200 else None

        def delete(call: Call) -> Any:
            namespaces.set_policy(require_namespace(call), field, None)
            return None

        router.add("GET", f"{NS}/{endpoint}", get)
        router.add(method, f"{NS}/{endpoint}", put)
        if endpoint not in _NOT_REMOVED:
            router.add("DELETE", f"{NS}/{endpoint}", delete)

    for endpoint, (field, method, check) in POLICIES.items():
        policy_routes(endpoint, field, method, check)

    def cluster_policy_routes(endpoint: str, field: str) -> None:
        def get(call: Call) -> Any:
            value = namespaces.policies(require_namespace(call)).get(field, {}).get(ctx.cluster)
            return absent_reply() if value is None else value

        def post(call: Call) -> Any:
            namespace = require_namespace(call)
            body = call.json(required=True)
            current = dict(namespaces.policy(namespace, field) or {})
            if body is None:
                current.pop(ctx.cluster, None)  # Jackson reads null, which removes the rate
            else:
                current[ctx.cluster] = bean(body, _RATE_BEANS[endpoint][0], _RATE_BEANS[endpoint][1])
            namespaces.set_policy(namespace, field, current or None)
            return None

        def delete(call: Call) -> Any:
            namespace = require_namespace(call)
            current = dict(namespaces.policy(namespace, field) or {})
            current.pop(ctx.cluster, None)
            namespaces.set_policy(namespace, field, current or None)
            return None

        router.add("GET", f"{NS}/{endpoint}", get)
        router.add("POST", f"{NS}/{endpoint}", post)
        router.add("DELETE", f"{NS}/{endpoint}", delete)

    for endpoint, field in CLUSTER_POLICIES.items():
        cluster_policy_routes(endpoint, field)

    @router.route("GET", NS + "/persistence/bookieAffinity")
    def bookie_affinity(call: Call) -> Any:
        namespace = require_namespace(call)
        value = namespaces.policy(namespace, _BOOKIE_AFFINITY)
        if value is None and not _has_local_policies(namespace):
            raise AdminError(404, "Namespace local-policies does not exist")
        # A group read from an empty body is an empty object; "" (or nothing) is no group.
        return absent_reply() if value in (None, "") else value

    def _has_local_policies(namespace: str) -> bool:
        """Pulsar keeps the group in the namespace's local policies, which a namespace has once a group was set or
        once one of its topics was loaded (its bundle owned)."""
        broker = ctx.broker
        return bool(
            broker.topics_of_namespace(namespace)
            or broker.partitioned_topics(namespace)
            or broker.non_persistent_topics(namespace)
        )

    @router.route("POST", NS + "/persistence/bookieAffinity")
    def set_bookie_affinity(call: Call) -> Any:
        namespace = require_namespace(call)
        body = call.json(required=True)
        if body is None:
            # Jackson reads null as no group: the namespace gets local policies without one.
            namespaces.set_policy(namespace, _BOOKIE_AFFINITY, "")
            return None
        fields = {"bookkeeperAffinityGroupPrimary": None, "bookkeeperAffinityGroupSecondary": None}
        value = bean(body, "BookieAffinityGroupData", fields)
        if value.get("bookkeeperAffinityGroupPrimary") == "":
            raise AdminError(412, "Bookkeeper affinity group primary can't be empty")
        namespaces.set_policy(namespace, _BOOKIE_AFFINITY, value)
        return None

    @router.route("DELETE", NS + "/persistence/bookieAffinity")
    def remove_bookie_affinity(call: Call) -> Any:
        namespace = require_namespace(call)
        if namespaces.policy(namespace, _BOOKIE_AFFINITY) is not None:
            namespaces.set_policy(namespace, _BOOKIE_AFFINITY, "")
        return None

    @router.route("GET", NS + "/antiAffinity")
    def anti_affinity(call: Call) -> Any:
        value = namespaces.policy(require_namespace(call), _ANTI_AFFINITY)
        return absent_reply() if value is None else text_reply(value)

    @router.route("POST", NS + "/antiAffinity")
    def set_anti_affinity(call: Call) -> Any:
        namespace = require_namespace(call)
        body = call.body.decode("utf-8", "replace").strip()
        group = call.json() if body.startswith('"') else body
        if not isinstance(group, str) or not group:
            raise AdminError(412, "antiAffinityGroup can't be empty")
        namespaces.set_policy(namespace, _ANTI_AFFINITY, group)
        return None

    @router.route("DELETE", NS + "/antiAffinity")
    def remove_anti_affinity(call: Call) -> Any:
        namespaces.set_policy(require_namespace(call), _ANTI_AFFINITY, None)
        return None

    @router.route("GET", V2 + "/namespaces/{cluster}/antiAffinity/{group}")
    def anti_affinity_namespaces(call: Call) -> Any:
        tenant = call.query.get("tenant") or ""
        if call["cluster"] != ctx.cluster:
            raise AdminError(404, "Cluster does not exist")
        require_tenant(tenant)
        # Pulsar lists the namespaces of the group whose name holds that cluster (tenant/cluster/namespace, the
        # deprecated v1 form); namespaces here are all tenant/namespace.
        return []

    @router.route("GET", NS + "/dispatcherPauseOnAckStatePersistent")
    def dispatcher_pause(call: Call) -> Any:
        return bool(namespaces.policy(require_namespace(call), _DISPATCHER_PAUSE))

    @router.route("POST", NS + "/dispatcherPauseOnAckStatePersistent")
    def set_dispatcher_pause(call: Call) -> Any:
        namespaces.set_policy(require_namespace(call), _DISPATCHER_PAUSE, True)
        return None

    @router.route("DELETE", NS + "/dispatcherPauseOnAckStatePersistent")
    def remove_dispatcher_pause(call: Call) -> Any:
        namespaces.set_policy(require_namespace(call), _DISPATCHER_PAUSE, None)
        return None

    @router.route("DELETE", NS + "/removeOffloadPolicies")
    def remove_offload_policies(call: Call) -> Any:
        namespaces.set_policy(require_namespace(call), "offload_policies", None)
        return None

    def subscriptions_of(namespace: str, sub_name: str | None) -> list[Subscription]:
        subs = []
        for name in namespace_topics(ctx, namespace):
            topic = ctx.broker.topic(name, create=False)
            subs.extend(s for n, s in topic.subscriptions.items() if sub_name in (None, n))
        return subs

    def clear_backlog(call: Call) -> Any:
        for sub in subscriptions_of(require_namespace(call), call.params.get("subscription")):
            sub.acknowledge_upto(sub.topic.read_limit)
        return ctx.committed()

    router.add("POST", NS + "/clearBacklog", clear_backlog)
    router.add("POST", NS + "/clearBacklog/{subscription}", clear_backlog)

    @router.route("POST", NS + "/unsubscribe/{subscription}")
    def unsubscribe(call: Call) -> Any:
        subs = subscriptions_of(require_namespace(call), call["subscription"])
        if any(s.consumers for s in subs):
            raise AdminError(412, "Subscription has active connected consumers")
        for sub in subs:
            sub.topic.remove_subscription(sub)
        return ctx.committed()

    @router.route("GET", NS + "/backlogQuotaMap")
    def backlog_quotas(call: Call) -> Any:
        return namespaces.policies(require_namespace(call))["backlog_quota_map"]

    @router.route("POST", NS + "/backlogQuota")
    def set_backlog_quota(call: Call) -> Any:
        namespace = require_namespace(call)
        kind, quota = backlog_quota_of(call, "Invalid backlog quota:")
        if quota is None:
            raise AdminError(500, "Request failed.")  # Pulsar's resource dereferences the missing quota
        current = dict(namespaces.policy(namespace, "backlog_quota_map") or {})
        current[kind] = quota.to_policy()
        namespaces.set_policy(namespace, "backlog_quota_map", current)
        return None

    @router.route("DELETE", NS + "/backlogQuota")
    def remove_backlog_quota(call: Call) -> Any:
        namespace = require_namespace(call)
        current = dict(namespaces.policy(namespace, "backlog_quota_map") or {})
        current.pop(call.query.get("backlogQuotaType") or "destination_storage", None)
        namespaces.set_policy(namespace, "backlog_quota_map", current or None)
        return None

    @router.route("GET", NS + "/properties")
    def get_properties(call: Call) -> Any:
        return namespaces.policies(require_namespace(call))["properties"]

    @router.route("PUT", NS + "/properties")
    def set_properties(call: Call) -> Any:
        namespace = require_namespace(call)
        # Pulsar's map holds no null values: a key given null is removed.
        current = dict(namespaces.policy(namespace, "properties") or {})
        for key, value in string_map(call.json(required=True)).items():
            if value is None:
                current.pop(key, None)
            else:
                current[key] = value
        namespaces.set_policy(namespace, "properties", current)
        return None

    @router.route("DELETE", NS + "/properties")
    def clear_properties(call: Call) -> Any:
        namespaces.set_policy(require_namespace(call), "properties", None)
        return None

    @router.route("PUT", NS + "/property/{key}/{value}")
    def set_property(call: Call) -> Any:
        namespace = require_namespace(call)
        current = dict(namespaces.policy(namespace, "properties") or {})
        current[call["key"]] = call["value"]
        namespaces.set_policy(namespace, "properties", current)
        return None

    @router.route("GET", NS + "/property/{key}")
    def get_property(call: Call) -> Any:
        value = namespaces.policies(require_namespace(call))["properties"].get(call["key"])
        return None if value is None else text_reply(value)

    @router.route("DELETE", NS + "/property/{key}")
    def remove_property(call: Call) -> Any:
        namespace = require_namespace(call)
        current = dict(namespaces.policy(namespace, "properties") or {})
        removed = current.pop(call["key"], None)
        namespaces.set_policy(namespace, "properties", current or None)
        return None if removed is None else text_reply(removed)
