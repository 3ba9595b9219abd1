"""Fixtures: the endpoint as a local process or in a container, and official-client helpers.

One set of fixtures, two ways to start the endpoint:

- local process (default; fast): :class:`tests.server_process.ServerProcess`;
- container, through testcontainers (:class:`tests.container_endpoint.ContainerServer`): for tests marked
  ``@pytest.mark.container``, and for every test when pytest runs with ``--container``. Asking for the container
  path with no reachable container engine fails the test with the reason (never a skip).

With ``--against-pulsar``, ``server`` is an Apache Pulsar standalone instead
(:class:`tests.conformance.pulsar_standalone.PulsarStandalone`, resolved from Maven Central): the tests that only use
``server`` (the Spark connector's, for one) then check the same behaviour against a real broker. Tests that need
servers of their own (``server_factory``: kills, restarts, settings) fail with that reason in this mode.

``make test`` runs the suite on local processes and deselects the container-marked tests; ``make test-containers``
sets up podman (or uses Docker), builds the image and runs them. ``server`` is function-scoped in form but backed
by one session-scoped server per kind, so fixtures depending on it must be function-scoped too.

``make test`` runs on parallel workers (pytest-xdist, ``-n 4 --dist loadgroup``). Each worker is a process of its
own with its own session fixtures (its own shared endpoint, on its own free ports and data directory), and
tests are handed out one at a time, except the groups :func:`pytest_collection_modifyitems` forms: the tests of a
module with a module-scoped fixture (a secured endpoint, a Pulsar standalone) stay on one worker, so that the
fixture starts once; so do the tests on the suite's SparkSession (``session`` of ``tests/spark``: a JVM of about a
GiB that takes half a minute of CPU to start).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pulsar
import pytest

from tests.conformance.pulsar_standalone import PulsarStandalone
from tests.container_endpoint import ContainerServer, EngineUnavailableError, endpoint_image, require_engine
from tests.server_process import ServerProcess

_LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
#: The servers a test used, whose logs are attached to its report when it fails.
_USED = pytest.StashKey[list[ServerProcess | ContainerServer | PulsarStandalone]]()
#: Log lines attached per server to a failed test's report.
_LOG_TAIL_LINES = 60

Server = ServerProcess | ContainerServer


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--container",
        action="store_true",
        help="start every endpoint fixture in a container through testcontainers (fails without a container engine)",
    )
    parser.addoption(
        "--against-pulsar",
        action="store_true",
        help="the `server` fixture is an Apache Pulsar standalone (the reference) instead of this endpoint",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "container: the test's endpoint runs in a container (testcontainers); fails when no container engine answers",
    )


#: Session fixtures costly enough that their tests share one pytest-xdist worker (fixture name -> group name).
_GROUPED_SESSION_FIXTURES = {"session": "spark-session"}
#: Tests of 15 s or more outside the groups (``make test``'s slowest-20 lists on the quiet machine), by node id
#: prefix, longest first: they are handed out first, so that none of them starts late and leaves the other workers
#: idle at the end of the run (a worker is given more tests while it has 2 or fewer waiting, so one test handed out
#: last can end up to 3 tests after the others). pytest-xdist hands out the groups first (most tests first), then
#: the other tests in collection order.
_LONGEST_FIRST = (
    "tests/spark/test_spark_cluster.py",
    "tests/test_subscription_model.py",
    "tests/conformance/test_cli.py::test_cli_tenants_namespaces_topics",
    "tests/fuzz/test_fuzz.py",
    "tests/conformance/test_workload.py",
    "tests/test_sim.py::test_seeds",
    "tests/conformance/test_scenarios.py::test_scenario[message-ids.redelivery-inside-batches]",
    "tests/test_retention_default.py::test_the_open_ledger_stays",
    "tests/conformance/test_cli.py",
    "tests/test_admin_java.py",
    "tests/test_crash_loop.py",
    "tests/conformance/test_crash_loop.py",
    "tests/conformance/test_scenarios.py::test_scenario[txn-coordinator.java-missing-namespace-end]",
    "tests/conformance/test_scenarios.py::test_scenario[routes.every-topic-policy]",
    "tests/conformance/test_pulsar_txn_client.py::test_send_timeouts_while_a_backlog_quota_holds_the_producer",
    "tests/conformance/test_pulsar_txn_client.py::test_failover_and_key_shared_subscriptions",
    "tests/test_retention_default.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the longest tests first (:data:`_LONGEST_FIRST`), and group the tests that must share a pytest-xdist
    worker (``--dist loadgroup``), by module: every test of a module where one uses a costly session fixture joins
    that fixture's group; a module with a module-scoped fixture is a group of its own (pytest would start the fixture
    again each time the module's tests resume on a worker). Marks written in a module (``pytestmark =
    pytest.mark.xdist_group(...)``) win. Runs before xdist reads the marks."""
    groups: dict[str, str] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        used = set(getattr(item, "fixturenames", ()))
        shared = [_GROUPED_SESSION_FIXTURES[name] for name in used & _GROUPED_SESSION_FIXTURES.keys()]
        if shared:
            groups[module] = shared[0]
        elif module not in groups and _uses_module_fixture(item):
            groups[module] = module
    for item in items:
        group = groups.get(item.nodeid.split("::", 1)[0])
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=_start_rank)


