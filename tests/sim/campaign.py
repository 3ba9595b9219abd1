"""Run seeds: one (``--seed``) or a campaign (``--seeds N --first-seed S``), on every core, shrinking failures.

python -m tests.sim --seeds 1000 --first-seed 1        # ends with "N scenarios, F failed, R scenarios/min"
python -m tests.sim --seed 42 --print-trace-hash       # the options, the checks, "trace <hex>"
python -m tests.sim --list-mutations
python -m tests.sim --seeds 2000 --mutation skip-sequence-store
python -m tests.sim --seed 42 --set messages=10 --set "crashes=[(3.5, 'now')]"   # a shrunk replay
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import gc
import multiprocessing
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.sim.mutations import MUTATIONS, injected
from tests.sim.scenario import Options, Scenario
from tests.sim.world import EVENT_BUDGET

#: Runs a shrink may take at most.
SHRINK_BUDGET = 80
#: The options a shrink tries turning off, one at a time.
SWITCHED_OFF = (
    "abort_rate",
    "stall_rate",
    "nack_rate",
    "short_reads",
    "stalls",
    "jitter",
    "leave_at",
    "end_crash",
    "think_spell",
)
#: The counters a campaign reports, each of which 1,000 seeds should see at least once.
EXPECTED = (
    "crash with a commit in flight",
    "crash between a write and its callbacks",
    "END_TXN while the disk is full",
    "transaction timed out",
    "deduplicated resend",
    "redelivery after a restart",
    "crash as a transaction open while the disk was full ends",
)


@dataclass
class Result:
    seed: int
    failures: list[str]
    trace: str
    counters: Counter[str] = field(default_factory=Counter)
    events: int = 0
    sim_seconds: float = 0.0
    partitions: int = 0
    coordinators: int = 0
    #: Whether the run stopped at its budget of events (:data:`tests.sim.world.EVENT_BUDGET`).
    runaway: bool = False

    def shape(self) -> dict[str, float]:
        """What makes the scenario big enough: each is at least its :data:`MINIMUM` in every scenario."""
        return {
            "partitions": self.partitions,
            "coordinators": self.coordinators,
            "crashes": self.counters.get("crash", 0),
            "messages stored": self.counters.get("messages stored", 0),
            "simulated seconds": self.sim_seconds,
        }


#: What every scenario has at least (see :meth:`Result.shape`); a campaign prints the fewest it saw of each.
MINIMUM = {"partitions": 3, "coordinators": 2, "crashes": 1, "messages stored": 100, "simulated seconds": 120.0}


def run_options(options: Options, mutation: str | None = None, log: bool = False, trace: bool = True) -> Result:
    """One run of ``options`` (with ``mutation`` injected); ``trace=False``: without its trace hash ("").

    The cyclic garbage collector is off during the run (its passes over the run's many live objects cost about a
    tenth of the time) and collects once after it. What survives that collection (modules, caches: not the run's
    objects, which are gone) is frozen, so that the next collection looks at the next run's objects only: a full
    collection over every imported module cost about a seventh of the time of a run.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        with injected(mutation):
            world = Scenario(options, log=log, trace=trace).run()
        result = Result(
            options.seed,
            world.failures,
            world.trace_hash(),
            world.counters,
            world.sched.events,
            world.sched.now,
            options.partitions,
            options.coordinators,
            world.sched.runaway is not None,
        )
        # Collected before the collector is on again: once on, the next allocation would start a collection of
        # everything the run allocated (all of it young), and this one would look at all of it again.
        del world
        gc.collect()
        gc.freeze()
    finally:
        if collecting:
            gc.enable()
    return result


def run_seed(
    seed: int,
    mutation: str | None = None,
    overrides: dict[str, Any] | None = None,
    later_faults: bool = True,
    trace: bool = True,
) -> Result:
    options = Options.from_seed(seed, later_faults)
    if overrides:
        options = options.replace(**overrides)
    return run_options(options, mutation, trace=trace)


def _run_seed_job(job: tuple[int, str | None]) -> Result:
    """A campaign's run of a seed: its trace is not hashed (nothing compares it)."""
    return run_seed(*job, trace=False)


