"""Who may call which admin route, checked before the route runs, as Pulsar 4.2.4's web resources check it.

Each route has a :class:`Rule`: the validation Pulsar's resource method runs (``validateSuperUserAccess``,
``validateTenantOperation``, ``validateNamespaceOperation``, ``validateNamespacePolicyOperation``,
``validateTopicOperation``, ``validateTopicPolicyOperation``, ``validateAdminAccessForTenant``, and the "both
super-user and ..." checks of tenants, brokers and clusters), with the operation and policy names its refusal
message carries; the status (401 or 403) and text are Pulsar's. The table was read off a Pulsar 4.2.4 standalone
with authentication and authorization enabled, refusing a role without any grant on every route.

As in Pulsar, nothing is checked unless authorization is enabled and the request authenticated (``Call.role`` is
None when authentication is disabled). A check that needs the admins of a tenant that does not exist answers 404; the
routes Pulsar guards with ``validateAdminAccessForTenant`` answer that 404 to everyone, even with authorization off.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

from engine.authorization import Authorization, TenantNotFoundError
from engine.coordinator import COORDINATOR_ASSIGN_TOPIC
from engine.names import TopicName
from proxy.admin.context import AdminContext
from proxy.admin.http import AdminError, Call, Handler


class Check(Enum):
    """The kinds of validation Pulsar's admin resources run."""

    OPEN = auto()
    SUPER_USER = auto()
    #: ``validateBothSuperuserAndBrokerOperation`` / ``...ClusterOperation``: super-users only.
    BROKER = auto()
    CLUSTER = auto()
    #: ``validateBothSuperUserAndTenantOperation``: a super-user, or an admin of the (existing) tenant.
    TENANTS = auto()
    #: ``validateTenantOperation``: an admin of the tenant.
    TENANT = auto()
    #: ``validateAdminAccessForTenant``.
    TENANT_ADMIN = auto()
    NAMESPACE = auto()
    NAMESPACE_POLICY = auto()
    TOPIC = auto()
    TOPIC_POLICY = auto()


@dataclass(frozen=True)
class Rule:
    """One route's check: its kind, the operation and policy named in a refusal, and for a topic operation on a
    fixed topic (the transaction coordinators' admin routes) that topic."""

    check: Check
    operation: str = ""
    policy: str = ""
    topic: str | None = None
    #: Whether the route looks its tenant up before anything else, whoever asks (``validateAdminAccessForTenant``).
    tenant_first: bool = False


OPEN = Rule(Check.OPEN)
SUPER_USER = Rule(Check.SUPER_USER)
TENANT_ADMIN = Rule(Check.TENANT_ADMIN, tenant_first=True)
#: A route this table does not list yet, under a tenant: its admins (and super-users) only.
UNLISTED = Rule(Check.TENANT_ADMIN)
COORDINATOR_LOOKUP = Rule(Check.TOPIC, "LOOKUP", topic=COORDINATOR_ASSIGN_TOPIC)


def _namespace(operation: str) -> Rule:
    return Rule(Check.NAMESPACE, operation)


def _topic(operation: str) -> Rule:
    return Rule(Check.TOPIC, operation)


NS = "admin/v2/namespaces/{tenant}/{namespace}"
TOPIC = "admin/v2/{domain}/{tenant}/{namespace}/{topic}"
SUBSCRIPTION = TOPIC + "/subscription/{sub}"
SCHEMA = "admin/v2/schemas/{tenant}/{namespace}/{topic}"
TXN = "admin/v3/transactions"

