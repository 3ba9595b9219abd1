"""pulsar_txn's sans-I/O core driving simulated clients against the real server in the deterministic simulator
(``tests/sim/core_runtime.py``, ``tests/sim/core_scenario.py``): consume-transform-produce in transactions, with
aborts, input written plainly and in transactions (some aborted), network faults, connection resets, spells of full
disk and server crashes with restarts from the simulated disk. Every committed output exactly once, nothing of an
aborted transaction delivered, everything consumed once the faults stop; a seed replays exactly.

More seeds: ``SIM_CORE_SEEDS=1-500 .venv/bin/python -m pytest tests/test_sim_core_client.py`` (or
``python -m tests.sim.core_scenario 1 500``).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.sim.core_scenario import CoreScenario

#: Seeds that found a defect, run with the default ones: 135, a worker waiting for ever on the receipts of sends
#: its lost connection had in flight (inputs never transformed: liveness).
FOUND = [135]


def _seeds() -> list[int]:
    first, _, last = os.environ.get("SIM_CORE_SEEDS", "1-8").partition("-")
    return sorted({*range(int(first), int(last or first) + 1), *FOUND})


@pytest.mark.parametrize("seed", _seeds())
def test_transformed_exactly_once_through_faults(seed: int) -> None:
    run = CoreScenario(seed).run()
    assert run.failures == [], f"seed {seed}: replay with python -m tests.sim.core_scenario {seed} {seed}"
    assert run.counters["crash"] >= 1
    assert run.counters["transactions committed"] >= 1
    assert run.sent and {out.split("|")[0] for out in run.audited} >= run.sent


def test_the_workload_meets_aborts_and_faults() -> None:
    """Over the default seeds, what the checks are about happens: transactions aborted by the workers and by the
    transactional source, transactions timed out, connection resets, crashes."""
    totals: dict[str, int] = {}
    for seed in range(1, 9):
        for name, count in CoreScenario(seed).run().counters.items():
            totals[name] = totals.get(name, 0) + count
    assert totals["transactions aborted"] >= 8
    assert totals["source transactions aborted"] >= 2 and totals["source transactions committed"] >= 8
    assert totals["transaction timed out in the client"] >= 4  # a worker stalled past the timeout, then committed
    assert totals["connection reset"] >= 4
    assert totals["crash"] >= 8


def test_a_seed_replays_exactly() -> None:
    """Twice in one process, and in another process with other string hashes (nothing hangs on set order)."""
    first, second = CoreScenario(7).run(), CoreScenario(7).run()
    assert first.outcome() == second.outcome()
    assert first.outcome()[0]  # the trace of every byte exchanged, hashed
    assert CoreScenario(8).run().outcome()[0] != first.outcome()[0]
    code = "from tests.sim.core_scenario import CoreScenario; print(repr(CoreScenario(7).run().outcome()))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert other.stdout.strip() == repr(first.outcome())
