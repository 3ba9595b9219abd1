"""The engine's permission store and Pulsar's rules for checking it (engine/authorization.py), without a server:
super-users, tenant admins, namespace and topic grants, partitions inheriting their partitioned topic's grants,
subscription role lists and the Prefix subscription-auth mode, the topic and namespace operations each grant allows,
and that grants are durable in the store.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.authorization import TenantNotFoundError, actions_of
from engine.broker import Broker, BrokerConfig
from engine.clock import ManualClock
from engine.errors import BrokerError
from engine.names import TopicName
from engine.store import Store
from wire.pulsar_api_pb2 import ServerError

TOPIC = TopicName.parse("persistent://acme/ns/orders")


def _broker(path: Path, enabled: bool = True) -> Broker:
    config = BrokerConfig(authorization_enabled=enabled, super_user_roles=("root",))
    broker = Broker(Store(path / "store.sqlite"), ManualClock(), config)
    if "acme" not in broker.namespaces.tenants:
        broker.namespaces.create_tenant("acme", {"adminRoles": ["acme-admin"], "allowedClusters": ["standalone"]})
        broker.namespaces.create_namespace("acme/ns", {})
    return broker


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    return _broker(tmp_path)


def test_super_users_and_tenant_admins_may_do_anything(broker: Broker) -> None:
    authz = broker.authorization
    for role in ("root", "acme-admin"):
        for operation in ("PRODUCE", "CONSUME", "LOOKUP", "TERMINATE", "UNLOAD", "COMPACT"):
            assert authz.allow_topic_operation(TOPIC, role, operation, "any-sub"), (role, operation)
        assert authz.allow_namespace_operation("acme/ns", role, "GRANT_PERMISSION")
    assert not authz.allow_topic_operation(TOPIC, "someone", "PRODUCE")
    assert not authz.allow_topic_operation(TOPIC, None, "LOOKUP")
    assert not authz.allow_namespace_operation("acme/ns", "someone", "GET_TOPICS")


def test_disabled_authorization_allows_everything(tmp_path: Path) -> None:
    authz = _broker(tmp_path, enabled=False).authorization
    assert authz.allow_topic_operation(TOPIC, None, "PRODUCE")
    assert authz.allow_topic_operation(TopicName.parse("persistent://nobody/ns/t"), "x", "TERMINATE")


def test_namespace_grants_allow_their_operations_only(broker: Broker) -> None:
    authz = broker.authorization
    authz.permissions.grant_namespace("acme/ns", "writer", ["produce"])
    authz.permissions.grant_namespace("acme/ns", "reader", ["consume"])
    assert authz.allow_topic_operation(TOPIC, "writer", "PRODUCE")
    assert not authz.allow_topic_operation(TOPIC, "writer", "CONSUME", "s")
    assert authz.allow_topic_operation(TOPIC, "reader", "CONSUME", "s")
    assert not authz.allow_topic_operation(TOPIC, "reader", "PRODUCE")
    for role in ("writer", "reader"):
        assert authz.allow_topic_operation(TOPIC, role, "LOOKUP")
        assert authz.allow_topic_operation(TOPIC, role, "GET_STATS")
        assert not authz.allow_topic_operation(TOPIC, role, "TERMINATE")
        assert authz.allow_namespace_operation("acme/ns", role, "GET_TOPICS")
        assert not authz.allow_namespace_operation("acme/ns", role, "GRANT_PERMISSION")
    assert authz.allow_namespace_operation("acme/ns", "reader", "CLEAR_BACKLOG")
    assert not authz.allow_namespace_operation("acme/ns", "writer", "CLEAR_BACKLOG")
    authz.permissions.revoke_namespace("acme/ns", "writer")
    assert not authz.allow_topic_operation(TOPIC, "writer", "LOOKUP")


def test_topic_grants_and_partitions_inherit_the_partitioned_topics(broker: Broker) -> None:
    authz = broker.authorization
    other = TopicName.parse("persistent://acme/ns/other")
    authz.permissions.grant_topic(TOPIC, "writer", ["produce"])
    assert authz.allow_topic_operation(TOPIC, "writer", "PRODUCE")
    assert not authz.allow_topic_operation(other, "writer", "PRODUCE")
    # A partition: its own grants, or its partitioned topic's.
    assert authz.allow_topic_operation(TOPIC.partition(3), "writer", "PRODUCE")
    authz.permissions.grant_topic(other.partition(0), "p0", ["consume"])
    assert authz.allow_topic_operation(other.partition(0), "p0", "CONSUME", "s")
    assert not authz.allow_topic_operation(other.partition(1), "p0", "CONSUME", "s")
    assert not authz.allow_topic_operation(other, "p0", "CONSUME", "s")
    # As Pulsar reports a topic's permissions: the namespace's united with the topic's own.
    authz.permissions.grant_namespace("acme/ns", "writer", ["consume"])
    assert authz.permissions.of_topic(TOPIC) == {"writer": ["consume", "produce"]}
    authz.permissions.revoke_topic(TOPIC, "writer")
    assert not authz.allow_topic_operation(TOPIC, "writer", "PRODUCE")
    assert broker.namespaces.policies("acme/ns")["auth_policies"]["destination_auth"] == {
        "persistent://acme/ns/other-partition-0": {"p0": ["consume"]}
    }


def test_subscription_roles_restrict_consumers_of_that_subscription(broker: Broker) -> None:
    authz = broker.authorization
    authz.permissions.grant_namespace("acme/ns", "reader", ["consume"])
    authz.permissions.grant_namespace("acme/ns", "other", ["consume"])
    authz.permissions.grant_subscription("acme/ns", "audit", ["other"])
    assert not authz.allow_topic_operation(TOPIC, "reader", "CONSUME", "audit")
    assert authz.allow_topic_operation(TOPIC, "reader", "CONSUME", "mine")
    assert authz.allow_topic_operation(TOPIC, "other", "CONSUME", "audit")
    # A lookup names no subscription.
    assert authz.allow_topic_operation(TOPIC, "reader", "LOOKUP")
    authz.permissions.revoke_subscription("acme/ns", "audit", "other")
    assert authz.permissions.of_subscriptions("acme/ns") == {}
    assert authz.allow_topic_operation(TOPIC, "reader", "CONSUME", "audit")
    with pytest.raises(ValueError, match="couldn't find subscription"):
        authz.permissions.revoke_subscription("acme/ns", "audit", "other")


def test_prefix_subscription_auth_mode_fails_the_check(broker: Broker) -> None:
    authz = broker.authorization
    authz.permissions.grant_namespace("acme/ns", "team", ["consume"])
    broker.namespaces.set_policy("acme/ns", "subscription_auth_mode", "Prefix")
    assert authz.allow_topic_operation(TOPIC, "team", "CONSUME", "team-sub")
    with pytest.raises(BrokerError) as raised:
        authz.allow_topic_operation(TOPIC, "team", "CONSUME", "sub")
    assert raised.value.code == ServerError.AuthorizationError
    assert "prefixed by the authentication role, like team-xxxx" in raised.value.message


def test_a_missing_tenant_fails_the_check_for_all_but_super_users(broker: Broker) -> None:
    name = TopicName.parse("persistent://ghost/ns/t")
    assert broker.authorization.allow_topic_operation(name, "root", "PRODUCE")
    with pytest.raises(TenantNotFoundError):
        broker.authorization.allow_topic_operation(name, "someone", "PRODUCE")


def test_grants_are_durable(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    broker.authorization.permissions.grant_namespace("acme/ns", "writer", ["produce", "functions"])
    broker.authorization.permissions.grant_topic(TOPIC, "reader", ["consume"])
    broker.authorization.permissions.grant_subscription("acme/ns", "audit", ["reader"])
    broker.store.close()
    again = _broker(tmp_path).authorization
    assert again.permissions.of_namespace("acme/ns") == {"writer": ["produce", "functions"]}
    assert again.allow_topic_operation(TOPIC, "reader", "CONSUME", "audit")
    assert not again.allow_topic_operation(TOPIC, "writer", "CONSUME", "audit")


def test_actions_are_read_as_pulsar_reads_a_set_of_auth_actions() -> None:
    assert actions_of(["consume", "produce", "produce", "bogus", 3]) == ["produce", "consume", None]
    assert actions_of(["sinks"]) == ["sinks"]
    assert actions_of([]) == []
