"""What the instruction-count benchmarks share: the in-process server they feed, and valgrind's count of a fed
process. Imported as a plain module (the scripts' own directory is on ``sys.path``), so that a fed process imports
the server from the checkout under test, not from this one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def in_process_server() -> tuple[Any, Any, Any]:
    """The checkout in the working directory's server, built as production wires it (``build_server``) on a
    ``MemoryReactorClock`` with the real SQLite store and inline commits, and one connection to it:
    ``(reactor, connection, transport)``; what the server writes collects in ``transport``."""
    sys.path.insert(0, os.getcwd())
    from twisted.internet.testing import MemoryReactorClock, StringTransport

    from engine.broker import InlineCommits
    from engine.clock import SystemClock
    from engine.store import Store
    from proxy.config import load
    from proxy.wiring import build_server

    class Transport(StringTransport):
        def setTcpNoDelay(self, enabled: bool) -> None:  # noqa: N802 (Twisted's name)
            pass

    work = tempfile.mkdtemp()
    reactor = MemoryReactorClock()
    store = Store(os.path.join(work, "store.sqlite"))
    server = build_server(
        load({"data_dir": work}, None, {}), reactor, store, SystemClock(reactor.callLater), InlineCommits()
    )
    connection = server.factory.buildProtocol(None)
    transport = Transport()
    connection.makeConnection(transport)
    return reactor, connection, transport


def instructions(script: str, checkout: Path, arguments: list[str]) -> int:
    """The instructions valgrind counts for ``script`` run with ``arguments`` by ``checkout``'s Python, in it."""
    command = [
        "valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
        str(checkout / ".venv" / "bin" / "python"), str(Path(script).resolve()), *arguments,
    ]  # fmt: skip
    result = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=False)
    if result.returncode:
        raise RuntimeError(f"the fed process failed:\n{result.stderr[-3000:]}")
    match = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
    if match is None:
        raise RuntimeError(f"valgrind printed no instruction count:\n{result.stderr[-2000:]}")
    return int(match.group(1).replace(",", ""))
