"""Authorization on this endpoint alone (the side-by-side scenarios are tests/conformance/test_authorization.py):
what a transaction's owner survives, grants that authorization-enabled off keeps but does not enforce, and the
super-user list as Pulsar reads it.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from proxy.config import load, super_user_roles
from tests.conformance.test_authorization import SECRET, RawClient, _sorted, _txn_answer, call, token
from tests.server_process import ServerProcess
from wire.pulsar_api_pb2 import BaseCommand

T = BaseCommand

SECRET_ARGS = ("--authentication-enabled", "--authentication-providers", "token")


def _server(root: Path, *extra: str) -> ServerProcess:
    secret = root / "secret.key"
    root.mkdir(parents=True, exist_ok=True)
    secret.write_bytes(SECRET)
    return ServerProcess(root / "data", *SECRET_ARGS, "--token-secret-key", f"file://{secret}", *extra)


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = _server(tmp_path, "--authorization-enabled", "--super-user-roles", " admin , ops ").start(timeout=30)
    yield proc
    proc.stop()


def test_a_transactions_owner_survives_a_restart(secured: ServerProcess) -> None:
    """The owner is part of the transaction's durable record: after kill -9 and a restart, another role still may
    not end it, and the owner may."""
    alice = RawClient(secured.url, "alice")
    alice.send(T.TC_CLIENT_CONNECT_REQUEST, request_id=alice.next_id(), tc_id=0)
    alice.read()
    alice.send(T.NEW_TXN, request_id=alice.next_id(), tc_id=0, txn_ttl_millis=600_000)
    response = alice.read().command.newTxnResponse
    txn = {"txnid_most_bits": response.txnid_most_bits, "txnid_least_bits": response.txnid_least_bits}
    alice.close()
    secured.kill()
    secured.start(timeout=30)
    answers = {}
    for role in ("bob", "alice"):
        conn = RawClient(secured.url, role)
        conn.send(T.TC_CLIENT_CONNECT_REQUEST, request_id=conn.next_id(), tc_id=0)
        conn.read()
        answers[role] = _txn_answer(conn, T.END_TXN, "endTxnResponse", txn_action=0, **txn)
        conn.close()
    assert answers == {
        "bob": {
            "error": "TransactionNotFound",
            "message": "Client (bob) is neither the owner of the transaction (txn) nor a super user",
        },
        "alice": {"ok": True},
    }


def test_super_user_roles_are_a_comma_list(secured: ServerProcess) -> None:
    """Both roles of `` admin , ops `` are super-users (blanks around names dropped, as Pulsar splits the list)."""
    for role in ("admin", "ops"):
        assert call(secured.admin_url, role, "GET", "/admin/v2/tenants")[0] == 200
    assert call(secured.admin_url, "other", "GET", "/admin/v2/tenants")[0] == 401
    assert super_user_roles(load({"super_user_roles": " admin , ops ,"}, None, {})) == ("admin", "ops")


def test_without_authorization_grants_are_kept_but_not_enforced(tmp_path: Path) -> None:
    """authorization-enabled off (the default): any authenticated role produces and consumes anywhere and calls any
    admin route, and the permission routes still store grants (as a Pulsar broker with authorization disabled)."""
    proc = _server(tmp_path).start(timeout=30)
    try:
        grant = call(proc.admin_url, "nobody", "POST", "/admin/v2/namespaces/public/default/permissions/x", ["produce"])
        assert grant == (204, None)
        assert call(proc.admin_url, "nobody", "GET", "/admin/v2/namespaces/public/default/permissions") == (
            200,
            {"x": ["produce"]},
        )
        client = pulsar.Client(proc.url, authentication=pulsar.AuthenticationToken(token("nobody")))
        try:
            client.create_producer("persistent://public/default/open-topic").send(b"x")
            client.subscribe("persistent://public/default/open-topic", "s").close()
        finally:
            client.close()
    finally:
        proc.stop()


def test_java_admin_grants_and_revokes(secured: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """``PulsarAdmin`` (Java 4.2.4, token authentication) grants, lists and revokes namespace, subscription and
    topic permissions as a super-user; a role without grants is refused each call, with Pulsar's statuses."""
    from tests.test_admin_java import run_admin

    for method, path, body in (
        ("PUT", "/admin/v2/tenants/acme", {"adminRoles": [], "allowedClusters": ["standalone"]}),
        ("PUT", "/admin/v2/namespaces/acme/ns", None),
        ("PUT", "/admin/v2/persistent/acme/ns/orders", None),
    ):
        assert call(secured.admin_url, "admin", method, path, body)[0] == 204
    topic = "persistent://acme/ns/orders"
    monkeypatch.setenv("PULSAR_AUTH_TOKEN", token("admin"))
    obs = run_admin(secured.admin_url, secured.url, "permissions", "acme/ns", topic)
    # The client reads the actions into a Java set, whose order is its own.
    assert {k: _sorted(v) for k, v in obs.items() if k != "scenario"} == {
        "grant_namespace": {"ok": None},
        "namespace_permissions": {"ok": {"alice": ["consume", "produce"]}},
        "grant_subscription": {"ok": None},
        "subscription_permissions": {"ok": {"sub1": ["carol"]}},
        "grant_topic": {"ok": None},
        "topic_permissions": {"ok": {"alice": ["consume", "produce"], "bob": ["consume"]}},
        "revoke_topic": {"ok": None},
        "revoke_subscription": {"ok": None},
        "revoke_namespace": {"ok": None},
        "namespace_permissions_after": {"ok": {}},
    }
    monkeypatch.setenv("PULSAR_AUTH_TOKEN", token("nobody"))
    refused = run_admin(secured.admin_url, secured.url, "permissions", "acme/ns", topic)
    statuses = {key: outcome["error"]["status"] for key, outcome in refused.items() if key != "scenario"}
    assert statuses == {
        "grant_namespace": 403,
        "namespace_permissions": 403,
        "grant_subscription": 403,
        "subscription_permissions": 403,
        "grant_topic": 401,
        "topic_permissions": 401,
        "revoke_topic": 401,
        "revoke_subscription": 403,
        "revoke_namespace": 403,
        "namespace_permissions_after": 403,
    }


