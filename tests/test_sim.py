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
#: A seed that each mutation fails (found by ``python -m tests.sim --mutation NAME --stop``), with the options seeds
#: choose today.
CAUGHT_BY = {
    "receipt-before-durable": 1,
    "skip-sequence-store": 23,
    "read-past-open-txn": 1,
    "split-commit-marker": 1,
    "lost-partition-registration": 5,
    "txn-success-after-failed-commit": 13,
    "acks-lost-by-failed-commit": 3,
    "earliest-skips-staged": 2,
    "txn-ids-reserved-before-stored": 1,
    "end-applied-before-durable": 8,
    "sequences-stored-by-earlier-commit": 182,
    "producers-kept-after-lost-write": 38,
    "lost-txn-buffer-snapshot": 49,
    "lost-coordinator-log-record": 39,
    "txn-ack-lost-after-consumer-left": 6,
}
#: Seeds that found defects in the server, and the defect (each fixed; the seed fails with it put back, with the options
#: it chose then: the faults of ``Options.with_later_faults`` came later). Where a server change altered the traces so
#: that the finding seed no longer meets the defect, the first seed that does (with those options) stands for it.
REGRESSIONS = {
    2: "earliest-skips-staged",
    # END_TXN's commit fails (a full disk): the transaction was ended in memory all the same (its messages
    # dispatched, its acknowledgements applied and written again by the retry of the cursors) while the store kept
    # it open, so a restart aborted it. Found by seed 46; 32, 38, 39, 47, 93, 94 and ``FIXED_SEEDS`` found it too
    # (16 stood for it until the simulated workers' nacks changed the traces, see 184369 below).
    32: "end-applied-before-durable",
    # A commit failed after a commit in flight before it succeeded: that one took the sequence ids staged for the
    # failed one as stored, and a producer's resend was answered as a duplicate of a message that was never stored.
    # Found by seed 1917.
    21: "sequences-stored-by-earlier-commit",
    # A SEND stalled on the network reached its topic after the commit of the producer's earlier message failed, was
    # stored, and the resend of the earlier one was answered as a duplicate (topics now disconnect their producers
    # after a lost write, as Pulsar's do). Found by seed 495.
    38: "producers-kept-after-lost-write",
    # A worker's transactional ACK was held while its commit was in flight; the worker's connection was lost, so its
    # consumer left without giving the entry back (it was held); then the commit failed (a full disk) and the entry,
    # held no more, belonged to nobody: never delivered again until a restart (found by seed 4831 of the campaign; 689
    # stands for it since the simulated workers' nacks changed the traces, see 184369 below).
    689: "txn-ack-lost-after-consumer-left",
}
#: Other seeds that failed before their defects were fixed; they pass. 64: the disk filled while a coordinator
#: reserved its next block of ids, answered at once and handed out again after the restart. 109, 132, 1785, 1885:
#: the END_TXN and deduplication defects above. 180: a transaction-buffer snapshot lost with its commit counted as
#: taken, so recovery replayed nothing and delivered an aborted transaction. 348: log records of an open transaction
#: lost by a failed commit, so after a restart its stored acknowledgements were held forever. 184369 (a defect of the
#: simulated client, not the server): a worker that nacked the inputs of a transaction that did not commit kept the
#: copy the server had delivered again meanwhile, so two workers held the same inputs, their transactional acks
#: conflicted, both aborted and nacked again, and the scenario ran away (livelock).
FIXED_SEEDS = (64, 109, 132, 180, 348, 1785, 1885, 184369)


def test_seeds_pass_and_see_every_fault() -> None:
    import multiprocessing

    # Spawned, not forked: a pytest-xdist worker has threads, and a child forked while one of them holds a lock
    # waits for it forever.
    with multiprocessing.get_context("spawn").Pool(min(2, os.cpu_count() or 1)) as pool:
        results = pool.map(_run_seed_job, [(seed, None) for seed in SEEDS], chunksize=4)
    failures = {r.seed: r.failures for r in results if r.failures}
    assert not failures, failures
    totals: Counter[str] = Counter()
    for result in results:
        totals.update(result.counters)
    for name in EXPECTED:
        assert totals[name] > 0, (name, totals)


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutation_is_caught(name: str) -> None:
    seed = CAUGHT_BY[name]
    assert run_seed(seed, name).failures
    assert not run_seed(seed).failures


@pytest.mark.parametrize("seed", sorted(REGRESSIONS))
def test_regression_seed(seed: int) -> None:
    # With the options the seed chose when it found the defect (before the later faults were added), and with today's.
    assert not run_seed(seed, later_faults=False).failures
    assert run_seed(seed, REGRESSIONS[seed], later_faults=False).failures
    assert not run_seed(seed).failures


@pytest.mark.parametrize("seed", FIXED_SEEDS)
def test_fixed_seed(seed: int) -> None:
    assert not run_seed(seed, later_faults=False).failures
    assert not run_seed(seed).failures


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


def test_a_seed_run_after_others_in_one_process_gives_its_fresh_trace() -> None:
    """Nothing of a scenario outlives it in the process (module state, class attributes, patches of a mutation)."""
    fresh = (
        subprocess.run(
            [sys.executable, "-m", "tests.sim", "--seed", "5", "--print-trace-hash"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    run_seed(3)
    run_seed(46, "end-applied-before-durable")
    run_seed(1917, "sequences-stored-by-earlier-commit")
    run_seed(180)
    assert f"trace {run_seed(5).trace}" == fresh


def test_a_scenario_that_loops_stops_at_its_budget_with_a_runaway_verdict() -> None:
    """With ``producers-kept-after-lost-write`` put back, seed 47's worker keeps its connection after each failed
    transaction and opens the next at once while the disk is full; every failed commit writes again the records of
    all the transactions left open, so the run grew without end (CPU and memory). It stops at the budget."""
    from tests.sim.world import EVENT_BUDGET

    result = run_seed(47, "producers-kept-after-lost-write")
    assert result.runaway and result.events == EVENT_BUDGET
    assert result.failures[0].startswith("runaway: 20,000 events"), result.failures
    assert not run_seed(47).failures


def test_the_networks_draws_are_those_of_random() -> None:
    """The simulated network draws its short reads as ``random.Random.randint`` and ``randrange`` would (a faster
    copy): the same numbers from the same generator, or every trace would change."""
    import random

    from tests.sim.world import _below

    for seed in range(50):
        theirs, ours = random.Random(seed), random.Random(seed)
        for size in (2, 3, 5, 64, 1000, 65537):
            assert theirs.randint(1, 3) == _below(ours.getrandbits, 3) + 1
            assert theirs.randrange(1, size) == _below(ours.getrandbits, size - 1) + 1


# Found by the campaign (seed 113185; 103849 too before the scenario waited for its set-up): a SUBSCRIBE that created
# a durable subscription (and its topic) was answered SUCCESS before they were stored; the disk filled before their
# commit and the server crashed before it was written again, so the subscription was gone after the restart and what
# was sent meanwhile was not kept for it. Fixed as Pulsar does: answered once the cursor is stored
# (``Topic.when_stored``; tests/test_failed_commits.py).
def test_a_subscription_answered_is_stored() -> None:
    assert not run_seed(113185).failures
