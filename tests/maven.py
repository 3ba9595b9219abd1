"""Maven projects of the repository (Java harnesses, a real Pulsar, pulsar-perf): built on demand, never committed.

Every project is built with ``mvn -q -B clean package`` in its directory (clean, so that no jar of an older pom
lingers in ``target/lib`` on the classpath). A stamp in ``target/`` written after a successful build skips Maven
while it is newer than the project's pom and sources and the outputs still exist. Maven runs one at a time across
processes (:func:`maven_lock`): ``pytest -n`` workers share each project's ``target/`` (a second ``clean`` would
delete the first build's jars while it runs) and the local repository; the second worker then finds the stamp fresh
and skips Maven.
Java 17+ and Maven are required: a missing tool fails with a clear message, never a skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

STAMP_NAME = ".maven-packaged"


def require(tool: str, needed_for: str) -> str:
    """The path of ``tool``, or a RuntimeError saying what needs it."""
    path = shutil.which(tool)
    if path is None:
        raise RuntimeError(f"`{tool}` is not on PATH: {needed_for} needs Java 17+ and Maven")
    return path


@contextlib.contextmanager
def maven_lock() -> Iterator[None]:
    """Hold the lock that lets one Maven build of this repository run at a time (a file in the temporary directory,
    named for the repository, so the tree stays clean and two checkouts do not wait for each other)."""
    digest = hashlib.sha1(str(Path(__file__).resolve().parent).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"pulsar-txn-proxy-maven-{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def package(project: Path, outputs: Path, timeout: float = 1800) -> None:
    """Run ``mvn -q -B clean package`` in ``project`` unless its stamp is newer than its sources and outputs exist."""
    require("java", str(project))
    with maven_lock():
        _package(project, outputs, timeout)


def _package(project: Path, outputs: Path, timeout: float) -> None:
    stamp = project / "target" / STAMP_NAME
    sources = [project / "pom.xml", *(p for p in (project / "src").rglob("*") if p.is_file())]
    if outputs.exists() and stamp.exists() and stamp.stat().st_mtime > max(p.stat().st_mtime for p in sources):
        return
    result = subprocess.run(
        [require("mvn", str(project)), "-q", "-B", "clean", "package"],
        cwd=project, capture_output=True, text=True, timeout=timeout, check=False,
    )
    if result.returncode != 0 or not outputs.exists():
        raise RuntimeError(
            f"`mvn -q -B clean package` in {project} failed with exit code {result.returncode}:\n"
            f"{result.stdout}\n{result.stderr}"
        )
    stamp.touch()


def dependencies(project: Path, timeout: float = 1800) -> Path:
    """Resolve a project whose pom copies its dependencies to ``target/lib``; that directory."""
    lib = project / "target" / "lib"
    package(project, lib, timeout)
    return lib


@functools.cache
def jar_classpath(project: Path, jar_prefix: str) -> str:
    """Build a project packaged as ``target/<jar_prefix>-*.jar`` plus ``target/lib``; the classpath to run it with."""
    target = project / "target"
    package(project, target / "lib", timeout=900)
    jars = sorted(target.glob(f"{jar_prefix}-*.jar"))
    if not jars:
        raise RuntimeError(f"`mvn -q -B clean package` in {project} made no {jar_prefix}-*.jar")
    return os.pathsep.join([str(jars[-1]), str(target / "lib" / "*")])
