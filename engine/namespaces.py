"""Tenants, namespaces, namespace and topic policies, durable in the store, and the policies the engine applies.

Policies are kept as Pulsar's ``Policies`` JSON object holds them (field names included), so the admin API
returns what was set. Those that change behaviour here: ``deduplicationEnabled``, ``retention_policies``,
``message_ttl_in_seconds``, ``compaction_threshold``, ``backlog_quota_map``, ``autoTopicCreationOverride``,
``autoSubscriptionCreationOverride`` (a producer's initial subscription) and
``schema_compatibility_strategy`` (with the deprecated ``schema_auto_update_compatibility_strategy`` and
``is_allow_auto_update_schema``); the broker and :class:`engine.policy_enforcer.PolicyEnforcer` read them through
the accessors below. Every other policy is stored and returned as set.

Topic policies are kept as Pulsar's ``TopicPolicies`` JSON object holds them, under the topic's name (a
partitioned topic's name for all its partitions). Where one is set it wins over the namespace's: message TTL,
retention, deduplication, the compaction threshold, each type of backlog quota, and the limits of
:class:`TopicLimits` (producers, consumers, subscriptions, subscription types, unacknowledged messages, message size).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from engine import backlog_quota
from engine.limits import TopicLimits
from engine.names import TopicName
from engine.schema_compat import AUTO_UPDATE_STRATEGIES, BROKER_DEFAULT
from engine.store import Store

if TYPE_CHECKING:
    from engine.topic import Topic

log = logging.getLogger(__name__)

_NAMED = re.compile(r"^[-=:.\w]+$")
_TENANT = "tenant"
_NAMESPACE = "namespace"
_TOPIC = "topic_policies"
_PROPERTIES = "topic_properties"
#: Boundaries of the 4 bundles a namespace of a standalone Pulsar has.
_BUNDLES = {
    "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
    "numBundles": 4,
}


#: Pulsar's broker.conf defaults of the limits topic and namespace policies override (0: no limit).
MAX_UNACKED_PER_CONSUMER = 50_000
MAX_UNACKED_PER_SUBSCRIPTION = 200_000


def valid_name(name: str) -> bool:
    """Pulsar's rule for tenant and namespace names (``NamedEntity.checkName``)."""
    return bool(_NAMED.match(name))


def default_policies(cluster: str) -> dict[str, Any]:
    """The policies of a namespace nobody changed, as a standalone Pulsar reports them."""
    return {
        "auth_policies": {"namespace_auth": {}, "destination_auth": {}, "subscription_auth_roles": {}},
        "replication_clusters": [cluster],
        "allowed_clusters": [],
        "bundles": dict(_BUNDLES),
        "backlog_quota_map": {},
        "clusterDispatchRate": {},
        "topicDispatchRate": {},
        "subscriptionDispatchRate": {},
        "replicatorDispatchRate": {},
        "clusterSubscribeRate": {},
        "publishMaxMessageRate": {},
        "latency_stats_sample_rate": {},
        "deleted": False,
        "encryption_required": False,
        "subscription_auth_mode": "None",
        "offload_threshold": -1,
        "offload_threshold_in_seconds": -1,
        "schema_compatibility_strategy": "UNDEFINED",
        "is_allow_auto_update_schema": True,
        "schema_validation_enforced": False,
        "subscription_types_enabled": [],
        "properties": {},
        "migrated": False,
    }


