"""The deterministic simulation of the whole server (tests/sim): a few hundred seeds pass, each mutation is caught,
the seeds that found defects stay fixed, and a seed's trace is the same in every run and under any hash seed.

The long campaign is ``make sim`` (100,000 seeds).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.sim.campaign import EXPECTED, _run_seed_job, run_seed
from tests.sim.mutations import MUTATIONS

ROOT = Path(__file__).resolve().parent.parent
#: Seeds ``make test`` runs (about 45 s on this shared 2-core machine; ``make sim`` runs 100,000).
SEEDS = range(1, 101)
#: A seed that each mutation fails (found by ``python -m tests.sim --mutation NAME --stop``).
CAUGHT_BY = {
    "receipt-before-durable": 2,
    "skip-sequence-store": 58,
    "read-past-open-txn": 1,
    "split-commit-marker": 1,
    "lost-partition-registration": 2,
    "txn-success-after-failed-commit": 328,
    "acks-lost-by-failed-commit": 3,
    "earliest-skips-staged": 2,
    "txn-ids-reserved-before-stored": 64,
}
#: Seeds that found defects in the server, and the defect (each fixed; the seed fails with it put back).
REGRESSIONS = {
    2: "earliest-skips-staged",
    # The disk fills while a coordinator reserves its next block of ids: the ids of the block never stored were
    # answered at once, and handed out again after the restart.
    64: "txn-ids-reserved-before-stored",
}
#: Seeds that find a defect not fixed yet: when END_TXN's commit fails (a full disk), the transaction is committed
#: in memory (its messages are dispatched, its acknowledgements applied and written again by the retry of the
#: cursors) while the store keeps it open without markers, so a restart aborts it: consumers got messages of a
#: transaction that ended aborted, and inputs it acknowledged are never transformed. Each of these seeds fails with it
#: alone; the test fails when one passes (the defect is fixed: remove it here) or another seed fails. The seeds run
#: in spawned processes, as ``python -m tests.sim`` runs them: forked from a pytest worker, a scenario inherited
#: that process's state and some seeds ended otherwise (16, 66 and 73 failed, 39 and 94 passed).
KNOWN_DEFECT_SEEDS = {32, 38, 39, 46, 47, 93, 94, 109, 132}
KNOWN_DEFECT_SIGNS = (
    "and the transaction ended aborted",
    "inputs never transformed after the faults stopped",
    "was committed for an input that is not stored",
)


def test_seeds_pass_and_see_every_fault() -> None:
    import multiprocessing

    # Spawned, not forked: a pytest-xdist worker has threads, and a child forked while one of them holds a lock
    # waits for it forever.
    with multiprocessing.get_context("spawn").Pool(min(2, os.cpu_count() or 1)) as pool:
        results = pool.map(_run_seed_job, [(seed, None) for seed in SEEDS], chunksize=4)
    failures = {r.seed: r.failures for r in results if r.failures}
    assert set(failures) == KNOWN_DEFECT_SEEDS & set(SEEDS), failures
    for seed, found in failures.items():
        assert all(any(sign in failure for sign in KNOWN_DEFECT_SIGNS) for failure in found), (seed, found)
    totals: Counter[str] = Counter()
    for result in results:
        totals.update(result.counters)
    for name in EXPECTED:
        assert totals[name] > 0, (name, totals)


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutation_is_caught(name: str) -> None:
    assert run_seed(CAUGHT_BY[name], name).failures
    assert not run_seed(CAUGHT_BY[name]).failures


@pytest.mark.parametrize("seed", sorted(REGRESSIONS))
def test_regression_seed(seed: int) -> None:
    assert not run_seed(seed).failures
    assert run_seed(seed, REGRESSIONS[seed]).failures


def test_same_seed_same_trace() -> None:
    first, second = run_seed(7), run_seed(7)
    assert first.trace == second.trace
    assert first.events == second.events
    assert run_seed(8).trace != first.trace


def test_trace_does_not_depend_on_the_hash_seed() -> None:
    traces = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        output = subprocess.run(
            [sys.executable, "-m", "tests.sim", "--seed", "11", "--print-trace-hash"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        traces.add(output.strip().splitlines()[-1])
    assert len(traces) == 1, traces
    assert traces == {f"trace {run_seed(11).trace}"}
