"""Build and run the Go harness (tests/go): the official Pulsar Go client against the server.

``tests/go/bin/harness <serviceUrl> <scenario> [args]`` prints one JSON line of observations (see tests/go/main.go).
It is built with ``go build`` when a source is newer than the binary; modules come through the Go module proxy and
are checked against the committed go.sum. A missing Go toolchain fails, never skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.txn_harness import observations

GO_DIR = Path(__file__).resolve().parent / "go"
BINARY = GO_DIR / "bin" / "harness"
#: Where the official Go installer puts the toolchain, for machines whose PATH does not name it.
GO_FALLBACK = Path("/usr/local/go/bin/go")
#: The first build downloads and compiles the client and its dependencies (about two minutes on two busy cores).
BUILD_TIMEOUT = 900


def _go() -> str:
    found = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.exists() else None)
    if found is None:
        raise RuntimeError(
            "the Go harness (tests/go) needs the Go toolchain (1.24 or newer): `go` is not on PATH and "
            f"{GO_FALLBACK} does not exist"
        )
    return found


def _sources() -> list[Path]:
    return [*GO_DIR.glob("*.go"), GO_DIR / "go.mod", GO_DIR / "go.sum"]


def build_harness() -> Path:
    """Build the Go harness unless the binary is newer than every source; the binary's path."""
    if BINARY.exists() and BINARY.stat().st_mtime >= max(p.stat().st_mtime for p in _sources()):
        return BINARY
    BINARY.parent.mkdir(exist_ok=True)
    partial = BINARY.with_name(f"harness.{os.getpid()}.tmp")
    command = [_go(), "build", "-mod=readonly", "-buildvcs=false", "-o", str(partial), "."]
    result = subprocess.run(command, cwd=GO_DIR, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"building the Go harness failed:\n{result.stdout}{result.stderr}")
    partial.replace(BINARY)  # atomic: a concurrent run sees the old binary or the new one, never half of one
    return BINARY


def run_scenario(service_url: str, name: str, *args: str, timeout: float = 90) -> dict[str, Any]:
    """Run one scenario with the Go client and return its observations; raise with the output if it did not run."""
    command = [str(build_harness()), service_url, name, *map(str, args)]
    return observations(command, f"Go scenario {name}", timeout)
