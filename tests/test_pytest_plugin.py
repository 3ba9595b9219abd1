"""The pytest plugin (pulsar_txn_proxy.pytest_plugin) as a user meets it: a small test suite of theirs, with no
import of the plugin, run by pytest in a subprocess (the plugin comes from the package's ``pytest11`` entry point).

Each inner suite writes what it saw (process ids, URLs) to ``seen.json`` so the outer test can check, after the
inner pytest exited, that every endpoint it started is stopped.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pulsar_txn_proxy.endpoint import PulsarEndpoint

pytest_plugins = ["pytester"]

#: Shared by the inner suites: record what an endpoint is, for the outer test.
RECORD = """
import json, pathlib

def record(key, endpoint):
    path = pathlib.Path(__file__).parent / "seen.json"
    seen = json.loads(path.read_text()) if path.exists() else {}
    seen[key] = {"pid": endpoint.process.pid, "service_url": endpoint.service_url, "admin_url": endpoint.admin_url,
                 "port": endpoint.port}
    path.write_text(json.dumps(seen))
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=180)


def _seen(pytester: pytest.Pytester) -> dict[str, dict[str, object]]:
    return json.loads((pytester.path / "seen.json").read_text())


def _assert_stopped(entry: dict[str, object]) -> None:
    """The endpoint's process is gone and its port refuses connections."""
    pid = int(entry["pid"])  # type: ignore[call-overload]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", int(entry["port"])), 1):  # type: ignore[call-overload]
        pass


def test_session_endpoint_produce_consume_and_failure_log(pytester: pytest.Pytester) -> None:
    """Two tests share the session endpoint and round-trip messages in their own namespaces; a failing test's
    report carries the endpoint's log; the endpoint is stopped when the session ends."""
    pytester.makepyfile(
        helpers=RECORD,
        test_user=textwrap.dedent(
            """
            import pulsar
            from helpers import record

            def test_round_trip(pulsar_endpoint, pulsar_client, pulsar_namespace):
                record("first", pulsar_endpoint)
                topic = pulsar_namespace.topic("orders")
                assert topic.startswith("persistent://public/test-")
                producer = pulsar_client.create_producer(topic)
                consumer = pulsar_client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
                producer.send(b"hello")
                msg = consumer.receive(5000)
                assert msg.data() == b"hello"
                consumer.acknowledge(msg)

            def test_same_endpoint_other_namespace(pulsar_endpoint, pulsar_namespace):
                record("second", pulsar_endpoint)
                assert pulsar_namespace.name in pulsar_endpoint.admin("GET", "/admin/v2/namespaces/public")
                client = pulsar.Client(pulsar_endpoint.service_url)
                reader = client.create_reader(pulsar_namespace.topic("orders"), pulsar.MessageId.earliest)
                assert not reader.has_message_available()   # a fresh namespace: nothing from the first test
                client.close()

            def test_fails(pulsar_endpoint, pulsar_namespace):
                pulsar_endpoint.admin("PUT", "/admin/v2/namespaces/" + pulsar_namespace.name, {})
            """
        ),
    )
    result = _run(pytester)
    result.assert_outcomes(passed=2, failed=1)
    # The failure is the admin API's answer (409: the namespace exists), with the endpoint's log in the report.
    result.stdout.fnmatch_lines(["*answered 409*", "*pulsar endpoint log (pulsar://127.0.0.1:*"])
    seen = _seen(pytester)
    assert seen["first"] == seen["second"]
    _assert_stopped(seen["first"])