#: Namespace policy routes (``NS/<endpoint>``) by the policy Pulsar names: GET reads it, the other methods write it.
NAMESPACE_POLICIES = {
    "allowedClusters": "ALLOW_CLUSTERS",
    "allowedTopicPropertyKeysForMetrics": "ALLOW_CUSTOM_METRIC_LABELS",
    "autoSubscriptionCreation": "AUTO_SUBSCRIPTION_CREATION",
    "autoTopicCreation": "AUTO_TOPIC_CREATION",
    "backlogQuota": "BACKLOG",
    "backlogQuotaMap": "BACKLOG",
    "compactionThreshold": "COMPACTION",
    "deduplication": "DEDUPLICATION",
    "deduplicationSnapshotInterval": "DEDUPLICATION_SNAPSHOT",
    "delayedDelivery": "DELAYED_DELIVERY",
    "dispatchRate": "RATE",
    "encryptionRequired": "ENCRYPTION",
    "entryFilters": "ENTRY_FILTERS",
    "inactiveTopicPolicies": "INACTIVE_TOPIC",
    "isAllowAutoUpdateSchema": "SCHEMA_COMPATIBILITY_STRATEGY",
    "maxConsumersPerSubscription": "MAX_CONSUMERS",
    "maxConsumersPerTopic": "MAX_CONSUMERS",
    "maxProducersPerTopic": "MAX_PRODUCERS",
    "maxSubscriptionsPerTopic": "MAX_SUBSCRIPTIONS",
    "maxTopicsPerNamespace": "MAX_TOPICS",
    "maxUnackedMessagesPerConsumer": "MAX_UNACKED",
    "maxUnackedMessagesPerSubscription": "MAX_UNACKED",
    "messageTTL": "TTL",
    "offloadDeletionLagMs": "OFFLOAD",
    "offloadPolicies": "OFFLOAD",
    "offloadThreshold": "OFFLOAD",
    "offloadThresholdInSeconds": "OFFLOAD",
    "persistence": "PERSISTENCE",
    "publishRate": "RATE",
    "replication": "REPLICATION",
    "replicatorDispatchRate": "REPLICATION_RATE",
    "retention": "RETENTION",
    "schemaAutoUpdateCompatibilityStrategy": "SCHEMA_COMPATIBILITY_STRATEGY",
    "schemaCompatibilityStrategy": "SCHEMA_COMPATIBILITY_STRATEGY",
    "schemaValidationEnforced": "SCHEMA_COMPATIBILITY_STRATEGY",
    "subscribeRate": "RATE",
    "subscriptionAuthMode": "SUBSCRIPTION_AUTH_MODE",
    "subscriptionDispatchRate": "RATE",
    "subscriptionExpirationTime": "SUBSCRIPTION_EXPIRATION_TIME",
    "subscriptionTypesEnabled": "SUBSCRIPTION_AUTH_MODE",
}
#: Topic policy routes (``TOPIC/<endpoint>``), likewise.
TOPIC_POLICIES = {
    "backlogQuota": "BACKLOG",
    "backlogQuotaMap": "BACKLOG",
    "compactionThreshold": "COMPACTION",
    "deduplicationEnabled": "DEDUPLICATION",
    "messageTTL": "TTL",
    "partitions": "PARTITION",
    "policies": "MAX_PRODUCERS",
    "retention": "RETENTION",
}
#: Every other route's rule, by ``(method, pattern)``.
RULES: dict[tuple[str, str], Rule] = {
    ("GET", "metrics"): OPEN,
    ("GET", "admin/v2/clusters"): OPEN,
    ("GET", "admin/v2/clusters/{cluster}"): Rule(Check.CLUSTER, "GET_CLUSTER"),
    ("GET", "admin/v2/brokers"): Rule(Check.BROKER, "LIST_BROKERS"),
    ("GET", "admin/v2/brokers/{cluster}"): Rule(Check.BROKER, "LIST_BROKERS"),
    ("GET", "admin/v2/brokers/configuration/runtime"): Rule(Check.BROKER, "LIST_RUNTIME_CONFIGURATIONS"),
    ("GET", "admin/v2/brokers/health"): Rule(Check.BROKER, "HEALTH_CHECK"),
    ("GET", "admin/v2/brokers/leaderBroker"): Rule(Check.BROKER, "GET_LEADER_BROKER"),
    ("GET", "admin/v2/brokers/ready"): OPEN,
    ("GET", "admin/v2/brokers/version"): OPEN,
    ("GET", "lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}"): _topic("LOOKUP"),
    # tenants
    ("GET", "admin/v2/tenants"): Rule(Check.TENANTS, "LIST_TENANTS"),
    ("GET", "admin/v2/tenants/{tenant}"): Rule(Check.TENANTS, "GET_TENANT"),
    ("PUT", "admin/v2/tenants/{tenant}"): Rule(Check.TENANTS, "CREATE_TENANT"),
    ("POST", "admin/v2/tenants/{tenant}"): Rule(Check.TENANTS, "UPDATE_TENANT"),
    ("DELETE", "admin/v2/tenants/{tenant}"): Rule(Check.TENANTS, "DELETE_TENANT"),
    # namespaces
    ("GET", "admin/v2/namespaces/{tenant}"): Rule(Check.TENANT, "LIST_NAMESPACES"),
    ("PUT", NS): Rule(Check.TENANT, "CREATE_NAMESPACE"),
    ("DELETE", NS): Rule(Check.TENANT, "DELETE_NAMESPACE"),
    ("GET", NS): Rule(Check.NAMESPACE_POLICY, "READ", "ALL"),
    ("GET", NS + "/bundles"): _namespace("GET_BUNDLE"),
    ("GET", NS + "/topics"): _namespace("GET_TOPICS"),
    ("PUT", NS + "/unload"): SUPER_USER,
    ("POST", NS + "/delayedDelivery"): SUPER_USER,
    ("DELETE", NS + "/delayedDelivery"): SUPER_USER,
    ("GET", NS + "/properties"): TENANT_ADMIN,
    ("PUT", NS + "/properties"): TENANT_ADMIN,
    ("DELETE", NS + "/properties"): TENANT_ADMIN,
    ("GET", NS + "/property/{key}"): TENANT_ADMIN,
    ("DELETE", NS + "/property/{key}"): TENANT_ADMIN,
    ("PUT", NS + "/property/{key}/{value}"): TENANT_ADMIN,
    # permissions
    ("GET", NS + "/permissions"): _namespace("GET_PERMISSION"),
    ("POST", NS + "/permissions/{role}"): _namespace("GRANT_PERMISSION"),
    ("DELETE", NS + "/permissions/{role}"): _namespace("REVOKE_PERMISSION"),
    ("GET", NS + "/permissions/subscription"): _namespace("GET_PERMISSION"),
    ("POST", NS + "/permissions/subscription/{sub}"): _namespace("GRANT_PERMISSION"),
    ("DELETE", NS + "/permissions/{sub}/{role}"): _namespace("REVOKE_PERMISSION"),
    ("GET", TOPIC + "/permissions"): TENANT_ADMIN,
    ("POST", TOPIC + "/permissions/{role}"): TENANT_ADMIN,
    ("DELETE", TOPIC + "/permissions/{role}"): TENANT_ADMIN,
    # topics
    ("GET", "admin/v2/{domain}/{tenant}/{namespace}"): _namespace("GET_TOPICS"),
    ("GET", "admin/v2/{domain}/{tenant}/{namespace}/partitioned"): _namespace("GET_TOPICS"),
    ("PUT", TOPIC): _namespace("CREATE_TOPIC"),
    ("DELETE", TOPIC): _namespace("DELETE_TOPIC"),
    ("DELETE", TOPIC + "/partitions"): _namespace("DELETE_TOPIC"),
    ("GET", TOPIC + "/partitions"): _topic("LOOKUP"),
    ("POST", TOPIC + "/createMissedPartitions"): _topic("LOOKUP"),
    ("GET", TOPIC + "/stats"): _topic("GET_STATS"),
    ("GET", TOPIC + "/internalStats"): _topic("GET_STATS"),
    ("GET", TOPIC + "/partitioned-stats"): _topic("GET_STATS"),
    ("GET", TOPIC + "/partitioned-internalStats"): _topic("GET_STATS"),
    ("GET", TOPIC + "/subscriptions"): _topic("GET_SUBSCRIPTIONS"),
    ("GET", TOPIC + "/compaction"): _topic("COMPACT"),
    ("PUT", TOPIC + "/compaction"): _topic("COMPACT"),
    ("POST", TOPIC + "/terminate"): _topic("TERMINATE"),
    ("POST", TOPIC + "/terminate/partitions"): _topic("TERMINATE"),
    ("PUT", TOPIC + "/unload"): _topic("UNLOAD"),
    ("POST", TOPIC + "/trim"): _topic("TRIM_TOPIC"),
    ("GET", TOPIC + "/examinemessage"): _topic("PEEK_MESSAGES"),
    ("GET", TOPIC + "/lastMessageId"): _topic("PEEK_MESSAGES"),
    ("GET", TOPIC + "/ledger/{ledger}/entry/{entry}"): _topic("PEEK_MESSAGES"),
    ("GET", TOPIC + "/messageid/{timestamp}"): _topic("PEEK_MESSAGES"),
    ("POST", TOPIC + "/all_subscription/expireMessages/{seconds}"): _topic("EXPIRE_MESSAGES"),
    ("PUT", SUBSCRIPTION): _topic("SUBSCRIBE"),
    ("DELETE", SUBSCRIPTION): _topic("UNSUBSCRIBE"),
    ("POST", SUBSCRIPTION + "/expireMessages/{seconds}"): _topic("EXPIRE_MESSAGES"),
    ("GET", SUBSCRIPTION + "/position/{position}"): _topic("PEEK_MESSAGES"),
    ("POST", SUBSCRIPTION + "/resetcursor"): _topic("RESET_CURSOR"),
    ("POST", SUBSCRIPTION + "/resetcursor/{timestamp}"): _topic("RESET_CURSOR"),
    ("POST", SUBSCRIPTION + "/skip/{count}"): _topic("SKIP"),
    ("POST", SUBSCRIPTION + "/skip_all"): _topic("SKIP"),
    # schemas
    ("GET", SCHEMA + "/schema"): _topic("GET_METADATA"),
    ("GET", SCHEMA + "/schema/{version}"): _topic("GET_METADATA"),
    ("GET", SCHEMA + "/schemas"): _topic("GET_METADATA"),
    ("POST", SCHEMA + "/schema"): _topic("PRODUCE"),
    ("DELETE", SCHEMA + "/schema"): TENANT_ADMIN,
    ("POST", SCHEMA + "/compatibility"): TENANT_ADMIN,
    # transactions: a transaction's metadata, a coordinator's internal stats and the per-topic statistics are open in
    # Pulsar (it only checks that the broker owns the coordinator or the topic)
    ("GET", TXN + "/coordinators"): OPEN,
    ("GET", TXN + "/coordinatorStats"): COORDINATOR_LOOKUP,
    ("GET", TXN + "/slowTransactions/{timeout}"): COORDINATOR_LOOKUP,
    ("GET", TXN + "/coordinatorInternalStats/{coordinatorId}"): OPEN,
    ("GET", TXN + "/transactionMetadata/{most}/{least}"): OPEN,
    ("POST", TXN + "/abortTransaction/{most}/{least}"): SUPER_USER,
    ("POST", TXN + "/transactionCoordinator/replicas"): SUPER_USER,
}
_TOPIC_STATS = re.compile(r"^admin/v3/transactions/(transaction|pendingAck|positionStats)")


