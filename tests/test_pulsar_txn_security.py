"""pulsar_txn over TLS with each credential the endpoint takes (token, basic, client certificate), and refusals."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pulsar
import pytest

import pulsar_txn
from tests.conftest import make_client
from tests.security import BASIC_USERS, Material
from tests.server_process import ServerProcess, free_port


class Secured:
    def __init__(self, proc: ServerProcess, tls_port: int, material: Material) -> None:
        self.tls_url = f"pulsar+ssl://localhost:{tls_port}"
        self.material = material
        self.token = material.token("alice")
        self.ca = material.path("ca.pem")


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    material = Material(tmp_path_factory.mktemp("material"))
    tls_port = free_port()
    proc = ServerProcess(
        tmp_path_factory.mktemp("secured") / "data",
        "--tls-port", str(tls_port),
        "--tls-cert-file", material.path("server.pem"), "--tls-key-file", material.path("server.key"),
        "--tls-trust-certs-file", material.path("ca.pem"),
        "--authentication-enabled", "--authentication-providers", "token,basic,tls",
        "--token-secret-key", f"file://{material.path('secret.key')}",
        "--basic-auth-conf", material.path("basic.conf"),
    )  # fmt: skip
    proc.start(timeout=30)
    yield Secured(proc, tls_port, material)
    proc.stop()


def _credentials(kind: str, secured: Secured) -> pulsar_txn.Authentication:
    if kind == "token":
        return pulsar_txn.AuthenticationToken(secured.token)
    if kind == "token-supplier":
        return pulsar_txn.AuthenticationToken(lambda: secured.token)
    if kind == "basic":
        return pulsar_txn.AuthenticationBasic("alice", BASIC_USERS["alice"])
    material = secured.material
    return pulsar_txn.AuthenticationTLS(material.path("client.pem"), material.path("client.key"))


@pytest.mark.parametrize("kind", ["token", "token-supplier", "basic", "tls"])
def test_a_transaction_over_tls_with_each_credential(secured: Secured, kind: str) -> None:
    topic = f"persistent://public/default/ptx-tls-{uuid.uuid4().hex[:10]}"
    official = make_client(
        secured.tls_url, authentication=pulsar.AuthenticationToken(secured.token), tls_trust_certs_file_path=secured.ca
    )
    observer = official.subscribe(topic, "observer")
    with pulsar_txn.Client(
        secured.tls_url,
        authentication=_credentials(kind, secured),
        operation_timeout_seconds=10,
        tls_trust_certs_file_path=secured.ca,
        tls_validate_hostname=True,
    ) as client:
        producer = client.create_producer(topic)
        with client.new_transaction() as txn:
            producer.send(b"over-tls", txn=txn)
    assert observer.receive(5000).data() == b"over-tls"
    official.close()


def test_refused_credentials_and_untrusted_brokers(secured: Secured) -> None:
    topic = f"persistent://public/default/ptx-tls-{uuid.uuid4().hex[:10]}"
    forged = pulsar_txn.AuthenticationToken(secured.material.token("alice", forged=True))
    with (
        pulsar_txn.Client(secured.tls_url, authentication=forged, tls_trust_certs_file_path=secured.ca) as client,
        pytest.raises(pulsar_txn.AuthenticationError),
    ):
        client.create_producer(topic)
    with (
        pulsar_txn.Client(secured.tls_url, authentication=pulsar_txn.AuthenticationToken(secured.token)) as client,
        pytest.raises(pulsar_txn.ConnectError, match="certificate verify failed"),
    ):
        client.create_producer(topic)  # the system's CAs do not know the tests' CA: refused at once, not retried
    with pulsar_txn.Client(
        secured.tls_url,
        authentication=pulsar_txn.AuthenticationToken(secured.token),
        tls_allow_insecure_connection=True,
    ) as client:
        client.create_producer(topic).send(b"x")