def _start_rank(item: pytest.Item) -> int:
    """Where ``item`` starts among the tests: the position of its prefix in :data:`_LONGEST_FIRST`, else after them
    (``list.sort`` is stable: the others keep their order)."""
    ranks = (rank for rank, prefix in enumerate(_LONGEST_FIRST) if item.nodeid.startswith(prefix))
    return next(ranks, len(_LONGEST_FIRST))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Under ``--dist loadgroup``, refuse to run if pytest-xdist could not tag the grouped tests (it renames their
    node ids, ``test@group``): their groups would silently spread over the workers."""
    if not session.config.getoption("loadgroup", False):
        return
    for item in session.items:
        if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid.rsplit("::", 1)[-1]:
            raise pytest.UsageError(
                f"pytest-xdist did not group {item.nodeid}: this pytest and pytest-xdist do not work together for "
                "--dist loadgroup (see the pin of pytest in pyproject.toml)"
            )


def _uses_module_fixture(item: pytest.Item) -> bool:
    """Whether a fixture the test asks for (directly or through others) is module-scoped. Fixtures a test reaches
    only through ``request.getfixturevalue`` are not seen: mark such modules themselves."""
    info = getattr(item, "_fixtureinfo", None)  # pytest's resolved fixture closure of the test
    return info is not None and any(defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values())


def _wants_container(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("container") or request.node.get_closest_marker("container"))


def _use(request: pytest.FixtureRequest, server: Server) -> None:
    request.node.stash.setdefault(_USED, []).append(server)


def _container_image() -> str:
    """The endpoint image, after checking that an engine answers; fails the test with the reason otherwise."""
    try:
        require_engine()
        return endpoint_image()
    except (EngineUnavailableError, RuntimeError) as exc:
        reason = str(exc)
    pytest.fail(reason, pytrace=False)


@pytest.fixture(scope="session")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The session's endpoint as a local process."""
    proc = ServerProcess(tmp_path_factory.mktemp("shared") / "data").start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def container_server() -> Iterator[ContainerServer]:
    """The session's endpoint in a container, on its own volume."""
    proc = ContainerServer(_container_image())
    try:
        proc.start()
        yield proc
        proc.stop()
    finally:
        proc.remove_volume()


@pytest.fixture(scope="session")
def pulsar_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarStandalone]:
    """An Apache Pulsar standalone for the session (``--against-pulsar``)."""
    with PulsarStandalone(tmp_path_factory.mktemp("pulsar")) as proc:
        yield proc


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Server | PulsarStandalone:
    """One server for the session (per kind); tests use their own topic names."""
    if request.config.getoption("against_pulsar"):
        kind = "pulsar_server"
    else:
        kind = "container_server" if _wants_container(request) else "local_server"
    proc: Server | PulsarStandalone = request.getfixturevalue(kind)
    _use(request, proc)
    return proc


@pytest.fixture
def server_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start private servers (for restarts, kills and settings); all are stopped and removed afterwards.

    ``name`` names the data (a directory, or a volume in container mode): the same name shares the data.
    """
    if request.config.getoption("against_pulsar"):
        pytest.fail("this test starts endpoints of its own, which --against-pulsar cannot give", pytrace=False)
    in_container = _wants_container(request)
    image = _container_image() if in_container else ""
    started: list[Server] = []
    volumes: dict[str, str] = {}

    def make(*extra: str, name: str = "data") -> Server:
        proc: Server
        if in_container:
            volume = volumes.setdefault(name, f"pulsar-txn-proxy-test-{uuid.uuid4().hex[:12]}")
            proc = ContainerServer(image, *extra, volume=volume)
        else:
            proc = ServerProcess(tmp_path / name, *extra)
        started.append(proc)
        _use(request, proc)
        return proc.start()

    yield make
    for proc in started:
        if proc.process is not None:
            proc.kill()
    for proc in started:
        if isinstance(proc, ContainerServer):
            proc.remove_volume()


def make_client(url: str, **kwargs: object) -> pulsar.Client:
    """An official Python client with quiet logging."""
    kwargs.setdefault("operation_timeout_seconds", 10)
    return pulsar.Client(url, logger=_LOGGER, **kwargs)


@pytest.fixture
def client(server: Server) -> Iterator[pulsar.Client]:
    """An official Python client connected to the session server."""
    c = make_client(server.url)
    yield c
    c.close()


@pytest.fixture
def topic() -> str:
    """A fresh topic name."""
    return f"persistent://public/default/t-{uuid.uuid4().hex[:12]}"


class Witness:
    """An official-client producer and consumer, connected before the bad input, that must keep working."""

    def __init__(self, url: str) -> None:
        self.client = make_client(url)
        self.topic = f"persistent://public/default/w-{uuid.uuid4().hex[:12]}"
        self.producer = self.client.create_producer(self.topic, batching_enabled=False)
        self.consumer = self.client.subscribe(self.topic, "witness")
        self.count = 0

    def check(self) -> None:
        """Produce and consume one more message on the old connection."""
        payload = f"w{self.count}".encode()
        self.count += 1
        msg_id = self.producer.send(payload)
        msg = self.consumer.receive(5000)
        assert msg.data() == payload
        assert msg.message_id() == msg_id
        self.consumer.acknowledge(msg)


@pytest.fixture
def witness(server: ServerProcess) -> Iterator[Witness]:
    """Official-client traffic that must work before and after a test's bad input; the server must survive."""
    w = Witness(server.url)
    w.check()
    yield w
    w.check()
    w.client.close()
    assert server.process is not None and server.process.poll() is None, "the server died"


@pytest.fixture
def partitioned(server_factory: Callable[..., Server]) -> Iterator[pulsar.Client]:
    """A client on a private server whose auto-created topics have 3 partitions."""
    server = server_factory("--default-partitions", "3")
    c = make_client(server.url)
    yield c
    c.close()
