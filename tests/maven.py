"""Maven projects of the repository (Java harnesses, a real Pulsar, pulsar-perf): built on demand, never committed.

Every project is built with ``mvn -q -B clean package`` in its directory (clean, so that no jar of an older pom
lingers in ``target/lib`` on the classpath). A stamp in ``target/`` written after a successful build skips Maven
while it is newer than the project's pom and sources and the outputs still exist.
Java 17+ and Maven are required: a missing tool fails with a clear message, never a skip.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

STAMP_NAME = ".maven-packaged"


def require(tool: str, needed_for: str) -> str:
    """The path of ``tool``, or a RuntimeError saying what needs it."""
    path = shutil.which(tool)
    if path is None:
        raise RuntimeError(f"`{tool}` is not on PATH: {needed_for} needs Java 17+ and Maven")
    return path


def package(project: Path, outputs: Path, timeout: float = 1800) -> None:
    """Run ``mvn -q -B clean package`` in ``project`` unless its stamp is newer than its sources and outputs exist."""
    require("java", str(project))
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
