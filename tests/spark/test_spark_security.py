"""TLS and authentication of the project's Python client and the ``pulsar`` data source (issue 21).

One endpoint serves ``pulsar+ssl://`` (a certificate for localhost from the tests' own CA) with the token, basic
and tls providers; certificates, keys, tokens and the password file are made by :mod:`tests.security`. What the
client and the connector wrote is read back with the official client.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from tests.conftest import make_client
from tests.security import BASIC_USERS, Material, SecuredEndpoint, secured_endpoint
from tests.server_process import ServerProcess, free_port

TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


class Secured(SecuredEndpoint):
    """The running endpoint, its URLs and credentials, and how the official client and the data source use them."""

    def official(self) -> pulsar.Client:
        """The official client over TLS with alice's token."""
        return make_client(
            self.tls_url,
            authentication=pulsar.AuthenticationToken(self.token),
            tls_trust_certs_file_path=self.ca,
            tls_validate_hostname=True,
        )

    def spark_options(self) -> dict[str, str]:
        """The data source options of a TLS connection with alice's token."""
        return {
            "service.url": self.tls_url,
            "pulsar.client.authPluginClassName": TOKEN_PLUGIN,
            "pulsar.client.authParams": f"token:{self.token}",
            "pulsar.client.tlsTrustCertsFilePath": self.ca,
        }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    material = Material(tmp_path_factory.mktemp("material"))
    with secured_endpoint(material, tmp_path_factory.mktemp("secured") / "data") as endpoint:
        yield Secured(endpoint.proc, endpoint.tls_port, material)


