"""TLS and authentication (issue 21) through the official Python client, raw frames and the admin API.

One server serves plain and TLS ports with the token, basic and tls providers; certificates, keys, tokens and the
password file are made by :mod:`tests.security`. What Pulsar 4.2.4 answers was observed on a standalone started
with the equivalent broker.conf (``tests.security.pulsar_auth_conf``; ``tests/conformance/test_authentication.py``
runs the shared scenarios against both).
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pulsar
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from proxy.authentication import AuthenticationError, Authenticator
from proxy.config import Settings, SettingsError
from proxy.connection import CLOSE_GRACE_SECONDS
from proxy.tls import server_options
from tests.conftest import make_client
from tests.security import BASIC_USERS, Material
from tests.server_process import ROOT, ServerProcess, free_port
from wire.commands import frame
from wire.framing import FrameDecoder
from wire.pulsar_api_pb2 import BaseCommand, ServerError

T = BaseCommand
REFRESH_SECONDS = 1


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    return Material(tmp_path_factory.mktemp("material"))


def security_args(material: Material, tls_port: int, admin_tls_port: int) -> list[str]:
    """Command-line options of a server with TLS ports and the token, basic and tls providers."""
    return [
        "--tls-port", str(tls_port), "--admin-tls-port", str(admin_tls_port),
        "--tls-cert-file", material.path("server.pem"), "--tls-key-file", material.path("server.key"),
        "--tls-trust-certs-file", material.path("ca.pem"),
        "--authentication-enabled", "--authentication-providers", "token,basic,tls",
        "--token-secret-key", f"file://{material.path('secret.key')}",
        "--basic-auth-conf", material.path("basic.conf"),
        "--authentication-refresh-check-seconds", str(REFRESH_SECONDS),
    ]  # fmt: skip


class Secured:
    """The running server and its URLs."""

    def __init__(self, proc: ServerProcess, tls_port: int, admin_tls_port: int) -> None:
        self.proc = proc
        self.port = proc.port
        self.url = proc.url
        self.tls_url = f"pulsar+ssl://localhost:{tls_port}"
        self.admin_url = proc.admin_url
        self.admin_tls_url = f"https://localhost:{admin_tls_port}"


@pytest.fixture(scope="module")
def secured(material: Material, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    tls_port, admin_tls_port = free_port(), free_port()
    proc = ServerProcess(
        tmp_path_factory.mktemp("secured") / "data", *security_args(material, tls_port, admin_tls_port)
    )
    proc.start(timeout=30)
    _wait_for_admin(proc.admin_url, material.token("admin"))
    yield Secured(proc, tls_port, admin_tls_port)
    proc.stop()


def _wait_for_admin(admin_url: str, token: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if _get(admin_url + "/admin/v2/clusters", {"Authorization": f"Bearer {token}"})[0] == 200:
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("admin API did not answer")


def _get(
    url: str, headers: dict[str, str] | None = None, context: ssl.SSLContext | None = None
) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def _round_trip(client: pulsar.Client, topic: str) -> list[bytes]:
    consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"m{i}".encode())
    got = [consumer.receive(5000).data() for _ in range(3)]
    client.close()
    return got


def _tls_client(secured: Secured, material: Material, **kwargs: Any) -> pulsar.Client:
    kwargs.setdefault("tls_trust_certs_file_path", material.path("ca.pem"))
    kwargs.setdefault("tls_validate_hostname", True)
    return make_client(secured.tls_url, **kwargs)


def _refused(client: pulsar.Client) -> str:
    """The exception class a refused client meets on its first request."""
    with pytest.raises(pulsar.PulsarException) as caught:
        client.create_producer(f"persistent://public/default/refused-{time.time_ns()}")
    client.close()
    return type(caught.value).__name__


# -- the official client -------------------------------------------------------------------------------------


def test_token_over_plain_and_tls_with_hostname_verification(secured: Secured, material: Material) -> None:
    token = pulsar.AuthenticationToken(material.token("alice"))
    plain = make_client(secured.url, authentication=token)
    assert _round_trip(plain, f"persistent://public/default/tok-plain-{time.time_ns()}") == [b"m0", b"m1", b"m2"]
    tls = _tls_client(secured, material, authentication=pulsar.AuthenticationToken(material.token("alice")))
    assert _round_trip(tls, f"persistent://public/default/tok-tls-{time.time_ns()}") == [b"m0", b"m1", b"m2"]


def test_basic_and_tls_certificate_authentication(secured: Secured, material: Material) -> None:
    for user, password in BASIC_USERS.items():  # one apr1 hash, one crypt hash
        client = _tls_client(secured, material, authentication=pulsar.AuthenticationBasic(user, password))
        assert _round_trip(client, f"persistent://public/default/basic-{time.time_ns()}") == [b"m0", b"m1", b"m2"]
    cert = pulsar.AuthenticationTLS(material.path("client.pem"), material.path("client.key"))
    client = _tls_client(secured, material, authentication=cert)
    assert _round_trip(client, f"persistent://public/default/cert-{time.time_ns()}") == [b"m0", b"m1", b"m2"]


@pytest.mark.parametrize(
    "kind", ["forged token", "expired token", "no credentials", "wrong password", "unknown user", "tls on plain"]
)
def test_refused_credentials_fail_the_client(secured: Secured, material: Material, kind: str) -> None:
    authentication = {
        "forged token": pulsar.AuthenticationToken(material.token("alice", forged=True)),
        "expired token": pulsar.AuthenticationToken(material.token("alice", expires_in=-5)),
        "no credentials": None,
        "wrong password": pulsar.AuthenticationBasic("alice", "not-her-password"),
        "unknown user": pulsar.AuthenticationBasic("mallory", "alice-secret"),
        "tls on plain": pulsar.AuthenticationTLS(material.path("client.pem"), material.path("client.key")),
    }[kind]
    kwargs = {"authentication": authentication} if authentication else {}
    client = make_client(secured.url, operation_timeout_seconds=2, **kwargs)
    # As against Pulsar 4.2.4: the C++ client retries a refused CONNECT until the operation times out.
    assert _refused(client) == "Timeout"


@pytest.mark.parametrize("kind", ["forged token", "no credentials"])
def test_refusal_over_tls_closes_cleanly(secured: Secured, material: Material, kind: str) -> None:
    """A TLS connection refused its credentials closes with the refusal logged and nothing else: no Twisted
    traceback once the close's grace period ends (the abort it arms must not touch the finished TLS layer)."""
    already = len(secured.proc.log())
    token = pulsar.AuthenticationToken(material.token("alice", forged=True))
    client = _tls_client(secured, material, operation_timeout_seconds=2,
                         **({"authentication": token} if kind == "forged token" else {}))  # fmt: skip
    assert _refused(client) == "Timeout"
    time.sleep(CLOSE_GRACE_SECONDS + 1.5)  # every refused connection's abort timer has fired
    logged = secured.proc.log()[already:]
    assert "closing connection" in logged
    assert "Traceback" not in logged and "CRITICAL" not in logged, logged


