"""The server's process-level limits: one server per data directory, the listen backlog, file descriptors running
out. Each through a real server process and the official client."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Server, Witness
from tests.server_process import ROOT, ServerProcess, free_port


def _serve(data_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``serve`` in the foreground until it exits (it must, within 30 s)."""
    command = [sys.executable, "-m", "proxy", "serve", "--host", "127.0.0.1", "--port", str(free_port()),
               "--admin-port", str(free_port()), "--data-dir", str(data_dir), *extra]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)


def test_second_server_on_one_data_dir_exits_and_the_first_keeps_serving(
    server_factory: Callable[..., Server],
) -> None:
    first = server_factory()
    assert isinstance(first, ServerProcess)
    witness = Witness(first.url)
    witness.check()

    second = _serve(first.data_dir)

    assert second.returncode == 1
    assert second.stderr.strip() == (
        f"pulsar-txn-proxy: data directory {first.data_dir} is in use by another pulsar-txn-proxy "
        f"(pid {first.process.pid}); each server needs a data directory of its own"  # type: ignore[union-attr]
    )
    witness.check()
    witness.client.close()
    # The kernel drops the lock with the process: a kill -9 leaves nothing that blocks the restart.
    first.kill()
    first.start()
    again = Witness(first.url)
    again.check()
    again.client.close()


def _listen_queue(port: int) -> int:
    """The backlog of the socket listening on ``port`` (``ss`` shows it as the Send-Q of a listener)."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    return int(out.split()[2])


def test_listen_backlog_is_configurable_and_large_by_default(server_factory: Callable[..., Server]) -> None:
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    default = server_factory(name="default")
    assert _listen_queue(default.port) == min(1024, somaxconn)
    assert _listen_queue(default.admin_port) == min(1024, somaxconn)
    small = server_factory("--listen-backlog", "77", name="small")
    assert _listen_queue(small.port) == 77


def test_bad_listen_backlog_is_refused(tmp_path: Path) -> None:
    result = _serve(tmp_path / "d", "--listen-backlog", "0")
    assert result.returncode == 2
    assert result.stderr.strip() == "pulsar-txn-proxy: listen_backlog: expected a positive integer, got 0"


def _open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_running_out_of_file_descriptors_is_logged_and_accepting_resumes(
    server_factory: Callable[..., Server],
) -> None:
    server = server_factory()
    assert isinstance(server, ServerProcess) and server.process is not None
    pid = server.process.pid
    witness = Witness(server.url)
    witness.check()
    # Leave the server a few descriptors, then connect more clients than it can hold.
    limit = _open_descriptors(pid) + 4
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
    held = []
    try:
        for _ in range(20):
            held.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        deadline = time.monotonic() + 10
        while "EMFILE encountered" not in server.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "EMFILE encountered; releasing reserved file descriptor." in server.log()
        # The connected witness is not affected.
        witness.check()
    finally:
        for sock in held:
            sock.close()
    # Descriptors come free as the server sees those connections close; new clients are accepted again.
    deadline = time.monotonic() + 10
    while _open_descriptors(pid) >= limit - 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    fresh = Witness(server.url)
    fresh.check()
    fresh.client.close()
    witness.check()
    witness.client.close()
    assert server.process.poll() is None
