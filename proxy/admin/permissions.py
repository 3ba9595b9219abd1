"""Permission routes: grants on namespaces and topics, and the roles of subscriptions, as Pulsar 4.2.4 serves them
(``pulsar-admin namespaces grant-permission``, ``topics grant-permission``, ``namespaces
grant-subscription-permission`` and their ``revoke-*`` and ``permissions`` commands).

Grants are kept and answered whether or not authorization is enabled, as Pulsar does; who may call these routes is
``access``'s business.
"""

from __future__ import annotations

from typing import Any

from engine.authorization import actions_of
from engine.names import TopicName
from proxy.admin.bodies import UnreadableBodyError, as_string
from proxy.admin.context import AdminContext
from proxy.admin.http import AdminError, Call, Router
from proxy.admin.topics import T as TOPIC
from proxy.admin.topics import parse_topic, partitions_of

NS = "/admin/v2/namespaces/{tenant}/{namespace}"
_ACTION = "org.apache.pulsar.common.policies.data.AuthAction"


def _set_of(value: Any, kind: str) -> list[Any]:
    """A JSON array as Jersey reads a ``Set<...>`` body (400 for anything else)."""
    if not isinstance(value, list):
        raise UnreadableBodyError(400, f"Cannot deserialize value of type `java.util.HashSet<{kind}>`")
    return value


def register(router: Router, ctx: AdminContext) -> None:
    """Add the permission routes."""
    broker = ctx.broker
    permissions = broker.authorization.permissions

    def namespace_of(call: Call, missing: str = "Namespace does not exist") -> str:
        namespace = f"{call['tenant']}/{call['namespace']}"
        if namespace not in broker.namespaces:
            raise AdminError(404, missing)
        return namespace

    def existing_topic(call: Call) -> TopicName:
        name = parse_topic(call)
        if name.namespace_name not in broker.namespaces:
            raise AdminError(404, "Namespace does not exist")
        exists = broker.exists(name.full) or partitions_of(ctx, name) > 0
        parent = broker.partitions_of(name.partitioned_parent.full)
        if name.partition_index >= 0 and parent is not None:
            exists = exists or name.partition_index < parent
        if not exists:
            raise AdminError(404, f"Topic {name.full} not found")
        return name

    # -- namespaces ------------------------------------------------------------------------------

    @router.route("GET", NS + "/permissions")
    def namespace_permissions(call: Call) -> Any:
        return permissions.of_namespace(namespace_of(call))

    @router.route("POST", NS + "/permissions/{role}")
    def grant_on_namespace(call: Call) -> Any:
        body = call.json()
        if body is None:
            raise AdminError(400, "Actions should not be null")
        actions = actions_of(_set_of(body, _ACTION))
        permissions.grant_namespace(namespace_of(call, "Topic's namespace does not exist"), call["role"], actions)
        return None

    @router.route("DELETE", NS + "/permissions/{role}")
    def revoke_on_namespace(call: Call) -> Any:
        permissions.revoke_namespace(namespace_of(call), call["role"])
        return None

    # -- subscriptions ---------------------------------------------------------------------------

    @router.route("GET", NS + "/permissions/subscription")
    def subscription_permissions(call: Call) -> Any:
        return permissions.of_subscriptions(namespace_of(call))

    @router.route("POST", NS + "/permissions/subscription/{sub}")
    def grant_on_subscription(call: Call) -> Any:
        # Jackson reads numbers and booleans as their text, and keeps a null role.
        roles = [as_string(role) for role in _set_of(call.json(required=True), "java.lang.String")]
        permissions.grant_subscription(namespace_of(call), call["sub"], roles)
        return None

    @router.route("DELETE", NS + "/permissions/{sub}/{role}")
    def revoke_on_subscription(call: Call) -> Any:
        namespace = namespace_of(call)
        try:
            permissions.revoke_subscription(namespace, call["sub"], call["role"])
        except ValueError as exc:
            # Pulsar lets the provider's IllegalArgumentException through as an internal error.
            raise AdminError(500, str(exc)) from None
        return None

    # -- topics ----------------------------------------------------------------------------------

    @router.route("GET", TOPIC + "/permissions")
    def topic_permissions(call: Call) -> Any:
        return permissions.of_topic(existing_topic(call))

    @router.route("POST", TOPIC + "/permissions/{role}")
    def grant_on_topic(call: Call) -> Any:
        body = call.json()
        if body is not None:
            _set_of(body, _ACTION)  # read before anything else, as Jersey reads it
        name = existing_topic(call)
        actions = None if body is None else actions_of(_set_of(body, _ACTION))
        permissions.grant_topic(name, call["role"], actions)
        return None

    @router.route("DELETE", TOPIC + "/permissions/{role}")
    def revoke_on_topic(call: Call) -> Any:
        name = existing_topic(call)
        # As Pulsar: from every partition of a partitioned topic too.
        for index in range(partitions_of(ctx, name)):
            permissions.revoke_topic(name.partition(index), call["role"])
        permissions.revoke_topic(name, call["role"])
        return None
