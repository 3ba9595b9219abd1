"""This endpoint and an Apache Pulsar standalone side by side, measured with Pulsar's own ``pulsar-perf``.

One run measures both targets, one after the other on the same machine (``--side-by-side``: at the same time, so that
a busy host's load weighs on both alike), with the same client tool
(``pulsar-perf`` from ``org.apache.pulsar:pulsar-testclient``, resolved by ``tests/conformance/pulsar-perf``):
batched and non-batched produce throughput, consume throughput, publish latency p50/p99 at a fixed rate,
transactions per second with 1 and 100 messages per transaction (100: batched and not), the server's CPU time per
message and per transaction in each of those runs (a 100-message transaction also set against the same 100 messages
without one), start-up time to the first accepted connection, and peak RSS. Every pulsar-perf row runs ``--runs``
times (3) per target; the table gives the median and range of each, and the ratio this/Pulsar of the medians
(``--results FILE`` also writes it as Markdown). Needs Java 17+ and Maven (Pulsar and pulsar-perf are
resolved from Maven Central).

Run: ``python bench/compare.py [--seconds 10] [--runs 3] [--results bench/RESULTS.md] [--rows txn100,plain,...]``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.conformance.pulsar_standalone import PulsarStandalone, peak_rss  # noqa: E402
from tests.maven import dependencies  # noqa: E402
from tests.server_process import ServerProcess  # noqa: E402

PERF_DIR = ROOT / "tests" / "conformance" / "pulsar-perf"
PERF_MAIN = "org.apache.pulsar.testclient.PulsarPerfTestTool"
#: Producer runs at an unlimited rate bound the client's queue. pulsar-perf's own default is unbounded (no
#: outstanding limit, no memory limit): against a broker slower than the client's offered rate its JVM fills its heap,
#: thrashes and dies with OutOfMemoryError, and the figure measures its garbage collector, not the broker.
BOUNDED = ("-o", "10000")
LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders><Console name="Console" target="SYSTEM_OUT"><PatternLayout pattern="%msg%n"/></Console></Appenders>
  <Loggers>
    <Root level="warn"><AppenderRef ref="Console"/></Root>
    <Logger name="org.apache.pulsar.testclient" level="info"/>
  </Loggers>
</Configuration>
"""
_THROUGHPUT = re.compile(r"Aggregated throughput stats --- (\d+) records (?:sent|received) --- ([\d.]+) msg/s")
#: pulsar-perf's periodic producer report, one per 10 s of its reporting loop.
_PRODUCED = re.compile(r"Throughput produced:\s*(\d+) msg ---\s*([\d.]+) msg/s")
_LATENCY = re.compile(
    r"Aggregated latency stats --- Latency: mean:\s*([\d.]+) ms - med:\s*([\d.]+) .*?99pct:\s*([\d.]+)"
)


@dataclass
class Row:
    """One figure: its name, unit, and whether higher is better."""

    name: str
    unit: str
    higher_is_better: bool
    values: dict[str, float] = field(default_factory=dict)


def build_perf() -> Path:
    """Resolve pulsar-perf's classpath with Maven unless done."""
    return dependencies(PERF_DIR)


class Perf:
    """Runs pulsar-perf commands against one service URL and parses their aggregated figures."""

    def __init__(self, work: Path, service_url: str) -> None:
        self.lib = build_perf()
        self.service_url = service_url
        self.conf = work / "client.conf"
        self.conf.write_text("")
        self.log4j = work / "perf-log4j2.xml"
        self.log4j.write_text(LOG4J2)
        self.log = work / "pulsar-perf.log"

    def run(self, command: str, topic: str, *args: str, server_cpu: Callable[[], float], timeout: float = 600) -> Run:
        """One pulsar-perf run, with the CPU time the server spent during it."""
        argv = [
            "java", "-Xmx1g", f"-Dlog4j.configurationFile={self.log4j}", "-cp", f"{self.lib}/*", PERF_MAIN,
            str(self.conf), command, "-u", self.service_url, *args, topic,
        ]
        cpu_before = server_cpu()
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        cpu = server_cpu() - cpu_before
        with open(self.log, "a") as log:
            log.write(f"$ {' '.join(argv)}\n{result.stdout}\n{result.stderr}\n")
        # A producer's aggregated rate divides by the time until its 10-second reporting loop wakes after the run:
        # about 20 s for a 10 s run. Its periodic reports each cover 10 s of the run itself, so they are used.
        periodic = _PRODUCED.findall(result.stdout) if command == "produce" else []
        throughput = _THROUGHPUT.findall(result.stdout)
        latency = _LATENCY.findall(result.stdout)
        if not throughput or not latency:
            raise RuntimeError(f"pulsar-perf {command} printed no figures:\n{result.stdout[-3000:]}{result.stderr}")
        rate = sum(float(r) for _, r in periodic) / len(periodic) if periodic else float(throughput[-1][1])
        return Run(rate, float(latency[-1][1]), float(latency[-1][2]), int(throughput[-1][0]), cpu)