def test_marker_settings_and_scopes(pytester: pytest.Pytester) -> None:
    """``@pytest.mark.pulsar_endpoint``: server options (partitions), and per-test / per-module lifetimes."""
    pytester.makepyfile(
        helpers=RECORD,
        test_scopes=textwrap.dedent(
            """
            import pytest
            from helpers import record

            @pytest.mark.pulsar_endpoint(default_partitions=3)
            def test_partitions(pulsar_endpoint, pulsar_client, pulsar_namespace):
                record("partitioned", pulsar_endpoint)
                topic = pulsar_namespace.topic("auto")
                pulsar_client.create_producer(topic).send(b"x")
                assert len(pulsar_client.get_topic_partitions(topic)) == 3

            def test_default(pulsar_endpoint, pulsar_client, pulsar_namespace):
                record("default", pulsar_endpoint)
                topic = pulsar_namespace.topic("auto")
                pulsar_client.create_producer(topic).send(b"x")
                assert pulsar_client.get_topic_partitions(topic) == [topic]

            def test_session_fixture(pulsar_session_endpoint, pulsar_endpoint):
                assert pulsar_session_endpoint is pulsar_endpoint

            @pytest.mark.pulsar_endpoint(scope="function")
            def test_fresh_a(pulsar_endpoint):
                record("fresh_a", pulsar_endpoint)

            @pytest.mark.pulsar_endpoint(scope="function")
            def test_fresh_b(pulsar_endpoint):
                record("fresh_b", pulsar_endpoint)
            """
        ),
        test_module_scope=textwrap.dedent(
            """
            import pytest
            from helpers import record

            pytestmark = pytest.mark.pulsar_endpoint(scope="module", transaction_coordinators=2)

            def test_one(pulsar_endpoint):
                record("module_1", pulsar_endpoint)
                assert len(pulsar_endpoint.admin("GET", "/admin/v3/transactions/coordinators")) == 2

            def test_two(pulsar_endpoint):
                record("module_2", pulsar_endpoint)
            """
        ),
    )
    result = _run(pytester)
    result.assert_outcomes(passed=7)
    seen = _seen(pytester)
    pids = {key: entry["pid"] for key, entry in seen.items()}
    assert pids["module_1"] == pids["module_2"]
    assert len({pids["partitioned"], pids["default"], pids["fresh_a"], pids["fresh_b"], pids["module_1"]}) == 5
    for entry in seen.values():
        _assert_stopped(entry)


def test_transactions_on_and_off(pytester: pytest.Pytester) -> None:
    """A transaction through the project's Python transactional client: committed messages reach an official
    consumer; with ``transaction_coordinators=0`` the endpoint has no coordinator to open one."""
    pytester.makepyfile(
        test_txn=textwrap.dedent(
            """
            import pulsar
            import pytest
            from pulsar_txn import Client, TransactionCoordinatorNotFoundError

            def test_commit(pulsar_endpoint, pulsar_client, pulsar_namespace):
                topic = pulsar_namespace.topic("txn")
                consumer = pulsar_client.subscribe(topic, "sub")
                txn_client = Client(pulsar_endpoint.service_url)
                txn = txn_client.new_transaction()
                txn_client.create_producer(topic).send(b"in-txn", txn=txn)
                with pytest.raises(pulsar.Timeout):
                    consumer.receive(300)            # not visible before the commit
                txn.commit()
                assert consumer.receive(5000).data() == b"in-txn"
                txn_client.close()

            @pytest.mark.pulsar_endpoint(transaction_coordinators=0)
            def test_off(pulsar_endpoint):
                txn_client = Client(pulsar_endpoint.service_url)
                with pytest.raises(TransactionCoordinatorNotFoundError):
                    txn_client.new_transaction()
                txn_client.close()
            """
        ),
    )
    _run(pytester).assert_outcomes(passed=2)