def test_untrusted_server_certificate_and_untrusted_client_certificate(secured: Secured, material: Material) -> None:
    token = pulsar.AuthenticationToken(material.token("alice"))
    wrong_ca = _tls_client(
        secured, material, authentication=token, tls_trust_certs_file_path=material.path("other-ca.pem")
    )
    assert _refused(wrong_ca) == "ConnectError"
    rogue = pulsar.AuthenticationTLS(material.path("rogue-client.pem"), material.path("rogue-client.key"))
    client = _tls_client(secured, material, authentication=rogue, operation_timeout_seconds=2)
    assert _refused(client) == "Timeout"


def test_wrong_host_name_is_refused_by_hostname_verification(material: Material, tmp_path: Path) -> None:
    tls_port = free_port()
    args = ["--tls-port", str(tls_port), "--tls-cert-file", material.path("wrong-host.pem"),
            "--tls-key-file", material.path("wrong-host.key")]  # fmt: skip
    proc = ServerProcess(tmp_path / "data", *args).start(timeout=30)
    try:
        url = f"pulsar+ssl://127.0.0.1:{tls_port}"
        verified = make_client(url, tls_trust_certs_file_path=material.path("ca.pem"), tls_validate_hostname=True)
        assert _refused(verified) == "ConnectError"
        unverified = make_client(url, tls_trust_certs_file_path=material.path("ca.pem"), tls_validate_hostname=False)
        topic = f"persistent://public/default/host-{time.time_ns()}"
        assert _round_trip(unverified, topic) == [b"m0", b"m1", b"m2"]
    finally:
        proc.stop()


