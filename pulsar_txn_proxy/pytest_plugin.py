"""pytest plugin: a fresh pulsar-txn-proxy endpoint for a test session, a module or a test. No import needed.

Installed with the package (entry point ``pytest11``), it gives these fixtures:

- ``pulsar_endpoint``: a :class:`~pulsar_txn_proxy.endpoint.PulsarEndpoint` with ``.service_url`` and
  ``.admin_url``. By default one endpoint serves the whole session, started when a test first asks for it. A test,
  class or module marked ``@pytest.mark.pulsar_endpoint(...)`` gets one with those settings instead: shared by the
  tests with equal settings for the session, or its own with ``scope="module"`` / ``scope="function"``.
- ``pulsar_session_endpoint``: the session's default endpoint as a session-scoped fixture, for fixtures of a wider
  scope than a test.
- ``pulsar_namespace``: a fresh namespace ``public/test-<random>`` on the test's endpoint; ``.topic("orders")`` is
  ``persistent://public/test-.../orders``.
- ``pulsar_client``: an official ``pulsar.Client`` connected to the test's endpoint (with its token when tokens
  are on), closed after the test (needs ``pulsar-client``).

``--pulsar-endpoint-url pulsar://host:6650`` (with ``--pulsar-endpoint-admin-url``, ``--pulsar-endpoint-token``)
runs the same tests against a broker started elsewhere, Apache Pulsar for one: the fixtures then hand out an
:class:`~pulsar_txn_proxy.endpoint.ExistingBroker` and start nothing; a test whose marker asks for settings fails.

Settings, lowest precedence first: ini options (``pulsar_endpoint_default_partitions = 3`` in ``[pytest]`` /
``[tool.pytest.ini_options]``), the same as command-line options (``--pulsar-endpoint-default-partitions=3``),
then the marker's keyword arguments. Any server option is a marker keyword in snake case (``deduplication=True``,
``max_message_size=1024``); ``tls=True`` and ``auth="token"`` make a certificate or a secret key and token.

The endpoints are stopped at the end of their scope; a failing test's report carries what they logged during it.
Nothing is started until a fixture asks, and importing this module costs only the standard library.
"""

from __future__ import annotations

import shlex
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pulsar_txn_proxy.endpoint import EndpointSettings, ExistingBroker, PulsarEndpoint, PulsarNamespace

