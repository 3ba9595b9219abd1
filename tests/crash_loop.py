"""Drive the Java harness's ``crash_loop`` (an exactly-once consume-transform-produce loop) while the broker is
killed with SIGKILL and restarted under it, at chosen points of its progress."""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pulsar_txn_proxy.conformance.framework import admin_call
from tests.txn_harness import JVM_OPTIONS, MAIN_CLASS, build_harness


@dataclass
class _Progress:
    """What the loop printed so far."""

    committed: int = 0
    produced: bool = False
    result: str | None = None
    lines: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def read(self, stream: Any) -> None:
        for line in stream:
            with self.changed:
                self.lines.append(line)
                if line.startswith("progress "):
                    self.committed = int(line.split()[1])
                elif line.startswith("produced "):
                    self.produced = True
                elif line.startswith("{"):
                    self.result = line
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()


def input_backlog(admin_url: str, topic: str) -> int | None:
    """The ``loop`` subscription's backlog on the input topic (partitioned or not); None if the admin API has none."""
    path = topic.removeprefix("persistent://")
    for stats in ("partitioned-stats", "stats"):
        answer = admin_call(admin_url, "GET", f"/admin/v2/persistent/{path}/{stats}")
        if answer.status == 200:
            subscription = answer.body.get("subscriptions", {}).get("loop")
            return None if subscription is None else subscription["msgBacklog"]
    return None


def run_crash_loop(
    service_url: str,
    admin_url: str,
    crash_restart: Callable[[], None],
    input_topic: str,
    output_topic: str,
    *,
    inputs: int = 300,
    kills: int = 2,
    seconds: int = 120,
    flags: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run the loop over ``inputs`` messages and ``crash_restart()`` the broker ``kills`` times, in the middle of
    equal shares of the loop's progress (2 kills: at a quarter and three quarters, inside a batch of the inputs).

    The output topic deduplicates: exactly-once needs it with Pulsar too, since a producer resends what a crash left
    unanswered and only deduplication drops what the broker had already written. After the last kill, the loop is
    stopped once the input subscription's backlog is empty (a commit whose answer a crash cut off may have committed
    without the loop knowing). Returns the loop's observations plus ``committed_at_kills`` (the loop's committed
    count when each kill began) and ``phases`` (inputs the loop saw committed before the first kill, between kills,
    after the last).
    """
    _deduplicate(admin_url, output_topic)
    command = [
        "java", *JVM_OPTIONS, "-cp", build_harness(), MAIN_CLASS, service_url, "crash_loop",
        input_topic, output_topic, str(inputs), str(seconds), *flags,
    ]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    progress = _Progress()
    stderr: list[str] = []
    readers = [
        threading.Thread(target=progress.read, args=(process.stdout,), daemon=True),
        threading.Thread(target=lambda: stderr.extend(process.stderr), daemon=True),  # type: ignore[arg-type]
    ]
    for reader in readers:
        reader.start()
    committed_at_kills: list[int] = []
    try:
        deadline = time.monotonic() + seconds
        for k in range(kills):
            threshold = inputs * (2 * k + 1) // (2 * kills)
            with progress.changed:
                progress.changed.wait_for(
                    lambda t=threshold: progress.committed >= t or process.poll() is not None
                    or time.monotonic() > deadline,
                    timeout=max(deadline - time.monotonic(), 0.1),
                )
                committed_at_kills.append(progress.committed)
            if process.poll() is not None:
                break
            crash_restart()
        _stop_when_consumed(process, admin_url, input_topic, deadline)
        process.wait(timeout=seconds + 60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    for reader in readers:
        reader.join(timeout=5)
    try:
        result = json.loads(progress.result) if progress.result else None
    except json.JSONDecodeError:
        result = None
    if process.returncode != 0 or not isinstance(result, dict) or "error" in result:
        raise RuntimeError(
            f"crash_loop failed (exit code {process.returncode})\nstdout:\n{''.join(progress.lines)[-5000:]}\n"
            f"stderr:\n{''.join(stderr)[-20000:]}"
        )
    marks = [0, *committed_at_kills, result["committed"]]
    result["committed_at_kills"] = committed_at_kills
    result["phases"] = [b - a for a, b in itertools.pairwise(marks)]
    return result


def _stop_when_consumed(process: subprocess.Popen[str], admin_url: str, input_topic: str, deadline: float) -> None:
    """Tell the loop to stop once the input backlog is empty (or the deadline passed)."""
    while process.poll() is None and time.monotonic() < deadline:
        try:
            empty = input_backlog(admin_url, input_topic) == 0
        except OSError:
            empty = False
        if empty:
            break
        time.sleep(0.5)
    if process.poll() is None and process.stdin is not None:
        process.stdin.write("stop\n")
        process.stdin.flush()


def _deduplicate(admin_url: str, topic: str, timeout: float = 30.0) -> None:
    """Turn deduplication on as a policy of ``topic`` (created first if it does not exist) and wait until it is in
    force (Pulsar applies topic policies asynchronously)."""
    path = f"/admin/v2/persistent/{topic.removeprefix('persistent://')}"
    if admin_call(admin_url, "GET", f"{path}/partitions").body.get("partitions", 0) == 0:
        admin_call(admin_url, "PUT", path)
    answer = admin_call(admin_url, "POST", f"{path}/deduplicationEnabled", True)
    if answer.status >= 300:
        raise RuntimeError(f"setting deduplication on {topic} failed: {answer}")
    deadline = time.monotonic() + timeout
    while admin_call(admin_url, "GET", f"{path}/deduplicationEnabled").body is not True:
        if time.monotonic() > deadline:
            raise RuntimeError(f"deduplication on {topic} not in force after {timeout} s")
        time.sleep(0.2)
