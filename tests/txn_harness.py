"""Build and run the Java transaction harness (tests/java): the official Java client against the server.

The Python client has no transaction API, so transaction tests run scenarios in a JVM:
``java -cp 'target/classes:target/lib/*' dev.pulsartxnproxy.Harness <serviceUrl> <scenario> [args]``
prints one JSON line of observations. Java 17+ and Maven are required: missing tools fail, never skip.

The harness is compiled against the pom's client (4.2.4); ``client_version`` runs the same classes on another client
line's jars (``target/lib-<version>``, resolved by Maven on first use), as a user of that line would run them.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pulsar_txn_proxy.conformance.harness import JVM_OPTIONS, observations
from tests.maven import jar_classpath, maven_lock, require

JAVA_DIR = Path(__file__).resolve().parent / "java"
MAIN_CLASS = "dev.pulsartxnproxy.Harness"

Scenario = Callable[..., dict[str, Any]]


def build_harness() -> str:
    """Build the transaction harness (tests/java) unless it is up to date; the classpath to run it with."""
    return jar_classpath(JAVA_DIR, "txn-harness")


def client_line_classpath(version: str) -> str:
    """The harness's classes on the jars of Pulsar client ``version`` (resolved once into ``target/lib-<version>``)."""
    classpath = build_harness()
    lib = Path(classpath.split(os.pathsep)[0]).parent / f"lib-{version}"
    with maven_lock():
        if not (lib / f"pulsar-client-{version}.jar").exists():
            result = subprocess.run(
                [require("mvn", str(JAVA_DIR)), "-q", "-B", "dependency:copy-dependencies",
                 f"-Dpulsar.version={version}", "-DincludeScope=runtime", f"-DoutputDirectory={lib}"],
                cwd=JAVA_DIR, capture_output=True, text=True, timeout=900, check=False,
            )
            if result.returncode != 0:
                raise RuntimeError(f"resolving pulsar-client {version} failed:\n{result.stdout}\n{result.stderr}")
    return os.pathsep.join([classpath.split(os.pathsep)[0], str(lib / "*")])


def run_scenario(
    service_url: str, name: str, *args: str, timeout: float = 60, client_version: str | None = None
) -> dict[str, Any]:
    """Run one scenario in a JVM and return its observations; raise with the output if it did not run.

    ``client_version``: on that Pulsar client line's jars instead of the pom's (no class-data sharing archive).
    """
    if client_version is not None:
        command = ["java", *JVM_OPTIONS, "-cp", client_line_classpath(client_version), MAIN_CLASS]
        return observations([*command, service_url, name, *map(str, args)], f"scenario {name}", timeout)
    classpath = build_harness()
    jar = Path(classpath.split(os.pathsep)[0])
    # Class-data sharing archive of the harness's classes, dumped by the first run after a build: ~0.5 s per JVM.
    with class_data_sharing(jar.parent / "harness.jsa", jar) as cds:
        command = ["java", *JVM_OPTIONS, cds, "-cp", classpath, MAIN_CLASS, service_url, name, *map(str, args)]
        return observations(command, f"scenario {name}", timeout)


@contextlib.contextmanager
def class_data_sharing(archive: Path, jar: Path) -> Iterator[str]:
    """The JVM option that uses ``archive`` when it is newer than ``jar``, or else dumps a new one at exit.

    A JVM dumps to a file of its own, moved into place once it has exited: JVMs of parallel test workers never read
    an archive another one is still writing.
    """
    if archive.exists() and archive.stat().st_mtime >= jar.stat().st_mtime:
        yield f"-XX:SharedArchiveFile={archive}"
        return
    dump = archive.with_name(f"{archive.stem}.{os.getpid()}.jsa")
    try:
        yield f"-XX:ArchiveClassesAtExit={dump}"
        if dump.exists():
            dump.replace(archive)
    finally:
        dump.unlink(missing_ok=True)


@pytest.fixture(scope="session", name="txn_harness")
def txn_harness_fixture() -> Scenario:
    """``txn_harness``: builds the harness once per session; call it as ``txn_harness(url, name, *args)``."""
    build_harness()
    return run_scenario
