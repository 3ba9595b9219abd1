"""Permissions and the rules that check them, as Pulsar's ``PulsarAuthorizationProvider`` keeps and applies them.

Permissions live in each namespace's policies, under ``auth_policies`` as Pulsar stores them (and the admin API shows
them): ``namespace_auth`` (role -> actions on every topic of the namespace), ``destination_auth`` (topic -> role ->
actions) and ``subscription_auth_roles`` (subscription -> the only roles that may consume through it). They are
durable with the namespace's other policies.

The rules: a super-user (``super-user-roles``) may do anything; an admin role of a tenant (its ``adminRoles``)
manages everything in the tenant; any other role needs a grant: ``produce`` or ``consume`` on the namespace or on the
topic (a partition: on the partition or on its partitioned topic), and for consuming through a subscription that
lists roles, to be one of them. A lookup needs either grant. A role of ``None`` (nobody authenticated) has no right.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

from engine.errors import BrokerError
from engine.names import TopicName
from engine.namespaces import Namespaces
from wire.pulsar_api_pb2 import ServerError

#: Pulsar's ``AuthAction`` values, in their declaration order.
ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages")
_AUTH = "auth_policies"
_NAMESPACE_AUTH = "namespace_auth"
_TOPIC_AUTH = "destination_auth"
_SUBSCRIPTION_AUTH = "subscription_auth_roles"


class Needs(Enum):
    """What a topic operation needs of a role that is neither a super-user nor a tenant admin."""

    LOOKUP = "lookup"
    PRODUCE = "produce"
    CONSUME = "consume"
    #: Only a tenant admin (or super-user) may.
    ADMIN = "admin"


#: Pulsar's topic operations by what they need (``PulsarAuthorizationProvider.allowTopicOperationAsync``).
TOPIC_OPERATIONS = {
    **dict.fromkeys(("LOOKUP", "GET_STATS", "GET_METADATA"), Needs.LOOKUP),
    "PRODUCE": Needs.PRODUCE,
    **dict.fromkeys(
        (
            "GET_SUBSCRIPTIONS",
            "CONSUME",
            "SUBSCRIBE",
            "UNSUBSCRIBE",
            "SKIP",
            "EXPIRE_MESSAGES",
            "PEEK_MESSAGES",
            "RESET_CURSOR",
            "GET_BACKLOG_SIZE",
            "SET_REPLICATED_SUBSCRIPTION_STATUS",
            "GET_REPLICATED_SUBSCRIPTION_STATUS",
        ),
        Needs.CONSUME,
    ),
}
#: Namespace operations a role with a namespace grant may do, and the grants that allow each
#: (``PulsarAuthorizationProvider.allowNamespaceOperationAsync``); any other needs a tenant admin.
NAMESPACE_OPERATIONS = {
    "GET_TOPIC": ("consume", "produce"),
    "GET_TOPICS": ("consume", "produce"),
    "GET_BUNDLE": ("consume", "produce"),
    "UNSUBSCRIBE": ("consume",),
    "TRIM_TOPIC": ("consume",),
    "CLEAR_BACKLOG": ("consume",),
    "PACKAGES": ("packages",),
}


def actions_of(names: Iterable[Any]) -> list[str | None]:
    """The actions named in a grant, as Pulsar reads a ``Set<AuthAction>``: each action once, in declaration order,
    and every name it does not know as one ``None`` (Jackson reads an unknown enum value as null), which grants
    nothing."""
    given = list(names)
    known: list[str | None] = [action for action in ACTIONS if action in given]
    if any(name not in ACTIONS for name in given):
        known.append(None)
    return known


class TenantNotFoundError(BrokerError):
    """The tenant whose admin roles a check needs does not exist (the admin API answers 404)."""

    def __init__(self) -> None:
        super().__init__(ServerError.TopicNotFound, "Tenant does not exist")


class Permissions:
    """The permissions kept in the namespaces' policies; every change is durable."""

    def __init__(self, namespaces: Namespaces) -> None:
        self.namespaces = namespaces

    def _auth(self, namespace: str) -> dict[str, Any]:
        stored = self.namespaces.policy(namespace, _AUTH) or {}
        return {
            _NAMESPACE_AUTH: dict(stored.get(_NAMESPACE_AUTH) or {}),
            _TOPIC_AUTH: {topic: dict(roles) for topic, roles in (stored.get(_TOPIC_AUTH) or {}).items()},
            _SUBSCRIPTION_AUTH: dict(stored.get(_SUBSCRIPTION_AUTH) or {}),
        }

    def _save(self, namespace: str, auth: dict[str, Any]) -> None:
        self.namespaces.set_policy(namespace, _AUTH, auth)

    # -- namespace grants ----------------------------------------------------------------------

    def of_namespace(self, namespace: str) -> dict[str, list[str | None]]:
        """Role -> actions granted on the whole namespace."""
        return self._auth(namespace)[_NAMESPACE_AUTH]

    def grant_namespace(self, namespace: str, role: str, actions: Iterable[str | None]) -> None:
        """Replace a role's actions on the namespace."""
        auth = self._auth(namespace)
        auth[_NAMESPACE_AUTH][role] = list(actions)
        self._save(namespace, auth)

    def revoke_namespace(self, namespace: str, role: str) -> None:
        """Take a role's namespace grant away (nothing happens if it has none)."""
        auth = self._auth(namespace)
        auth[_NAMESPACE_AUTH].pop(role, None)
        self._save(namespace, auth)

    # -- topic grants ----------------------------------------------------------------------------

    def of_topic(self, name: TopicName) -> dict[str, list[str | None]]:
        """Role -> actions on a topic as Pulsar reports them: the namespace's grants united with the topic's own."""
        auth = self._auth(name.namespace_name)
        merged = {role: list(actions) for role, actions in auth[_NAMESPACE_AUTH].items()}
        for role, actions in auth[_TOPIC_AUTH].get(name.full, {}).items():
            held = merged.setdefault(role, [])
            held.extend(action for action in actions if action not in held)
        return merged

    def grant_topic(self, name: TopicName, role: str, actions: Iterable[str | None] | None) -> None:
        """Replace a role's actions on one topic; None (a grant without a body) leaves the role without any."""
        auth = self._auth(name.namespace_name)
        roles = auth[_TOPIC_AUTH].setdefault(name.full, {})
        if actions is None:
            roles.pop(role, None)
        else:
            roles[role] = list(actions)
        if not roles:
            del auth[_TOPIC_AUTH][name.full]
        self._save(name.namespace_name, auth)

    def revoke_topic(self, name: TopicName, role: str) -> None:
        """Take a role's grant on a topic away."""
        auth = self._auth(name.namespace_name)
        roles = auth[_TOPIC_AUTH].get(name.full)
        if roles is None or role not in roles:
            return
        del roles[role]
        if not roles:
            del auth[_TOPIC_AUTH][name.full]
        self._save(name.namespace_name, auth)

    def forget_topic(self, name: TopicName) -> None:
        """Drop every grant on a topic, as Pulsar does when it deletes the topic."""
        if name.namespace_name not in self.namespaces:
            return
        auth = self._auth(name.namespace_name)
        if auth[_TOPIC_AUTH].pop(name.full, None) is not None:
            self._save(name.namespace_name, auth)

    # -- subscription roles ----------------------------------------------------------------------

    def of_subscriptions(self, namespace: str) -> dict[str, list[str]]:
        """Subscription -> the roles allowed to consume through it."""
        return self._auth(namespace)[_SUBSCRIPTION_AUTH]

    def grant_subscription(self, namespace: str, subscription: str, roles: Iterable[str]) -> None:
        """Replace the roles allowed on a subscription."""
        auth = self._auth(namespace)
        auth[_SUBSCRIPTION_AUTH][subscription] = list(dict.fromkeys(roles))
        self._save(namespace, auth)

    def revoke_subscription(self, namespace: str, subscription: str, role: str) -> None:
        """Remove a role from a subscription's list (the list goes when it empties); ValueError for a subscription
        without a list, as Pulsar refuses it."""
        auth = self._auth(namespace)
        roles = auth[_SUBSCRIPTION_AUTH].get(subscription)
        if roles is None:
            raise ValueError("couldn't find subscription")
        roles = [r for r in roles if r != role]
        if roles:
            auth[_SUBSCRIPTION_AUTH][subscription] = roles
        else:
            del auth[_SUBSCRIPTION_AUTH][subscription]
        self._save(namespace, auth)