@dataclass(frozen=True)
class Run:
    """One pulsar-perf run: its rate, publish latencies, the messages it moved and the server CPU they cost."""

    rate: float
    p50: float
    p99: float
    records: int
    cpu_seconds: float

    def cpu_micros(self, per: int = 1) -> float:
        """Server CPU (user + system) in microseconds per message, or per group of ``per`` messages."""
        return self.cpu_seconds * 1e6 * per / self.records if self.records else float("nan")


#: The pulsar-perf runs a measurement is made of, by name (``--rows`` picks some): (command, arguments after the
#: rate and length). ``consume`` reads what ``batched`` stored, so it needs it. The transaction runs have one producer
#: that commits every N messages; their like-for-like rows without a transaction are ``batched`` and ``plain``
#: (the same producer, rate and size, ``-db`` in both non-batched ones).
RUNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "batched": ("produce", ("-s", "100", *BOUNDED)),
    "plain": ("produce", ("-s", "100", "-db", *BOUNDED)),
    "consume": ("consume", ("-sp", "Earliest", "-ss", "bench")),
    "latency": ("produce", ("-s", "100", "-db")),
    "txn1": ("produce", ("-s", "100", "-txn", "-nmt", "1", "-db", *BOUNDED)),
    "txn100": ("produce", ("-s", "100", "-txn", "-nmt", "100", *BOUNDED)),
    "txn100plain": ("produce", ("-s", "100", "-txn", "-nmt", "100", "-db", *BOUNDED)),
}


def measure(
    perf: Perf, seconds: int, rate: int, server_cpu: Callable[[], float], runs: tuple[str, ...] = tuple(RUNS)
) -> dict[str, float]:
    """The throughput, latency and CPU figures of the named pulsar-perf ``runs`` against one target, one run each."""
    run = uuid.uuid4().hex[:8]
    topic = f"persistent://public/default/bench-{run}"
    secs = str(seconds)
    done: dict[str, Run] = {}
    for name in runs:
        command, args = RUNS[name]
        if name == "consume":
            # Consume what the batched run stored, from the start (the count makes pulsar-perf stop when read).
            stored = int(done["batched"].rate * seconds * 0.9)
            pace = ("-m", str(stored), "-time", str(seconds * 6))
            topic_name = f"{topic}-batched"
        else:
            pace = ("-r", str(rate) if name == "latency" else "1000000", "-time", secs)
            topic_name = f"{topic}-{name}"
        done[name] = perf.run(command, topic_name, *pace, *args, server_cpu=server_cpu)
    figures: dict[str, float] = {}
    if "batched" in done:
        figures |= {
            "produce_batched": done["batched"].rate,
            "cpu_produce_batched": done["batched"].cpu_micros(),
            "cpu_batched100": done["batched"].cpu_micros(per=100),
        }
    if "plain" in done:
        figures |= {
            "produce_unbatched": done["plain"].rate,
            "cpu_produce_unbatched": done["plain"].cpu_micros(),
            "cpu_plain100": done["plain"].cpu_micros(per=100),
        }
    if "consume" in done:
        figures |= {"consume": done["consume"].rate, "cpu_consume": done["consume"].cpu_micros()}
    if "latency" in done:
        fixed = done["latency"]
        figures |= {"latency_p50": fixed.p50, "latency_p99": fixed.p99, "cpu_fixed_rate": fixed.cpu_micros()}
    if "txn1" in done:
        figures |= {"txn1": done["txn1"].rate, "cpu_txn1": done["txn1"].cpu_micros(per=1)}
    if "txn100" in done:
        figures |= {"txn100": done["txn100"].rate / 100, "cpu_txn100": done["txn100"].cpu_micros(per=100)}
    if "txn100plain" in done:
        figures |= {
            "txn100_plain": done["txn100plain"].rate / 100,
            "cpu_txn100_plain": done["txn100plain"].cpu_micros(per=100),
        }
    return figures


