"""The test harness's server process: ports another process took between their pick and the bind are picked again."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import server_process
from tests.server_process import ServerProcess, _listens_on


def _picks(first: list[int]) -> Iterator[int]:
    """``free_port`` that hands out ``first`` (taken ports) before free ones."""
    real = server_process.free_port

    def pick(avoid: set[int] | frozenset[int] = frozenset()) -> int:
        return first.pop(0) if first else real(avoid)

    return pick  # type: ignore[return-value]


def test_a_pulsar_port_served_by_another_server_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = ServerProcess(tmp_path / "other").start()
    try:
        monkeypatch.setattr(server_process, "free_port", _picks([other.port]))
        # The probe gets CONNECTED from the other server before this one even tries to bind.
        server = ServerProcess(tmp_path / "server").start()
        try:
            assert server.port != other.port
            assert _listens_on(server.process.pid, server.port)
        finally:
            server.stop()
    finally:
        other.stop()


def test_a_taken_admin_port_is_picked_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        monkeypatch.setattr(server_process, "free_port", _picks([server_process.free_port(), taken]))
        server = ServerProcess(tmp_path / "server").start()
        try:
            assert server.admin_port != taken
            with urllib.request.urlopen(f"{server.admin_url}/admin/v2/clusters", timeout=10) as answer:
                assert answer.status == 200
        finally:
            server.stop()