_CONSTRAINED = re.compile(r"\{(\w+):[^}]*\}")


def rule_of(method: str, pattern: str) -> Rule:
    """The check of a route: from :data:`RULES`, the policy tables, or (a route this table does not know) an admin
    of its tenant where it names one, else a super-user. A parameter's allowed values do not matter here
    (``{domain:persistent|non-persistent}`` is ``{domain}``)."""
    pattern = _CONSTRAINED.sub(r"{\1}", pattern)
    rule = RULES.get((method, pattern))
    if rule is not None:
        return rule
    head, _, endpoint = pattern.rpartition("/")
    if head == NS and endpoint in NAMESPACE_POLICIES:
        return Rule(Check.NAMESPACE_POLICY, "READ" if method == "GET" else "WRITE", NAMESPACE_POLICIES[endpoint])
    if head == TOPIC and endpoint in TOPIC_POLICIES:
        return Rule(Check.TOPIC_POLICY, "READ" if method == "GET" else "WRITE", TOPIC_POLICIES[endpoint])
    if head == NS and endpoint == "{bundle}" and method == "DELETE":
        # Pulsar's bundle deletion: also what a DELETE of a namespace policy without a DELETE route of its own reaches
        # (tenants.py registers none for them, as Pulsar has none).
        return _namespace("DELETE_BUNDLE")
    if _TOPIC_STATS.match(pattern):
        return OPEN
    return UNLISTED if "{tenant}" in pattern else SUPER_USER