@dataclass
class UnderTest:
    """A target being measured: its URL, start-up time, and ways to read its peak RSS and its CPU time so far."""

    name: str
    service_url: str
    startup_seconds: float
    #: Process start to the first CONNECTED answer (the server can serve a client).
    answer_seconds: float
    peak_rss: Callable[[], int]
    #: User + system CPU seconds the server process has used since it started.
    cpu_seconds: Callable[[], float]


def process_cpu(pid: int) -> Callable[[], float]:
    """User + system CPU seconds of one process (the JVM's threads or the endpoint's, all of them)."""
    process = psutil.Process(pid)

    def read() -> float:
        times = process.cpu_times()
        return times.user + times.system

    return read


@contextmanager
def endpoint_target(work: Path, checkout: Path | None = None, name: str = "") -> Iterator[UnderTest]:
    """This endpoint, from this checkout or from ``checkout`` (another one, run by its own virtualenv)."""
    launcher = None
    if checkout is not None:
        # -c puts the working directory first on sys.path: the other checkout goes before it.
        boot = (
            f"import runpy, sys; sys.path.insert(0, {str(checkout)!r}); runpy.run_module('proxy', run_name='__main__')"
        )
        launcher = [str(checkout / ".venv" / "bin" / "python"), "-c", boot]

    def server(data: Path) -> ServerProcess:
        process = ServerProcess(data, "--log-level", "WARNING")
        if launcher is not None:
            process.launcher = launcher
        return process.start()

    # Start-up: the best of three fresh starts (the first also pays for cold file caches).
    startups, answers = [], []
    for i in range(3):
        probe = server(work / f"startup-{i}")
        startups.append(probe.startup_seconds)
        answers.append(probe.ready_seconds)
        probe.stop()
    running = server(work / "endpoint")
    pid = running.process.pid
    try:
        yield UnderTest(name or OURS, running.url, min(startups), min(answers), lambda: peak_rss(pid), process_cpu(pid))
    finally:
        running.stop()


@contextmanager
def pulsar_target(work: Path, journal_sync: bool = False) -> Iterator[UnderTest]:
    pulsar = PulsarStandalone(work / "pulsar", journal_sync=journal_sync).start()
    pid = pulsar.process.pid
    try:
        yield UnderTest(PULSAR, pulsar.url, pulsar.first_connection_seconds, pulsar.first_answer_seconds,
                        lambda: peak_rss(pid), process_cpu(pid))
    finally:
        pulsar.stop()


