"""Run the subscription model (tests/subscription_model.py) for a time budget and count examples and failures.

``python -m tests.model_run --minutes 30`` (``make model``) runs batches of examples on one local server until the
time is up; each failure is shrunk by hypothesis, printed with its steps, counted, and the run goes on. With
``--service-url`` the examples run against that broker (the reference Pulsar) and the restart rule is off. The exit
status is 1 if anything failed; SIGUSR1 prints every thread's stack.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import re
import signal
import sys
import time
import traceback
from collections import Counter

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test


def failure_kind(exc: BaseException) -> str:
    """What failed, without message ids: the assertion's own words, or the exception's type and message."""
    text = re.sub(r"m\d+@[\d:]+(\[\d+/\d+\])?", "m", str(exc).strip().splitlines()[0] if str(exc).strip() else "")
    if isinstance(exc, AssertionError):
        return text.split(": ")[0]
    return f"{type(exc).__name__}: {text[:160]}"


def _terminated(*_: object) -> None:
    """SIGTERM: stop the local server (a child process) and leave at once."""
    from tests import subscription_model

    if subscription_model._target is not None and subscription_model._target.server is not None:
        subscription_model._target.server.kill()
    os._exit(143)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long to run (default 30)")
    parser.add_argument("--steps", type=int, default=30, help="most steps per example (default 30)")
    parser.add_argument("--batch", type=int, default=20, help="examples per hypothesis run (default 20)")
    parser.add_argument("--service-url", help="run against this broker (no restarts) instead of a local server")
    parser.add_argument("--without", default="", help="rules to leave out, comma-separated (past a known defect)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminated)
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` prints where every thread is
    if args.service_url:
        os.environ["MODEL_SERVICE_URL"] = args.service_url
    if args.without:
        os.environ["MODEL_WITHOUT"] = args.without
    from tests.subscription_model import SubscriptionMachine, target

    began = time.monotonic()
    deadline = began + args.minutes * 60
    failures: Counter[str] = Counter()
    runs = 0
    while time.monotonic() < deadline:
        runs += 1
        try:
            run_state_machine_as_test(
                SubscriptionMachine,
                settings=settings(
                    max_examples=args.batch,
                    stateful_step_count=args.steps,
                    deadline=None,
                    database=None,
                    suppress_health_check=list(HealthCheck),
                    print_blob=False,
                ),
            )
        except Exception as exc:  # every failure is counted and the run goes on
            kind = failure_kind(exc)
            failures[kind] += 1
            print(f"\n=== failure {sum(failures.values())}: {kind}", flush=True)
            traceback.print_exception(exc)
        elapsed = (time.monotonic() - began) / 60
        print(
            f"[{elapsed:.1f} min] examples: {target().examples}, failed runs: {sum(failures.values())}",
            flush=True,
        )
    minutes = (time.monotonic() - began) / 60
    examples = target().examples
    print(
        f"\nexamples: {examples} in {minutes:.1f} min ({examples / minutes:.1f}/min), "
        f"failures: {sum(failures.values())}"
    )
    for kind, count in failures.most_common():
        print(f"  {count} x {kind}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
