"""Start, stop, kill and restart the endpoint as a local process, for tests and benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-server.log"
        self.startup_seconds = 0.0

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0) -> ServerProcess:
        """Start and wait until the port accepts connections."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable, "-m", "proxy", "serve", "--host", "127.0.0.1", "--port", str(self.port),
            "--data-dir", str(self.data_dir), "--advertised-address", "127.0.0.1", *self.extra,
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child keeps it open)
        began = time.monotonic()
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = began + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    self.startup_seconds = time.monotonic() - began
                    return self
            except OSError:
                time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"server did not accept connections within {timeout} s:\n{self.log()}")

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
