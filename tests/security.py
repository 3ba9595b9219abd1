"""Key material the security tests make for themselves: a CA, server and client certificates, token keys and
tokens, and a basic-auth password file, all written into one directory (:class:`Material`).

The same files configure this endpoint and a Pulsar standalone (:func:`pulsar_auth_conf`), so a scenario runs
against both with identical credentials.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from passlib.hash import apr_md5_crypt, des_crypt

from tests.server_process import ServerProcess, free_port
from tests.txn_harness import JVM_OPTIONS, build_harness, observations

#: The role of the super-user token a Pulsar standalone's own clients use.
ADMIN_ROLE = "admin"
#: Users of the basic-auth file and their passwords: one hashed with apr1 (``htpasswd -m``), one with crypt.
BASIC_USERS = {"alice": "alice-secret", "bob": "bobpass"}


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _certificate(
    subject_cn: str,
    key: rsa.RSAPrivateKey,
    issuer: x509.Name | None,
    issuer_key: rsa.RSAPrivateKey,
    *,
    ca: bool = False,
    hosts: tuple[str, ...] = (),
    client: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject_cn)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer or subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if hosts:
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


@dataclass
class Material:
    """Files under ``root``: ``ca.pem`` (trusted), ``server.pem``/``server.key`` (for localhost and 127.0.0.1),
    ``client.pem``/``client.key`` (CN ``client_cn``), ``other-ca.pem`` and ``rogue-client.*`` (signed by an
    untrusted CA), ``secret.key`` (raw HMAC key), ``public.key``/``private.key`` (RS256), ``basic.conf``."""

    root: Path
    client_cn: str = "tls-client"

    def __post_init__(self) -> None:
        root = self.root
        root.mkdir(parents=True, exist_ok=True)
        ca_key, other_key = _key(), _key()
        ca = _certificate("test-ca", ca_key, None, ca_key, ca=True)
        other = _certificate("other-ca", other_key, None, other_key, ca=True)
        self._write_pem("ca.pem", ca)
        self._write_pem("other-ca.pem", other)
        server_key = _key()
        server = _certificate("localhost", server_key, ca.subject, ca_key, hosts=("localhost", "127.0.0.1"))
        self._write_pem("server.pem", server)
        (root / "server.key").write_bytes(_pem_key(server_key))
        # A server certificate for a name the client does not dial: hostname verification must refuse it.
        wrong_key = _key()
        wrong = _certificate("elsewhere.example", wrong_key, ca.subject, ca_key, hosts=("elsewhere.example",))
        self._write_pem("wrong-host.pem", wrong)
        (root / "wrong-host.key").write_bytes(_pem_key(wrong_key))
        for name, issuer, issuer_key in (("client", ca, ca_key), ("rogue-client", other, other_key)):
            key = _key()
            self._write_pem(f"{name}.pem", _certificate(self.client_cn, key, issuer.subject, issuer_key, client=True))
            (root / f"{name}.key").write_bytes(_pem_key(key))
        self.secret = b"0123456789abcdef0123456789abcdef"
        (root / "secret.key").write_bytes(self.secret)
        self.signing_key = _key()
        (root / "private.key").write_bytes(_pem_key(self.signing_key))
        (root / "public.key").write_bytes(
            self.signing_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        (root / "basic.conf").write_text(
            f"alice:{apr_md5_crypt.hash(BASIC_USERS['alice'])}\nbob:{des_crypt.hash(BASIC_USERS['bob'])}\n"
        )

    def _write_pem(self, name: str, certificate: x509.Certificate) -> None:
        (self.root / name).write_bytes(certificate.public_bytes(serialization.Encoding.PEM))

    def path(self, name: str) -> str:
        return str(self.root / name)

    def token(self, subject: str, *, expires_in: float | None = None, forged: bool = False) -> str:
        """An HS256 token for ``subject`` signed with ``secret.key`` (or with another key when ``forged``)."""
        claims: dict[str, object] = {"sub": subject}
        if expires_in is not None:
            claims["exp"] = int(time.time() + expires_in)
        key = b"not-the-secret-key-not-the-secret" if forged else self.secret
        return jwt.encode(claims, key, algorithm="HS256")

    def rs256_token(self, subject: str) -> str:
        """A token for ``subject`` signed with ``private.key`` (verified with ``public.key``)."""
        return jwt.encode({"sub": subject}, self.signing_key, algorithm="RS256")

    def basic_header(self, user: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def pulsar_auth_conf(material: Material, tls_port: int, web_tls_port: int) -> dict[str, object]:
    """broker.conf settings of a Pulsar standalone equivalent to this endpoint's with TLS and the token, basic and
    TLS providers (authorization off; its own clients use an ``admin`` token)."""
    providers = ",".join(
        f"org.apache.pulsar.broker.authentication.AuthenticationProvider{name}" for name in ("Token", "Basic", "Tls")
    )
    return {
        "brokerServicePortTls": tls_port,
        "webServicePortTls": web_tls_port,
        "tlsCertificateFilePath": material.path("server.pem"),
        "tlsKeyFilePath": material.path("server.key"),
        "tlsTrustCertsFilePath": material.path("ca.pem"),
        "tlsRequireTrustedClientCertOnConnect": "false",
        "authenticationEnabled": "true",
        "authenticationProviders": providers,
        "tokenSecretKey": f"file://{material.path('secret.key')}",
        "basicAuthConf": material.path("basic.conf"),
        "superUserRoles": ADMIN_ROLE,
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": f"token:{material.token(ADMIN_ROLE)}",
        "authenticationRefreshCheckSeconds": 5,
    }


def write_java_tokens(material: Material) -> None:
    """The token files SecurityScenarios reads (see its class comment)."""
    root = material.root
    (root / "alice.token").write_text(material.token("alice"))
    (root / "forged.token").write_text(material.token("alice", forged=True))
    (root / "expired.token").write_text(material.token("alice", expires_in=-5))
    now = int(time.time())
    for exp in range(now + 2, now + 120, 2):
        (root / f"short-{exp}.token").write_text(jwt.encode({"sub": "alice", "exp": exp}, material.secret, "HS256"))


def run_java_security(plain_url: str, tls_url: str, material: Material) -> dict[str, Any]:
    """SecurityScenarios' observations against one target."""
    write_java_tokens(material)
    prefix = f"persistent://public/default/java-{time.time_ns()}"
    main = "dev.pulsartxnproxy.SecurityScenarios"
    command = ["java", *JVM_OPTIONS, "-cp", build_harness(), main, plain_url, tls_url, str(material.root), prefix]
    return observations(command, "SecurityScenarios", timeout=180)


