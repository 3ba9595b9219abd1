"""Maven projects of the repository (Java harnesses, a real Pulsar, pulsar-perf): built on demand, never committed.

Each project is built as the conformance command builds its Java harness: its pom and sources are copied into the
per-user cache (``$PULSAR_TXN_PROXY_CACHE``, default ``~/.cache/pulsar-txn-proxy``) under a directory named for
their hash, and ``mvn -q -B package`` runs there once per version of the sources. A fresh clone, a worktree and a
CI checkout of the same sources therefore reuse one build, as they reuse Maven's local repository; and the
class-data sharing archives dumped beside the jars stay valid for all of them (an archive records its classpath).
Maven runs one at a time across processes (:func:`maven_lock`): ``pytest -n`` workers share the local repository;
a second worker then finds the build done.
Java 17+ and Maven are required: a missing tool fails with a clear message, never a skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from pulsar_txn_proxy.conformance.harness import cache_dir, staged

BUILT = ".built"


def require(tool: str, needed_for: str) -> str:
    """The path of ``tool``, or a RuntimeError saying what needs it."""
    path = shutil.which(tool)
    if path is None:
        raise RuntimeError(f"`{tool}` is not on PATH: {needed_for} needs Java 17+ and Maven")
    return path


@contextlib.contextmanager
def maven_lock() -> Iterator[None]:
    """Hold the lock that lets one Maven run of this user's test builds happen at a time."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / ".maven.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@functools.cache
def built(project: Path, timeout: float = 1800) -> Path:
    """The directory in the cache where ``project`` (a directory with a pom.xml) is packaged; built unless done."""
    require("java", str(project))
    stage = staged(f"maven-{project.name}", project, ("pom.xml", "src/**/*"))
    with maven_lock():
        if not (stage / BUILT).exists():
            result = subprocess.run(
                [require("mvn", str(project)), "-q", "-B", "clean", "package"],
                cwd=stage, capture_output=True, text=True, timeout=timeout, check=False,
            )
            if result.returncode != 0:
                raise RuntimeError(
                    f"`mvn -q -B clean package` of {project} in {stage} failed with exit code {result.returncode}:\n"
                    f"{result.stdout}\n{result.stderr}"
                )
            (stage / BUILT).touch()
    return stage


def dependencies(project: Path, timeout: float = 1800) -> Path:
    """Resolve a project whose pom copies its dependencies to ``target/lib``; that directory."""
    lib = built(project, timeout) / "target" / "lib"
    if not lib.is_dir():
        raise RuntimeError(f"`mvn -q -B clean package` of {project} made no {lib}")
    return lib


def jar_classpath(project: Path, jar_prefix: str) -> str:
    """Build a project packaged as ``target/<jar_prefix>-*.jar`` plus ``target/lib``; the classpath to run it with."""
    target = dependencies(project, timeout=900).parent
    jars = sorted(target.glob(f"{jar_prefix}-*.jar"))
    if not jars:
        raise RuntimeError(f"`mvn -q -B clean package` of {project} in {target.parent} made no {jar_prefix}-*.jar")
    return os.pathsep.join([str(jars[-1]), str(target / "lib" / "*")])