def _topic(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def _publish(secured: Secured, topic: str, values: list[str]) -> None:
    client = secured.official()
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for value in values:
            producer.send(value.encode())
    finally:
        client.close()


def _read_back(secured: Secured, topic: str, timeout_ms: int = 1500) -> list[str]:
    """Every committed message of ``topic``, read from its start with the official client over TLS."""
    client = secured.official()
    try:
        consumer = client.subscribe(topic, f"check-{uuid.uuid4().hex[:8]}",
                                    initial_position=pulsar.InitialPosition.Earliest)
        got = []
        while True:
            try:
                got.append(consumer.receive(timeout_ms).data().decode())
            except pulsar.Timeout:
                return got
    finally:
        client.close()


# -- the Python client ----------------------------------------------------------------------------------


def _credentials(kind: str, secured: Secured) -> Any:
    from pulsar_txn import AuthenticationBasic, AuthenticationTLS, AuthenticationToken

    material = secured.material
    if kind == "token":
        return AuthenticationToken(secured.token)
    if kind == "basic":
        return AuthenticationBasic("alice", BASIC_USERS["alice"])
    return AuthenticationTLS(material.path("client.pem"), material.path("client.key"))


@pytest.mark.parametrize("kind", ["token", "basic", "tls"])
def test_client_commits_a_transaction_over_tls_with_each_credential(secured: Secured, kind: str) -> None:
    """The connector's client (pulsar_txn) over pulsar+ssl:// (trust file, host name checked) with the official
    client's authentication names: a consumed message and two sends commit together in one transaction."""
    from pulsar_txn import Client, InitialPosition

    source, sink = _topic(f"in-{kind}"), _topic(f"out-{kind}")
    _publish(secured, source, ["a"])
    with Client(secured.tls_url, authentication=_credentials(kind, secured), operation_timeout_seconds=10,
                tls_trust_certs_file_path=secured.ca, tls_validate_hostname=True) as client:
        consumer = client.subscribe(source, "s", initial_position=InitialPosition.Earliest)
        producer = client.create_producer(sink)
        msg = consumer.receive(timeout_millis=5000)
        txn = client.new_transaction(timeout_ms=30_000)
        producer.send(msg.data() + b"1", txn=txn)
        producer.send(msg.data() + b"2", txn=txn)
        consumer.acknowledge(msg, txn=txn)
        assert _read_back(secured, sink, 300) == []  # not visible before the commit
        txn.commit()
        assert all(link.core.url.startswith("pulsar+ssl://") for link in client._rt._links.values())
    assert _read_back(secured, sink) == ["a1", "a2"]


def test_client_refuses_a_wrong_token_and_an_untrusted_broker(secured: Secured) -> None:
    from pulsar_txn import AuthenticationError, AuthenticationToken, Client, ConnectError

    forged = AuthenticationToken(secured.material.token("alice", forged=True))
    with (
        Client(secured.tls_url, authentication=forged, tls_trust_certs_file_path=secured.ca) as client,
        pytest.raises(AuthenticationError, match="Failed to authenticate"),
    ):
        client.create_producer(_topic("forged")).send(b"x")
    # Without the trust file the system's CAs do not know the tests' CA.
    with (
        Client(secured.tls_url, authentication=AuthenticationToken(secured.token)) as client,
        pytest.raises(ConnectError, match=r"TLS handshake .* failed: .*certificate verify failed"),
    ):
        client.create_producer(_topic("untrusted")).send(b"x")
    # tls_allow_insecure_connection accepts it, as the official client's option does.
    with Client(secured.tls_url, authentication=AuthenticationToken(secured.token),
                tls_allow_insecure_connection=True) as client:
        client.create_producer(_topic("insecure")).send(b"x")


def test_every_token_parameter_form_of_the_java_plugin_authenticates(secured: Secured, tmp_path: Path) -> None:
    """``authParams`` as AuthenticationToken parses them: ``token:``, ``file:``, JSON and the bare token."""
    from spark.security import Security, new_client

    token_file = tmp_path / "t.token"
    token_file.write_text(f"  {secured.token}\n")
    forms = [f"token:{secured.token}", f"file://{token_file}", json.dumps({"token": secured.token}), secured.token]
    for params in forms:
        security = Security.from_plugin(TOKEN_PLUGIN, params, tls_trust_certs_file=secured.ca)
        assert security.data() == secured.token.encode(), params
        with new_client(secured.tls_url, security, 5) as client:
            client.get_topic_partitions(_topic("token-forms"))
            links = list(client._rt._links.values())
            assert links and all(link.core.server_version.startswith("pulsar-txn-proxy") for link in links)


def test_an_untrusted_broker_is_not_retried_as_an_outage(secured: Secured) -> None:
    """The connector's reconnect back-off rides out a broker restart, but a certificate that fails verification
    fails the work at once: waiting cannot make it trusted."""
    from pulsar_txn._runtime import TlsVerificationError
    from spark.backoff import Backoff
    from spark.security import Security, new_client

    untrusted = Security.token(secured.token, tls_trust_certs_file=secured.material.path("other-ca.pem"))
    attempts = []

    def work() -> list[str]:
        attempts.append(1)
        with new_client(secured.tls_url, untrusted, 5) as client:
            return client.get_topic_partitions(_topic("untrusted"))

    started = time.monotonic()
    with pytest.raises(TlsVerificationError, match="certificate verify failed"):
        Backoff(initial=0.5, maximum=1.0, total=20.0).run(work, "planning")
    assert len(attempts) == 1
    assert time.monotonic() - started < 5


# -- the data source ------------------------------------------------------------------------------------


def _read(session: Any, options: dict[str, str], **more: str) -> Any:
    return session.read.format("pulsar").options(**options, **more).load()


def test_batch_write_and_read_over_tls_with_a_token(session: Any, secured: Secured, tmp_path: Path) -> None:
    """Tasks (in Spark's Python workers) and the driver write and read over pulsar+ssl:// with a token: the token
    plugin's class name, and its short name with the token in a file."""
    topic = _topic("spark-tls")
    rows = [(f"v{i}", f"k{i % 3}") for i in range(40)]
    frame = session.createDataFrame(rows, "value string, __key string").repartition(2)
    frame.write.format("pulsar").options(**secured.spark_options()).option("topic", topic).mode("append").save()
    assert sorted(_read_back(secured, topic)) == sorted(v for v, _ in rows)

    token_file = tmp_path / "alice.token"
    token_file.write_text(secured.token + "\n")
    by_file = {
        **secured.spark_options(),
        "pulsar.client.authPluginClassName": "token",
        "pulsar.client.authParams": f"file://{token_file}",
    }
    back = _read(session, by_file, topic=topic).collect()
    assert sorted((r.value.decode(), r["__key"].decode()) for r in back) == sorted(rows)


@pytest.mark.parametrize("plugin", ["org.apache.pulsar.client.impl.auth.AuthenticationBasic", "tls"])
def test_batch_read_with_basic_and_certificate_authentication(session: Any, secured: Secured, plugin: str) -> None:
    """The basic plugin's JSON parameters and the tls plugin's ``tlsCertFile:...,tlsKeyFile:...`` reach the broker."""
    topic = _topic("spark-auth")
    _publish(secured, topic, ["a", "b"])
    material = secured.material
    params = (
        json.dumps({"userId": "alice", "password": BASIC_USERS["alice"]})
        if plugin.endswith("Basic")
        else f"tlsCertFile:{material.path('client.pem')},tlsKeyFile:{material.path('client.key')}"
    )
    options = {
        **secured.spark_options(),
        "pulsar.client.authPluginClassName": plugin,
        "pulsar.client.authParams": params,
    }
    assert sorted(r.value.decode() for r in _read(session, options, topic=topic).collect()) == ["a", "b"]


def test_streaming_exactly_once_copy_over_tls_with_a_token(session: Any, secured: Secured, tmp_path: Path) -> None:
    """A streaming copy (exactly-once sink: task transactions, the driver's commit log) over pulsar+ssl://."""
    source, sink, log_topic = _topic("stream-in"), _topic("stream-out"), _topic("stream-log")
    sent = [f"m{i}" for i in range(60)]
    _publish(secured, source, sent)
    options = secured.spark_options()
    frame = session.readStream.format("pulsar").options(**options).option("topic", source).option(
        "startingOffsets", "earliest"
    ).option("maxRecordsPerTrigger", 25).load()
    query = (
        frame.select("value").writeStream.format("pulsar").options(**options).option("topic", sink)
        .option("commitLogTopic", log_topic).option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination(60)
    assert query.exception() is None
    assert sorted(_read_back(secured, sink)) == sorted(sent)
    log = [json.loads(v) for v in _read_back(secured, log_topic)]
    assert [r["batch"] for r in log if r["kind"] == "done"] == [0, 1, 2]  # 25 + 25 + 10 records


def test_missing_credentials_fail_load_with_the_brokers_refusal(session: Any, secured: Secured) -> None:
    options = {"service.url": secured.tls_url, "pulsar.client.tlsTrustCertsFilePath": secured.ca}
    started = time.monotonic()
    with pytest.raises(Exception, match="Failed to authenticate"):
        _read(session, {**options, "reconnectTimeoutMs": "0"}, topic=_topic("anon"))
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    ("options", "text"),
    [
        ({"pulsar.client.authPluginClassName": "kerberos", "pulsar.client.authParams": "x"},
         "option 'pulsar.client.authPluginClassName': unsupported plugin 'kerberos'"),
        ({"pulsar.client.authPluginClassName": TOKEN_PLUGIN},
         f"option 'pulsar.client.authPluginClassName' '{TOKEN_PLUGIN}' needs 'pulsar.client.authParams'"),
        ({"pulsar.client.authParams": "token:abc"},
         "option 'pulsar.client.authParams' needs 'pulsar.client.authPluginClassName'"),
        ({"pulsar.client.authPluginClassName": "token", "pulsar.client.authParams": "file:///no/such.token"},
         "option 'pulsar.client.authParams': cannot read the token file /no/such.token"),
        ({"pulsar.client.authPluginClassName": "basic", "pulsar.client.authParams": "alice:secret"},
         "option 'pulsar.client.authParams': basic authentication parameters must be a JSON object"),
        ({"pulsar.client.authPluginClassName": "tls", "pulsar.client.authParams": "tlsCertFile:/no/cert.pem"},
         "option 'pulsar.client.authParams': tls authentication parameters need tlsCertFile and tlsKeyFile"),
        ({"pulsar.client.tlsTrustCertsFilePath": "/no/ca.pem"},
         "option 'pulsar.client.tlsTrustCertsFilePath': no file /no/ca.pem"),
        ({"pulsar.client.tlsHostnameVerificationEnable": "maybe"},
         "option 'pulsar.client.tlsHostnameVerificationEnable' must be true or false"),
    ],
)
def test_bad_auth_options_fail_load_and_save_naming_the_option(
    session: Any, secured: Secured, options: dict[str, str], text: str
) -> None:
    base = {"service.url": secured.tls_url}
    with pytest.raises(Exception, match=text):
        _read(session, {**base, **options}, topic=_topic("bad"))
    frame = session.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match=text):
        frame.write.format("pulsar").options(**base, **options).option("topic", _topic("bad")).mode("append").save()