def test_required_trusted_client_certificate(material: Material, tmp_path: Path) -> None:
    """tls-require-trusted-client-cert: a client without a certificate, or with one of another CA, fails the
    handshake (Pulsar's tlsRequireTrustedClientCertOnConnect)."""
    tls_port = free_port()
    args = ["--tls-port", str(tls_port), "--tls-cert-file", material.path("server.pem"),
            "--tls-key-file", material.path("server.key"), "--tls-trust-certs-file", material.path("ca.pem"),
            "--tls-require-trusted-client-cert"]  # fmt: skip
    proc = ServerProcess(tmp_path / "data", *args).start(timeout=30)
    try:
        url = f"pulsar+ssl://localhost:{tls_port}"
        trust = {"tls_trust_certs_file_path": material.path("ca.pem"), "operation_timeout_seconds": 3}
        # The C++ client retries a handshake the server fails until the operation times out.
        assert _refused(make_client(url, **trust)) == "Timeout"
        rogue = pulsar.AuthenticationTLS(material.path("rogue-client.pem"), material.path("rogue-client.key"))
        assert _refused(make_client(url, authentication=rogue, **trust)) == "Timeout"
        cert = pulsar.AuthenticationTLS(material.path("client.pem"), material.path("client.key"))
        topic = f"persistent://public/default/required-{time.time_ns()}"
        assert _round_trip(make_client(url, authentication=cert, **trust), topic) == [b"m0", b"m1", b"m2"]
    finally:
        proc.stop()


def test_client_refreshes_an_expiring_token_on_a_live_connection(secured: Secured, material: Material) -> None:
    """AUTH_CHALLENGE: the client's token supplier is asked again after the first token expired."""
    issued: list[str] = []

    def supplier() -> str:
        issued.append(material.token("alice", expires_in=2))
        return issued[-1]

    client = make_client(secured.url, authentication=pulsar.AuthenticationToken(supplier))
    producer = client.create_producer(f"persistent://public/default/refresh-{time.time_ns()}")
    for _ in range(10):
        producer.send(b"x")
        time.sleep(0.5)
    client.close()
    assert len(issued) >= 2


# -- raw frames: what exactly goes on the wire ---------------------------------------------------------------


class Raw:
    """A bare protocol connection."""

    def __init__(self, port: int, **connect: Any) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.decoder = FrameDecoder()
        self.pending: list[BaseCommand] = []
        self.sock.sendall(frame(T.CONNECT, client_version="raw", protocol_version=20, **connect))

    def send(self, kind: int, **fields: Any) -> None:
        self.sock.sendall(frame(kind, **fields))

    def next(self, skip: tuple[int, ...] = (T.PING,)) -> BaseCommand | None:
        """The next command (None once the server closed)."""
        while True:
            while self.pending:
                command = self.pending.pop(0)
                if command.type in skip:
                    if command.type == T.PING:
                        self.send(T.PONG)
                    continue
                return command
            data = self.sock.recv(65536)
            if not data:
                return None
            self.pending.extend(item.command for item in self.decoder.feed(data))


@pytest.mark.parametrize(
    "connect",
    [
        {},
        {"auth_method_name": "token"},
        {"auth_method_name": "token", "auth_data": b"not.a.token"},
        {"auth_method_name": "basic", "auth_data": b"alice:wrong"},
        {"auth_method_name": "kerberos", "auth_data": b"x"},
    ],
    ids=["none", "token-without-data", "token-garbage", "basic-wrong", "unknown-method"],
)
def test_refused_connect_is_one_error_then_close(secured: Secured, connect: dict[str, Any]) -> None:
    raw = Raw(secured.port, **connect)
    error = raw.next()
    assert error is not None and error.type == T.ERROR
    assert (error.error.request_id, error.error.error, error.error.message) == (
        2**64 - 1,
        ServerError.AuthenticationError,
        "Failed to authenticate",
    )
    assert raw.next() is None


