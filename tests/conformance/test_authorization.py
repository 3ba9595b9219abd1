"""Authorization (issue 21) on both targets started with the equivalent settings: token authentication, authorization
enabled, ``admin`` the super-user (broker.conf ``authenticationEnabled``, ``authorizationEnabled``, ``superUserRoles``,
``tokenSecretKey``, and the standalone's own client authenticating as ``admin``).

Every scenario makes a tenant whose admin role is ``tadmin``, a namespace where ``alice`` may produce, a topic where
``bob`` may consume, and a role ``nobody`` with no grant; it observes, with tokens signed here:

- the permission routes (grant, list, revoke on namespaces, topics and subscriptions) and their answers;
- every admin route this endpoint serves, called by ``nobody`` (refused: status and Pulsar's reason), and the
  everyday ones called by each role;
- the Pulsar protocol: what each role may do with the official Python client, and the exact error codes and texts of
  LOOKUP, PARTITIONED_METADATA, PRODUCER, SUBSCRIBE and GET_TOPICS_OF_NAMESPACE refusals on raw frames;
- transactions: only the role that opened one (or a super-user) may add to it or end it.

The module starts its own targets (the suite's shared ones run without authentication); ``--service-url`` runs do
not apply. Golden: ``golden/authorization.json``, recorded from a private Pulsar 4.2.4 standalone
(``--conformance-target pulsar --record-golden``).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pulsar
import pytest

from engine.coordinator import COORDINATOR_ASSIGN_TOPIC
from pulsar_txn_proxy.conformance.framework import Outcome, Run, Target, scenario
from tests.conformance.pulsar_standalone import PulsarStandalone
from tests.server_process import ServerProcess
from tests.test_bad_input import RawConnection
from tests.txn_harness import JVM_OPTIONS, build_harness, observations
from wire.pulsar_api_pb2 import BaseCommand, ServerError

T = BaseCommand
#: The module's targets are module-scoped and reached through ``request.getfixturevalue``: keep its tests on one
#: pytest-xdist worker (tests/conftest.py) so that they start once.
pytestmark = pytest.mark.xdist_group("conformance-authorization")
SUPER_USER = "admin"
ROLES = ("nobody", "alice", "bob", "tadmin")
#: The HMAC key tokens are signed with (both targets read it from a file, as ``pulsar tokens create-secret-key``
#: writes it).
SECRET = b"authorization-conformance-secret"


def token(role: str) -> str:
    return jwt.encode({"sub": role}, SECRET, algorithm="HS256")


def _secret_file(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "secret.key"
    path.write_bytes(SECRET)
    return path


def _wait_for_admin(admin_url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if call(admin_url, SUPER_USER, "GET", "/admin/v2/clusters")[0] == 200:
            return
        time.sleep(0.1)
    raise RuntimeError(f"the admin API at {admin_url} did not answer within {timeout} s")


@pytest.fixture(scope="module")
def endpoint_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """This endpoint with token authentication and authorization, ``admin`` its super-user."""
    root = tmp_path_factory.mktemp("authorization")
    secret = _secret_file(root)
    proc = ServerProcess(
        root / "endpoint",
        "--authentication-enabled", "--authentication-providers", "token",
        "--token-secret-key", f"file://{secret}",
        "--authorization-enabled", "--super-user-roles", SUPER_USER,
    )  # fmt: skip
    proc.start(timeout=60)
    _wait_for_admin(proc.admin_url)
    yield Target("this endpoint", proc.url, proc.admin_url)
    proc.stop()


@pytest.fixture(scope="module")
def pulsar_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A Pulsar standalone with the equivalent broker.conf; its own client authenticates as ``admin``."""
    root = tmp_path_factory.mktemp("authorization")
    secret = _secret_file(root)
    conf = {
        "authenticationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        "tokenSecretKey": f"file://{secret}",
        "authorizationEnabled": "true",
        "superUserRoles": SUPER_USER,
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": f"token:{token(SUPER_USER)}",
    }
    pulsar_standalone = PulsarStandalone(
        root / "pulsar", extra_conf=conf, admin_headers={"Authorization": f"Bearer {token(SUPER_USER)}"}
    )
    pulsar_standalone.start()
    try:
        yield Target("Apache Pulsar", pulsar_standalone.url, pulsar_standalone.admin_url)
    finally:
        pulsar_standalone.stop()


# -- admin calls with a role ---------------------------------------------------------------------------------------


