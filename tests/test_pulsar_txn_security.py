"""pulsar_txn over TLS with each credential the endpoint takes (token, basic, client certificate), and refusals."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pulsar
import pytest

import pulsar_txn
from tests.conftest import make_client
from tests.security import BASIC_USERS, Material, SecuredEndpoint, secured_endpoint


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredEndpoint]:
    material = Material(tmp_path_factory.mktemp("material"))
    with secured_endpoint(material, tmp_path_factory.mktemp("secured") / "data") as endpoint:
        yield endpoint


def _credentials(kind: str, secured: SecuredEndpoint) -> pulsar_txn.Authentication:
    if kind == "token":
        return pulsar_txn.AuthenticationToken(secured.token)
    if kind == "token-supplier":
        return pulsar_txn.AuthenticationToken(lambda: secured.token)
    if kind == "basic":
        return pulsar_txn.AuthenticationBasic("alice", BASIC_USERS["alice"])
    material = secured.material
    return pulsar_txn.AuthenticationTLS(material.path("client.pem"), material.path("client.key"))


@pytest.mark.parametrize("kind", ["token", "token-supplier", "basic", "tls"])
def test_a_transaction_over_tls_with_each_credential(secured: SecuredEndpoint, kind: str) -> None:
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


def test_refused_credentials_and_untrusted_brokers(secured: SecuredEndpoint) -> None:
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
