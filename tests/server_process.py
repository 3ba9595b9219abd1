"""Start, stop, kill and restart the endpoint as a local process, for tests and benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from wire.commands import frame
from wire.framing import FrameDecoder, ProtocolError
from wire.pulsar_api_pb2 import BaseCommand, ServerError

ROOT = Path(__file__).resolve().parent.parent

#: Server options that keep what subscriptions acknowledged (retention without limits): for tests that read every
#: message back from the start after a kill (by default a topic deletes acknowledged data when it loads, as Pulsar's).
KEEP_ACKNOWLEDGED = ("--default-retention-time-in-minutes", "-1", "--default-retention-size-in-mb", "-1")


def first_answer(port: int, deadline: float, alive: Callable[[], bool]) -> tuple[float, float]:
    """Wait until a broker on 127.0.0.1:``port`` answers CONNECT; (accepted, answered) as ``time.monotonic()`` values.

    ``accepted`` is when a TCP connection was first accepted (the kernel completed the handshake), ``answered`` when
    a CONNECTED frame (or, from a server that requires credentials, its AuthenticationError) came back on it.
    ``alive()`` false or the deadline passing raises RuntimeError.
    """
    accepted = 0.0
    hello = frame(BaseCommand.CONNECT, client_version="startup-probe", protocol_version=20)
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError("the server exited while starting")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                accepted = accepted or time.monotonic()
                sock.sendall(hello)
                decoder = FrameDecoder()
                while time.monotonic() < deadline:
                    sock.settimeout(max(deadline - time.monotonic(), 0.01))
                    data = sock.recv(65536)
                    if not data:
                        break
                    for item in decoder.feed(data):
                        if _answers_connect(item.command):
                            return accepted, time.monotonic()
        except (OSError, ProtocolError):
            # Refused, or closed before an answer (a container's port forwarder accepts before the server is up).
            time.sleep(0.02)
    raise RuntimeError(f"nothing answered CONNECT on port {port} in time")


def _listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` (or a child of it: a test may wrap the server) listens on TCP ``port``."""
    try:
        parent = psutil.Process(pid)
        processes = [parent, *parent.children(recursive=True)]
        return any(
            c.status == psutil.CONN_LISTEN and c.laddr.port == port
            for process in processes
            for c in process.net_connections(kind="tcp")
        )
    except psutil.NoSuchProcess:
        return False


def _answers_connect(command: BaseCommand) -> bool:
    """CONNECTED, or the refusal of a server that requires credentials (the probe has none): it is serving."""
    if command.type == BaseCommand.CONNECTED:
        return True
    return command.type == BaseCommand.ERROR and command.error.error == ServerError.AuthenticationError


def free_port(avoid: set[int] | frozenset[int] = frozenset()) -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (and is none of ``avoid``)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in avoid:
            return port


class ServerProcess:
    """The server as a child process on 127.0.0.1 with its own data directory."""

    def __init__(self, data_dir: Path, *extra: str, port: int | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.extra = list(extra)
        #: Whether the ports were picked here (free a moment ago): taken by another process meanwhile, they are
        #: picked again at start; a port the caller chose is kept.
        self._picked_port = port is None
        self._picked_admin_port = "--admin-port" not in self.extra
        self.port, self.admin_port = port or 0, 0
        if not self._picked_admin_port:
            self.admin_port = int(self.extra[self.extra.index("--admin-port") + 1])
        self._pick_ports()
        self.process: subprocess.Popen[bytes] | None = None
        #: What runs the command line (``serve`` and its options follow): a test may wrap the server.
        self.launcher = [sys.executable, "-m", "proxy"]
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-server.log"
        #: Seconds from the process start to the first accepted connection, and to the first answered CONNECT.
        self.startup_seconds = 0.0
        self.ready_seconds = 0.0

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    def _pick_ports(self) -> None:
        """Pick the ports not given by the caller, distinct from each other and from the caller's."""
        taken = {self.port, self.admin_port} - {0}
        if self._picked_port:
            self.port = free_port(taken)
            taken.add(self.port)
        if self._picked_admin_port:
            self.admin_port = free_port(taken)

    def _command(self) -> list[str]:
        admin = ["--admin-port", str(self.admin_port)] if self._picked_admin_port else []
        return [
            *self.launcher, "serve", "--host", "127.0.0.1", "--port", str(self.port),
            "--data-dir", str(self.data_dir), "--advertised-address", "127.0.0.1", *admin, *self.extra,
        ]

    def start(self, timeout: float = 15.0) -> ServerProcess:
        """Start and wait until the server answers CONNECT (``startup_seconds``: until it accepted a connection).

        A port picked here that another process took between the pick and the server's bind (tests run in parallel
        workers) makes the server exit, or serve without its admin API, or the probe reach the other process: the
        server is then started again on new ports, up to three times.
        """
        for attempt in range(3):
            lost = self._start_once(timeout)
            if lost is None:
                return self
            if attempt == 2:
                raise RuntimeError(f"server could not listen on its ports ({lost}):\n{self.log()}")
            self._pick_ports()
        return self

    def _start_once(self, timeout: float) -> str | None:
        """Start and wait for the answer to CONNECT; what went wrong with a port picked here (then not running)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child keeps it open)
        began = time.monotonic()
        process = self.process = subprocess.Popen(self._command(), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        try:
            accepted, answered = first_answer(self.port, began + timeout, lambda: process.poll() is None)
        except RuntimeError as exc:
            if process.poll() is None:
                self.kill()
                raise RuntimeError(f"server did not start within {timeout} s ({exc}):\n{self.log()}") from None
            if self._picked_port and f"cannot listen on 127.0.0.1:{self.port}:" in self._log_since(log_start):
                self.process = None
                return f"port {self.port} taken"
            raise RuntimeError(f"server exited with {process.returncode}:\n{self.log()}") from None
        lost = None
        if self._picked_port and not _listens_on(process.pid, self.port):
            lost = f"another process answered on port {self.port}"
        elif self._picked_admin_port and "admin API disabled: cannot listen" in self._log_since(log_start):
            lost = f"admin port {self.admin_port} taken"
        if lost is not None:
            self.kill()
            return lost
        self.startup_seconds = accepted - began
        self.ready_seconds = answered - began
        return None

    def _log_since(self, offset: int) -> str:
        with open(self.log_path, "rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.process is None:
            return 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        finally:
            self.process = None

    def kill(self) -> None:
        """``kill -9``: no chance to flush anything."""
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None

    def restart(self) -> ServerProcess:
        """Stop (if running) and start again on the same port and data."""
        self.stop()
        return self.start()

    def log(self) -> str:
        """What the server printed so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""
