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


def _answers_connect(command: BaseCommand) -> bool:
    """CONNECTED, or the refusal of a server that requires credentials (the probe has none): it is serving."""
    if command.type == BaseCommand.CONNECTED:
        return True
    return command.type == BaseCommand.ERROR and command.error.error == ServerError.AuthenticationError


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """The server as a child process on 127.0.0.1 with its own data directory."""

    def __init__(self, data_dir: Path, *extra: str, port: int | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.extra = list(extra)
        self.port = port or free_port()
        self.admin_port = free_port()
        if "--admin-port" in self.extra:
            self.admin_port = int(self.extra[self.extra.index("--admin-port") + 1])
        else:
            self.extra += ["--admin-port", str(self.admin_port)]
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

    def start(self, timeout: float = 15.0) -> ServerProcess:
        """Start and wait until the server answers CONNECT (``startup_seconds``: until it accepted a connection)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            *self.launcher, "serve", "--host", "127.0.0.1", "--port", str(self.port),
            "--data-dir", str(self.data_dir), "--advertised-address", "127.0.0.1", *self.extra,
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child keeps it open)
        began = time.monotonic()
        process = self.process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        try:
            accepted, answered = first_answer(self.port, began + timeout, lambda: process.poll() is None)
        except RuntimeError as exc:
            if process.poll() is not None:
                raise RuntimeError(f"server exited with {process.returncode}:\n{self.log()}") from None
            self.kill()
            raise RuntimeError(f"server did not start within {timeout} s ({exc}):\n{self.log()}") from None
        self.startup_seconds = accepted - began
        self.ready_seconds = answered - began
        return self

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