def test_the_anonymous_role_is_authorized_like_any_other(tmp_path: Path) -> None:
    """With anonymous-user-role, a client without credentials gets that role (as Pulsar's ServerCnx gives it), and
    the role needs grants like any other: refused until the super-user grants it produce on the namespace."""
    proc = _server(tmp_path, "--authorization-enabled", "--super-user-roles", "admin", "--anonymous-user-role", "anon")
    proc.start(timeout=30)
    topic = "persistent://public/default/anonymous-topic"
    client = pulsar.Client(proc.url, operation_timeout_seconds=5)
    try:
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer(topic)
        grants = "/admin/v2/namespaces/public/default/permissions"
        assert call(proc.admin_url, "admin", "POST", f"{grants}/anon", ["produce"]) == (204, None)
        client.create_producer(topic).send(b"x")
        with pytest.raises(pulsar.AuthorizationError):
            client.subscribe(topic, "s")
    finally:
        client.close()
        proc.stop()


def test_authorization_without_authentication_refuses_clients(tmp_path: Path) -> None:
    """Without authentication a connection has no role: with authorization enabled every checked command is refused
    (as Pulsar's ServerCnx refuses a null role), the admin API is not checked (Pulsar checks it only when both are
    enabled), and start-up says so."""
    proc = ServerProcess(tmp_path / "data", "--authorization-enabled").start(timeout=30)
    client = pulsar.Client(proc.url, operation_timeout_seconds=5)
    try:
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer("persistent://public/default/no-role")
        with urllib.request.urlopen(proc.admin_url + "/admin/v2/tenants", timeout=10) as response:
            assert response.status == 200
    finally:
        client.close()
        proc.stop()
    assert "authorization is enabled without authentication" in proc.log()


def test_watching_a_namespaces_topics_needs_the_right_to_list_them(secured: ServerProcess) -> None:
    """WATCH_TOPIC_LIST is checked as GET_TOPICS_OF_NAMESPACE is (the namespace operation GET_TOPICS), with the text
    Pulsar 4.2.4's ServerCnx answers; a super-user is let through."""
    answers = {}
    for role in ("nobody", "admin"):
        conn = RawClient(secured.url, role)
        conn.send(
            T.WATCH_TOPIC_LIST, request_id=conn.next_id(), watcher_id=1, namespace="public/default",
            topics_pattern="persistent://public/default/.*",
        )
        command = conn.read().command
        answers[role] = (
            (BaseCommand.Type.Name(command.type), command.error.message) if command.type == T.ERROR
            else BaseCommand.Type.Name(command.type)
        )
        conn.close()
    assert answers == {
        "nobody": ("ERROR", "Proxy Client is not authorized to watchTopicList"),
        "admin": "WATCH_TOPIC_LIST_SUCCESS",
    }
