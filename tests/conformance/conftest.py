"""Targets and the comparison for the conformance suite.

Options (``pytest tests/conformance ...``):

- ``--conformance-target endpoint`` (default): this endpoint, started here; outcomes are compared with the golden
  files recorded from real Apache Pulsar (``pulsar_txn_proxy/conformance/golden/``).
- ``--conformance-target pulsar``: a real Pulsar standalone started here (``pulsar_standalone.py``; Java 17+ and
  Maven), compared with the golden files.
- ``--conformance-target both``: both, compared with each other, side by side.
- ``--service-url pulsar://h:6650 [--admin-url http://h:8080]``: any running broker instead, compared with the
  golden files (scenarios that restart the broker then fail: the suite cannot restart it).
- ``--record-golden``: write the reference outcomes (Pulsar's, or the ``--service-url`` broker's) to the golden files
  instead of comparing with them.

The options are read with defaults, so a plain ``pytest`` from the repository root (which does not load this file's
``pytest_addoption``) runs the default: this endpoint against the golden files.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from pulsar_txn_proxy.conformance.framework import (
    KNOWN_DIFFERENCES,
    PULSAR_VERSION,
    Scenario,
    Target,
    load_golden,
    run_on,
    save_golden,
    side_by_side,
    wait_for_admin,
)
from pulsar_txn_proxy.conformance.runner import is_this_endpoint, server_version
from pulsar_txn_proxy.conformance.security import TOKEN_PLUGIN, Credentials, register
from pulsar_txn_proxy.endpoint import PulsarEndpoint
from tests.conformance.pulsar_standalone import PulsarStandalone
from tests.server_process import ServerProcess, free_port

_IDENTITY = pytest.StashKey[dict[str, bool]]()
ENDPOINT = "this endpoint"
PULSAR = f"Apache Pulsar {PULSAR_VERSION}"
GOLDEN = f"golden (Pulsar {PULSAR_VERSION})"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "conformance suite: this endpoint versus Apache Pulsar")
    group.addoption("--conformance-target", choices=("endpoint", "pulsar", "both"), default="endpoint",
                    help="what to run the scenarios against (default: endpoint, compared with golden files)")
    group.addoption("--service-url", default=None, help="run against this broker instead (pulsar://host:port)")
    group.addoption("--admin-url", default=None, help="its admin REST URL (http://host:port)")
    group.addoption("--record-golden", action="store_true", default=False,
                    help="write the reference target's outcomes to pulsar_txn_proxy/conformance/golden/")


def _option(config: pytest.Config, name: str, default: Any) -> Any:
    return config.getoption(name, default)


def _mode(config: pytest.Config) -> str:
    if _option(config, "--service-url", None):
        return "url"
    return _option(config, "--conformance-target", "endpoint")


@pytest.fixture(scope="session")
def endpoint_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """This endpoint with its admin API, on its own data directory. Its periodic policy check (TTL, retention) runs
    hourly: scenarios do not wait for it (the retention scenarios trim instead), and one that came between two of
    their observations would make them depend on its phase."""
    proc = ServerProcess(
        tmp_path_factory.mktemp("conformance") / "endpoint", "--policy-check-interval-seconds", "3600"
    )
    proc.start(timeout=60)
    wait_for_admin(proc.admin_url)

    def crash_restart() -> None:
        proc.kill()
        proc.start(timeout=60)
        wait_for_admin(proc.admin_url)

    yield Target(ENDPOINT, proc.url, proc.admin_url, crash_restart)
    if proc.process is not None:
        proc.stop()


@pytest.fixture(scope="session")
def pulsar_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A real Pulsar standalone, started once for the session and stopped at its end."""
    pulsar = PulsarStandalone(tmp_path_factory.mktemp("conformance") / "pulsar")
    pulsar.start()

    def crash_restart() -> None:
        pulsar.kill()
        pulsar.start()

    try:
        yield Target(PULSAR, pulsar.url, pulsar.admin_url, crash_restart)
    finally:
        pulsar.stop()


@pytest.fixture(scope="session")
def secured_endpoint_target() -> Iterator[Target]:
    """This endpoint with TLS and token authentication, reached through its TLS URLs with a super-user's token (the
    scenarios that need ``auth`` or ``tls``)."""
    with PulsarEndpoint(tls=True, auth="token", startup_timeout=60) as endpoint:
        assert endpoint.tls_service_url and endpoint.tls_admin_url
        credentials = Credentials(TOKEN_PLUGIN, f"token:{endpoint.token}", str(endpoint.tls_cert_file))
        register(credentials, endpoint.tls_service_url, endpoint.tls_admin_url)
        yield Target(ENDPOINT, endpoint.tls_service_url, endpoint.tls_admin_url)


