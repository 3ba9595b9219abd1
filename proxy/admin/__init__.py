"""The Pulsar-compatible admin REST API, Prometheus metrics and HTTP lookup, on ``twisted.web``.

It serves ``pulsar-admin``, the Java ``PulsarAdmin`` client and plain HTTP in the broker's process and reactor:
one module per group of resources (``tenants``: tenants, namespaces and policies; ``permissions``; ``topics``;
``topic_policies``; ``transactions``; ``schemas``; ``status``: lookup, clusters, brokers; ``metrics``), routed by
:class:`~proxy.admin.http.Router`, each route behind the check of ``access`` (who may call it).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from twisted.web import server

from proxy.admin import (
    access,
    metrics,
    permissions,
    schemas,
    status,
    tenants,
    topic_policies,
    topics,
    transactions,
    unsupported,
)
from proxy.admin.auth import AdminAuthentication
from proxy.admin.context import AdminContext
from proxy.admin.http import AdminResource, Router

if TYPE_CHECKING:
    from engine.broker import Broker
    from proxy.authentication import Authenticator
    from proxy.server import BrokerService


def build_router(ctx: AdminContext) -> Router:
    """Every admin route."""
    router = Router()
    for group in (tenants, permissions, topics, topic_policies, transactions, schemas, status, metrics, unsupported):
        group.register(router, ctx)
    router.wrap(access.guard(ctx))
    return router


def admin_site(
    broker: Broker,
    service: BrokerService,
    admin_port: int,
    authenticator: Authenticator | None = None,
    authenticate_metrics: bool = False,
    admin_tls_port: int | None = None,
) -> server.Site:
    """The ``twisted.web`` site to listen with on the admin port (and the https one, if any)."""
    router = build_router(AdminContext(broker, service, admin_port, admin_tls_port))
    site = server.Site(AdminResource(router, AdminAuthentication(authenticator, authenticate_metrics)))
    # /metrics renders in a worker thread; hand the GIL back to the reactor every millisecond (not every 5) so that
    # message traffic waits little while a scrape renders. Nothing changes while the reactor runs alone.
    sys.setswitchinterval(0.001)
    site.displayTracebacks = False
    site.noisy = False
    # No access log: it would date requests by the reactor's clock, which is monotonic (see proxy.reactor).
    site.log = lambda request: None
    return site