def run_admin_security(http_url: str, https_url: str, material: Material) -> dict[str, Any]:
    """tests/admin-java SecurityAdmin's observations (PulsarAdmin with each credential) against one target."""
    from tests.maven import jar_classpath

    write_java_tokens(material)
    classpath = jar_classpath(Path(__file__).resolve().parent / "admin-java", "admin-harness")
    main = "dev.pulsartxnproxy.admin.SecurityAdmin"
    command = ["java", *JVM_OPTIONS, "-cp", classpath, main, http_url, https_url, str(material.root)]
    return observations(command, "SecurityAdmin", timeout=180)


class SecuredEndpoint:
    """A running endpoint that serves ``pulsar+ssl://`` with the token, basic and tls providers: its URLs and alice's
    credentials."""

    def __init__(self, proc: ServerProcess, tls_port: int, material: Material) -> None:
        self.proc = proc
        self.url = proc.url
        self.tls_port = tls_port
        self.tls_url = f"pulsar+ssl://localhost:{tls_port}"
        self.material = material
        self.token = material.token("alice")
        self.ca = material.path("ca.pem")


@contextlib.contextmanager
def secured_endpoint(material: Material, data: Path) -> Iterator[SecuredEndpoint]:
    """An endpoint on ``data`` with TLS (certificates from ``material``) and the three providers, stopped after."""
    tls_port = free_port()
    proc = ServerProcess(
        data,
        "--tls-port", str(tls_port),
        "--tls-cert-file", material.path("server.pem"), "--tls-key-file", material.path("server.key"),
        "--tls-trust-certs-file", material.path("ca.pem"),
        "--authentication-enabled", "--authentication-providers", "token,basic,tls",
        "--token-secret-key", f"file://{material.path('secret.key')}",
        "--basic-auth-conf", material.path("basic.conf"),
    )  # fmt: skip
    proc.start(timeout=30)
    try:
        yield SecuredEndpoint(proc, tls_port, material)
    finally:
        proc.stop()
