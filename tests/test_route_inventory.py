"""The route inventory: every admin REST route Apache Pulsar 4.2.4 serves for tenants, namespaces, topics,
subscriptions, topic policies, schemas, transactions, brokers, clusters and lookup
(``tests/conformance/routes/pulsar-4.2.4.txt``, read from Pulsar's own resource classes) resolves here to the route
of the same path, never to a wider one; the routes this endpoint does not serve answer 501 saying so.

What the served routes answer is compared with Pulsar in ``tests/conformance/test_routes.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.broker import Broker
from engine.clock import ManualClock
from engine.store import Store
from proxy.admin import build_router, schemas, status, tenants, topic_policies, topics, transactions
from proxy.admin.context import AdminContext
from proxy.admin.http import Router
from proxy.admin.unsupported import UNSUPPORTED
from tests.conformance.pulsar_routes import pulsar_routes
from tests.server_process import ServerProcess
from tests.test_admin_http import Http, start_admin_server

ServerFactory = Callable[..., ServerProcess]
#: A value for each path parameter of Pulsar's routes (one that names no literal segment of another route).
_SAMPLE = "x-1"


def _segments(pattern: str) -> list[str]:
    return [_SAMPLE if part.startswith("{") else part for part in pattern.strip("/").split("/")]


def _shape(pattern: str) -> list[str]:
    """A pattern with its parameters unnamed; a ``{name:a|b}`` parameter stands for each of its values."""
    return ["{}" if part.startswith("{") and ":" not in part else part for part in pattern.strip("/").split("/")]


def _same_route(pulsar: str, ours: str) -> bool:
    left, right = _shape(pulsar), _shape(ours)
    if len(left) != len(right):
        return False
    return all(
        a == b or (b.startswith("{") and a in b[1:-1].partition(":")[2].split("|"))
        for a, b in zip(left, right, strict=True)
    )


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> AdminContext:
    """An engine on a fresh store; no Pulsar protocol service (the routes are only resolved)."""
    store = Store(Path(tmp_path_factory.mktemp("routes")) / "store.sqlite")
    return AdminContext(Broker(store, ManualClock()), None, 0)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def router(context: AdminContext) -> Router:
    return build_router(context)


def test_every_pulsar_route_resolves_to_the_route_of_its_path(router: Router) -> None:
    routes = pulsar_routes()
    assert len(routes) > 500
    wrong = []
    for method, pattern in routes:
        ours = router.pattern_of(method, _segments(pattern))
        if ours is None or not _same_route(pattern, ours):
            wrong.append(f"{method} {pattern} -> {ours}")
    assert not wrong, "\n".join(wrong)


#: Routes of this endpoint that are no admin route of Pulsar's broker (Prometheus metrics).
_OWN_ROUTES = {("GET", "/metrics")}


def test_every_route_served_is_a_pulsar_route(router: Router) -> None:
    """A route Pulsar lacks would answer where Pulsar answers 404 or 405 (a DELETE of a policy it only sets)."""
    pulsar = {(m, tuple(_shape(p))) for m, p in pulsar_routes()}
    extra = [
        (method, expanded)
        for method, pattern in router.routes()
        for expanded in _expansions(pattern)
        if (method, tuple(_shape(expanded))) not in pulsar and (method, expanded) not in _OWN_ROUTES
    ]
    assert extra == []


def _expansions(pattern: str) -> list[str]:
    """The patterns a ``{name:a|b}`` parameter stands for."""
    parts = pattern.split("/")
    for i, part in enumerate(parts):
        if part.startswith("{") and ":" in part:
            choices = part[1:-1].partition(":")[2].split("|")
            return [e for c in choices for e in _expansions("/".join([*parts[:i], c, *parts[i + 1 :]]))]
    return [pattern]


def test_unsupported_routes_are_pulsar_routes_that_nothing_else_serves(context: AdminContext) -> None:
    pulsar = {(m, tuple(_shape(p))) for m, p in pulsar_routes()}
    listed = [(m, e) for m, p, _ in UNSUPPORTED for e in _expansions(p)]
    assert [r for r in listed if (r[0], tuple(_shape(r[1]))) not in pulsar] == []
    assert len(set(listed)) == len(listed)
    served = Router()
    for group in (tenants, topics, topic_policies, transactions, schemas, status):
        group.register(served, context)
    assert [r for r in listed if served.pattern_of(r[0], _segments(r[1])) is not None] == []


def test_unsupported_routes_answer_501_saying_so(server_factory: ServerFactory) -> None:
    _, url = start_admin_server(server_factory)
    http = Http(url)
    for method, pattern, reason in ((m, e, r) for m, p, r in UNSUPPORTED for e in _expansions(p)):
        path = "/" + "/".join(_segments(pattern))
        status, _, body = http.request(method, path, {} if method in ("POST", "PUT") else None)
        assert status == 501, f"{method} {path}: {status}"
        assert json.loads(body)["reason"] == f"{reason}: not supported by this endpoint", path