def refusal(rule: Rule, call: Call, broker_id: str, scope: str) -> AdminError:
    """Pulsar's answer to a call its role may not make; ``scope`` is what the check was about."""
    role = call.role
    principal = f"originalPrincipal [null] and clientAppId [{role}]"
    check, operation, policy = rule.check, rule.operation, rule.policy
    if check is Check.SUPER_USER:
        return AdminError(401, "This operation requires super-user access")
    if check is Check.BROKER:
        message = f"validateBothSuperuserAndBrokerOperation for {principal} about operation [{operation}]"
        return AdminError(401, f"Unauthorized to {message} on broker [{broker_id}]")
    if check is Check.CLUSTER:
        message = f"validateBothSuperuserAndClusterOperation for {principal} about operation [{operation}]"
        return AdminError(401, f"Unauthorized to {message} on cluster [{scope}]")
    if check is Check.TENANTS:
        message = f"validateBothTenantOperationAndSuperUser for {principal} about operation [{operation}] "
        return AdminError(401, f"Unauthorized to {message}")
    if check is Check.TENANT:
        message = f"validateTenantOperation for {principal} about operation [{operation}] on tenant [{scope}]"
        return AdminError(401, f"Unauthorized to {message}")
    if check is Check.TENANT_ADMIN:
        return AdminError(401, "Don't have permission to administrate resources on this tenant")
    if check is Check.NAMESPACE:
        message = f"validateNamespaceOperation for operation [{operation}] on namespace [{scope}]"
        return AdminError(403, f"Unauthorized to {message}")
    if check is Check.NAMESPACE_POLICY:
        message = f"validateNamespacePolicyOperation for operation [{operation}] on namespace [{scope}]"
        return AdminError(403, f"Unauthorized to {message} on policy [{policy}]")
    if check is Check.TOPIC:
        return AdminError(401, f"Unauthorized to validateTopicOperation for operation [{operation}] on topic [{scope}]")
    message = f"validateTopicPolicyOperation for operation [{operation}] on topic [{scope}]"
    return AdminError(403, f"Unauthorized to {message} on policy [{policy}]")


