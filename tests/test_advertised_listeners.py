"""Advertised listeners (``--advertised-listeners``, ``--internal-listener-name``; Pulsar's ``advertisedListeners`` and
``internalListenerName``): lookups are answered with the addresses of the listener they name, and a listener the
endpoint does not advertise fails them with ServiceNotReady, as Pulsar 4.2.4 answers (checked on a standalone with
``advertisedListeners=internal:pulsar://127.0.0.1:<port>,external:pulsar://ext.example:16650,
external:pulsar+ssl://ext.example:16651`` and ``internalListenerName=internal``)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from proxy.config import SettingsError, load
from tests.conftest import make_client
from tests.server_process import ServerProcess, free_port
from tests.test_bad_input import RawConnection
from tests.txn_harness import Scenario, txn_harness_fixture  # noqa: F401 (the txn_harness fixture)
from wire.pulsar_api_pb2 import BaseCommand, CommandLookupTopicResponse, ServerError

T = BaseCommand
Connect = CommandLookupTopicResponse.Connect
Failed = CommandLookupTopicResponse.Failed
TLS = "pulsar+ssl://ext.example:16651"


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[ServerProcess]:
    """An endpoint whose ``internal`` listener is 127.0.0.1 and whose ``external`` one is localhost (both reach it)
    and has a TLS address."""
    port = free_port()
    listeners = f"internal:pulsar://127.0.0.1:{port},external:pulsar://localhost:{port},external:{TLS}"
    proc = ServerProcess(tmp_path / "data", "--advertised-listeners", listeners, port=port).start()
    yield proc
    proc.stop()


def _lookup(port: int, listener: str | None) -> CommandLookupTopicResponse:
    conn = RawConnection(port)
    try:
        conn.handshake()
        fields = {} if listener is None else {"advertised_listener_name": listener}
        conn.send(T.LOOKUP, topic=f"persistent://public/default/l-{uuid.uuid4().hex[:8]}", request_id=1, **fields)
        return conn.expect(T.LOOKUP_RESPONSE).lookupTopicResponse
    finally:
        conn.close()


def _urls(answer: CommandLookupTopicResponse) -> tuple[int, str | None, str | None]:
    url = answer.brokerServiceUrl if answer.HasField("brokerServiceUrl") else None
    tls = answer.brokerServiceUrlTls if answer.HasField("brokerServiceUrlTls") else None
    return answer.response, url, tls


@pytest.mark.parametrize("listener", ["nope", "internal"])
def test_without_listeners_a_named_listener_is_refused(server: ServerProcess, listener: str) -> None:
    answer = _lookup(server.port, listener)
    assert (answer.response, answer.error) == (Failed, ServerError.ServiceNotReady)
    assert answer.message == f"the broker do not have {listener} listener"
    assert _urls(_lookup(server.port, None))[:2] == (Connect, f"pulsar://127.0.0.1:{server.port}")
    assert _urls(_lookup(server.port, ""))[:2] == (Connect, f"pulsar://127.0.0.1:{server.port}")


def test_python_client_with_an_unknown_listener_cannot_produce(server: ServerProcess) -> None:
    client = make_client(server.url, listener_name="nope", operation_timeout_seconds=3)
    try:
        with pytest.raises(pulsar.Timeout):
            client.create_producer(f"persistent://public/default/l-{uuid.uuid4().hex[:8]}")
    finally:
        client.close()


def test_lookups_answer_the_named_listener(listening: ServerProcess) -> None:
    port = listening.port
    assert _urls(_lookup(port, None)) == (Connect, f"pulsar://127.0.0.1:{port}", TLS)
    assert _urls(_lookup(port, "internal")) == (Connect, f"pulsar://127.0.0.1:{port}", None)
    assert _urls(_lookup(port, "external")) == (Connect, f"pulsar://localhost:{port}", TLS)
    refused = _lookup(port, "nope")
    assert (refused.response, refused.error, refused.message) == (
        Failed,
        ServerError.ServiceNotReady,
        "the broker do not have nope listener",
    )


def test_python_client_reaches_the_endpoint_through_its_listener(listening: ServerProcess) -> None:
    topic = f"persistent://public/default/l-{uuid.uuid4().hex[:8]}"
    client = make_client(listening.url, listener_name="external")
    try:
        consumer = client.subscribe(topic, "s")
        client.create_producer(topic).send(b"through external")
        assert consumer.receive(10_000).data() == b"through external"
    finally:
        client.close()


def test_http_lookup_answers_the_named_listener(listening: ServerProcess) -> None:
    path = f"{listening.admin_url}/lookup/v2/topic/persistent/public/default/l-{uuid.uuid4().hex[:8]}"
    with urllib.request.urlopen(f"{path}?listenerName=external", timeout=10) as reply:
        answer = json.load(reply)
    assert (answer["brokerUrl"], answer["brokerUrlTls"], answer["nativeUrl"]) == (
        f"pulsar://localhost:{listening.port}",
        TLS,
        f"pulsar://localhost:{listening.port}",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{path}?listenerName=nope", timeout=10)
    assert refused.value.code == 500
    assert "the broker do not have nope listener" in refused.value.read().decode()


@pytest.mark.parametrize(
    ("listeners", "internal", "error"),
    [
        ("internal:pulsar://h:6650,internal:pulsar://g:6650", None, "redundant configure for listener `internal`"),
        ("internal:http://h:6650", None, "is not a pulsar:// or pulsar+ssl:// URL"),
        ("internal:pulsar://h", None, "with a host and a port"),
        ("pulsar://h:6650", None, "is not a pulsar:// or pulsar+ssl:// URL"),
        ("a:pulsar://h:6650", "b", "do not contain the internal listener name 'b'"),
    ],
)
def test_listener_settings_are_checked(listeners: str, internal: str | None, error: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(error)):
        load({"advertised_listeners": listeners, "internal_listener_name": internal}, None, {})


def test_internal_listener_name_chooses_the_unnamed_answer(tmp_path: Path) -> None:
    port = free_port()
    listeners = f"a:pulsar://127.0.0.1:{port},b:pulsar://localhost:{port}"
    proc = ServerProcess(
        tmp_path / "data", "--advertised-listeners", listeners, "--internal-listener-name", "b", port=port
    ).start()
    try:
        assert _urls(_lookup(port, None)) == (Connect, f"pulsar://localhost:{port}", None)
    finally:
        proc.stop()


def test_java_client_with_a_listener_name(listening: ServerProcess, txn_harness: Scenario) -> None:
    topic = f"persistent://public/default/l-{uuid.uuid4().hex[:8]}"
    assert txn_harness(listening.url, "listener_produce", topic, "external")["produce"] == "ok"
    # Pulsar 4.2.4's answer to the Java client, with or without listeners: its lookups fail.
    assert txn_harness(listening.url, "listener_produce", topic, "nope")["produce"] == "LookupException"