def test_lookup_names_the_tls_url_beside_the_plain_one(secured: Secured, material: Material) -> None:
    raw = Raw(secured.port, auth_method_name="token", auth_data=material.token("alice").encode())
    assert raw.next().type == T.CONNECTED
    raw.send(T.LOOKUP, topic="persistent://public/default/lk", request_id=1)
    answer = raw.next().lookupTopicResponse
    tls_port = secured.tls_url.rsplit(":", 1)[1]
    assert (answer.brokerServiceUrl, answer.brokerServiceUrlTls) == (
        secured.url,
        f"pulsar+ssl://127.0.0.1:{tls_port}",
    )


def test_auth_challenge_refreshes_or_closes(secured: Secured, material: Material) -> None:
    token = material.token("alice", expires_in=1.5).encode()
    flags = {"supports_auth_refresh": True}
    refreshed = Raw(secured.port, auth_method_name="token", auth_data=token, feature_flags=flags)
    stale = Raw(secured.port, auth_method_name="token", auth_data=token, feature_flags=flags)
    unable = Raw(secured.port, auth_method_name="token", auth_data=token)
    for raw in (refreshed, stale, unable):
        assert raw.next().type == T.CONNECTED
    for raw in (refreshed, stale):
        challenge = raw.next()
        assert challenge.type == T.AUTH_CHALLENGE
        assert not challenge.authChallenge.HasField("server_version")  # as Pulsar 4.2.4 sends it
        assert (challenge.authChallenge.challenge.auth_method_name, challenge.authChallenge.challenge.auth_data) == (
            "token",
            b"PulsarAuthRefresh",
        )
    refreshed.send(
        T.AUTH_RESPONSE, response={"auth_method_name": "token", "auth_data": material.token("alice").encode()}
    )
    stale.send(T.AUTH_RESPONSE, response={"auth_method_name": "token", "auth_data": token})
    error = stale.next()
    assert (error.type, error.error.error, error.error.message) == (
        T.ERROR,
        ServerError.AuthenticationError,
        "Failed to authenticate",
    )
    assert stale.next() is None
    assert unable.next() is None  # expired, and it cannot be asked for fresh credentials
    time.sleep(REFRESH_SECONDS * 2.5)
    refreshed.send(T.LOOKUP, topic="persistent://public/default/lk", request_id=7)
    answer = refreshed.next()
    assert answer.type == T.LOOKUP_RESPONSE  # still connected, with no further challenge


def test_role_changing_on_refresh_closes(secured: Secured, material: Material) -> None:
    raw = Raw(
        secured.port,
        auth_method_name="token",
        auth_data=material.token("alice", expires_in=1).encode(),
        feature_flags={"supports_auth_refresh": True},
    )
    assert raw.next().type == T.CONNECTED
    assert raw.next().type == T.AUTH_CHALLENGE
    raw.send(T.AUTH_RESPONSE, response={"auth_method_name": "token", "auth_data": material.token("bob").encode()})
    assert raw.next() is None


# -- admin API -----------------------------------------------------------------------------------------------


def test_admin_requires_credentials_except_metrics(secured: Secured, material: Material) -> None:
    clusters = secured.admin_url + "/admin/v2/clusters"
    status, content_type, body = _get(clusters)
    assert (status, content_type) == (401, "text/html;charset=iso-8859-1")
    assert "<title>Error 401 Authentication required</title>" in body
    for header in (
        f"Bearer {material.token('alice', forged=True)}",
        f"Bearer {material.token('alice', expires_in=-5)}",
        material.basic_header("alice", "wrong"),
        "Bearer ",
    ):
        assert _get(clusters, {"Authorization": header})[0] == 401, header
    status, _, body = _get(clusters, {"X-Pulsar-Auth-Method-Name": "nope"})
    assert (status, "Unsupported authentication method: [nope]." in body) == (401, True)
    assert _get(clusters, {"Authorization": f"Bearer {material.token('alice')}"})[:3:2] == (200, '["standalone"]')
    assert _get(clusters, {"Authorization": material.basic_header("bob", "bobpass")})[0] == 200
    assert _get(clusters + f"?token={material.token('alice')}")[0] == 200
    assert _get(secured.admin_url + "/metrics")[0] == 200