def _topic_name(call: Call, rule: Rule) -> TopicName:
    if rule.topic is not None:
        return TopicName.parse(rule.topic)
    domain = call.params.get("domain", "persistent")
    return TopicName.parse(f"{domain}://{call['tenant']}/{call['namespace']}/{call['topic']}")


def allowed(authorization: Authorization, rule: Rule, call: Call) -> tuple[bool, str]:
    """Whether the call's role passes the rule, and the scope its refusal names; TenantNotFoundError (a 404) when
    the check needs the admins of a tenant that does not exist."""
    role = call.role
    check = rule.check
    if check is Check.OPEN or authorization.is_super_user(role):
        return True, ""
    tenant = call.params.get("tenant", "")
    namespace = f"{tenant}/{call.params.get('namespace', '')}"
    if check in (Check.SUPER_USER, Check.BROKER):
        return False, ""
    if check is Check.CLUSTER:
        return False, call.params.get("cluster", "")
    if check is Check.TENANTS:
        info = authorization.namespaces.tenants.get(tenant)
        return info is not None and role in (info.get("adminRoles") or ()), tenant
    if check in (Check.TENANT, Check.TENANT_ADMIN):
        return authorization.is_tenant_admin(tenant, role), tenant
    if check is Check.NAMESPACE:
        return authorization.allow_namespace_operation(namespace, role, rule.operation), namespace
    if check is Check.NAMESPACE_POLICY:
        return authorization.is_tenant_admin(tenant, role), namespace
    name = _topic_name(call, rule)
    if check is Check.TOPIC_POLICY:
        return authorization.is_tenant_admin(name.tenant, role), name.full
    return authorization.allow_topic_operation(name, role, rule.operation, call.params.get("sub")), name.full


def guard(ctx: AdminContext) -> Callable[[str, str, Handler], Handler]:
    """What wraps each route's handler: the route's check first, when authorization applies to the call."""
    authorization = ctx.broker.authorization

    tenants = authorization.namespaces.tenants

    def wrap(method: str, pattern: str, handler: Handler) -> Handler:
        rule = rule_of(method, pattern)

        def checked(call: Call) -> Any:
            if rule.tenant_first and call["tenant"] not in tenants:
                # Pulsar's validateAdminAccessForTenant looks the tenant up first, whoever asks, authorization or not.
                raise TenantNotFoundError()
            if authorization.enabled and call.role is not None:
                ok, scope = allowed(authorization, rule, call)
                if not ok:
                    raise refusal(rule, call, f"{ctx.host(call.host)}:{ctx.admin_port}", scope)
            return handler(call)

        return checked

    return wrap
