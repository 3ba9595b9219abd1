"""The endpoint in a container, started through testcontainers, with the interface of :class:`ServerProcess`.

The engine is whatever Docker-compatible API ``DOCKER_HOST`` (or the default Docker socket) reaches; on our
machines that is podman's API service, set up by ``compose/with-engine.sh``. The image is built (or found up to
date) by ``compose/build_image.py``; ``PULSAR_TXN_PROXY_IMAGE`` names a prebuilt image instead.

The container listens on the same port number it is published on, and lookups answer ``127.0.0.1``: the
official clients then reach the broker a lookup names through the published port, as with Pulsar standalone
run with ``advertisedAddress=localhost`` and equal port mappings.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import time
import uuid
from types import ModuleType
from typing import Any

from tests.server_process import ROOT, first_answer, free_port

# No registry is reachable, so testcontainers' Ryuk reaper image cannot be pulled; the fixtures remove what they
# start. Read by testcontainers when it is imported, so set before that.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

#: Label on every container and volume the tests create (to find leftovers: ``podman ps -a --filter label=...``).
TEST_LABEL = "dev.pulsar-txn-proxy.test"
DATA_DIR = "/data"


class EngineUnavailableError(RuntimeError):
    """The container path was asked for, and no container engine is reachable."""


def engine_problem() -> str | None:
    """Why no container engine is reachable; None when one answers."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def require_engine() -> None:
    """Fail clearly, naming the way to get one, unless a container engine answers."""
    problem = engine_problem()
    if problem is not None:
        where = os.environ.get("DOCKER_HOST", "the default Docker socket")
        raise EngineUnavailableError(
            f"the container tests need a Docker-compatible engine, and none answers at {where} ({problem}). "
            "Run them with `make test-containers` (sets up podman as root) or `compose/with-engine.sh "
            ".venv/bin/python -m pytest --container ...`."
        )


def _build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_image", ROOT / "compose" / "build_image.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def endpoint_image() -> str:
    """The image to test: ``$PULSAR_TXN_PROXY_IMAGE``, else the local build, (re)built when its inputs changed."""
    if os.environ.get("PULSAR_TXN_PROXY_IMAGE"):
        return os.environ["PULSAR_TXN_PROXY_IMAGE"]
    build = _build_module()
    try:
        return build.ensure_image("endpoint")
    except build.BuildError as exc:
        raise RuntimeError(f"building the endpoint image failed: {exc}") from None


def _option_value(args: list[str], option: str) -> int | None:
    """The integer value of ``option`` in command-line ``args`` (``--opt N`` or ``--opt=N``); None if absent."""
    for i, arg in enumerate(args):
        if arg == option and i + 1 < len(args):
            return int(args[i + 1])
        if arg.startswith(option + "="):
            return int(arg.split("=", 1)[1])
    return None


def _create_volume(name: str) -> None:
    """A labelled named volume (an engine would create it unlabelled on first use)."""
    import docker

    client = docker.from_env()
    try:
        client.volumes.create(name, labels={TEST_LABEL: "1"})
    finally:
        client.close()


class _ContainerState:
    """``process``-like view of a running container: ``poll()`` is None while it runs, else its exit code."""

    def __init__(self, container: Any) -> None:
        self._container = container

    @property
    def pid(self) -> int:
        """The server's process id in this machine's PID namespace (the engine runs it here, as on Linux)."""
        wrapped = self._container.get_wrapped_container()
        wrapped.reload()
        return int(wrapped.attrs["State"]["Pid"])

    def poll(self) -> int | None:
        wrapped = self._container.get_wrapped_container()
        wrapped.reload()
        if wrapped.status in ("running", "created", "restarting"):
            return None
        return int(wrapped.attrs["State"]["ExitCode"])


