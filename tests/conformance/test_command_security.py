"""``pulsar-txn-proxy conformance run`` against a broker with TLS and token authentication, and the known
differences excused for this endpoint only.

The command runs as a user runs it (a child process) against this endpoint started with TLS and token authentication
(``PulsarEndpoint(tls=True, auth="token")``), through its ``pulsar+ssl://`` and ``https://`` URLs only. The
scenarios chosen reach the broker every way the suite does: the official Python client, raw protocol connections,
admin REST calls, the project's transactional client, the Java harness (client and admin calls) and the Go harness
(client and admin client); each fails when the options do not reach it. These tests do not use the ``conformance``
fixture, so they run once whatever ``--conformance-target`` says.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pulsar_txn_proxy.endpoint import PulsarEndpoint

pytestmark = pytest.mark.xdist_group("conformance-command-security")

#: One scenario per way of reaching the broker.
THROUGH = {
    "core.produce-consume-in-order": "the official Python client",
    "admin.topic-stats": "admin REST calls",
    "message-ids.admin-skip-examine-and-get-by-id": "admin REST calls read for their headers",
    "response-fields.fields-of-answers": "a raw protocol connection",
    "python-txn-client.ending-a-transaction-twice-or-an-unknown-one-is-refused": "the transactional Python client",
    "transactions.commit-atomic": "the Java harness",
    "topic-watch.java-pattern-consumer": "the Java harness's admin calls",
    "go-client.produce-consume": "the Go harness",
    "go-client.admin-create-partitioned": "the Go harness's admin client",
}


def conformance(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy", "conformance", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _only(*ids: str) -> list[str]:
    return [arg for scenario_id in ids for arg in ("--only", scenario_id)]


def _report(directory: Path) -> dict:
    return json.loads((directory / "report.json").read_text())


@pytest.fixture(scope="module")
def secured() -> Iterator[PulsarEndpoint]:
    with PulsarEndpoint(tls=True, auth="token", startup_timeout=60) as endpoint:
        yield endpoint


def _tls_target(endpoint: PulsarEndpoint) -> list[str]:
    assert endpoint.tls_service_url and endpoint.tls_admin_url
    return ["--service-url", endpoint.tls_service_url, "--admin-url", endpoint.tls_admin_url]


def test_tls_and_token_options_reach_every_client(secured: PulsarEndpoint, tmp_path: Path) -> None:
    done = conformance(
        "run",
        *_tls_target(secured),
        "--tls-trust-certs-file-path",
        str(secured.tls_cert_file),
        "--auth-plugin",
        "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "--auth-params",
        f"token:{secured.token}",
        *_only(*THROUGH),
        "--report",
        str(tmp_path / "report"),
        cwd=tmp_path,
    )
    report = _report(tmp_path / "report")
    outcomes = {item["id"]: (item["outcome"], item["reason"]) for item in report["scenarios"]}
    assert set(THROUGH) <= set(outcomes), done.stderr  # --only takes prefixes: commit-atomic-batched comes too
    failed = {f"{i} ({THROUGH.get(i, i)})": o for i, o in outcomes.items() if o[0] != "pass"}
    assert not failed, f"{failed}\n{done.stderr[-4000:]}"
    assert done.returncode == 0
    assert report["capabilities"]["tls"]["available"], report["capabilities"]["tls"]
    assert report["capabilities"]["auth"]["available"], report["capabilities"]["auth"]
    assert "authentication token" in report["target"]["security"], report["target"]
    assert secured.token not in json.dumps(report), "the report must not carry the secret"


def test_without_the_token_the_broker_refuses_the_run(secured: PulsarEndpoint, tmp_path: Path) -> None:
    """The endpoint does require what the test above passes: without the token nothing reaches it."""
    done = conformance(
        "run",
        *_tls_target(secured),
        "--tls-trust-certs-file-path",
        str(secured.tls_cert_file),
        *_only("core.produce-consume-in-order", "admin.topic-stats"),
        "--report",
        str(tmp_path / "report"),
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    report = _report(tmp_path / "report")
    outcomes = {item["id"]: item for item in report["scenarios"]}
    assert outcomes["core.produce-consume-in-order"]["outcome"] == "error"  # the client gives up (a timeout)
    assert outcomes["admin.topic-stats"]["outcome"] == "unsupported"
    assert "401" in report["capabilities"]["admin"]["detail"]
    assert not report["capabilities"]["auth"]["available"]


def test_token_shortcut_and_contradicting_options(secured: PulsarEndpoint, tmp_path: Path) -> None:
    both = conformance(
        "run", *_tls_target(secured), "--token", "x", "--auth-plugin", "basic", *_only("core"), cwd=tmp_path
    )
    assert both.returncode == 2 and "--token" in both.stderr
    done = conformance(
        "run",
        *_tls_target(secured),
        "--tls-trust-cert-path",  # pulsar-admin's name of the option
        str(secured.tls_cert_file),
        "--token",
        str(secured.token),
        *_only("core.produce-consume-in-order"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr


# -- known differences: excused for this endpoint only ---------------------------------------------------------------

#: A scenario with a documented deliberate difference of this endpoint (``KNOWN_DIFFERENCES``), observed through a raw
#: connection only: CONNECTED's feature flags.
KNOWN = "response-fields.fields-of-answers"


class RenamingRelay:
    """A TCP relay to a broker that renames it in CONNECTED's ``server_version`` (a same-length byte substitution,
    so that the frame stays valid): the endpoint's behaviour under another broker's name, as a vendor's broker that
    differs where this endpoint deliberately differs."""

    def __init__(self, upstream: tuple[str, int], old: bytes, new: bytes) -> None:
        assert len(old) == len(new)
        self.upstream, self.old, self.new = upstream, old, new
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            broker = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, broker, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(broker, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, rename: bool) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data.replace(self.old, self.new) if rename else data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                s.close()

    def close(self) -> None:
        self.server.close()


@pytest.fixture(scope="module")
def plain() -> Iterator[PulsarEndpoint]:
    with PulsarEndpoint(startup_timeout=60) as endpoint:
        yield endpoint


def test_known_differences_are_excused_for_this_endpoint_only(plain: PulsarEndpoint, tmp_path: Path) -> None:
    ours = conformance(
        "run", "--service-url", plain.service_url, *_only(KNOWN), "--report", str(tmp_path / "ours"), cwd=tmp_path
    )
    assert ours.returncode == 0, ours.stderr
    result = _report(tmp_path / "ours")["scenarios"][0]
    assert result["outcome"] == "pass"
    assert "connect_features" in result["reason"], result

    relay = RenamingRelay(("127.0.0.1", plain.port), b"pulsar-txn-proxy ", b"acme-pulsar-9000 ")
    try:
        vendor = conformance(
            "run",
            "--service-url",
            f"pulsar://127.0.0.1:{relay.port}",
            *_only(KNOWN),
            "--report",
            str(tmp_path / "vendor"),
            cwd=tmp_path,
        )
        forced = conformance(
            "run",
            "--service-url",
            plain.service_url,
            "--known-differences",
            "compare",
            *_only(KNOWN),
            cwd=tmp_path,
        )
    finally:
        relay.close()
    assert vendor.returncode == 1, vendor.stderr
    report = _report(tmp_path / "vendor")
    result = report["scenarios"][0]
    assert result["outcome"] == "differs"
    assert {row["observation"].split("[")[0] for row in result["differences"]} == {"connect_features"}
    assert any("acme-pulsar-9000" in note and "compared" in note for note in report["notes"]), report["notes"]
    assert forced.returncode == 1, forced.stderr


def test_credentials_scenarios_are_unsupported_without_authentication(plain: PulsarEndpoint, tmp_path: Path) -> None:
    done = conformance(
        "run", "--service-url", plain.service_url, "--admin-url", plain.admin_url, *_only("credentials"),
        "--report", str(tmp_path / "report"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = _report(tmp_path / "report")
    assert {item["outcome"] for item in report["scenarios"]} == {"unsupported"}
    assert all("auth" in item["reason"] for item in report["scenarios"])