class Authorization:
    """Whether a role may do something; ``enabled`` False allows everything (authorization is off)."""

    def __init__(self, namespaces: Namespaces, enabled: bool = False, super_users: Iterable[str] = ()) -> None:
        self.namespaces = namespaces
        self.permissions = Permissions(namespaces)
        self.enabled = enabled
        self.super_users = frozenset(super_users)

    def is_super_user(self, role: str | None) -> bool:
        return role is not None and role in self.super_users

    def is_tenant_admin(self, tenant: str, role: str | None) -> bool:
        """Whether ``role`` is an admin role of an existing tenant; :class:`TenantNotFoundError` if there is none."""
        info = self.namespaces.tenants.get(tenant)
        if info is None:
            raise TenantNotFoundError()
        return role is not None and role in (info.get("adminRoles") or ())

    def is_super_user_or_admin(self, tenant: str, role: str | None) -> bool:
        """Pulsar's ``validateTenantAdminAccess``: a super-user, or an admin of the (existing) tenant."""
        return self.is_super_user(role) or self.is_tenant_admin(tenant, role)

    def _granted(self, name: TopicName, role: str | None, action: str) -> bool:
        """A grant of ``action`` to ``role`` on the namespace, the topic, or (for a partition) its partitioned topic."""
        if role is None or name.namespace_name not in self.namespaces:
            return False
        auth = self.namespaces.policy(name.namespace_name, _AUTH) or {}
        if action in (auth.get(_NAMESPACE_AUTH) or {}).get(role, ()):
            return True
        topics = auth.get(_TOPIC_AUTH) or {}
        if action in topics.get(name.full, {}).get(role, ()):
            return True
        parent = name.partitioned_parent
        return parent is not name and action in topics.get(parent.full, {}).get(role, ())

    def can_produce(self, name: TopicName, role: str | None) -> bool:
        """A produce grant (the provider's check; super-users and admins are the caller's business)."""
        return self._granted(name, role, "produce")

    def can_consume(self, name: TopicName, role: str | None, subscription: str | None) -> bool:
        """A consume grant, and a place on the subscription's list of roles where it has one.

        A namespace in ``Prefix`` subscription-auth mode also wants the subscription name to begin with the role:
        otherwise Pulsar fails the check with an error (AuthorizationError) rather than refusing it.
        """
        if subscription and name.namespace_name in self.namespaces:
            roles = self.permissions.of_subscriptions(name.namespace_name).get(subscription)
            if roles and role not in roles:
                return False
            mode = self.namespaces.policy(name.namespace_name, "subscription_auth_mode")
            if mode == "Prefix" and not subscription.startswith(role or ""):
                raise BrokerError(
                    ServerError.AuthorizationError,
                    "org.apache.pulsar.broker.PulsarServerException: Failed to create consumer - The subscription name "
                    f"needs to be prefixed by the authentication role, like {role}-xxxx for topic: {name.full}",
                )
        return self._granted(name, role, "consume")

    def can_lookup(self, name: TopicName, role: str | None) -> bool:
        """Either grant."""
        return self.can_produce(name, role) or self.can_consume(name, role, None)

    def allow_topic_operation(
        self, name: TopicName, role: str | None, operation: str, subscription: str | None = None
    ) -> bool:
        """Pulsar's ``allowTopicOperationAsync``: super-users and tenant admins may do any operation; other roles the
        operations their grants allow (see :data:`TOPIC_OPERATIONS`). Raises :class:`TenantNotFoundError`."""
        if not self.enabled or self.is_super_user_or_admin(name.tenant, role):
            return True
        needs = TOPIC_OPERATIONS.get(operation, Needs.ADMIN)
        if needs is Needs.LOOKUP:
            return self.can_lookup(name, role)
        if needs is Needs.PRODUCE:
            return self.can_produce(name, role)
        if needs is Needs.CONSUME:
            return self.can_consume(name, role, subscription)
        return False

    def allow_namespace_operation(self, namespace: str, role: str | None, operation: str) -> bool:
        """Pulsar's ``allowNamespaceOperationAsync``: admins may do any; other roles the operations of
        :data:`NAMESPACE_OPERATIONS` their namespace grants allow. Raises :class:`TenantNotFoundError`."""
        if not self.enabled or self.is_super_user_or_admin(namespace.partition("/")[0], role):
            return True
        if role is None or namespace not in self.namespaces:
            return False
        granted = self.permissions.of_namespace(namespace).get(role, ())
        return any(action in granted for action in NAMESPACE_OPERATIONS.get(operation, ()))