def shrink(options: Options, mutation: str | None) -> tuple[Options, Result]:
    """A smaller set of options that still fails: fewer faults, fewer messages, fewer random perturbations."""
    best = options
    result = run_options(best, mutation, trace=False)
    budget = [SHRINK_BUDGET]

    def fails(candidate: Options) -> Result | None:
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        attempt = run_options(candidate, mutation, trace=False)
        return attempt if attempt.failures else None

    for name in ("resets", "disk_full", "crashes"):
        index = 0
        while index < len(getattr(best, name)):
            items = list(getattr(best, name))
            del items[index]
            attempt = fails(best.replace(**{name: items}))
            if attempt is not None:
                best, result = best.replace(**{name: items}), attempt
            else:
                index += 1
    for name, floor in (("messages", 1), ("txn_batches", 0), ("workers", 1), ("batch", 1), ("partitions", 3)):
        while getattr(best, name) > floor:
            smaller = max(floor, getattr(best, name) // 2)
            candidate = best.replace(**{name: smaller})
            if name == "workers" and smaller == 1 and best.ctp_sub in ("Failover", "Key_Shared"):
                candidate = candidate.replace(ctp_sub="Shared")
            attempt = fails(candidate)
            if attempt is None:
                break
            best, result = candidate, attempt
    for name in SWITCHED_OFF:
        if getattr(best, name):
            off = type(getattr(best, name))()
            attempt = fails(best.replace(**{name: off}))
            if attempt is not None:
                best, result = best.replace(**{name: off}), attempt
    return best, result


def replay_command(options: Options, mutation: str | None) -> str:
    """The command that runs ``options`` again: the seed and whatever differs from what the seed chooses."""
    base = Options.from_seed(options.seed)
    parts = [f"python -m tests.sim --seed {options.seed}"]
    if mutation:
        parts.append(f"--mutation {mutation}")
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        if value != getattr(base, f.name):
            parts.append(f'--set "{f.name}={value!r}"')
    return " ".join(parts)


def _parse_overrides(items: list[str]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(Options)}
    for item in items:
        name, _, text = item.partition("=")
        if name not in names:
            raise SystemExit(f"--set: no option {name!r} (options: {', '.join(sorted(names))})")
        overrides[name] = ast.literal_eval(text)
    return overrides


def report_failure(result: Result, mutation: str | None, do_shrink: bool, out: Any) -> None:
    options = Options.from_seed(result.seed)
    print(f"FAIL seed {result.seed}: {result.failures[0]}", file=out)
    for more in result.failures[1:4]:
        print(f"    also: {more}", file=out)
    print(f"    options: {options.describe()}", file=out)
    print(f"    replay: {replay_command(options, mutation)}", file=out)
    if do_shrink and result.runaway:
        print("    not shrunk: each run of a runaway takes its whole budget of events", file=out)
    elif do_shrink:
        small, small_result = shrink(options, mutation)
        if small != options:
            print(f"    shrunk ({small_result.failures[0]}): {replay_command(small, mutation)}", file=out)
    out.flush()


def campaign(
    first: int, count: int, mutation: str | None, jobs: int, do_shrink: bool, stop_at_first: bool, out: Any
) -> int:
    """Run ``count`` seeds from ``first``; print failures, the counters and the summary line; the failures."""
    started = time.monotonic()
    totals: Counter[str] = Counter()
    failed = 0
    done = 0
    #: The least of each measure of :meth:`Result.shape` over the scenarios, and a scenario that had it.
    fewest: dict[str, tuple[float, int]] = {}
    #: The most events a scenario ran, and that scenario (how far the busiest is from the runaway budget).
    most_events = (0, 0)
    seeds = [(seed, mutation) for seed in range(first, first + count)]
    pool = multiprocessing.get_context("fork").Pool(jobs) if jobs > 1 else None
    results = pool.imap(_run_seed_job, seeds, chunksize=4) if pool else map(_run_seed_job, seeds)
    try:
        for result in results:
            done += 1
            totals.update(result.counters)
            most_events = max(most_events, (result.events, -result.seed))
            for name, value in result.shape().items():
                if name not in fewest or value < fewest[name][0]:
                    fewest[name] = (value, result.seed)
                    if value < MINIMUM[name]:
                        # Said at once too, as a failure is: a long campaign may be stopped before its summary.
                        print(f"TOO SMALL: seed {result.seed} had {value:g} {name}", file=out, flush=True)
            if result.failures:
                failed += 1
                report_failure(result, mutation, do_shrink and failed <= 3, out)
                if stop_at_first:
                    break
            if done % 1000 == 0:
                rate = done / (time.monotonic() - started) * 60
                print(
                    f"... {done} scenarios (to seed {result.seed}), {failed} failed, {rate:.0f} scenarios/min, "
                    f"at most {most_events[0]:,} events",
                    file=out,
                    flush=True,
                )
    finally:
        if pool is not None:
            pool.terminate()
    elapsed = time.monotonic() - started
    for name in EXPECTED:
        print(f"  {name}: {totals.get(name, 0)}", file=out)
    for name, value in sorted(totals.items()):
        if name not in EXPECTED:
            print(f"  {name}: {value}", file=out)
    if fewest:
        least = ", ".join(f"{name} {value:g} (seed {seed})" for name, (value, seed) in fewest.items())
        print(f"  each scenario had at least: {least}", file=out)
        for name, (value, seed) in fewest.items():
            if value < MINIMUM[name]:
                print(f"  TOO SMALL: seed {seed} had {value:g} {name} (each should have {MINIMUM[name]:g})", file=out)
        events, seed = most_events
        print(f"  the most events a scenario ran: {events:,} (seed {-seed}; the budget is {EVENT_BUDGET:,})", file=out)
    print(f"{done} scenarios, {failed} failed, {done / elapsed * 60:.0f} scenarios/min", file=out, flush=True)
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=100_000, help="seeds a campaign runs (default 100,000)")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--seed", type=int, help="run this seed alone and print what it did")
    parser.add_argument("--print-trace-hash", action="store_true", help="with --seed: print 'trace <hex>'")
    parser.add_argument("--list-mutations", action="store_true", help="the mutation names, one a line")
    parser.add_argument("--mutation", help="run with this defect put back (see --list-mutations)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override an option")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: one per core)")
    parser.add_argument("--no-shrink", action="store_true", help="do not shrink failures")
    parser.add_argument("--stop", action="store_true", help="stop at the first failure")
    parser.add_argument("--log", action="store_true", help="with --seed: show the server's log")
    args = parser.parse_args(argv)
    if args.list_mutations:
        for name in MUTATIONS:
            print(name)
        return 0
    if args.mutation and args.mutation not in MUTATIONS:
        parser.error(f"unknown mutation {args.mutation!r}; --list-mutations lists them")
    if args.seed is not None:
        overrides = _parse_overrides(args.set)
        options = Options.from_seed(args.seed).replace(**overrides)
        print(f"options: {options.describe()}")
        if args.mutation:
            print(f"mutation: {args.mutation}: {MUTATIONS[args.mutation][0]}")
        result = run_options(options, args.mutation, log=args.log)
        print(f"{result.events} events, {result.sim_seconds:.1f} simulated seconds")
        for name, value in sorted(result.counters.items()):
            print(f"  {name}: {value}")
        for failure in result.failures:
            print(f"FAIL: {failure}")
        if result.failures:
            print(f"replay: {replay_command(options, args.mutation)}")
            if not args.no_shrink and not result.runaway:
                small, small_result = shrink(options, args.mutation)
                if small != options:
                    print(f"shrunk ({small_result.failures[0]}): {replay_command(small, args.mutation)}")
        if args.print_trace_hash:
            print(f"trace {result.trace}")
        return 1 if result.failures else 0
    failed = campaign(
        args.first_seed, args.seeds, args.mutation, max(1, args.jobs), not args.no_shrink, args.stop, sys.stdout
    )
    return 1 if failed else 0
