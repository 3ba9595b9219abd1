"""The randomized transaction workload with a fixed seed against this endpoint, kill -9 included; no anomalies.

``make conformance`` runs it longer and against Apache Pulsar too (``python -m tests.conformance.workload``).
"""

from __future__ import annotations

from pathlib import Path

from tests.conformance.checker import table
from tests.conformance.workload import Settings, endpoint, run_workload

SETTINGS = Settings(seed=7, seconds=10, writers=3, cpp_workers=2, inputs=40, kill_restarts=1)


def test_workload_has_no_anomalies(tmp_path: Path) -> None:
    with endpoint(tmp_path / "endpoint") as (url, admin_url, crash_restart):
        result = run_workload(url, admin_url, SETTINGS, tmp_path / "history.jsonl", crash_restart)
    report = table(result, "workload against this endpoint (seed 7, one kill -9)")
    assert result.ok, report
    # The run did real work: transactions of every kind ended, inputs were processed, every partition was read.
    assert result.stats["produce committed"] > 50, report
    assert result.stats["produce aborted"] > 5, report
    assert result.stats["produce abandoned"] > 0, report
    assert result.stats["cpp committed"] > 0, report
    assert result.stats["partitions read to the end"] == "9/9", report
