"""``pulsar-txn-proxy conformance``: the catalogue, outcomes against endpoints that lack features, reports, goldens.

Each case runs the command as a user does (a child process, ``python -m proxy conformance ...``) against endpoints
started here, on scenarios driven by the Python client only (the Java and Go harnesses are covered by the
conformance suite itself).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

import pytest

from pulsar_txn_proxy.conformance import harness
from tests.server_process import ServerProcess, free_port

PLAIN = "core.produce-consume-in-order"
ADMIN = "admin.topic-stats"
TXN = "python-txn-client.ending-a-transaction-twice-or-an-unknown-one-is-refused"
RESTART = "transactions.committed-txn-survives-kill"
GO_PLAIN = "go-client.produce-consume"


def conformance(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy", "conformance", *args],
        cwd=cwd, capture_output=True, text=True, timeout=600, check=False,
    )


def _only(*ids: str) -> list[str]:
    return [arg for scenario_id in ids for arg in ("--only", scenario_id)]


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("conformance-command") / "data").start()
    yield proc
    proc.stop()


def _started(tmp_path: Path, *extra: str) -> ServerProcess:
    return ServerProcess(tmp_path / "data", *extra).start()


def _report(directory: Path) -> dict[str, dict]:
    data = json.loads((directory / "report.json").read_text())
    return {item["id"]: item for item in data["scenarios"]}


def test_list_json_names_every_scenario_once(tmp_path: Path) -> None:
    done = conformance("list", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    entries = json.loads(done.stdout)
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)) > 150
    by_id = {e["id"]: e for e in entries}
    assert by_id["transactions.abort-invisible"]["clients"] == ["java"]
    assert {"transactions", "partitioned", "admin"} <= set(by_id["transactions.abort-invisible"]["needs"])
    assert by_id["go-client.seek-id"]["clients"] == ["go"]
    assert by_id[PLAIN]["needs"] == [] and by_id[PLAIN]["area"] == "core"
    assert "restart" in by_id[RESTART]["needs"]


def test_run_passes_and_writes_the_reports(endpoint: ServerProcess, tmp_path: Path) -> None:
    reports = tmp_path / "out"
    done = conformance("run", "--service-url", endpoint.url, "--admin-url", endpoint.admin_url, "--clients", "python",
                       *_only(PLAIN, ADMIN, RESTART), "--report", str(reports), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = _report(reports)
    assert {k: v["outcome"] for k, v in outcomes.items()} == {PLAIN: "pass", ADMIN: "pass"}
    data = json.loads((reports / "report.json").read_text())
    assert data["golden_pulsar_version"] == "4.2.4" and "python" in data["client_versions"]
    cases = ElementTree.parse(reports / "junit.xml").getroot().findall("testcase")
    assert sorted(c.get("name") for c in cases) == sorted([PLAIN, ADMIN])
    page = (reports / "report.html").read_text()
    assert "Score per area" in page and PLAIN in page
    assert "total" in done.stdout and "time:" in done.stdout


def test_restart_scenarios_are_not_run_without_a_restart_command(endpoint: ServerProcess, tmp_path: Path) -> None:
    reports = tmp_path / "out"
    done = conformance("run", "--service-url", endpoint.url, "--admin-url", endpoint.admin_url,
                       *_only(RESTART), "--report", str(reports), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    result = _report(reports)[RESTART]
    assert result["outcome"] == "not-run" and "--restart-command" in result["reason"]


def test_admin_scenarios_are_unsupported_without_an_admin_url(endpoint: ServerProcess, tmp_path: Path) -> None:
    reports = tmp_path / "out"
    done = conformance("run", "--service-url", endpoint.url, "--clients", "python", *_only(PLAIN, ADMIN),
                       "--report", str(reports), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = _report(reports)
    assert outcomes[PLAIN]["outcome"] == "pass"
    assert outcomes[ADMIN]["outcome"] == "unsupported" and "admin" in outcomes[ADMIN]["reason"]


def test_transaction_scenarios_are_unsupported_without_coordinators(tmp_path: Path) -> None:
    proc = _started(tmp_path, "--transaction-coordinators", "0")
    try:
        reports = tmp_path / "out"
        done = conformance("run", "--service-url", proc.url, "--admin-url", proc.admin_url, "--clients",
                           "python,go", *_only(PLAIN, TXN, GO_PLAIN), "--report", str(reports), cwd=tmp_path)
    finally:
        proc.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = _report(reports)
    assert outcomes[PLAIN]["outcome"] == "pass"
    # The Go harness's client is built without transactions there: with them it could not connect at all.
    assert outcomes[GO_PLAIN]["outcome"] == "pass"
    assert outcomes[TXN]["outcome"] == "unsupported" and "transactions" in outcomes[TXN]["reason"]


def test_a_broker_that_behaves_differently_exits_1_with_its_differences(tmp_path: Path) -> None:
    proc = _started(tmp_path, "--default-partitions", "3")
    try:
        reports = tmp_path / "out"
        done = conformance("run", "--service-url", proc.url, "--admin-url", proc.admin_url, "--clients", "python",
                           *_only(PLAIN), "--report", str(reports), cwd=tmp_path)
    finally:
        proc.stop()
    assert done.returncode == 1, done.stdout + done.stderr
    result = _report(reports)[PLAIN]
    assert result["outcome"] == "differs" and result["differences"]
    assert {"observation", "reference", "broker"} <= set(result["differences"][0])
    assert result["differences"][0]["observation"] in (reports / "report.html").read_text()


def test_goldens_recorded_from_a_broker_and_a_live_reference(endpoint: ServerProcess, tmp_path: Path) -> None:
    goldens = tmp_path / "goldens"
    target = ["--service-url", endpoint.url, "--admin-url", endpoint.admin_url, "--clients", "python", *_only(PLAIN)]
    recorded = conformance("record", *target, "--out", str(goldens), cwd=tmp_path)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert "produce_consume_in_order" in json.loads((goldens / "core.json").read_text())
    against_goldens = conformance("run", *target, "--golden", str(goldens), cwd=tmp_path)
    assert against_goldens.returncode == 0, against_goldens.stdout + against_goldens.stderr
    live = conformance("run", *target, "--reference-url", endpoint.url, "--reference-admin-url", endpoint.admin_url,
                       cwd=tmp_path)
    assert live.returncode == 0, live.stdout + live.stderr


def test_bad_usage_exits_2(endpoint: ServerProcess, tmp_path: Path) -> None:
    assert conformance("run", "--service-url", endpoint.url, "--clients", "cobol", cwd=tmp_path).returncode == 2
    assert conformance("run", "--service-url", endpoint.url, "--only", "nothing.like.this", cwd=tmp_path
                       ).returncode == 2
    unreachable = conformance("run", "--service-url", f"pulsar://127.0.0.1:{free_port()}", cwd=tmp_path)
    assert unreachable.returncode == 2 and "cannot connect" in unreachable.stderr


def test_a_harness_failure_keeps_the_java_exception(tmp_path: Path) -> None:
    printed = json.dumps({"error": {"type": "PulsarClientException$TimeoutException", "message": "lookup timed out"}})
    with pytest.raises(harness.HarnessError) as failure:
        harness.observations([sys.executable, "-c", f"print({printed!r}); raise SystemExit(1)"], "Java scenario x", 60)
    assert failure.value.cause == "Java scenario x: PulsarClientException$TimeoutException: lookup timed out"