def call(admin_url: str, role: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """An admin request with ``role``'s token: status and decoded body."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        admin_url + path,
        data=data,
        method=method,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token(role)}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    text = raw.decode(errors="replace")
    try:
        return status, json.loads(text) if text.strip() else None
    except ValueError:
        return status, text


def _sorted(value: Any) -> Any:
    """Role and action sets with a stable order (Pulsar keeps them in Java hash sets)."""
    if isinstance(value, dict):
        return {k: _sorted(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((_sorted(v) for v in value), key=json.dumps)
    return value


class Setup:
    """A tenant administered by ``tadmin`` with namespace ``ns``: ``alice`` produces on the namespace, ``bob``
    consumes on its topic ``top``, and subscription ``sub1`` is ``carol``'s alone."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.admin_url = run.target.admin_url or ""
        self.tenant = run.name("tenant")
        self.namespace = f"{self.tenant}/ns"
        self.topic = f"persistent://{self.namespace}/top"
        steps = [
            ("PUT", f"/admin/v2/tenants/{self.tenant}", {"adminRoles": ["tadmin"], "allowedClusters": ["standalone"]}),
            ("PUT", f"/admin/v2/namespaces/{self.namespace}", None),
            ("PUT", f"/admin/v2/persistent/{self.namespace}/top", None),
            ("POST", f"/admin/v2/namespaces/{self.namespace}/permissions/alice", ["produce"]),
            ("POST", f"/admin/v2/persistent/{self.namespace}/top/permissions/bob", ["consume"]),
            ("POST", f"/admin/v2/namespaces/{self.namespace}/permissions/subscription/sub1", ["carol"]),
        ]
        for method, path, body in steps:
            status, answer = self.admin(SUPER_USER, method, path, body)
            if status >= 300:
                raise RuntimeError(f"{method} {path}: {status} {answer}")

    def admin(self, role: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return call(self.admin_url, role, method, path.replace("{t}", self.tenant), body)

    def untenanted(self, value: Any) -> Any:
        """``value`` with the tenant's name as ``{t}``, in keys too."""
        return json.loads(json.dumps(value).replace(self.tenant, "{t}"))

    def answer(self, role: str, method: str, path: str, body: Any = None) -> dict[str, Any]:
        """Status, and Pulsar's reason when refused (the broker's own address left out of it)."""
        status, answer = self.admin(role, method, path, body)
        out: dict[str, Any] = {"status": status}
        if status >= 400 and isinstance(answer, dict):
            out["reason"] = re.sub(r" on broker \[[^\]]*\]", " on broker [...]", str(answer.get("reason")))
        return out

    def client(self, role: str) -> pulsar.Client:
        return self.run.client(authentication=pulsar.AuthenticationToken(token(role)))


# -- the permission routes -------------------------------------------------------------------------------------------


@scenario
def test_permission_routes(run: Run) -> Outcome:
    """Grant, list and revoke on a namespace, a topic (and a partition) and a subscription; the answers to bodies
    that are not a set of actions, to names that do not exist, and the policies that hold the grants."""
    setup = Setup(run)
    ns, t = "{t}/ns", "{t}"
    partitioned = f"/admin/v2/persistent/{ns}/parts"
    steps: list[tuple[str, str, Any]] = [
        ("GET", f"/admin/v2/namespaces/{ns}/permissions", None),
        ("POST", f"/admin/v2/namespaces/{ns}/permissions/carol", ["consume", "produce", "functions"]),
        ("POST", f"/admin/v2/namespaces/{ns}/permissions/dave", ["bogus"]),
        ("POST", f"/admin/v2/namespaces/{ns}/permissions/dave", {"a": 1}),
        ("POST", f"/admin/v2/namespaces/{ns}/permissions/dave", None),
        ("POST", f"/admin/v2/namespaces/{ns}/permissions/erin", []),
        ("POST", f"/admin/v2/namespaces/{ns}/permissions/erin", "produce"),
        ("GET", f"/admin/v2/namespaces/{ns}/permissions", None),
        ("DELETE", f"/admin/v2/namespaces/{ns}/permissions/erin", None),
        ("DELETE", f"/admin/v2/namespaces/{ns}/permissions/never-granted", None),
        ("GET", f"/admin/v2/namespaces/{t}/missing/permissions", None),
        ("POST", f"/admin/v2/namespaces/{t}/missing/permissions/x", ["produce"]),
        ("POST", f"/admin/v2/persistent/{ns}/top/permissions/alice", ["consume"]),
        ("POST", f"/admin/v2/persistent/{ns}/top/permissions/hank", None),
        ("GET", f"/admin/v2/persistent/{ns}/top/permissions", None),
        ("GET", f"/admin/v2/persistent/{ns}/missing/permissions", None),
        ("POST", f"/admin/v2/persistent/{ns}/missing/permissions/x", ["produce"]),
        ("DELETE", f"/admin/v2/persistent/{ns}/missing/permissions/x", None),
        ("PUT", f"{partitioned}/partitions", 2),
        ("POST", f"{partitioned}/permissions/gina", ["produce"]),
        ("POST", f"{partitioned}-partition-0/permissions/ivan", ["consume"]),
        ("GET", f"{partitioned}/permissions", None),
        ("GET", f"{partitioned}-partition-0/permissions", None),
        ("GET", f"{partitioned}-partition-1/permissions", None),
        ("DELETE", f"{partitioned}/permissions/gina", None),
        ("GET", f"{partitioned}/permissions", None),
        ("DELETE", f"/admin/v2/persistent/{ns}/top/permissions/alice", None),
        ("DELETE", f"/admin/v2/persistent/{ns}/top/permissions/never-granted", None),
        ("GET", f"/admin/v2/persistent/{ns}/top/permissions", None),
        ("POST", f"/admin/v2/namespaces/{ns}/permissions/subscription/sub2", ["zed", "amy", "bob"]),
        ("GET", f"/admin/v2/namespaces/{ns}/permissions/subscription", None),
        ("DELETE", f"/admin/v2/namespaces/{ns}/permissions/sub2/amy", None),
        ("DELETE", f"/admin/v2/namespaces/{ns}/permissions/sub9/amy", None),
        ("GET", f"/admin/v2/namespaces/{ns}/permissions/subscription", None),
    ]
    outcome: dict[str, Any] = {}
    for index, (method, path, body) in enumerate(steps):
        status, answer = setup.admin(SUPER_USER, method, path, body)
        outcome[f"{index:02d} {method} {path}"] = {"status": status, "body": _sorted(answer) if status < 300 else None}
    status, policies = setup.admin(SUPER_USER, "GET", "/admin/v2/namespaces/{t}/ns")
    outcome["auth_policies"] = setup.untenanted(_sorted(policies.get("auth_policies"))) if status == 200 else status
    return outcome


# -- who may call which admin route ----------------------------------------------------------------------------------

#: Every admin route this endpoint serves (the transaction statistics of a topic aside: Pulsar answers them without
#: a check, with errors of its own), with ``{t}`` the scenario's tenant, ``ns`` its namespace, ``top`` its topic.
ROUTES = (
    "GET /admin/v2/brokers",
    "GET /admin/v2/brokers/configuration/runtime",
    "GET /admin/v2/brokers/health",
    "GET /admin/v2/brokers/leaderBroker",
    "GET /admin/v2/brokers/ready",
    "GET /admin/v2/brokers/standalone",
    "GET /admin/v2/brokers/version",
    "GET /admin/v2/clusters",
    "GET /admin/v2/clusters/standalone",
    "GET /admin/v2/namespaces/{t}",
    "DELETE /admin/v2/namespaces/{t}/ns",
    "GET /admin/v2/namespaces/{t}/ns",
    "PUT /admin/v2/namespaces/{t}/ns",
    *(
        f"{method} /admin/v2/namespaces/{{t}}/ns/{endpoint}"
        for endpoint, methods in (
            ("allowedClusters", "DELETE GET POST"),
            ("allowedTopicPropertyKeysForMetrics", "DELETE GET POST"),
            ("autoSubscriptionCreation", "DELETE GET POST"),
            ("autoTopicCreation", "DELETE GET POST"),
            ("backlogQuota", "DELETE POST"),
            ("backlogQuotaMap", "GET"),
            ("bundles", "GET"),
            ("compactionThreshold", "DELETE GET PUT"),
            ("deduplication", "DELETE GET POST"),
            ("deduplicationSnapshotInterval", "DELETE GET POST"),
            ("delayedDelivery", "DELETE GET POST"),
            ("dispatchRate", "DELETE GET POST"),
            ("encryptionRequired", "DELETE GET POST"),
            ("entryFilters", "DELETE GET POST"),
            ("inactiveTopicPolicies", "DELETE GET POST"),
            ("isAllowAutoUpdateSchema", "DELETE GET POST"),
            ("maxConsumersPerSubscription", "DELETE GET POST"),
            ("maxConsumersPerTopic", "DELETE GET POST"),
            ("maxProducersPerTopic", "DELETE GET POST"),
            ("maxSubscriptionsPerTopic", "DELETE GET POST"),
            ("maxTopicsPerNamespace", "DELETE GET POST"),
            ("maxUnackedMessagesPerConsumer", "DELETE GET POST"),
            ("maxUnackedMessagesPerSubscription", "DELETE GET POST"),
            ("messageTTL", "DELETE GET POST"),
            ("offloadDeletionLagMs", "DELETE GET PUT"),
            ("offloadPolicies", "DELETE GET POST"),
            ("offloadThreshold", "DELETE GET PUT"),
            ("offloadThresholdInSeconds", "DELETE GET PUT"),
            ("permissions", "GET"),
            ("permissions/someone", "DELETE POST"),
            ("permissions/subscription", "GET"),
            ("permissions/subscription/sub1", "POST"),
            ("permissions/sub1/someone", "DELETE"),
            ("persistence", "DELETE GET POST"),
            ("properties", "DELETE GET PUT"),
            ("property/k", "DELETE GET"),
            ("property/k/v", "PUT"),
            ("publishRate", "DELETE GET POST"),
            ("replication", "DELETE GET POST"),
            ("replicatorDispatchRate", "DELETE GET POST"),
            ("retention", "DELETE GET POST"),
            ("schemaAutoUpdateCompatibilityStrategy", "DELETE GET PUT"),
            ("schemaCompatibilityStrategy", "DELETE GET PUT"),
            ("schemaValidationEnforced", "DELETE GET POST"),
            ("subscribeRate", "DELETE GET POST"),
            ("subscriptionAuthMode", "DELETE GET POST"),
            ("subscriptionDispatchRate", "DELETE GET POST"),
            ("subscriptionExpirationTime", "DELETE GET POST"),
            ("subscriptionTypesEnabled", "DELETE GET POST"),
            ("topics", "GET"),
            ("unload", "PUT"),
        )
        for method in methods.split()
    ),
    "GET /admin/v2/persistent/{t}/ns",
    "GET /admin/v2/persistent/{t}/ns/partitioned",
    "DELETE /admin/v2/persistent/{t}/ns/top",
    "PUT /admin/v2/persistent/{t}/ns/top",
    *(
        f"{method} /admin/v2/persistent/{{t}}/ns/top/{endpoint}"
        for endpoint, methods in (
            ("all_subscription/expireMessages/10", "POST"),
            ("backlogQuota", "DELETE POST"),
            ("backlogQuotaMap", "GET"),
            ("compaction", "GET PUT"),
            ("compactionThreshold", "DELETE GET POST"),
            ("createMissedPartitions", "POST"),
            ("deduplicationEnabled", "DELETE GET POST"),
            ("examinemessage", "GET"),
            ("internalStats", "GET"),
            ("lastMessageId", "GET"),
            ("ledger/1/entry/1", "GET"),
            ("messageTTL", "DELETE GET POST"),
            ("messageid/1", "GET"),
            ("partitioned-internalStats", "GET"),
            ("partitioned-stats", "GET"),
            ("partitions", "DELETE GET POST PUT"),
            ("permissions", "GET"),
            ("permissions/someone", "DELETE POST"),
            ("policies", "DELETE"),
            ("retention", "DELETE GET POST"),
            ("stats", "GET"),
            ("subscription/sub1", "DELETE PUT"),
            ("subscription/sub1/expireMessages/10", "POST"),
            ("subscription/sub1/position/1", "GET"),
            ("subscription/sub1/resetcursor", "POST"),
            ("subscription/sub1/resetcursor/1", "POST"),
            ("subscription/sub1/skip/1", "POST"),
            ("subscription/sub1/skip_all", "POST"),
            ("subscriptions", "GET"),
            ("terminate", "POST"),
            ("terminate/partitions", "POST"),
            ("unload", "PUT"),
        )
        for method in methods.split()
    ),
    "POST /admin/v2/schemas/{t}/ns/top/compatibility",
    "DELETE /admin/v2/schemas/{t}/ns/top/schema",
    "GET /admin/v2/schemas/{t}/ns/top/schema",
    "POST /admin/v2/schemas/{t}/ns/top/schema",
    "GET /admin/v2/schemas/{t}/ns/top/schema/0",
    "GET /admin/v2/schemas/{t}/ns/top/schemas",
    "GET /admin/v2/tenants",
    "DELETE /admin/v2/tenants/{t}",
    "GET /admin/v2/tenants/{t}",
    "POST /admin/v2/tenants/{t}",
    "PUT /admin/v2/tenants/{t}",
    "POST /admin/v3/transactions/abortTransaction/0/1",
    "GET /admin/v3/transactions/coordinatorStats",
    "GET /admin/v3/transactions/coordinators",
    "GET /admin/v3/transactions/slowTransactions/1000",
    "POST /admin/v3/transactions/transactionCoordinator/replicas",
    "GET /lookup/v2/topic/persistent/{t}/ns/top",
)
#: Route endings whose body Pulsar reads as a list, or as a number (read before any check: the body must parse).
_LIST_BODIES = ("allowedClusters", "allowedTopicPropertyKeysForMetrics", "replication", "subscriptionTypesEnabled")
_NUMBER_BODIES = re.compile(
    r"/(compactionThreshold|deduplication\w*|encryptionRequired|isAllowAutoUpdateSchema|max\w+|messageTTL|offload"
    r"(DeletionLagMs|Threshold|ThresholdInSeconds)|schema\w*Strategy|schemaValidationEnforced|subscriptionAuthMode|"
    r"subscriptionExpirationTime|partitions|replicas)$"
)


def _body(method: str, path: str) -> Any:
    """A body of the type the route reads (the refusals come after it is read, in Pulsar)."""
    if method not in ("POST", "PUT"):
        return None
    if "/tenants/" in path:
        return {"adminRoles": ["tadmin"], "allowedClusters": ["standalone"]}
    if "/permissions/subscription/" in path:
        return ["carol"]
    if "/permissions/" in path:
        return ["produce"]
    if path.endswith(_LIST_BODIES):
        return ["standalone"]
    if _NUMBER_BODIES.search(path):
        return 10
    return {}


@scenario
def test_admin_routes_refused_without_a_grant(run: Run) -> Outcome:
    """Every admin route called by a role without any grant: Pulsar's status (401 or 403, 200 where it checks
    nothing) and reason, route by route."""
    setup = Setup(run)
    outcome: dict[str, Any] = {}
    for route in ROUTES:
        method, path = route.split(" ", 1)
        outcome[route] = setup.answer("nobody", method, path, _body(method, path))
    return outcome


#: Routes every role calls: reads, and the grants and revocations of the permission routes.
EVERYDAY = (
    "GET /admin/v2/tenants",
    "GET /admin/v2/tenants/{t}",
    "GET /admin/v2/namespaces/{t}",
    "GET /admin/v2/namespaces/{t}/ns",
    "GET /admin/v2/namespaces/{t}/ns/topics",
    "GET /admin/v2/namespaces/{t}/ns/bundles",
    "GET /admin/v2/namespaces/{t}/ns/messageTTL",
    "GET /admin/v2/namespaces/{t}/ns/permissions",
    "POST /admin/v2/namespaces/{t}/ns/permissions/someone",
    "DELETE /admin/v2/namespaces/{t}/ns/permissions/someone",
    "GET /admin/v2/namespaces/{t}/ns/permissions/subscription",
    "POST /admin/v2/namespaces/{t}/ns/permissions/subscription/sub9",
    "DELETE /admin/v2/namespaces/{t}/ns/permissions/sub9/carol",
    "GET /admin/v2/persistent/{t}/ns",
    "GET /admin/v2/persistent/{t}/ns/top/stats",
    "GET /admin/v2/persistent/{t}/ns/top/internalStats",
    "GET /admin/v2/persistent/{t}/ns/top/partitions",
    "GET /admin/v2/persistent/{t}/ns/top/subscriptions",
    "GET /admin/v2/persistent/{t}/ns/top/messageTTL",
    "GET /admin/v2/persistent/{t}/ns/top/permissions",
    "POST /admin/v2/persistent/{t}/ns/top/permissions/someone",
    "DELETE /admin/v2/persistent/{t}/ns/top/permissions/someone",
    "PUT /admin/v2/persistent/{t}/ns/top/subscription/mine",
    "PUT /admin/v2/persistent/{t}/ns/top/subscription/sub1",
    "POST /admin/v2/persistent/{t}/ns/top/subscription/mine/skip_all",
    "GET /admin/v2/schemas/{t}/ns/top/schema",
    "GET /lookup/v2/topic/persistent/{t}/ns/top",
    "GET /admin/v2/persistent/{t}/ns/top/permissions",
    "GET /admin/v2/namespaces/{t}/missing/messageTTL",
    "GET /admin/v2/persistent/ghost-tenant/ns/top/permissions",
    "GET /admin/v2/namespaces/ghost-tenant/ns/permissions",
)


@scenario
def test_admin_routes_by_role(run: Run) -> Outcome:
    """The everyday routes called by the super-user, the tenant's admin, a namespace producer, a topic consumer and
    a role without grants."""
    setup = Setup(run)
    outcome: dict[str, Any] = {}
    for role in (SUPER_USER, *ROLES):
        for route in EVERYDAY:
            method, path = route.split(" ", 1)
            outcome[f"{role} {route}"] = setup.answer(role, method, path, _body(method, path))
    return outcome


# -- the Pulsar protocol --------------------------------------------------------------------------------------------


def _attempt(step: Any) -> str:
    try:
        step()
    except Exception as exc:
        return type(exc).__name__
    return "ok"


@scenario
def test_clients_by_role(run: Run) -> Outcome:
    """What each role may do with the official Python client: produce, consume through any subscription and
    through one whose role list leaves it out, read the partitions of the topic."""
    setup = Setup(run)
    outcome: dict[str, Any] = {}
    for role in (SUPER_USER, *ROLES):
        client = setup.client(role)
        outcome[role] = {
            "produce": _attempt(lambda c=client: c.create_producer(setup.topic).send(b"x")),
            "subscribe": _attempt(lambda c=client, r=role: c.subscribe(setup.topic, f"{r}-sub").close()),
            "subscribe_restricted": _attempt(lambda c=client: c.subscribe(setup.topic, "sub1").close()),
            "partitions": _attempt(lambda c=client: c.get_topic_partitions(setup.topic)),
        }
    return outcome


class RawClient(RawConnection):
    """A raw protocol connection that authenticates with a role's token."""

    def __init__(self, url: str, role: str) -> None:
        super().__init__(int(url.rsplit(":", 1)[1]))
        self.send(
            T.CONNECT,
            client_version="authz-conformance",
            protocol_version=20,
            auth_method_name="token",
            auth_data=token(role).encode(),
        )
        self.expect(T.CONNECTED)
        self.request_id = 0

    def next_id(self) -> int:
        self.request_id += 1
        return self.request_id

    def answer(self, kind: int, expected: int, **fields: Any) -> dict[str, Any]:
        """Send a request; the error code and message of its answer (``ok`` when there is none)."""
        self.send(kind, request_id=self.next_id(), **fields)
        command = self.read().command
        if command.type == T.ERROR:
            return {"error": ServerError.Name(command.error.error), "message": command.error.message}
        assert command.type == expected, command
        payload = {
            T.LOOKUP_RESPONSE: lambda: command.lookupTopicResponse,
            T.PARTITIONED_METADATA_RESPONSE: lambda: command.partitionMetadataResponse,
            T.GET_TOPICS_OF_NAMESPACE_RESPONSE: lambda: None,
            T.PRODUCER_SUCCESS: lambda: None,
            T.SUCCESS: lambda: None,
        }[command.type]()
        if payload is not None and payload.HasField("error"):
            return {"error": ServerError.Name(payload.error), "message": payload.message}
        return {"ok": True}


@scenario
def test_commands_refused(run: Run) -> Outcome:
    """The error code and text of each refused command, for a role without grants, for a topic of a tenant that does
    not exist, and for a subscription that must begin with the role (subscription auth mode Prefix)."""
    setup = Setup(run)
    prefixed_ns = f"/admin/v2/namespaces/{setup.tenant}/prefixed"
    statuses = [
        setup.admin(SUPER_USER, "PUT", prefixed_ns)[0],
        setup.admin(SUPER_USER, "POST", prefixed_ns + "/subscriptionAuthMode", "Prefix")[0],
        setup.admin(SUPER_USER, "POST", prefixed_ns + "/permissions/alice", ["consume"])[0],
    ]
    outcome: dict[str, Any] = {"setup": statuses}
    ghost = f"persistent://{run.name('ghost')}/ns/t"
    prefixed = f"persistent://{setup.tenant}/prefixed/t"
    for role in ("nobody", "alice"):
        conn = RawClient(run.target.service_url, role)
        try:
            for label, topic in (("topic", setup.topic), ("ghost", ghost)):
                outcome[f"{role} {label}"] = {
                    "lookup": conn.answer(T.LOOKUP, T.LOOKUP_RESPONSE, topic=topic),
                    "partitioned_metadata": conn.answer(
                        T.PARTITIONED_METADATA, T.PARTITIONED_METADATA_RESPONSE, topic=topic
                    ),
                    "producer": conn.answer(T.PRODUCER, T.PRODUCER_SUCCESS, topic=topic, producer_id=conn.request_id),
                    "subscribe": conn.answer(
                        T.SUBSCRIBE, T.SUCCESS, topic=topic, subscription="s", subType=0, consumer_id=conn.request_id
                    ),
                }
            outcome[f"{role} topics_of_namespace"] = conn.answer(
                T.GET_TOPICS_OF_NAMESPACE, T.GET_TOPICS_OF_NAMESPACE_RESPONSE, namespace=setup.namespace
            )
            # A lookup first: Pulsar serves a namespace bundle once a lookup loaded it.
            outcome[f"{role} prefixed lookup"] = conn.answer(T.LOOKUP, T.LOOKUP_RESPONSE, topic=prefixed)
            outcome[f"{role} prefixed"] = {
                sub: conn.answer(
                    T.SUBSCRIBE, T.SUCCESS, topic=prefixed, subscription=sub, subType=0, consumer_id=conn.request_id
                )
                for sub in ("other", f"{role}-mine")
            }
        finally:
            conn.close()
    return outcome


# -- transactions ---------------------------------------------------------------------------------------------------


def _txn_answer(conn: RawClient, kind: int, response: str, **fields: Any) -> dict[str, Any]:
    conn.send(kind, request_id=conn.next_id(), **fields)
    command = conn.read().command
    payload = getattr(command, response)
    if payload.HasField("error"):
        # The transaction id in the text differs between brokers.
        return {"error": ServerError.Name(payload.error), "message": re.sub(r"\(\d+,\d+\)", "(txn)", payload.message)}
    return {"ok": True}


def _open_txn(conn: RawClient, timeout: float = 60.0) -> dict[str, int]:
    """A new transaction of coordinator 0, waiting for the coordinator (a fresh standalone loads it a while after
    it starts serving)."""
    deadline = time.monotonic() + timeout
    while True:
        conn.send(T.NEW_TXN, request_id=conn.next_id(), tc_id=0, txn_ttl_millis=60_000)
        response = conn.expect(T.NEW_TXN_RESPONSE).newTxnResponse
        if not response.HasField("error"):
            return {"txnid_most_bits": response.txnid_most_bits, "txnid_least_bits": response.txnid_least_bits}
        if time.monotonic() > deadline:
            raise RuntimeError(f"NEW_TXN failed: {response}")
        time.sleep(0.5)


@scenario
def test_transactions_belong_to_their_owner(run: Run) -> Outcome:
    """``alice`` opens transactions; ``bob`` may neither add a partition or a subscription to them nor end them;
    ``alice`` and the super-user may."""
    setup = Setup(run)
    conns = {role: RawClient(run.target.service_url, role) for role in ("alice", "bob", SUPER_USER)}
    outcome: dict[str, Any] = {}
    try:
        # As a client does first: the lookup has Pulsar load the coordinator (only a super-user may make it here).
        conns[SUPER_USER].answer(T.LOOKUP, T.LOOKUP_RESPONSE, topic=f"{COORDINATOR_ASSIGN_TOPIC}-partition-0")
        for conn in conns.values():
            conn.send(T.TC_CLIENT_CONNECT_REQUEST, request_id=conn.next_id(), tc_id=0)
            conn.expect(T.TC_CLIENT_CONNECT_RESPONSE)
        txns = [_open_txn(conns["alice"]) for _ in range(2)]
        acked = {"subscription": [{"topic": setup.topic, "subscription": "s"}]}
        if setup.admin(SUPER_USER, "PUT", "/admin/v2/persistent/{t}/ns/top/subscription/s")[0] != 204:
            raise RuntimeError("creating subscription s failed")
        for role in ("bob", "alice", SUPER_USER):
            conn = conns[role]
            outcome[role] = {
                "add_partition": _txn_answer(
                    conn, T.ADD_PARTITION_TO_TXN, "addPartitionToTxnResponse", partitions=[setup.topic], **txns[0]
                ),
                "add_subscription": _txn_answer(
                    conn, T.ADD_SUBSCRIPTION_TO_TXN, "addSubscriptionToTxnResponse", **acked, **txns[0]
                ),
            }
        # The commands a coordinator sends to the brokers owning the topic: super-users only.
        bob = conns["bob"]
        outcome["bob end on partition"] = _txn_answer(
            bob, T.END_TXN_ON_PARTITION, "endTxnOnPartitionResponse", topic=setup.topic, txn_action=1, **txns[1]
        )
        on_subscription = {"topic": setup.topic, "subscription": "s"}
        outcome["bob end on subscription"] = _txn_answer(
            bob, T.END_TXN_ON_SUBSCRIPTION, "endTxnOnSubscriptionResponse", subscription=on_subscription,
            txn_action=1, **txns[1],
        )  # fmt: skip
        # The admin API names the owner; a role without grants may read it, as in Pulsar.
        most, least = txns[0]["txnid_most_bits"], txns[0]["txnid_least_bits"]
        status, metadata = call(
            run.target.admin_url or "", "nobody", "GET", f"/admin/v3/transactions/transactionMetadata/{most}/{least}"
        )
        outcome["metadata"] = {"status": status, "owner": metadata.get("owner") if isinstance(metadata, dict) else None}
        outcome["bob end"] = _txn_answer(conns["bob"], T.END_TXN, "endTxnResponse", txn_action=1, **txns[0])
        outcome["alice end"] = _txn_answer(conns["alice"], T.END_TXN, "endTxnResponse", txn_action=1, **txns[0])
        outcome["super-user end"] = _txn_answer(conns[SUPER_USER], T.END_TXN, "endTxnResponse", txn_action=1, **txns[1])
    finally:
        for conn in conns.values():
            conn.close()
    return outcome


@scenario
def test_partitioned_topic_grants(run: Run) -> Outcome:
    """A grant on a partitioned topic covers its partitions; a grant on one partition covers that partition alone
    (and not the partitioned topic's metadata)."""
    setup = Setup(run)
    parts = f"persistent://{setup.namespace}/parts"
    statuses = [
        setup.admin(SUPER_USER, "PUT", "/admin/v2/persistent/{t}/ns/parts/partitions", 2)[0],
        setup.admin(SUPER_USER, "POST", "/admin/v2/persistent/{t}/ns/parts/permissions/dora", ["produce"])[0],
        setup.admin(SUPER_USER, "POST", "/admin/v2/persistent/{t}/ns/parts-partition-0/permissions/carol", ["consume"])[
            0
        ],
    ]
    dora, carol = setup.client("dora"), setup.client("carol")
    return {
        "setup": statuses,
        "dora produce": _attempt(lambda: dora.create_producer(parts).send(b"x")),
        "dora produce partition": _attempt(lambda: dora.create_producer(f"{parts}-partition-1").send(b"x")),
        "dora subscribe": _attempt(lambda: dora.subscribe(parts, "s").close()),
        "carol subscribe": _attempt(lambda: carol.subscribe(parts, "s").close()),
        "carol subscribe partition 0": _attempt(lambda: carol.subscribe(f"{parts}-partition-0", "s").close()),
        "carol subscribe partition 1": _attempt(lambda: carol.subscribe(f"{parts}-partition-1", "s").close()),
        "carol partitions": _attempt(lambda: carol.get_topic_partitions(parts)),
    }


@scenario
def test_deleted_topics_lose_their_grants(run: Run) -> Outcome:
    """Deleting a topic, or a partitioned topic, deletes the grants on it and on its partitions."""
    setup = Setup(run)
    steps = [
        ("PUT", "/admin/v2/persistent/{t}/ns/gone", None),
        ("POST", "/admin/v2/persistent/{t}/ns/gone/permissions/zoe", ["produce"]),
        ("PUT", "/admin/v2/persistent/{t}/ns/gone-parts/partitions", 2),
        ("POST", "/admin/v2/persistent/{t}/ns/gone-parts/permissions/zoe", ["produce"]),
        ("POST", "/admin/v2/persistent/{t}/ns/gone-parts-partition-1/permissions/yan", ["consume"]),
        ("DELETE", "/admin/v2/persistent/{t}/ns/gone", None),
        ("DELETE", "/admin/v2/persistent/{t}/ns/gone-parts/partitions", None),
    ]
    outcome: dict[str, Any] = {
        f"{method} {path}": setup.admin(SUPER_USER, method, path, body)[0] for method, path, body in steps
    }
    _, policies = setup.admin(SUPER_USER, "GET", "/admin/v2/namespaces/{t}/ns")
    outcome["topic grants"] = setup.untenanted(_sorted(policies["auth_policies"]["destination_auth"]))
    return outcome


@scenario
def test_java_transactions_by_role(run: Run) -> Outcome:
    """The official Java client (tests/java AuthorizationScenarios): a role that may produce and consume commits a
    transactional send and a transactional acknowledgement; a role that may only consume opens a transaction but may
    not produce; a role without grants cannot even start a transactional client (it may not look the coordinators
    up). Both transactional roles have a grant on ``pulsar/system``, where the coordinators' topic lives."""
    setup = Setup(run)
    grants = [
        ("/admin/v2/namespaces/{t}/ns/permissions/txn-writer", ["produce", "consume"]),
        ("/admin/v2/persistent/{t}/ns/top/permissions/txn-reader", ["consume"]),
        ("/admin/v2/namespaces/pulsar/system/permissions/txn-writer", ["consume"]),
        ("/admin/v2/namespaces/pulsar/system/permissions/txn-reader", ["consume"]),
    ]
    statuses = [setup.admin(SUPER_USER, "POST", path, body)[0] for path, body in grants]
    tokens = [token(role) for role in ("txn-writer", "txn-reader", "stranger")]
    command = [
        "java", *JVM_OPTIONS, "-cp", build_harness(), "dev.pulsartxnproxy.AuthorizationScenarios",
        run.target.service_url, setup.topic, *tokens,
    ]  # fmt: skip
    return {"grants": statuses, **observations(command, "AuthorizationScenarios", timeout=180)}