@pytest.fixture(scope="session")
def secured_pulsar_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """A Pulsar standalone configured alike (TLS ports, token authentication; tests.security.pulsar_auth_conf)."""
    from tests.security import ADMIN_ROLE, Material, pulsar_auth_conf

    root = tmp_path_factory.mktemp("secured-conformance")
    material = Material(root / "material")
    tls_port, web_tls_port = free_port(), free_port()
    token = material.token(ADMIN_ROLE)
    pulsar = PulsarStandalone(
        root / "pulsar",
        extra_conf=pulsar_auth_conf(material, tls_port, web_tls_port),
        admin_headers={"Authorization": f"Bearer {token}"},
    )
    pulsar.start(timeout=300)
    try:
        service_url, admin_url = f"pulsar+ssl://localhost:{tls_port}", f"https://localhost:{web_tls_port}"
        register(Credentials(TOKEN_PLUGIN, f"token:{token}", material.path("ca.pem")), service_url, admin_url)
        yield Target(PULSAR, service_url, admin_url)
    finally:
        pulsar.stop()


class Conformance:
    """Runs one scenario on the selected targets and fails on any difference from the reference."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.config = request.config
        self.mode = _mode(self.config)
        self.record = bool(_option(self.config, "--record-golden", False))
        self.request = request
        self.secured = False

    def _target(self, fixture: str) -> Target:
        if self.secured:
            fixture = f"secured_{fixture}"
        return self.request.getfixturevalue(fixture)

    def check(self, fn: Scenario, secured: bool = False) -> None:
        """``secured``: the scenario needs a broker with TLS or authentication (the secured targets)."""
        self.secured = secured
        if secured and self.mode == "url":
            pytest.fail(
                "this scenario needs a broker with authentication: run `pulsar-txn-proxy conformance run` with its "
                "credentials (--auth-plugin/--auth-params, --tls-trust-certs-file-path)",
                pytrace=False,
            )
        module = fn.__module__.rsplit(".", 1)[-1].removeprefix("test_")
        name = fn.__name__.removeprefix("test_")
        label = f"{module}.{name}"
        if self.mode == "both":
            ours = run_on(self._target("endpoint_target"), fn)
            reference = run_on(self._target("pulsar_target"), fn)
            if self.record:
                save_golden(module, name, reference, PULSAR)
            self._compare(label, ours, reference, ENDPOINT, PULSAR, excuse_known=True)
            return
        if self.mode == "url":
            admin = _option(self.config, "--admin-url", None)
            target = Target(_option(self.config, "--service-url", None), _option(self.config, "--service-url", ""),
                            admin)
        else:
            target = self._target("pulsar_target" if self.mode == "pulsar" else "endpoint_target")
        outcome = run_on(target, fn)
        if self.record and self.mode != "endpoint":
            save_golden(module, name, outcome, target.name)
            _fail_on_crash(label, outcome)
            return
        golden = load_golden(module)
        if name not in golden:
            pytest.fail(
                f"{label}: no golden outcome recorded from real Pulsar; record it with "
                f"`pytest tests/conformance --conformance-target pulsar --record-golden`.\n"
                f"{target.name} gave: {json.dumps(outcome, sort_keys=True)}"
            )
        self._compare(label, outcome, golden[name], target.name, GOLDEN, excuse_known=self._is_endpoint(target))

    def _is_endpoint(self, target: Target) -> bool:
        """Whether the target is this endpoint (a ``--service-url`` broker when its CONNECTED says so): only then
        are its deliberate differences from Pulsar excused."""
        if self.mode != "url":
            return self.mode == "endpoint"
        cache = self.config.stash.setdefault(_IDENTITY, {})
        if target.service_url not in cache:
            cache[target.service_url] = is_this_endpoint(server_version(target))
        return cache[target.service_url]

    @staticmethod
    def _compare(
        label: str, ours: Any, reference: Any, ours_name: str, reference_name: str, excuse_known: bool
    ) -> None:
        known = KNOWN_DIFFERENCES.get(label, {}) if excuse_known else {}
        for key, why in known.items():
            if isinstance(ours, dict) and isinstance(reference, dict) and ours.get(key) != reference.get(key):
                warnings.warn(f"{label}: known difference in {key!r}: {why}", stacklevel=2)
        report = side_by_side(
            label, _comparable(ours, known), _comparable(reference, known), ours_name, reference_name
        )
        if report is not None:
            traces = [f"{n} failed:\n{o['$trace']}" for n, o in ((ours_name, ours), (reference_name, reference))
                      if isinstance(o, dict) and "$trace" in o]
            pytest.fail("\n".join([report, *traces]), pytrace=False)


def _comparable(outcome: Any, known: dict[str, str]) -> Any:
    """The outcome without its failure trace and without the documented deliberate differences."""
    if isinstance(outcome, dict):
        return {k: v for k, v in outcome.items() if k != "$trace" and k not in known}
    return outcome


def _fail_on_crash(label: str, outcome: Any) -> None:
    if isinstance(outcome, dict) and "$failed" in outcome:
        pytest.fail(f"{label} did not finish on the reference target:\n{outcome.get('$trace')}", pytrace=False)


@pytest.fixture
def conformance(request: pytest.FixtureRequest) -> Conformance:
    """Used by tests made with :func:`pulsar_txn_proxy.conformance.framework.scenario`."""
    return Conformance(request)