class ContainerServer:
    """The server in a container on a named volume; ``restart()`` starts a new container on the same volume."""

    def __init__(self, image: str, *extra: str, volume: str | None = None, port: int | None = None) -> None:
        self.image = image
        self.extra = list(extra)
        self.volume = volume or f"pulsar-txn-proxy-test-{uuid.uuid4().hex[:12]}"
        self.port = port or free_port()
        #: The admin port (given in the options, or a free one), published under the same number.
        self.admin_port = _option_value(self.extra, "--admin-port") or free_port()
        if "--admin-port" not in self.extra:
            self.extra += ["--admin-port", str(self.admin_port)]
        self.container: Any = None
        self.process: _ContainerState | None = None
        self.startup_seconds = 0.0
        self._earlier_logs: list[str] = []
        self._volume_created = False

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def start(self, timeout: float = 30.0) -> ContainerServer:
        """Start a container and wait until it answers a Pulsar CONNECT through the published port."""
        from testcontainers.core.container import DockerContainer

        command = ["serve", "--port", str(self.port), "--advertised-address", "127.0.0.1", *self.extra]
        container = (
            DockerContainer(self.image)
            .with_name(f"pulsar-txn-proxy-test-{uuid.uuid4().hex[:12]}")
            .with_bind_ports(self.port, self.port)
            .with_volume_mapping(self.volume, DATA_DIR, "rw")
            .with_env("PULSAR_TXN_PROXY_PORT", str(self.port))
            .with_command(command)
            .with_kwargs(labels={TEST_LABEL: "1"})
        )
        container.with_bind_ports(self.admin_port, self.admin_port)
        if not self._volume_created:
            _create_volume(self.volume)
            self._volume_created = True
        began = time.monotonic()
        try:
            container.start()
        except Exception:
            if container._container is not None:  # created, but it did not start: remove it
                container.stop(force=True, delete_volume=False)
            raise
        self.container = container
        self.process = _ContainerState(container)
        state = self.process
        try:
            _, answered = first_answer(self.port, began + timeout, lambda: state.poll() is None)
        except RuntimeError:
            code, log = state.poll(), self.log()
            self._remove()
            if code is not None:
                raise RuntimeError(f"the endpoint container exited with {code}:\n{log}") from None
            raise RuntimeError(f"the endpoint container did not answer a CONNECT within {timeout} s:\n{log}") from None
        self.startup_seconds = answered - began
        return self

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, wait, remove the container (the volume stays); returns the exit code."""
        if self.container is None:
            return 0
        wrapped = self.container.get_wrapped_container()
        wrapped.stop(timeout=int(timeout))
        code = int(wrapped.wait(timeout=timeout)["StatusCode"])
        self._remove()
        return code

    def kill(self) -> None:
        """SIGKILL the container: no chance to flush anything."""
        if self.container is not None:
            wrapped = self.container.get_wrapped_container()
            if self.process is not None and self.process.poll() is None:
                wrapped.kill()
                wrapped.wait(timeout=10)
            self._remove()

    def restart(self) -> ContainerServer:
        """Stop (if running) and start a new container on the same volume and port."""
        self.stop()
        return self.start()

    def log(self) -> str:
        """What the server printed, in this container and the earlier ones on this volume."""
        return "".join(self._earlier_logs) + self._current_log()

    def _current_log(self) -> str:
        if self.container is None:
            return ""
        try:
            return self.container.get_wrapped_container().logs().decode(errors="replace")
        except Exception as exc:
            return f"(logs unavailable: {exc})\n"

    def remove_volume(self) -> None:
        """Remove the container (if any) and the data volume."""
        import docker

        if self.container is not None:
            self.kill()
        client = docker.from_env()
        try:
            client.volumes.get(self.volume).remove(force=True)
        except docker.errors.NotFound:
            pass
        finally:
            client.close()

    def _remove(self) -> None:
        if self.container is None:
            return
        self._earlier_logs.append(self._current_log())
        self.container.stop(force=True, delete_volume=False)
        self.container = None
        self.process = None