class Namespaces:
    """Tenants (``TenantInfo``) and namespaces (their set policies), written through to the store."""

    def __init__(self, store: Store, cluster: str, builtin: Iterable[str]) -> None:
        self.store = store
        self.cluster = cluster
        self.tenants: dict[str, dict[str, Any]] = {
            name: json.loads(value) for name, value in store.metadata(_TENANT).items()
        }
        self._policies: dict[str, dict[str, Any]] = {
            name: json.loads(value) for name, value in store.metadata(_NAMESPACE).items()
        }
        self._topic_policies: dict[str, dict[str, Any]] = {
            name: json.loads(value) for name, value in store.metadata(_TOPIC).items()
        }
        #: Counts changes to namespace and topic policies, so that what is derived from them can be cached.
        self.generation = 0
        self._limits: dict[str, tuple[int, TopicLimits]] = {}
        for namespace in builtin:
            tenant = namespace.partition("/")[0]
            if tenant not in self.tenants:
                self.create_tenant(tenant, {"adminRoles": [], "allowedClusters": [cluster]})
            if namespace not in self._policies:
                self.create_namespace(namespace, {})

    # -- tenants -----------------------------------------------------------------------------

    def create_tenant(self, tenant: str, info: dict[str, Any]) -> None:
        """Create or replace a tenant's ``TenantInfo``."""
        self.tenants[tenant] = info
        self.store.put_metadata(_TENANT, tenant, json.dumps(info))

    def delete_tenant(self, tenant: str) -> None:
        """Forget a tenant (its namespaces must be gone)."""
        self.tenants.pop(tenant, None)
        self.store.put_metadata(_TENANT, tenant, None)

    # -- namespaces --------------------------------------------------------------------------

    def __contains__(self, namespace: object) -> bool:
        return namespace in self._policies

    def names(self, tenant: str | None = None) -> list[str]:
        """Namespaces, of one tenant or all, sorted."""
        return sorted(n for n in self._policies if tenant is None or n.partition("/")[0] == tenant)

    def create_namespace(self, namespace: str, policies: dict[str, Any]) -> None:
        """Create a namespace with the policies given at creation."""
        self._policies[namespace] = dict(policies)
        self._save(namespace)

    def delete_namespace(self, namespace: str) -> None:
        """Forget a namespace and its policies (its topics must be gone)."""
        self._policies.pop(namespace, None)
        self.generation += 1
        self.store.put_metadata(_NAMESPACE, namespace, None)

    def policies(self, namespace: str) -> dict[str, Any]:
        """Every policy of a namespace: the defaults overlaid with what was set."""
        merged = default_policies(self.cluster)
        merged.update(self._policies[namespace])
        return merged

    def policy(self, namespace: str, key: str) -> Any:
        """One policy as set, or None if it was never set (or removed)."""
        return self._policies.get(namespace, {}).get(key)

    def set_policy(self, namespace: str, key: str, value: Any) -> None:
        """Set (or, with None, remove) one policy."""
        policies = self._policies[namespace]
        if value is None:
            policies.pop(key, None)
        else:
            policies[key] = value
        self._save(namespace)

    def _save(self, namespace: str) -> None:
        self.generation += 1
        self.store.put_metadata(_NAMESPACE, namespace, json.dumps(self._policies[namespace]))

    # -- topic policies -------------------------------------------------------------------------

    def topic_policies(self, topic: str) -> dict[str, Any]:
        """The policies set on a (partitioned) topic, by ``TopicPolicies`` field (empty if none)."""
        return dict(self._topic_policies.get(topic, {}))

    def set_topic_policy(self, topic: str, key: str, value: Any) -> None:
        """Set (or, with None, remove) one policy of a (partitioned) topic."""
        policies = self._topic_policies.setdefault(topic, {})
        if value is None:
            policies.pop(key, None)
        else:
            policies[key] = value
        self.generation += 1
        self.store.put_metadata(_TOPIC, topic, json.dumps(policies) if policies else None)
        if not policies:
            del self._topic_policies[topic]

    def delete_topic_policies(self, topic: str) -> None:
        """Forget every policy of a (partitioned) topic."""
        if self._topic_policies.pop(topic, None) is None:
            return
        self.generation += 1
        self.store.put_metadata(_TOPIC, topic, None)

    def topic_properties(self, topic: str) -> dict[str, str] | None:
        """The properties of a (partitioned) topic, or None if none were ever set."""
        value = self.store.metadata(_PROPERTIES).get(topic)
        return None if value is None else json.loads(value)

    def set_topic_properties(self, topic: str, properties: dict[str, str] | None) -> None:
        """Replace (or, with None, forget) the properties of a (partitioned) topic."""
        self.store.put_metadata(_PROPERTIES, topic, None if properties is None else json.dumps(properties))

    def applied_policy(self, name: TopicName, topic_key: str, namespace_key: str | None) -> Any:
        """A policy in force on a topic, as set: the topic's own (a partition's: its partitioned topic's) value under
        ``topic_key``, else its namespace's under ``namespace_key`` (``key*``: a map by cluster, this cluster's
        value; None: the namespace has no such policy); None if neither sets it (an ``UNDEFINED`` schema
        compatibility strategy is none)."""
        value = self._topic_policies.get(name.partitioned_parent.full, {}).get(topic_key)
        if value is not None or namespace_key is None:
            return value
        if namespace_key.endswith("*"):
            return (self.policy(name.namespace_name, namespace_key[:-1]) or {}).get(self.cluster)
        value = self.policy(name.namespace_name, namespace_key)
        return None if value == "UNDEFINED" else value

    # -- the policies the engine applies: a topic's own, else its namespace's ------------------------

    def limits(self, name: TopicName) -> TopicLimits:
        """The limits in force on a topic partition (cached until a policy changes)."""
        cached = self._limits.get(name.full)
        if cached is not None and cached[0] == self.generation:
            return cached[1]

        def applied(topic_key: str, namespace_key: str | None, default: Any) -> Any:
            value = self.applied_policy(name, topic_key, namespace_key)
            return default if value is None else value

        limits = TopicLimits(
            int(applied("maxProducerPerTopic", "max_producers_per_topic", 0)),
            int(applied("maxConsumerPerTopic", "max_consumers_per_topic", 0)),
            int(applied("maxConsumersPerSubscription", "max_consumers_per_subscription", 0)),
            int(applied("maxSubscriptionsPerTopic", "max_subscriptions_per_topic", 0)),
            tuple(applied("subscriptionTypesEnabled", "subscription_types_enabled", None) or ()),
            int(applied("maxUnackedMessagesOnConsumer", "max_unacked_messages_per_consumer", MAX_UNACKED_PER_CONSUMER)),
            int(
                applied(
                    "maxUnackedMessagesOnSubscription",
                    "max_unacked_messages_per_subscription",
                    MAX_UNACKED_PER_SUBSCRIPTION,
                )
            ),
            applied("maxMessageSize", None, None),
        )
        self._limits[name.full] = (self.generation, limits)
        return limits

    def deduplication(self, name: TopicName) -> bool | None:
        """A topic's deduplication switch, or None to use the broker's."""
        value = self.applied_policy(name, "deduplicationEnabled", "deduplicationEnabled")
        return None if value is None else bool(value)

    def max_message_size(self, name: TopicName) -> int:
        """A topic's own max message size in bytes (0: the broker's alone); no namespace policy sets one."""
        return int(self.limits(name).max_message_size or 0)

    def message_ttl(self, name: TopicName) -> int:
        """Seconds after which a topic's unacknowledged messages expire (0: never)."""
        return int(self.applied_policy(name, "messageTTLInSeconds", "message_ttl_in_seconds") or 0)

    def check_new_producer(self, topic: Topic, now_ms: int) -> None:
        """Refuse a new producer on a topic while one of its backlog quotas with a producer policy is exceeded."""
        quotas = self.backlog_quotas(topic.name)
        if quotas:
            backlog_quota.check_new_producer(topic, quotas, now_ms)

    def backlog_quotas(self, name: TopicName) -> backlog_quota.Quotas:
        """A topic's backlog quotas by type: each type the topic's own, else its namespace's."""
        quotas = backlog_quota.parse_quotas(self.policy(name.namespace_name, "backlog_quota_map"))
        topic_quotas = self._topic_policies.get(name.partitioned_parent.full, {}).get("backLogQuotaMap")
        quotas.update(backlog_quota.parse_quotas(topic_quotas))
        return quotas

    def compaction_threshold(self, name: TopicName) -> int:
        """Bytes after the last compaction's horizon beyond which a topic is compacted (0: never)."""
        return int(self.applied_policy(name, "compactionThreshold", "compaction_threshold") or 0)

    def retention(self, name: TopicName) -> tuple[int, int] | None:
        """``(minutes, megabytes)`` a topic's acknowledged data is kept for (-1: no limit), or None when not set."""
        value = self.applied_policy(name, "retentionPolicies", "retention_policies")
        if not value:
            return None
        return int(value.get("retentionTimeInMinutes", 0)), int(value.get("retentionSizeInMB", 0))

    def auto_topic_creation(self, namespace: str) -> tuple[bool, int] | None:
        """``(allowed, partitions of created topics)`` from the namespace's override, or None."""
        value = self.policy(namespace, "autoTopicCreationOverride")
        if not value:
            return None
        allowed = bool(value.get("allowAutoTopicCreation"))
        if value.get("topicType") == "partitioned":
            return allowed, max(1, int(value.get("defaultNumPartitions") or 1))
        return allowed, 0

    def auto_subscription_creation(self, namespace: str) -> bool:
        """Whether subscriptions may be created on demand (the namespace's override, else the broker's: allowed)."""
        value = self.policy(namespace, "autoSubscriptionCreationOverride")
        if isinstance(value, dict) and "allowAutoSubscriptionCreation" in value:
            return bool(value["allowAutoSubscriptionCreation"])
        return True

    def schema_strategy(self, name: TopicName) -> str:
        """The schema compatibility strategy in force on a topic, as Pulsar resolves it: the topic's own, else its
        namespace's, else the one its namespace's deprecated auto-update policy stands for, else the broker's."""
        own = self._topic_policies.get(name.partitioned_parent.full, {}).get("schemaCompatibilityStrategy")
        if own and own != "UNDEFINED":
            return str(own)
        namespace = name.namespace_name
        strategy = self.policy(namespace, "schema_compatibility_strategy")
        if strategy and strategy != "UNDEFINED":
            return str(strategy)
        auto_update = self.policy(namespace, "schema_auto_update_compatibility_strategy")
        if auto_update is not None:
            return AUTO_UPDATE_STRATEGIES.get(auto_update, "ALWAYS_INCOMPATIBLE")
        return BROKER_DEFAULT

    def allow_auto_update_schema(self, namespace: str) -> bool:
        """Whether producers may add new schema versions to the namespace's topics."""
        return self.policy(namespace, "is_allow_auto_update_schema") is not False
