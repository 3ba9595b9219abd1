"""The Java and Go client harnesses: built on first use into a per-user cache, run one scenario per process.

The Python client has no transaction API and other languages' clients behave differently, so some scenarios run in
a harness process: ``java ... dev.pulsartxnproxy.Harness <serviceUrl> <scenario> [args]`` (official Java client
4.2.4) or ``harness <serviceUrl> <scenario> [args]`` (official Go client); each prints one JSON line of observations.

Their sources ship with the package (``harness_sources/java``, ``harness_sources/go``). They are copied into
``$PULSAR_TXN_PROXY_CACHE`` (default ``~/.cache/pulsar-txn-proxy``), under a directory named for a hash of the
sources, and built there with Maven or ``go build``: never in the package nor in the current directory, and once per
version of the sources. Java 17+ with Maven, or Go 1.24+, is needed only by the scenarios that drive that client.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pulsar_txn_proxy.conformance import security

SOURCES = Path(__file__).resolve().parent / "harness_sources"
JAVA_SOURCES = SOURCES / "java"
GO_SOURCES = SOURCES / "go"
MAIN_CLASS = "dev.pulsartxnproxy.Harness"
#: Each run is a short-lived JVM: the C1 compiler alone and the serial collector start faster on few cores; JVM
#: log lines (class-data sharing warnings) go to stderr so that stdout carries only the JSON line.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xlog:disable", "-Xlog:all=warning:stderr")
#: Where the official Go installer puts the toolchain, for machines whose PATH does not name it.
GO_FALLBACK = Path("/usr/local/go/bin/go")
#: The first builds download the clients and their dependencies (minutes on two busy cores).
BUILD_TIMEOUT = 1800


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


#: Where build progress goes (the conformance command points it at its terminal output).
progress: Callable[[str], None] = _stderr
#: Whether the harnesses' clients enable transactions (off for a broker without a transaction coordinator, where
#: such a client cannot be built; its scenarios that need transactions are not run there).
transactions = True


class ToolchainMissingError(RuntimeError):
    """A harness cannot be built here: its toolchain is not installed (the message says how to get it)."""


class HarnessError(RuntimeError):
    """A harness process did not run its scenario; ``cause`` is the root cause (e.g. the Java exception's class and
    message), the exception's text carries the whole output."""

    def __init__(self, cause: str, details: str) -> None:
        super().__init__(f"{cause}\n{details}")
        self.cause = cause