MARKER = "pulsar_endpoint"
#: The settings that have ini / command-line options, with their kind and help.
_OPTIONS: dict[str, tuple[str, str]] = {
    "default_partitions": ("string", "partitions of auto-created topics (default 0: non-partitioned)"),
    "transaction_coordinators": ("string", "transaction coordinators; 0 turns transactions off (default 16)"),
    "tls": ("bool", "open TLS ports with a self-signed certificate for localhost (default off)"),
    "auth": ("string", "'token': require tokens, with a fresh secret key (default: none)"),
    "args": ("string", "more `pulsar-txn-proxy serve` arguments, shell-quoted"),
}
#: Options that point the fixtures at a broker started elsewhere instead of starting endpoints.
_EXISTING: dict[str, str] = {
    "url": "use the broker at this service URL instead of starting endpoints (an Apache Pulsar, say)",
    "admin_url": "the admin URL of --pulsar-endpoint-url's broker (default http://<its host>:8080)",
    "token": "a token the fixtures use with --pulsar-endpoint-url's broker",
}
_SCOPES = ("session", "module", "function")
#: Log lines of an endpoint attached to a failing test's report, at most.
_LOG_LINES = 200
#: The endpoints a test used, with the size of their log when it began using them.
_USED = pytest.StashKey[dict[int, tuple[PulsarEndpoint, int]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pulsar-endpoint", "pulsar-txn-proxy endpoint fixtures")
    for name, (kind, help_text) in _OPTIONS.items():
        flag = "--pulsar-endpoint-" + name.replace("_", "-")
        if kind == "bool":
            group.addoption(flag, action="store_true", default=None, dest=f"pulsar_endpoint_{name}", help=help_text)
        else:
            group.addoption(flag, default=None, dest=f"pulsar_endpoint_{name}", help=help_text)
        parser.addini(f"pulsar_endpoint_{name}", help_text, type=kind, default=None)
    for name, help_text in _EXISTING.items():
        group.addoption("--pulsar-endpoint-" + name.replace("_", "-"), dest=f"pulsar_endpoint_{name}", help=help_text)
        parser.addini(f"pulsar_endpoint_{name}", help_text, default=None)
    group.addoption("--pulsar-endpoint-command", default=None, dest="pulsar_endpoint_command",
                    help="command that runs the server, shell-quoted (default: python -m proxy)")  # fmt: skip
    parser.addini("pulsar_endpoint_command", "command that runs the server (default: python -m proxy)", default=None)
    group.addoption("--pulsar-endpoint-startup-timeout", default=None, dest="pulsar_endpoint_startup_timeout",
                    help="seconds an endpoint may take to start (default 30)")  # fmt: skip
    parser.addini("pulsar_endpoint_startup_timeout", "seconds an endpoint may take to start (default 30)", default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(scope='session', **settings): the pulsar_endpoint fixture's settings (default_partitions=3, "
        "transaction_coordinators=0, tls=True, auth='token', args=[...], any server option in snake case) and "
        "lifetime ('session': shared by tests with equal settings; 'module'; 'function': the test's own)",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test's report carries what its endpoints logged while it ran (the last lines)."""
    report = yield
    if report.failed:
        used = dict(item.stash.get(_USED, {}))
        for value in getattr(item, "funcargs", {}).values():  # an endpoint a fixture of the user's started
            if isinstance(value, PulsarEndpoint) and id(value) not in used:
                used[id(value)] = (value, 0)
        for endpoint, offset in used.values():
            text = endpoint.log_path.read_bytes()[offset:].decode(errors="replace") if endpoint.data_dir else ""
            lines = text.splitlines()[-_LOG_LINES:]
            report.sections.append((f"pulsar endpoint log ({endpoint.service_url})", "\n".join(lines)))
    return report


# -- settings ---------------------------------------------------------------------------------------------------


def _base_settings(config: pytest.Config) -> EndpointSettings:
    """The ini options overridden by the command-line options."""
    changes: dict[str, Any] = {}
    for name, (kind, _) in _OPTIONS.items():
        value = config.getoption(f"pulsar_endpoint_{name}")
        if value is None:
            value = config.getini(f"pulsar_endpoint_{name}")
        if value is None or value == "":
            continue
        if kind == "bool":
            changes[name] = bool(value)
        elif name in ("default_partitions", "transaction_coordinators"):
            changes[name] = int(value)
        else:
            changes[name] = value
    return EndpointSettings().merged(**changes)


def _existing(config: pytest.Config) -> ExistingBroker | None:
    """The broker ``--pulsar-endpoint-url`` names, if any."""
    values = {}
    for name in _EXISTING:
        values[name] = config.getoption(f"pulsar_endpoint_{name}") or config.getini(f"pulsar_endpoint_{name}")
    if not values["url"]:
        return None
    admin_url = values["admin_url"] or f"http://{urllib.parse.urlsplit(values['url']).hostname}:8080"
    return ExistingBroker(values["url"], admin_url, values["token"] or None)


def _marked(node: pytest.Item | pytest.Collector, base: EndpointSettings) -> tuple[str, EndpointSettings]:
    """The scope and settings the ``pulsar_endpoint`` markers on ``node`` and its parents ask for (the closest
    wins); ``base`` when there are none."""
    scope, settings = "session", base
    for mark in reversed(list(node.iter_markers(MARKER))):
        if mark.args:
            raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keyword arguments only, got {mark.args!r}")
        kwargs = dict(mark.kwargs)
        scope = kwargs.pop("scope", scope)
        if scope not in _SCOPES:
            raise pytest.UsageError(f"@pytest.mark.{MARKER}(scope={scope!r}): one of {', '.join(_SCOPES)}")
        settings = settings.merged(**kwargs)
    return scope, settings


class _Endpoints:
    """Endpoints started for one scope, by settings; all are stopped by :meth:`stop_all`."""

    def __init__(self, config: pytest.Config, directory: Path) -> None:
        self._config = config
        self._directory = directory
        self._started: dict[EndpointSettings, PulsarEndpoint] = {}

    def get(self, settings: EndpointSettings) -> PulsarEndpoint:
        if settings not in self._started:
            self._started[settings] = self.start(settings)
        return self._started[settings]

    def start(self, settings: EndpointSettings) -> PulsarEndpoint:
        command = self._config.getoption("pulsar_endpoint_command") or self._config.getini("pulsar_endpoint_command")
        timeout = self._config.getoption("pulsar_endpoint_startup_timeout") or self._config.getini(
            "pulsar_endpoint_startup_timeout"
        )
        data_dir = self._directory / f"endpoint-{len(self._started)}"
        endpoint = PulsarEndpoint(
            data_dir,
            settings=settings,
            command=shlex.split(command) if command else None,
            startup_timeout=float(timeout) if timeout else 30.0,
        )
        return endpoint.start()

    def stop_all(self) -> None:
        for endpoint in self._started.values():
            endpoint.stop()
        self._started.clear()


# -- fixtures ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def _pulsar_session_endpoints(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_Endpoints]:
    endpoints = _Endpoints(pytestconfig, tmp_path_factory.mktemp("pulsar-endpoints"))
    yield endpoints
    endpoints.stop_all()


@pytest.fixture(scope="module")
def _pulsar_module_endpoints(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[_Endpoints]:
    endpoints = _Endpoints(pytestconfig, tmp_path_factory.mktemp("pulsar-module-endpoints"))
    yield endpoints
    endpoints.stop_all()


@pytest.fixture(scope="session")
def pulsar_session_endpoint(request: pytest.FixtureRequest) -> PulsarEndpoint | ExistingBroker:
    """The session's endpoint with the ini / command-line settings (markers do not change it)."""
    existing = _existing(request.config)
    if existing is not None:
        return existing
    pool: _Endpoints = request.getfixturevalue("_pulsar_session_endpoints")
    return pool.get(_base_settings(request.config))


@pytest.fixture
def pulsar_endpoint(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PulsarEndpoint | ExistingBroker]:
    """The test's endpoint: the session's, or the one its ``pulsar_endpoint`` marker asks for."""
    base = _base_settings(request.config)
    scope, settings = _marked(request.node, base)
    existing = _existing(request.config)
    if existing is not None:
        if settings != base:
            pytest.fail(
                f"this test's @pytest.mark.{MARKER} asks for settings ({settings}) that the broker of "
                f"--pulsar-endpoint-url ({existing.service_url}) cannot be given",
                pytrace=False,
            )
        yield existing
        return
    if scope == "function":
        endpoint = _Endpoints(request.config, tmp_path).start(settings)
        _record(request, endpoint)
        yield endpoint
        endpoint.stop()
        return
    pool: _Endpoints = request.getfixturevalue(f"_pulsar_{scope}_endpoints")
    endpoint = pool.get(settings)
    _record(request, endpoint)
    yield endpoint


@pytest.fixture
def pulsar_namespace(pulsar_endpoint: PulsarEndpoint | ExistingBroker) -> PulsarNamespace:
    """A fresh namespace ``public/test-<random>`` on the test's endpoint; ``.topic(name)`` names topics in it."""
    return pulsar_endpoint.create_namespace()


@pytest.fixture
def pulsar_client(pulsar_endpoint: PulsarEndpoint | ExistingBroker) -> Iterator[Any]:
    """An official Python client (``pulsar.Client``) on the test's endpoint, closed after the test."""
    import pulsar

    kwargs: dict[str, Any] = {"operation_timeout_seconds": 10, "logger": pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)}
    if pulsar_endpoint.token:
        kwargs["authentication"] = pulsar.AuthenticationToken(pulsar_endpoint.token)
    client = pulsar.Client(pulsar_endpoint.service_url, **kwargs)
    yield client
    client.close()


def _record(request: pytest.FixtureRequest, endpoint: PulsarEndpoint) -> None:
    """Remember that the test uses ``endpoint``, to attach its log if the test fails."""
    request.node.stash.setdefault(_USED, {})[id(endpoint)] = (endpoint, endpoint.log_size())