def test_admin_over_https_with_token_and_client_certificate(secured: Secured, material: Material) -> None:
    context = ssl.create_default_context(cafile=material.path("ca.pem"))
    clusters = secured.admin_tls_url + "/admin/v2/clusters"
    assert _get(clusters, context=context)[0] == 401
    assert _get(clusters, {"Authorization": f"Bearer {material.token('alice')}"}, context)[0] == 200
    context.load_cert_chain(material.path("client.pem"), material.path("client.key"))
    assert _get(clusters, context=context)[0] == 200
    lookup = _get(
        secured.admin_tls_url + "/lookup/v2/topic/persistent/public/default/lk",
        {"Authorization": f"Bearer {material.token('alice')}"},
        context,
    )
    assert json.loads(lookup[2])["brokerUrlTls"].startswith("pulsar+ssl://127.0.0.1:")
    untrusting = ssl.create_default_context(cafile=material.path("other-ca.pem"))
    with pytest.raises(urllib.error.URLError):
        _get(clusters, context=untrusting)


# -- providers and settings, without a server ----------------------------------------------------------------


def _authenticator(**settings: Any) -> Authenticator:
    return Authenticator(Settings(authentication_enabled=True, **settings))


def test_token_provider_roles_claims_and_keys(material: Material, tmp_path: Path) -> None:
    hmac = _authenticator(authentication_providers="token", token_secret_key=material.path("secret.key"))
    assert hmac.authenticate("token", material.token("alice").encode(), None) == "alice"
    secret64 = base64.b64encode(material.secret).decode()
    inline = _authenticator(authentication_providers="token", token_secret_key=f"data:;base64,{secret64}")
    assert inline.authenticate("token", material.token("bob").encode(), None) == "bob"
    claim = _authenticator(
        authentication_providers="token", token_secret_key=material.path("secret.key"), token_auth_claim="roles"
    )
    listed = jwt.encode({"sub": "x", "roles": ["ops", "dev"]}, material.secret, algorithm="HS256")
    assert claim.authenticate("token", listed.encode(), None) == "ops"
    rs256 = _authenticator(authentication_providers="token", token_public_key=material.path("public.key"))
    assert rs256.authenticate("token", material.rs256_token("carol").encode(), None) == "carol"
    with pytest.raises(AuthenticationError):  # an HMAC token signed with the public key's bytes is no RS256 token
        rs256.authenticate("token", jwt.encode({"sub": "x"}, material.secret, algorithm="HS256").encode(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "ec.pub").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    es256 = _authenticator(
        authentication_providers="token", token_public_key=str(tmp_path / "ec.pub"), token_public_alg="ES256"
    )
    assert es256.authenticate("token", jwt.encode({"sub": "dave"}, key, algorithm="ES256").encode(), None) == "dave"


def test_token_refusals_carry_pulsars_texts(material: Material) -> None:
    auth = _authenticator(authentication_providers="token", token_secret_key=material.path("secret.key"))
    cases = {
        material.token("a", expires_in=-5): "Failed to authentication token: JWT expired at ",
        material.token("a", forged=True): "Failed to authentication token: JWT signature does not match",
        "abc": "Failed to authentication token: JWT strings must contain exactly 2 period characters. Found: 0",
        " ": "Blank token found",
    }
    for token, text in cases.items():
        with pytest.raises(AuthenticationError) as caught:
            auth.authenticate("token", token.encode(), None)
        assert caught.value.message.startswith(text), caught.value.message
    with pytest.raises(AuthenticationError, match="No anonymous role"):
        auth.authenticate("none", b"", None)


def test_basic_provider_reads_crypt_and_apr1(material: Material, tmp_path: Path) -> None:
    auth = _authenticator(authentication_providers="basic", basic_auth_conf=material.path("basic.conf"))
    assert [auth.authenticate("basic", f"{u}:{p}".encode(), None) for u, p in BASIC_USERS.items()] == ["alice", "bob"]
    for data, text in (
        (b"alice:x", "Unknown user or invalid password"),
        (b"alice", "Base64 decoded params are invalid"),
    ):
        with pytest.raises(AuthenticationError, match=text):
            auth.authenticate("basic", data, None)
    header = {"Authorization": material.basic_header("alice", "alice-secret")}
    assert auth.authenticate_http(header.get, None) == "alice"
    (tmp_path / "bad.conf").write_text("alice\n")
    with pytest.raises(SettingsError, match="basic-auth-conf: line 1"):
        _authenticator(authentication_providers="basic", basic_auth_conf=str(tmp_path / "bad.conf"))


def test_tls_provider_takes_the_certificate_common_name(material: Material) -> None:
    from cryptography import x509

    auth = _authenticator(authentication_providers="tls", tls_port=1)
    certificate = x509.load_pem_x509_certificate(Path(material.path("client.pem")).read_bytes())
    assert auth.authenticate("tls", b"", certificate) == material.client_cn
    with pytest.raises(AuthenticationError, match="Failed to get TLS certificates from client"):
        auth.authenticate("tls", b"", None)


@pytest.mark.parametrize(
    ("settings", "text"),
    [
        ({"authentication_providers": "token", "token_secret_key": "/nonexistent/key"}, "token-secret-key: "),
        ({"authentication_providers": "token", "token_secret_key": "data:;base64,c2hvcnQ="}, "at least 256"),
        ({"authentication_providers": "token"}, "needs token-secret-key or token-public-key"),
        ({"authentication_providers": "basic"}, "needs basic-auth-conf"),
        ({"authentication_providers": "kerberos"}, "unknown provider 'kerberos'"),
        ({"authentication_providers": ""}, "needs authentication-providers"),
    ],
)
def test_bad_authentication_settings_are_refused(settings: dict[str, Any], text: str) -> None:
    with pytest.raises(SettingsError, match=text):
        _authenticator(**settings)


def test_tls_port_without_certificate_stops_start_up_with_one_line(material: Material, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="tls-cert-file is required"):
        server_options(Settings(tls_port=1))
    with pytest.raises(SettingsError, match="tls-key-file: "):
        server_options(Settings(tls_port=1, tls_cert_file=material.path("server.pem"), tls_key_file="/nope"))
    with pytest.raises(SettingsError, match="cannot be used together"):  # the key of another certificate
        server_options(
            Settings(tls_port=1, tls_cert_file=material.path("server.pem"), tls_key_file=material.path("client.key"))
        )
    result = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--data-dir", str(tmp_path / "d"), "--port", "0", "--tls-port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "pulsar-txn-proxy: tls-cert-file is required with tls-port or admin-tls-port"
    ]