def rows_for(results: dict[str, dict[str, list[float]]], rate: int) -> list[Row]:
    specs = [
        ("produce_batched", "produce throughput, batched, 100 B", "msg/s", True),
        ("produce_unbatched", "produce throughput, non-batched, 100 B", "msg/s", True),
        ("consume", "consume throughput (batched backlog)", "msg/s", True),
        ("latency_p50", f"publish latency p50 at {rate} msg/s, non-batched", "ms", False),
        ("latency_p99", f"publish latency p99 at {rate} msg/s, non-batched", "ms", False),
        ("txn1", "transactions per second, 1 message each", "txn/s", True),
        ("txn100", "transactions per second, 100 messages each", "txn/s", True),
        ("txn100_plain", "transactions per second, 100 messages each, non-batched", "txn/s", True),
        ("cpu_produce_batched", "server CPU per message, batched produce", "µs/msg", False),
        ("cpu_produce_unbatched", "server CPU per message, non-batched produce", "µs/msg", False),
        ("cpu_consume", "server CPU per message, consume", "µs/msg", False),
        ("cpu_fixed_rate", f"server CPU per message at {rate} msg/s, non-batched", "µs/msg", False),
        ("cpu_txn1", "server CPU per transaction, 1 message each", "µs/txn", False),
        ("cpu_txn100", "server CPU per transaction, 100 messages each", "µs/txn", False),
        ("cpu_batched100", "server CPU per 100 messages, batched, no transaction", "µs/100 msg", False),
        ("cpu_txn100_plain", "server CPU per transaction, 100 messages each, non-batched", "µs/txn", False),
        ("cpu_plain100", "server CPU per 100 messages, non-batched, no transaction", "µs/100 msg", False),
        ("startup", "start-up to first accepted connection", "s", False),
        ("answer", "start-up to first CONNECT answered", "s", False),
        ("rss", "peak RSS", "MiB", False),
    ]
    rows = []
    for key, name, unit, higher in specs:
        if not all(key in figures for figures in results.values()):
            continue  # a row of a pulsar-perf run left out (--rows)
        row = Row(name, unit, higher)
        for target, figures in results.items():
            row.values[target] = figures[key]
        rows.append(row)
    return rows


def _figure(value: float) -> str:
    return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"


def _spread(values: list[float]) -> str:
    """The median of a row's runs, with their range when there is more than one."""
    middle = _figure(statistics.median(values))
    return middle if len(values) == 1 else f"{middle} ({_figure(min(values))} to {_figure(max(values))})"


OURS = "this endpoint"
PULSAR = "Pulsar standalone"
PULSAR_FSYNC = "Pulsar, journal fsync"


def render(rows: list[Row], references: list[str]) -> str:
    """A Markdown table: this endpoint, each Pulsar, the ratio this/Pulsar of the medians, and whether this endpoint
    is better or equal than the first Pulsar (the goal) on the row. Each cell is the median of the runs and their
    range."""
    header = f"| figure | unit | {OURS} |"
    rule = "|---|---|---:|"
    for ref in references:
        header += f" {ref} | this/{ref} |"
        rule += "---:|---:|"
    header += " better or equal |"
    rule += ":---:|"
    lines = [header, rule]
    for row in rows:
        ours = statistics.median(row.values[OURS])
        line = f"| {row.name} | {row.unit} | {_spread(row.values[OURS])} |"
        for ref in references:
            theirs = statistics.median(row.values[ref])
            line += f" {_spread(row.values[ref])} | {ours / theirs if theirs else float('inf'):.3g} |"
        first = statistics.median(row.values[references[0]])
        ok = ours >= first if row.higher_is_better else ours <= first
        lines.append(line + f" {'yes' if ok else 'no'} |")
    return "\n".join(lines)


#: The ratios of ``transaction_overhead``: a send mode, its transaction row and its row without a transaction.
OVERHEADS = (("batched", "cpu_txn100", "cpu_batched100"), ("non-batched", "cpu_txn100_plain", "cpu_plain100"))


