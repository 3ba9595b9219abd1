"""The fixtures' choice between a local process and a container, and how asking for a container fails without an
engine. These tests need no container engine (they run in the default suite)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.container_endpoint import ContainerServer
from tests.server_process import ROOT, ServerProcess

CONTAINER_TEST = "tests/test_container.py::test_official_client_produces_and_consumes"
LOCAL_TEST = "tests/test_smoke.py::test_produce_then_consume_in_order"


def test_server_fixture_kind_follows_the_option(request: pytest.FixtureRequest, server: object) -> None:
    expected = ContainerServer if request.config.getoption("container") else ServerProcess
    assert type(server) is expected


def _pytest_without_engine(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_TXN_PROXY_")}
    env["DOCKER_HOST"] = "unix:///nonexistent/docker.sock"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )


def test_container_path_without_engine_fails_clearly() -> None:
    """A container-marked test, and any test under --container, errors (never skips) and names the engine."""
    result = _pytest_without_engine(CONTAINER_TEST, LOCAL_TEST, "--container")
    out = result.stdout
    assert result.returncode == 1, out
    assert "2 errors" in out and "skipped" not in out, out
    assert out.count("the container tests need a Docker-compatible engine") >= 2, out
    assert "unix:///nonexistent/docker.sock" in out


def test_marker_alone_selects_the_container_path() -> None:
    """Without --container, only the marked test asks for an engine; the other runs on a local process."""
    result = _pytest_without_engine(CONTAINER_TEST, LOCAL_TEST)
    out = result.stdout
    assert result.returncode == 1, out
    assert "1 passed, 1 error" in out, out
    assert f"ERROR {CONTAINER_TEST}" in out and f"PASSED {LOCAL_TEST}" in out, out