def test_providers_may_be_named_by_pulsars_classes(material: Material) -> None:
    classes = ",".join(
        f"org.apache.pulsar.broker.authentication.AuthenticationProvider{name}" for name in ("Token", "Basic")
    )
    auth = _authenticator(
        authentication_providers=classes,
        token_secret_key=material.path("secret.key"),
        basic_auth_conf=material.path("basic.conf"),
    )
    assert list(auth.providers) == ["token", "basic"]


def test_metrics_need_credentials_only_when_configured(material: Material) -> None:
    from proxy.admin.auth import AdminAuthentication

    auth = _authenticator(authentication_providers="token", token_secret_key=material.path("secret.key"))
    open_metrics, closed_metrics = AdminAuthentication(auth), AdminAuthentication(auth, authenticate_metrics=True)
    assert [open_metrics.needs_credentials(p) for p in (["metrics"], ["admin", "v2", "clusters"], ["lookup"])] == [
        False,
        True,
        True,
    ]
    assert closed_metrics.needs_credentials(["metrics"])
    assert not AdminAuthentication(None, authenticate_metrics=True).needs_credentials(["admin", "v2", "clusters"])


# -- the project's own transactional client (pulsar_txn, with the Spark connector's credentials) ---------


def test_project_client_commits_over_tls_with_a_refreshed_token(secured: Secured, material: Material) -> None:
    """pulsar_txn over pulsar+ssl:// (trust file, host name verified) with a token supplier given as the Spark
    connector gives it: a transaction commits after the broker asked for a fresh token on the live connection."""
    from spark.security import Security, new_client

    issued: list[str] = []

    def supplier() -> str:
        issued.append(material.token("alice", expires_in=2))
        return issued[-1]

    security = Security.token(supplier, tls_trust_certs_file=material.path("ca.pem"))
    topic = f"persistent://public/default/own-client-{time.time_ns()}"
    with new_client(secured.tls_url, security, 10) as client:
        producer = client.create_producer(topic)
        txn = client.new_transaction()
        sent = []
        ends = time.monotonic() + REFRESH_SECONDS * 4  # the token expires; the broker challenges, the client answers
        while time.monotonic() < ends:
            sent.append(f"m{len(sent)}".encode())
            producer.send(sent[-1], txn=txn)
            time.sleep(0.1)
        txn.commit()
        assert all(link.core.url.startswith("pulsar+ssl://") for link in client._rt._links.values())
    assert len(issued) >= 2
    reader = make_client(secured.url, authentication=pulsar.AuthenticationToken(material.token("bob")))
    consumer = reader.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    assert [consumer.receive(5000).data() for _ in sent] == sent
    reader.close()


