"""Topic policies: ``/admin/v2/persistent/{tenant}/{namespace}/{topic}/{policy}``, as ``pulsar-admin topicpolicies``
and the Java ``PulsarAdmin.topicPolicies()`` call them.

Set on a non-partitioned topic or a partitioned one (for all its partitions), never on one partition; the topic must
exist. GET answers the topic's own value (200 without a body when unset); with ``applied=true``, the value in force:
the topic's, else the namespace's, else the broker's default. Paths, bodies, status codes and reasons follow Pulsar's
``PersistentTopics``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.backlog_quota import BacklogQuota, QuotaType, RetentionPolicy
from engine.names import TopicName
from proxy.admin.context import AdminContext
from proxy.admin.http import AdminError, Call, Router, absent_reply
from proxy.admin.tenants import backlog_quota_of, check_boolean, check_integer, check_retention
from proxy.admin.topics import T, parse_topic

_MAX_MESSAGE_SIZE_REASON = (
    "topic-level maxMessageSize must be greater than or equal to 0 and must be smaller than that in the broker-level"
)
#: What a broker without settings of its own applies when neither the topic nor its namespace set a quota.
_DEFAULT_QUOTA = BacklogQuota(-1, -1, RetentionPolicy.PRODUCER_REQUEST_HOLD).to_policy()


@dataclass(frozen=True)
class TopicPolicy:
    """One policy: its ``TopicPolicies`` field, the namespace ``Policies`` field it overrides, and how it is set."""

    field: str
    namespace_field: str
    #: The broker's value when neither level sets one.
    default: Callable[[AdminContext], Any]
    #: The value a set request carries (None: remove it).
    value: Callable[[Call], Any]


def _from_query(name: str, check: Callable[[Any], Any]) -> Callable[[Call], Any]:
    def value(call: Call) -> Any:
        raw = call.integer(name)
        return None if raw is None else check(raw)

    return value


def _from_body(check: Callable[[Any], Any], required: bool = True) -> Callable[[Call], Any]:
    def value(call: Call) -> Any:
        body = call.json(required=required)
        return None if body is None else check(body)

    return value


def _retention(value: Any) -> Any:
    """Pulsar checks a topic's retention as the namespace's, but answers a bad one with 400, not 412."""
    try:
        return check_retention(value)
    except AdminError as exc:
        raise AdminError(400, exc.reason) from None


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
        _from_body(_retention),
    ),
    "deduplicationEnabled": TopicPolicy(
        "deduplicationEnabled",
        "deduplicationEnabled",
        lambda ctx: ctx.broker.config.deduplication,
        # An empty body removes it, as Pulsar reads a missing Boolean.
        _from_body(check_boolean, required=False),
    ),
    # A topic's alone: Pulsar has no namespace policy for it (the namespace field is never set), and nothing applies
    # when it is unset.
    "maxMessageSize": TopicPolicy(
        "maxMessageSize",
        "",
        lambda ctx: None,
        # At most the broker's max message size, checked on setting it.
        _from_body(check_integer(0, _MAX_MESSAGE_SIZE_REASON)),
    ),
    "compactionThreshold": TopicPolicy(
        "compactionThreshold",
        "compaction_threshold",
        lambda ctx: 0,
        _from_body(check_integer(0, "Invalid value for compactionThreshold")),
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

    def policy_routes(endpoint: str, policy: TopicPolicy) -> None:
        def get(call: Call) -> Any:
            name = topic_of(call)
            if call.flag("applied"):
                value = namespaces.applied_policy(name, policy.field, policy.namespace_field)
                if value is None:
                    value = policy.default(ctx)
            else:
                value = namespaces.topic_policies(name.full).get(policy.field)
            return absent_reply() if value is None else value

        def post(call: Call) -> Any:
            name = topic_of(call)
            value = policy.value(call)
            if policy.field == "retentionPolicies":
                minutes, megabytes = value["retentionTimeInMinutes"], value["retentionSizeInMB"]
                quotas = namespaces.backlog_quotas(name)
                if any(_exceeds_retention(quota, minutes, megabytes) for quota in quotas.values()):
                    raise AdminError(
                        412,
                        "Retention Quota must exceed configured backlog quota for topic. "
                        "Please increase retention quota and retry",
                    )
            if policy.field == "maxMessageSize" and value > broker.config.max_message_size:
                raise AdminError(412, _MAX_MESSAGE_SIZE_REASON)
            namespaces.set_topic_policy(name.full, policy.field, value)
            return None

        def delete(call: Call) -> Any:
            namespaces.set_topic_policy(topic_of(call).full, policy.field, None)
            return None

        router.add("GET", f"{T}/{endpoint}", get)
        router.add("POST", f"{T}/{endpoint}", post)
        router.add("DELETE", f"{T}/{endpoint}", delete)

    for endpoint, policy in POLICIES.items():
        policy_routes(endpoint, policy)

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
        name = topic_of(call)
        kind, quota = backlog_quota_of(
            call, f"Set namespace[{name.namespace_name}] backlog quota failed because the data validation failed."
        )
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

    @router.route("DELETE", T + "/policies")
    def delete_all(call: Call) -> Any:
        namespaces.delete_topic_policies(topic_of(call).full)
        return None