def transaction_overhead(results: dict[str, dict[str, list[float]]]) -> str:
    """Per send mode and target: the server CPU of a 100-message transaction over that of the same 100 messages
    (same producer, rate, size and batching) without one."""
    lines = []
    for mode, txn, plain in OVERHEADS:
        parts = []
        for target, figures in results.items():
            if txn in figures and plain in figures:
                ratio = statistics.median(figures[txn]) / statistics.median(figures[plain])
                parts.append(f"{target} {ratio:.2f}x")
        if parts:
            lines.append(f"Server CPU of a 100-message transaction / the same 100 messages without one, {mode}: "
                         + ", ".join(parts))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10, help="length of each pulsar-perf run")
    parser.add_argument("--rate", type=int, default=1000, help="msg/s of the latency run")
    parser.add_argument("--runs", type=int, default=3, help="runs of every pulsar-perf row per target (median, range)")
    parser.add_argument("--results", type=Path, help="also write the table (Markdown) to this file")
    parser.add_argument("--pulsar-fsync", action="store_true",
                        help="also measure Pulsar with its bookie fsyncing the journal before acknowledging "
                             "(journalSyncData=true), as this endpoint fsyncs before a receipt")
    parser.add_argument("--baseline", type=Path, metavar="CHECKOUT",
                        help="also measure this endpoint from another checkout with its own .venv (e.g. a worktree "
                             "of an earlier commit), for a before/after comparison in one run")
    parser.add_argument("--no-pulsar", action="store_true", help="measure no Pulsar (with --baseline: before/after)")
    parser.add_argument("--rows", default=",".join(RUNS), type=_runs,
                        help=f"the pulsar-perf runs to make, comma-separated (default all: {','.join(RUNS)}); "
                             "consume needs batched")
    parser.add_argument("--side-by-side", action="store_true",
                        help="run every target's rows at the same time (each its own pulsar-perf), so that all see "
                             "the same load on a busy host; throughput then shares the cores, CPU per message does not")
    args = parser.parse_args()
    targets: list[tuple[str, Callable[[Path], AbstractContextManager[UnderTest]]]] = [(OURS, endpoint_target)]
    if not args.no_pulsar:
        targets.append((PULSAR, lambda work: pulsar_target(work / "default", False)))
    if args.pulsar_fsync and not args.no_pulsar:
        targets.append((PULSAR_FSYNC, lambda work: pulsar_target(work / "fsync", True)))
    if args.baseline is not None:
        baseline = args.baseline.resolve()
        rev = subprocess.run(["git", "-C", str(baseline), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        label = f"this endpoint at {rev}"
        targets.append((label, lambda work: endpoint_target(work / "baseline", baseline, label)))
    if len(targets) < 2:
        parser.error("nothing to compare with: give --baseline with --no-pulsar")
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        work = Path(tmp)
        if args.side_by_side:
            results = side_by_side(work, targets, args.runs, args.seconds, args.rate, args.rows)
        for name, target in [] if args.side_by_side else targets:
            print(f"measuring {name} ...", flush=True)
            began = time.monotonic()
            figures: dict[str, list[float]] = {}
            with target(work) as under_test:
                perf = Perf(work, under_test.service_url)
                for run in range(args.runs):
                    for key, value in measure(perf, args.seconds, args.rate, under_test.cpu_seconds,
                                              args.rows).items():
                        figures.setdefault(key, []).append(value)
                    print(f"  run {run + 1} of {args.runs} done at {time.monotonic() - began:.0f} s", flush=True)
                figures["startup"] = [under_test.startup_seconds]
                figures["answer"] = [under_test.answer_seconds]
                figures["rss"] = [under_test.peak_rss() / 2**20]
            results[name] = figures
            print(f"  done in {time.monotonic() - began:.0f} s: {figures}", flush=True)
    table = render(rows_for(results, args.rate), [name for name, _ in targets[1:]])
    overhead = transaction_overhead(results)
    print(table)
    print(overhead)
    if args.results:
        command = "python bench/compare.py " + " ".join(sys.argv[1:])
        order = "all targets at the same time" if args.side_by_side else "one target after the other"
        args.results.write_text(results_markdown(table, overhead, command.strip(), args.seconds, args.runs, order))


def _runs(text: str) -> tuple[str, ...]:
    """``--rows``: known run names, in the order measure() needs them (batched before consume)."""
    names = {name.strip() for name in text.split(",") if name.strip()}
    unknown = names - set(RUNS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown runs {sorted(unknown)}; known: {', '.join(RUNS)}")
    if "consume" in names and "batched" not in names:
        raise argparse.ArgumentTypeError("consume reads what batched stored: give batched too")
    return tuple(name for name in RUNS if name in names)


def side_by_side(
    work: Path,
    targets: list[tuple[str, Callable[[Path], AbstractContextManager[UnderTest]]]],
    runs: int,
    seconds: int,
    rate: int,
    rows: tuple[str, ...] = tuple(RUNS),
) -> dict[str, dict[str, list[float]]]:
    """Every target started, then each run's rows measured on all of them at the same time (one thread and one
    pulsar-perf per target): a load that comes and goes on the host then weighs on every target alike."""
    results: dict[str, dict[str, list[float]]] = {name: {} for name, _ in targets}
    with ExitStack() as stack:
        running = [(name, stack.enter_context(target(work))) for name, target in targets]
        perfs = {}
        for name, under_test in running:
            (work / f"perf-{len(perfs)}").mkdir()
            perfs[name] = Perf(work / f"perf-{len(perfs)}", under_test.service_url)
        began = time.monotonic()
        for run in range(runs):
            with ThreadPoolExecutor(len(running)) as pool:
                futures = {
                    name: pool.submit(measure, perfs[name], seconds, rate, under_test.cpu_seconds, rows)
                    for name, under_test in running
                }
            measured = {name: future.result() for name, future in futures.items()}
            for name, figures in measured.items():
                for key, value in figures.items():
                    results[name].setdefault(key, []).append(value)
            print(f"  run {run + 1} of {runs} done at {time.monotonic() - began:.0f} s", flush=True)
        for name, under_test in running:
            results[name]["startup"] = [under_test.startup_seconds]
            results[name]["answer"] = [under_test.answer_seconds]
            results[name]["rss"] = [under_test.peak_rss() / 2**20]
    return results


def results_markdown(table: str, overhead: str, command: str, seconds: int, runs: int, order: str) -> str:
    return f"""# This endpoint versus Apache Pulsar standalone

Made by `{command}` ({time.strftime("%Y-%m-%d")}), on one machine, {order}.
"better or equal" compares with the Pulsar standalone as it ships (first Pulsar column).

{table}

{overhead}

How it was measured:

- Each pulsar-perf row runs {runs} times per target ({order}, the same server process for all
  its runs); a cell is the median and, in brackets, the range of its runs; the ratio compares medians.
- Server CPU: user + system CPU time of the server process (the endpoint's Python process; the standalone's one
  JVM, broker and bookie together) during the row's pulsar-perf run, divided by the messages the run moved (or the
  transactions it committed). pulsar-perf's own JVM is not counted. This figure varies far less with a busy host
  than throughput does: it counts the work the server did, not how fast it got the cores.

- Client: Pulsar's own `pulsar-perf` (`org.apache.pulsar:pulsar-testclient` 4.0.8, the newest published; it runs
  on the 4.2.4 client libraries), the same for every target, {seconds} s per run, 100-byte messages; throughput rows
  use an unlimited rate with at most 10,000 messages outstanding per producer (`-o 10000`: pulsar-perf's default
  queue is unbounded and its JVM runs out of heap against a broker slower than it offers), the latency rows a
  fixed rate with batching off. Transactions: `pulsar-perf produce -txn
  -nmt N` (one producer; a transaction commits every N messages; `-db` for the non-batched row),
  transactions/s = msg/s / N; each is set against the batched or non-batched row without a transaction. Producer rates
  are the mean of pulsar-perf's 10-second reports: its final "aggregated" producer rate divides by the time
  until its reporting loop next wakes, about 20 s for a 10 s run.
- Consume: a fresh subscription reads the batched run's backlog from the start.
- Start-up: process start to the first accepted TCP connection on the Pulsar port, and to the first CONNECT
  answered with CONNECTED on it (this endpoint: best of 3 fresh starts; Pulsar: the standalone of this run).
  This endpoint binds its port before it imports Twisted and the engine and opens the store, so connections made
  while it starts wait in the kernel's backlog instead of being refused; Pulsar opens its port once its broker
  service is up, so for Pulsar the two rows are nearly the same.
- Peak RSS: `VmHWM` of the server process after all runs.
- This endpoint: `pulsar-txn-proxy serve` defaults (SQLite, `synchronous=FULL`: every receipt waits for an
  fsync). Pulsar 4.2.4 standalone from `tests/conformance/pulsar_standalone.py`: transactions on, one bookie,
  RocksDB metadata, `-Xms256m -Xmx1g -XX:MaxDirectMemorySize=1g`; as shipped its bookie acknowledges writes
  before they reach the disk (`journalSyncData=false`); the "journal fsync" column sets `journalSyncData=true`.
- The machine has 2 cores, shared with other work while this ran: figures are noisy, and the client and the
  server compete for the same cores.
"""


if __name__ == "__main__":
    main()
