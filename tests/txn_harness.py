"""Build and run the Java transaction harness (tests/java): the official Java client against the server.

The Python client has no transaction API, so transaction tests run scenarios in a JVM:
``java -cp 'target/classes:target/lib/*' dev.pulsartxnproxy.Harness <serviceUrl> <scenario> [args]``
prints one JSON line of observations. Java 17+ and Maven are required: missing tools fail, never skip.

The harness is compiled against the pom's client (4.2.4); ``client_version`` runs the same classes on another client
line's jars (``target/lib-<version>``, resolved by Maven on first use), as a user of that line would run them.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.maven import jar_classpath, maven_lock, require

JAVA_DIR = Path(__file__).resolve().parent / "java"
TARGET = JAVA_DIR / "target"
MAIN_CLASS = "dev.pulsartxnproxy.Harness"
# Class-data sharing archive of the harness's classes, dumped by the first run after a build: saves ~0.5 s per JVM.
CDS_ARCHIVE = TARGET / "harness.jsa"
# Each run is a short-lived JVM: the C1 compiler alone and the serial collector start faster on few cores; JVM
# log lines (CDS warnings) go to stderr so that stdout carries only the JSON line.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xlog:disable", "-Xlog:all=warning:stderr")

Scenario = Callable[..., dict[str, Any]]


def build_harness() -> str:
    """Build the transaction harness (tests/java) unless it is up to date; the classpath to run it with."""
    return jar_classpath(JAVA_DIR, "txn-harness")


def client_line_classpath(version: str) -> str:
    """The harness's classes on the jars of Pulsar client ``version`` (resolved once into ``target/lib-<version>``)."""
    classpath = build_harness()
    lib = TARGET / f"lib-{version}"
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
    with class_data_sharing(CDS_ARCHIVE, Path(classpath.split(os.pathsep)[0])) as cds:
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


def observations(command: list[str], label: str, timeout: float) -> dict[str, Any]:
    """Run a harness process (Java or Go) and return the JSON line of observations it printed last; raise with its
    output if it did not run, failed or printed none."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(
            f"{label} did not finish within {timeout} s\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}"
        ) from exc
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    try:
        parsed = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        parsed = None
    if result.returncode != 0 or not isinstance(parsed, dict) or "error" in parsed:
        raise RuntimeError(
            f"{label} failed (exit code {result.returncode})\n"
            f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-20000:]}"
        )
    return parsed


@pytest.fixture(scope="session", name="txn_harness")
def txn_harness_fixture() -> Scenario:
    """``txn_harness``: builds the harness once per session; call it as ``txn_harness(url, name, *args)``."""
    build_harness()
    return run_scenario
