"""Pulsar admin routes this endpoint does not serve: each answers 501 with a reason, so that no wider route takes
the request and a user learns why (the route inventory, tests/test_route_inventory.py, lists Pulsar's routes)."""

from __future__ import annotations

from typing import Any

from proxy.admin.context import AdminContext
from proxy.admin.http import AdminError, Call, Router

V2 = "/admin/v2"
NS = V2 + "/namespaces/{tenant}/{namespace}"
T = V2 + "/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}"
SUB = T + "/subscription/{subName}"
_CLUSTERS = "This endpoint is the one cluster it reports; clusters are not created, changed or deleted"
_ISOLATION = "Namespace isolation policies place namespaces on brokers; this endpoint is a single broker"
_BUNDLES = (
    "Namespace bundles are fixed here (one owner, this endpoint); they are not split, unloaded or listed one by one"
)
_OFFLOAD = "Tiered storage (offloading ledgers to long-term storage) does not exist here"
_GROUPS = "Resource groups (rate quotas shared by namespaces) do not exist here"
_GEO = "Geo-replication and cluster migration need several clusters; this endpoint is one"
_PERMISSIONS = "Granting or revoking permissions on several topics in one call is not built; grant per topic"

#: ``(method, Pulsar's path pattern, why it is not served)``.
UNSUPPORTED: list[tuple[str, str, str]] = [
    ("PUT", V2 + "/clusters/{cluster}", _CLUSTERS),
    ("POST", V2 + "/clusters/{cluster}", _CLUSTERS),
    ("DELETE", V2 + "/clusters/{cluster}", _CLUSTERS),
    ("GET", V2 + "/clusters/{cluster}/peers", _GEO),
    ("POST", V2 + "/clusters/{cluster}/peers", _GEO),
    ("GET", V2 + "/clusters/{cluster}/migrate", _GEO),
    ("POST", V2 + "/clusters/{cluster}/migrate", _GEO),
    ("POST", NS + "/migration", _GEO),
    ("GET", SUB + "/replicatedSubscriptionStatus", _GEO),
    ("POST", SUB + "/replicatedSubscriptionStatus", _GEO),
    ("GET", V2 + "/clusters/{cluster}/namespaceIsolationPolicies", _ISOLATION),
    ("GET", V2 + "/clusters/{cluster}/namespaceIsolationPolicies/brokers", _ISOLATION),
    ("GET", V2 + "/clusters/{cluster}/namespaceIsolationPolicies/brokers/{broker}", _ISOLATION),
    ("GET", V2 + "/clusters/{cluster}/namespaceIsolationPolicies/{policyName}", _ISOLATION),
    ("POST", V2 + "/clusters/{cluster}/namespaceIsolationPolicies/{policyName}", _ISOLATION),
    ("DELETE", V2 + "/clusters/{cluster}/namespaceIsolationPolicies/{policyName}", _ISOLATION),
    ("POST", V2 + "/brokers/shutdown", "The endpoint is stopped by its process manager (SIGTERM), not over HTTP"),
    ("GET", NS + "/resourcegroup", _GROUPS),
    (
        "POST",
        NS + "/resourcegroup/{resourcegroup}",
        "Resource groups (rate quotas shared by namespaces) do not exist here",
    ),
    ("DELETE", NS + "/resourcegroup", _GROUPS),
    ("DELETE", NS + "/{bundle}", _BUNDLES),
    ("PUT", NS + "/{bundle}/unload", _BUNDLES),
    ("PUT", NS + "/{bundle}/split", _BUNDLES),
    ("GET", NS + "/{bundle}/topicHashPositions", _BUNDLES),
    ("POST", NS + "/{bundle}/clearBacklog", _BUNDLES),
    ("POST", NS + "/{bundle}/clearBacklog/{subscription}", _BUNDLES),
    ("POST", NS + "/{bundle}/unsubscribe/{subscription}", _BUNDLES),
    ("GET", V2 + "/non-persistent/{tenant}/{namespace}/{bundle}", _BUNDLES),
    ("GET", "/lookup/v2/topic/{topic-domain}/{tenant}/{namespace}/{topic}/bundle", _BUNDLES),
    ("GET", NS + "/scanOffloadedLedgers", _OFFLOAD),
    ("GET", T + "/offload", _OFFLOAD),
    ("PUT", T + "/offload", _OFFLOAD),
    ("DELETE", T + "/truncate", "Truncating deletes ledgers a topic rolled over; a topic here has one ledger"),
    ("GET", T + "/backlog", "The offline backlog estimate reads a topic's ledgers without loading it"),
    ("PUT", T + "/backlogSize", "Resetting the backlog size estimate (of an offloaded topic) does not apply here"),
    ("GET", T + "/getMessageIdByIndex", "Broker entry metadata (message indexes) is not kept"),
    ("POST", SUB + "/analyzeBacklog", "Backlog analysis runs entry filters; none are installed here"),
    ("POST", SUB + "/expireMessages", "Expiring up to a message id is not built; expire by time is"),
    ("GET", SUB + "/properties", "Subscription properties are not kept"),
    ("PUT", SUB + "/properties", "Subscription properties are not kept"),
    ("POST", V2 + "/namespaces/grantPermissionsOnTopics", _PERMISSIONS),
    ("POST", V2 + "/namespaces/revokePermissionsOnTopics", _PERMISSIONS),
]


def register(router: Router, ctx: AdminContext) -> None:
    """Add a 501 answer for each route of :data:`UNSUPPORTED`."""

    def refuse(reason: str) -> Any:
        def handler(call: Call) -> Any:
            raise AdminError(501, f"{reason}: not supported by this endpoint")

        return handler

    for method, pattern, reason in UNSUPPORTED:
        if not router.serves(method, pattern):  # a route built since takes precedence
            router.add(method, pattern, refuse(reason))
