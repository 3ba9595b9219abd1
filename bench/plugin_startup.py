"""From ``pytest`` to the first test: the sample project (examples/pytest-sample) on the plugin's endpoint, beside the
same suite on an Apache Pulsar 4.2.4 standalone.

Each run copies the sample to a temporary directory and runs ``python -m pytest`` there in a subprocess; a small
plugin (``-p``) notes the wall-clock time when the first test's body begins (after its fixtures set up, so after the
broker answers). The figure is from launching pytest to that moment; the suite's whole run is printed beside it.

- Endpoint side: the suite as it is; the plugin starts ``pulsar-txn-proxy serve`` for the session.
- Pulsar side: the same test files with a ``conftest.py`` that overrides ``pulsar_endpoint`` with a session-scoped
  Pulsar standalone (tests/conformance/pulsar_standalone.py, from Maven Central, transactions enabled) started
  inside the pytest session. Pulsar's own testcontainers module would start the ``apachepulsar/pulsar`` image
  instead, but no image registry is reachable here; the standalone runs the same broker without a container. Its
  jars are resolved before the clock starts, as a pulled image would be.

    .venv/bin/python bench/plugin_startup.py [--runs 3] [--pulsar-runs 1] [--no-pulsar]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "pytest-sample"

CLOCK_PLUGIN = """
import os, time

_noted = False


def pytest_runtest_call(item):
    global _noted
    if not _noted:
        _noted = True
        with open(os.environ["STARTUP_CLOCK_FILE"], "w") as out:
            out.write(repr(time.time()))
"""

PULSAR_CONFTEST = f"""
import sys

sys.path.insert(0, {str(ROOT)!r})

import pytest

from pulsar_txn_proxy.endpoint import ExistingBroker
from tests.conformance.pulsar_standalone import PulsarStandalone


@pytest.fixture(scope="session")
def reference_pulsar(tmp_path_factory):
    with PulsarStandalone(tmp_path_factory.mktemp("pulsar")) as pulsar:
        yield pulsar


@pytest.fixture
def pulsar_endpoint(reference_pulsar):
    return ExistingBroker(reference_pulsar.url, reference_pulsar.admin_url)
"""


def run_once(pulsar: bool) -> tuple[float, float]:
    """(seconds to the first test, seconds for the whole suite) of one pytest run of the sample."""
    with tempfile.TemporaryDirectory(prefix="plugin-startup-") as tmp:
        work = Path(tmp) / "sample"
        shutil.copytree(SAMPLE, work, ignore=shutil.ignore_patterns(".venv", ".pytest_cache", "__pycache__"))
        if pulsar:
            (work / "conftest.py").write_text(PULSAR_CONFTEST)
        plugins = Path(tmp) / "plugins"
        plugins.mkdir()
        (plugins / "startup_clock.py").write_text(CLOCK_PLUGIN)
        clock = Path(tmp) / "first-test"
        env = dict(os.environ, PYTHONPATH=str(plugins), STARTUP_CLOCK_FILE=str(clock))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "startup_clock", "-p", "no:cacheprovider"]
        began = time.time()
        result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, check=False)
        ended = time.time()
        if result.returncode != 0:
            raise SystemExit(
                f"the sample failed ({'pulsar' if pulsar else 'endpoint'}):\n{result.stdout}\n{result.stderr}"
            )
        return float(clock.read_text()) - began, ended - began


def summary(name: str, runs: list[tuple[float, float]]) -> str:
    first = [r[0] for r in runs]
    whole = [r[1] for r in runs]
    return (
        f"  {name:<44} first test after {statistics.median(first):6.2f} s (min {min(first):.2f}, max {max(first):.2f})"
        f"   whole suite {statistics.median(whole):6.2f} s   ({len(runs)} run{'s' if len(runs) > 1 else ''})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs on the plugin's endpoint (default 3)")
    parser.add_argument("--pulsar-runs", type=int, default=1, help="runs on a Pulsar standalone (default 1)")
    parser.add_argument("--no-pulsar", action="store_true", help="leave the Pulsar side out")
    args = parser.parse_args()
    tests = sum(p.read_text().count("\ndef test_") for p in (SAMPLE / "tests").glob("test_*.py"))
    lines = [f"pytest to the first test of {SAMPLE.relative_to(ROOT)} ({tests} tests), median of runs:"]
    endpoint = [run_once(pulsar=False) for _ in range(args.runs)]
    lines.append(summary("pulsar-txn-proxy (pytest plugin, no import)", endpoint))
    if not args.no_pulsar:
        sys.path.insert(0, str(ROOT))
        from tests.conformance.pulsar_standalone import build

        build()  # resolve the jars before the clock starts, as a pulled image would be
        pulsar = [run_once(pulsar=True) for _ in range(args.pulsar_runs)]
        lines.append(summary("Apache Pulsar 4.2.4 standalone (same suite)", pulsar))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines.append(f"load average at the end (1, 5, 15 min): {load} on {os.cpu_count()} CPUs (other work inflates both)")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