def test_project_client_refused_without_credentials_or_trust(secured: Secured, material: Material) -> None:
    from pulsar_txn import ConnectError, PulsarException
    from spark.security import Security, new_client

    def server_version(url: str, security: Security | None = None) -> str:
        with new_client(url, security, 5) as client:
            client.get_topic_partitions("persistent://public/default/refused")
            return next(iter(client._rt._links.values())).core.server_version

    with pytest.raises(PulsarException, match="Failed to authenticate"):
        server_version(secured.url)
    with pytest.raises(PulsarException, match="Failed to authenticate"):
        server_version(secured.url, Security.basic("alice", "wrong"))
    with pytest.raises(ConnectError, match="TLS handshake"):
        server_version(
            secured.tls_url, Security.token(material.token("a"), tls_trust_certs_file=material.path("other-ca.pem"))
        )
    cert = Security.tls(
        material.path("client.pem"), material.path("client.key"), tls_trust_certs_file=material.path("ca.pem")
    )
    assert server_version(secured.tls_url, cert).startswith("pulsar-txn-proxy")


def test_token_expiry_boundary_as_jjwt(material: Material) -> None:
    """A token is valid through its ``exp`` second and refused after it (jjwt: expired when now > exp)."""
    now = [999.0]
    auth = Authenticator(
        Settings(
            authentication_enabled=True, authentication_providers="token", token_secret_key=material.path("secret.key")
        ),
        clock=lambda: now[0],
    )
    token = jwt.encode({"sub": "alice", "exp": 1000}, material.secret, algorithm="HS256").encode()
    assert auth.identify("token", token, None).expires_at == 1000
    now[0] = 1000.0
    assert auth.authenticate("token", token, None) == "alice"
    now[0] = 1000.5
    with pytest.raises(AuthenticationError, match="JWT expired at 1970-01-01T00:16:40Z"):
        auth.authenticate("token", token, None)


def test_security_settings_from_environment_and_file(tmp_path: Path) -> None:
    from proxy.config import load

    environ = {
        "PULSAR_TXN_PROXY_TLS_PORT": "6651",
        "PULSAR_TXN_PROXY_AUTHENTICATION_ENABLED": "true",
        "PULSAR_TXN_PROXY_AUTHENTICATION_PROVIDERS": "token,tls",
    }
    config = tmp_path / "c.toml"
    config.write_text('admin-tls-port = 8443\ntoken-auth-claim = "role"\ntls-require-trusted-client-cert = true\n')
    settings = load({}, str(config), environ)
    assert (settings.tls_port, settings.admin_tls_port, settings.authentication_enabled) == (6651, 8443, True)
    assert (settings.authentication_providers, settings.token_auth_claim) == ("token,tls", "role")
    assert settings.tls_require_trusted_client_cert is True
    with pytest.raises(SettingsError, match="tls_port: expected an integer"):
        load({}, None, {"PULSAR_TXN_PROXY_TLS_PORT": "ssl"})