def cache_dir() -> Path:
    """The per-user cache the harnesses are built in."""
    configured = os.environ.get("PULSAR_TXN_PROXY_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pulsar-txn-proxy"


def _source_files(root: Path, patterns: tuple[str, ...]) -> list[Path]:
    return sorted(p for pattern in patterns for p in root.glob(pattern) if p.is_file())


def staged(kind: str, root: Path, patterns: tuple[str, ...]) -> Path:
    """A copy of the sources in the cache, in a directory named for their hash: made once, and atomically (copied
    into a directory of this process's own, then renamed), so that a concurrent builder never reads half a file."""
    files = _source_files(root, patterns)
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    stage = cache_dir() / f"{kind}-{digest.hexdigest()[:16]}"
    if (stage / ".sources").exists():
        return stage
    partial = stage.with_name(f"{stage.name}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    for path in files:
        target = partial / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    (partial / ".sources").touch()
    try:
        partial.rename(stage)
    except OSError:  # another process made it first (a stage is never changed once made)
        shutil.rmtree(partial, ignore_errors=True)
    return stage


@contextlib.contextmanager
def build_lock(stage: Path) -> Iterator[None]:
    """One build of a stage at a time, across processes."""
    with (stage / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run_build(command: list[str], cwd: Path, what: str) -> None:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
    if result.returncode != 0:
        raise HarnessError(f"building {what} failed (exit code {result.returncode})", result.stdout + result.stderr)


# -- Java ------------------------------------------------------------------------------------------------


def java_toolchain() -> str | None:
    """Why the Java harness cannot be built here, or None when Java and Maven are on PATH."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        return (
            f"{' and '.join(missing)} not on PATH: the Java-client scenarios need Java 17+ and Maven "
            "(e.g. `apt-get install openjdk-17-jdk-headless maven`)"
        )
    return None


@functools.cache
def java_classpath() -> str:
    """Build the Java harness unless built; the classpath to run it with."""
    if (why := java_toolchain()) is not None:
        raise ToolchainMissingError(why)
    stage = staged("java", JAVA_SOURCES, ("pom.xml", "src/**/*"))
    done = stage / ".built"
    with build_lock(stage):
        if not done.exists():
            progress(f"building the Java harness (official Java client, Maven; first use only) in {stage} ...")
            _run_build(["mvn", "-q", "-B", "package", "-DskipTests"], stage, "the Java harness")
            done.touch()
            progress("the Java harness is built")
    jars = sorted((stage / "target").glob("txn-harness-*.jar"))
    if not jars:
        raise HarnessError("building the Java harness made no target/txn-harness-*.jar", str(stage))
    return os.pathsep.join([str(jars[-1]), str(stage / "target" / "lib" / "*")])


def client_line_classpath(version: str) -> str:
    """The harness's classes on the jars of Pulsar Java client ``version`` (resolved once with Maven)."""
    classpath = java_classpath()
    stage = Path(classpath.split(os.pathsep)[0]).parent.parent
    lib = stage / "target" / f"lib-{version}"
    with build_lock(stage):
        if not (lib / f"pulsar-client-{version}.jar").exists():
            progress(f"resolving the Java client {version} with Maven (first use only) ...")
            _run_build(
                [
                    "mvn",
                    "-q",
                    "-B",
                    "dependency:copy-dependencies",
                    f"-Dpulsar.version={version}",
                    "-DincludeScope=runtime",
                    f"-DoutputDirectory={lib}",
                ],
                stage,
                f"pulsar-client {version}",
            )
    return os.pathsep.join([classpath.split(os.pathsep)[0], str(lib / "*")])


def run_scenario(
    service_url: str, name: str, *args: str, timeout: float = 60, client_version: str | None = None
) -> dict[str, Any]:
    """Run one Java-harness scenario and return its observations; raise :class:`HarnessError` if it did not run.

    ``client_version``: on that Pulsar client line's jars instead of the pom's (no class-data sharing archive).
    """
    credentials = security.for_url(service_url)
    if client_version is not None:
        command = ["java", *JVM_OPTIONS, "-cp", client_line_classpath(client_version), MAIN_CLASS]
        return observations(
            [*command, service_url, name, *map(str, args)], f"Java scenario {name}", timeout, credentials
        )
    classpath = java_classpath()
    jar = Path(classpath.split(os.pathsep)[0])
    with class_data_sharing(jar.parent / "harness.jsa", jar) as cds:  # saves ~0.5 s per JVM
        command = ["java", *JVM_OPTIONS, cds, "-cp", classpath, MAIN_CLASS, service_url, name, *map(str, args)]
        return observations(command, f"Java scenario {name}", timeout, credentials)


@contextlib.contextmanager
def class_data_sharing(archive: Path, jar: Path) -> Iterator[str]:
    """The JVM option that uses the class-data sharing ``archive`` when it is newer than ``jar``, or else dumps a new
    one at exit.

    A JVM dumps to a file of its own, moved into place once it has exited: parallel JVMs never read an archive
    another one is still writing.
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


# -- Go --------------------------------------------------------------------------------------------------


def _go() -> str | None:
    return shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.exists() else None)


def go_toolchain() -> str | None:
    """Why the Go harness cannot be built here, or None when a Go toolchain is found."""
    if _go() is None:
        return (
            f"`go` is not on PATH and {GO_FALLBACK} does not exist: the Go-client scenarios need Go 1.24+ "
            "(https://go.dev/dl/)"
        )
    return None


@functools.cache
def go_binary() -> Path:
    """Build the Go harness unless built; the binary."""
    go = _go()
    if go is None:
        raise ToolchainMissingError(go_toolchain() or "no Go toolchain")
    stage = staged("go", GO_SOURCES, ("*.go", "go.mod", "go.sum"))
    binary = stage / "bin" / "harness"
    with build_lock(stage):
        if not binary.exists():
            progress(f"building the Go harness (official Go client; first use only) in {stage} ...")
            _run_build(
                [go, "build", "-mod=readonly", "-buildvcs=false", "-o", str(binary), "."], stage, "the Go harness"
            )
            progress("the Go harness is built")
    return binary


def go_scenario(service_url: str, name: str, *args: str, timeout: float = 90) -> dict[str, Any]:
    """Run one Go-harness scenario and return its observations; raise :class:`HarnessError` if it did not run."""
    command = [str(go_binary()), service_url, name, *map(str, args)]
    return observations(command, f"Go scenario {name}", timeout, security.for_url(service_url))


# -- both ------------------------------------------------------------------------------------------------


def observations(
    command: list[str], label: str, timeout: float, credentials: security.Credentials = security.NONE
) -> dict[str, Any]:
    """Run a harness process and return the JSON line of observations it printed last; raise
    :class:`HarnessError` (the harness's own error first) if it did not run, failed or printed none.

    The process gets the broker's TLS and authentication settings in ``HARNESS_AUTH_*``/``HARNESS_TLS_*``."""
    env = {**os.environ, **credentials.harness_env()}
    if not transactions:
        env["HARNESS_TRANSACTIONS"] = "false"
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(
            f"{label} did not finish within {timeout} s", f"stdout:\n{exc.stdout}\nstderr:\n{exc.stderr}"
        ) from exc
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    try:
        parsed = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        parsed = None
    if result.returncode != 0 or not isinstance(parsed, dict) or "error" in parsed:
        error = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(error, dict):
            cause = f"{label}: {error.get('type')}: {error.get('message')}"
        else:
            tail = [line for line in result.stderr.splitlines() if line.strip()][-1:]
            cause = f"{label} failed (exit code {result.returncode}){': ' + tail[0] if tail else ''}"
        raise HarnessError(cause, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-20000:]}")
    return parsed