def test_example_pipeline_over_tls_with_a_token(session: Any, secured: Secured, tmp_path: Path) -> None:
    """spark.pipeline with the TLS and token options: its helpers publish and read back, the query aggregates."""
    from spark.pipeline import Event, build_query, produce, read_topic
    from spark.security import Security

    authentication = Security.token(secured.token, tls_trust_certs_file=secured.ca)
    t0 = 1_700_000_000_000
    source, sink = _topic("pipe-in"), _topic("pipe-out")
    events = [Event("a", 1, t0 + 1_000), Event("a", 2, t0 + 3_000), Event("end-of-input", 0, t0 + 90_000)]
    assert produce(secured.tls_url, source, events, authentication) == 3
    client_options = {k: v for k, v in secured.spark_options().items() if k != "service.url"}
    query = build_query(
        session, secured.tls_url, str(tmp_path / "ck"), sources=(source,), sink=sink,
        trigger={"availableNow": True}, client_options=client_options,
    )  # fmt: skip
    query.awaitTermination(60)
    assert query.exception() is None
    rows = read_topic(secured.tls_url, sink, authentication)
    assert [(r["key"], r["window_start"] - t0, r["events"], r["total"]) for r in rows] == [("a", 0, 2, 3)]


def test_hostname_verification_can_be_turned_off(session: Any, secured: Secured, tmp_path: Path) -> None:
    """A broker whose (trusted) certificate names another host: refused by the client with
    ``tls_validate_hostname=True`` and by default at load(), accepted with ``tls_validate_hostname=False`` /
    ``pulsar.client.tlsHostnameVerificationEnable=false``."""
    from pulsar_txn import Client
    from pulsar_txn._runtime import TlsVerificationError

    material = secured.material
    tls_port = free_port()
    proc = ServerProcess(
        tmp_path / "data", "--tls-port", str(tls_port), "--tls-cert-file", material.path("wrong-host.pem"),
        "--tls-key-file", material.path("wrong-host.key"),
    ).start(timeout=30)  # fmt: skip
    try:
        url, topic = f"pulsar+ssl://127.0.0.1:{tls_port}", _topic("wrong-host")
        with (
            Client(url, tls_trust_certs_file_path=secured.ca, tls_validate_hostname=True) as client,
            pytest.raises(TlsVerificationError, match="mismatch"),
        ):
            client.create_producer(topic).send(b"x")
        with Client(url, tls_trust_certs_file_path=secured.ca, tls_validate_hostname=False) as client:
            client.create_producer(topic).send(b"m0")
        options = {"service.url": url, "pulsar.client.tlsTrustCertsFilePath": secured.ca}
        with pytest.raises(Exception, match=r"TLS handshake .* failed: .*mismatch"):
            _read(session, options, topic=topic)
        unverified = {**options, "pulsar.client.tlsHostnameVerificationEnable": "false"}
        assert [r.value for r in _read(session, unverified, topic=topic).collect()] == [b"m0"]
    finally:
        proc.stop()
