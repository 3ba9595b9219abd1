"""Randomized transaction workload against a target, then the checker (tests/conformance/checker.py).

The workload itself is a Java program (tests/conformance/workload, official Java client 4.2.4: the Python client
has no transactions): writers run transactions over several 3-partition topics and commit, abort or abandon them,
consume-process-produce workers move an input topic to an output topic in transactions, live consumers read
everything, and a final read checks each partition to its end. Against this endpoint the driver can also
``kill -9`` the server and restart it while the workload runs (``--kill-restarts``).

Run: ``python -m tests.conformance.workload [--target endpoint|pulsar] [--service-url U --admin-url A] [--seed 1]
[--seconds 15] [--kill-restarts 1]``. It prints the summary table and exits 1 on any anomaly.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pulsar_txn_proxy.conformance.framework import admin_call, wait_for_admin  # noqa: E402
from tests.conformance.checker import CheckResult, check, load, table  # noqa: E402
from tests.conformance.pulsar_standalone import PulsarStandalone  # noqa: E402
from tests.maven import jar_classpath  # noqa: E402
from tests.server_process import KEEP_ACKNOWLEDGED, ServerProcess  # noqa: E402

JAVA_DIR = Path(__file__).resolve().parent / "workload"
MAIN_CLASS = "dev.pulsartxnproxy.conformance.Workload"
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx512m")


@dataclass
class Settings:
    """Size and shape of one workload run."""

    seed: int = 1
    seconds: int = 15
    writers: int = 3
    cpp_workers: int = 2
    inputs: int = 60
    topics: int = 2
    partitions: int = 3
    txn_timeout_ms: int = 3000
    kill_restarts: int = 0


def build() -> str:
    """Build the workload jar unless up to date; returns its classpath."""
    return jar_classpath(JAVA_DIR, "conformance-workload")


def run_workload(
    service_url: str, admin_url: str, settings: Settings, history: Path,
    crash_restart: Callable[[], None] | None = None,
) -> CheckResult:
    """Create the topics, run the Java workload (crashing the target as asked), and check the history."""
    classpath = build()
    suffix = uuid.uuid4().hex[:8]
    names = [f"wl-{i}-{suffix}" for i in range(settings.topics)] + [f"wl-in-{suffix}", f"wl-out-{suffix}"]
    for name in names:
        answer = admin_call(admin_url, "PUT", f"/admin/v2/persistent/public/default/{name}/partitions",
                            settings.partitions)
        if answer.status >= 300:
            raise RuntimeError(f"creating {name} failed: {answer}")
    full = [f"persistent://public/default/{n}" for n in names]
    command = [
        "java", *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS,
        "--service-url", service_url, "--topics", ",".join(full[: settings.topics]),
        "--input", full[-2], "--output", full[-1], "--partitions", str(settings.partitions),
        "--seed", str(settings.seed), "--seconds", str(settings.seconds), "--writers", str(settings.writers),
        "--cpp-workers", str(settings.cpp_workers), "--inputs", str(settings.inputs),
        "--txn-timeout-ms", str(settings.txn_timeout_ms), "--history", str(history),
    ]
    stderr_path = history.with_suffix(".stderr")
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
        crasher = None
        crash_errors: list[BaseException] = []
        if crash_restart is not None and settings.kill_restarts:
            crasher = threading.Thread(
                target=_crash_schedule, args=(settings, crash_restart, crash_errors), daemon=True
            )
            crasher.start()
        try:
            code = process.wait(timeout=settings.seconds + settings.txn_timeout_ms / 1000 + 240)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise RuntimeError(f"the workload did not finish; see {stderr_path}") from None
        if crasher is not None:
            crasher.join()
        if crash_errors:
            raise RuntimeError("restarting the target failed") from crash_errors[0]
    if not history.exists() or code not in (0, 1):
        raise RuntimeError(f"the workload exited with {code}:\n{stderr_path.read_text()[-5000:]}")
    result = check(load(history))
    result.stats["kill -9 restarts"] = settings.kill_restarts if crash_restart else 0
    return result


def _crash_schedule(settings: Settings, crash_restart: Callable[[], None], errors: list[BaseException]) -> None:
    """kill -9 and restart the target at seeded random moments of the busy phase."""
    rng = random.Random(settings.seed)
    moments = sorted(rng.uniform(0.25, 0.75) * settings.seconds for _ in range(settings.kill_restarts))
    began = time.monotonic()
    try:
        for moment in moments:
            time.sleep(max(0.0, began + moment - time.monotonic()))
            crash_restart()
    except Exception as exc:  # reported by run_workload
        errors.append(exc)


@contextmanager
def endpoint(data_dir: Path) -> Iterator[tuple[str, str, Callable[[], None]]]:
    """This endpoint with its admin API, deduplication (so that resends after a crash are not duplicates) and
    unlimited retention: the final read checks every committed message from the start, and by default a topic
    deletes what its subscriptions acknowledged when it loads again after the kill."""
    proc = ServerProcess(data_dir, "--deduplication", *KEEP_ACKNOWLEDGED)
    proc.start(timeout=60)
    wait_for_admin(proc.admin_url)

    def crash_restart() -> None:
        proc.kill()
        proc.start(timeout=60)

    try:
        yield proc.url, proc.admin_url, crash_restart
    finally:
        if proc.process is not None:
            proc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("endpoint", "pulsar"), default="endpoint")
    parser.add_argument("--service-url", help="run against this broker instead (no restarts)")
    parser.add_argument("--admin-url")
    parser.add_argument("--history", type=Path, help="where to keep the history (default: a temporary file)")
    defaults = Settings()
    for name, value in vars(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=value)
    args = parser.parse_args()
    settings = Settings(**{k: getattr(args, k) for k in vars(defaults)})
    work = Path(tempfile.mkdtemp(prefix="workload-"))
    history = args.history or work / "history.jsonl"
    if args.service_url:
        if not args.admin_url:
            parser.error("--service-url needs --admin-url (topics are created through the admin API)")
        settings.kill_restarts = 0
        result = run_workload(args.service_url, args.admin_url, settings, history)
        title = f"workload against {args.service_url}"
    elif args.target == "pulsar":
        settings.kill_restarts = 0
        with PulsarStandalone(work / "pulsar") as pulsar:
            result = run_workload(pulsar.url, pulsar.admin_url, settings, history)
        title = "workload against Apache Pulsar (standalone)"
    else:
        with endpoint(work / "endpoint") as (url, admin_url, crash_restart):
            result = run_workload(url, admin_url, settings, history, crash_restart)
        title = "workload against this endpoint"
    print(table(result, title))
    print(f"\nhistory: {history}")
    sys.exit(0 if result.ok else 1)


if __name__ == "__main__":
    main()