def test_tls_and_token_from_ini_and_command_line(pytester: pytest.Pytester) -> None:
    """Ini options turn on TLS and tokens; a command-line option sets the partitions; users connect with the
    certificate and token the endpoint hands back."""
    pytester.makeini(
        """
        [pytest]
        pulsar_endpoint_tls = true
        pulsar_endpoint_auth = token
        """
    )
    pytester.makepyfile(
        helpers=RECORD,
        test_secure=textwrap.dedent(
            """
            import ssl, urllib.error, urllib.request
            import pulsar
            import pytest
            from helpers import record

            def test_tls_token(pulsar_endpoint, pulsar_namespace):
                record("secure", pulsar_endpoint)
                assert pulsar_endpoint.tls_service_url.startswith("pulsar+ssl://localhost:")
                client = pulsar.Client(
                    pulsar_endpoint.tls_service_url,
                    authentication=pulsar.AuthenticationToken(pulsar_endpoint.token),
                    tls_trust_certs_file_path=str(pulsar_endpoint.tls_cert_file),
                )
                topic = pulsar_namespace.topic("secure")
                client.create_producer(topic).send(b"over tls")
                assert len(client.get_topic_partitions(topic)) == 2
                client.close()

            def test_admin_needs_token(pulsar_endpoint):
                context = ssl.create_default_context(cafile=str(pulsar_endpoint.tls_cert_file))
                url = pulsar_endpoint.tls_admin_url + "/admin/v2/clusters"
                with pytest.raises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(url, context=context)
                assert refused.value.code == 401
                request = urllib.request.Request(url, headers={"Authorization": "Bearer " + pulsar_endpoint.token})
                assert urllib.request.urlopen(request, context=context).status == 200
                other = pulsar_endpoint.create_token("alice")
                request = urllib.request.Request(url, headers={"Authorization": "Bearer " + other})
                assert urllib.request.urlopen(request, context=context).status == 200
            """
        ),
    )
    result = _run(pytester, "--pulsar-endpoint-default-partitions=2", "--pulsar-endpoint-startup-timeout=90")
    result.assert_outcomes(passed=2)
    _assert_stopped(_seen(pytester)["secure"])


def test_server_that_cannot_start_fails_the_test_with_its_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad=textwrap.dedent(
            """
            import pytest

            @pytest.mark.pulsar_endpoint(no_such_option=1)
            def test_bad_option(pulsar_endpoint):
                pass
            """
        ),
    )
    result = _run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*EndpointError: the endpoint exited while starting*", "*--no-such-option*"])


def test_plugin_import_is_light() -> None:
    """Loading the plugin (in every pytest session of whoever installs the package) imports neither the server
    nor the client nor Twisted."""
    code = (
        "import sys, pulsar_txn_proxy.pytest_plugin\n"
        "heavy = ('wire', 'engine', 'proxy', 'spark', 'pulsar', 'twisted', 'cryptography', 'jwt', 'testcontainers')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "[]"


def test_existing_broker_option(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``--pulsar-endpoint-url`` points the fixtures at a broker started elsewhere: nothing is started, namespaces
    are made there, and a test whose marker asks for settings fails saying why."""
    with PulsarEndpoint(tmp_path / "elsewhere") as elsewhere:
        pytester.makepyfile(
            test_existing=textwrap.dedent(
                f"""
                import pytest

                def test_uses_it(pulsar_endpoint, pulsar_namespace, pulsar_client):
                    assert pulsar_endpoint.service_url == "{elsewhere.service_url}"
                    pulsar_client.create_producer(pulsar_namespace.topic("t")).send(b"x")

                @pytest.mark.pulsar_endpoint(default_partitions=2)
                def test_settings_refused(pulsar_endpoint):
                    pass
                """
            ),
        )
        result = _run(
            pytester,
            f"--pulsar-endpoint-url={elsewhere.service_url}",
            f"--pulsar-endpoint-admin-url={elsewhere.admin_url}",
        )
        result.assert_outcomes(passed=1, errors=1)
        result.stdout.fnmatch_lines(["*asks for settings*cannot be given*"])
        namespaces = elsewhere.admin("GET", "/admin/v2/namespaces/public")
        assert any(name.startswith("public/test-") for name in namespaces)


def test_endpoint_dies_with_a_killed_session(pytester: pytest.Pytester) -> None:
    """A pytest session killed outright (SIGKILL, as a CI job at its timeout) leaves no endpoint running."""
    pytester.makepyfile(
        helpers=RECORD,
        test_killed=textwrap.dedent(
            """
            import os, signal
            from helpers import record

            def test_killed(pulsar_endpoint):
                record("killed", pulsar_endpoint)
                os.kill(os.getpid(), signal.SIGKILL)
            """
        ),
    )
    _run(pytester)
    entry = _seen(pytester)["killed"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _running(int(entry["pid"])):  # type: ignore[call-overload]
        time.sleep(0.1)
    assert not _running(int(entry["pid"]))  # type: ignore[call-overload]
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", int(entry["port"])), 1):  # type: ignore[call-overload]
        pass


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its reaper is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"
