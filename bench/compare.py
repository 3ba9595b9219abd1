"""This endpoint and an Apache Pulsar standalone side by side, measured with Pulsar's own ``pulsar-perf``.

One run measures both targets, one after the other on the same machine, with the same client tool
(``pulsar-perf`` from ``org.apache.pulsar:pulsar-testclient``, resolved by ``tests/conformance/pulsar-perf``):
batched and non-batched produce throughput, consume throughput, publish latency p50/p99 at a fixed rate,
transactions per second with 1 and 100 messages per transaction, start-up time to the first accepted
connection, and peak RSS. It prints a table with the ratio this/Pulsar of each figure (``--results FILE`` also
writes it as Markdown). Needs Java 17+ and Maven (Pulsar and pulsar-perf are resolved from Maven Central).

Run: ``python bench/compare.py [--seconds 10] [--results bench/RESULTS.md]``; ``--service-url/--admin-url`` (and
``--pid``) measure a running broker instead of starting a Pulsar standalone.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

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

    def run(self, command: str, topic: str, *args: str, timeout: float = 600) -> tuple[float, float, float]:
        """(msg/s, latency median ms, latency p99 ms) of one pulsar-perf run."""
        argv = [
            "java", "-Xmx1g", f"-Dlog4j.configurationFile={self.log4j}", "-cp", f"{self.lib}/*", PERF_MAIN,
            str(self.conf), command, "-u", self.service_url, *args, topic,
        ]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        with open(self.log, "a") as log:
            log.write(f"$ {' '.join(argv)}\n{result.stdout}\n{result.stderr}\n")
        # A producer's aggregated rate divides by the time until its 10-second reporting loop wakes after the run:
        # about 20 s for a 10 s run. Its periodic reports each cover 10 s of the run itself, so they are used.
        periodic = _PRODUCED.findall(result.stdout) if command == "produce" else []
        throughput = _THROUGHPUT.findall(result.stdout)
        latency = _LATENCY.findall(result.stdout)
        if not (periodic or throughput) or not latency:
            raise RuntimeError(f"pulsar-perf {command} printed no figures:\n{result.stdout[-3000:]}{result.stderr}")
        rate = sum(float(r) for _, r in periodic) / len(periodic) if periodic else float(throughput[-1][1])
        return rate, float(latency[-1][1]), float(latency[-1][2])


def measure(perf: Perf, seconds: int, rate: int) -> dict[str, float]:
    """Every throughput and latency figure against one target."""
    run = uuid.uuid4().hex[:8]
    topic = f"persistent://public/default/bench-{run}"
    secs = str(seconds)
    out: dict[str, float] = {}
    out["produce_batched"], _, _ = perf.run(
        "produce", f"{topic}-batched", "-r", "1000000", "-time", secs, "-s", "100", *BOUNDED
    )
    out["produce_unbatched"], _, _ = perf.run(
        "produce", f"{topic}-plain", "-r", "1000000", "-time", secs, "-s", "100", "-db", *BOUNDED
    )
    # Consume what the batched run stored, from the start (the count makes pulsar-perf stop when it is read).
    stored = int(out["produce_batched"] * seconds * 0.9)
    out["consume"], _, _ = perf.run("consume", f"{topic}-batched", "-sp", "Earliest", "-ss", "bench", "-m",
                                    str(stored), "-time", str(seconds * 6))
    _, out["latency_p50"], out["latency_p99"] = perf.run(
        "produce", f"{topic}-latency", "-r", str(rate), "-time", secs, "-s", "100", "-db"
    )
    txn1, _, _ = perf.run("produce", f"{topic}-txn1", "-r", "1000000", "-time", secs, "-s", "100", "-txn",
                          "-nmt", "1", "-db", *BOUNDED)
    txn100, _, _ = perf.run("produce", f"{topic}-txn100", "-r", "1000000", "-time", secs, "-s", "100", "-txn",
                            "-nmt", "100", *BOUNDED)
    out["txn1"], out["txn100"] = txn1, txn100 / 100
    return out


@dataclass
class UnderTest:
    """A target being measured: its URL, start-up time, and a way to read its peak RSS."""

    name: str
    service_url: str
    startup_seconds: float
    #: Process start to the first CONNECTED answer (the server can serve a client).
    answer_seconds: float
    peak_rss: Callable[[], int]


@contextmanager
def endpoint_target(work: Path) -> Iterator[UnderTest]:
    # Start-up: the best of three fresh starts (the first also pays for cold file caches).
    startups, answers = [], []
    for i in range(3):
        probe = ServerProcess(work / f"startup-{i}", "--log-level", "WARNING").start()
        startups.append(probe.startup_seconds)
        answers.append(probe.ready_seconds)
        probe.stop()
    server = ServerProcess(work / "endpoint", "--log-level", "WARNING").start()
    try:
        yield UnderTest(
            "this endpoint", server.url, min(startups), min(answers), lambda: peak_rss(server.process.pid)
        )
    finally:
        server.stop()


@contextmanager
def pulsar_target(work: Path, journal_sync: bool = False) -> Iterator[UnderTest]:
    pulsar = PulsarStandalone(work / "pulsar", journal_sync=journal_sync).start()
    try:
        yield UnderTest("Pulsar standalone", pulsar.url, pulsar.first_connection_seconds,
                        pulsar.first_answer_seconds, lambda: peak_rss(pulsar.process.pid))
    finally:
        pulsar.stop()


def rows_for(results: dict[str, dict[str, float]], rate: int) -> list[Row]:
    specs = [
        ("produce_batched", "produce throughput, batched, 100 B", "msg/s", True),
        ("produce_unbatched", "produce throughput, non-batched, 100 B", "msg/s", True),
        ("consume", "consume throughput (batched backlog)", "msg/s", True),
        ("latency_p50", f"publish latency p50 at {rate} msg/s, non-batched", "ms", False),
        ("latency_p99", f"publish latency p99 at {rate} msg/s, non-batched", "ms", False),
        ("txn1", "transactions per second, 1 message each", "txn/s", True),
        ("txn100", "transactions per second, 100 messages each", "txn/s", True),
        ("startup", "start-up to first accepted connection", "s", False),
        ("answer", "start-up to first CONNECT answered", "s", False),
        ("rss", "peak RSS", "MiB", False),
    ]
    rows = []
    for key, name, unit, higher in specs:
        row = Row(name, unit, higher)
        for target, figures in results.items():
            row.values[target] = figures[key]
        rows.append(row)
    return rows


def _figure(value: float) -> str:
    return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"


OURS = "this endpoint"
PULSAR = "Pulsar standalone"
PULSAR_FSYNC = "Pulsar, journal fsync"


def render(rows: list[Row], references: list[str]) -> str:
    """A Markdown table: this endpoint, each Pulsar, the ratio this/Pulsar, and whether this endpoint is better or
    equal than the first Pulsar (the goal) on the row."""
    header = f"| figure | unit | {OURS} |"
    rule = "|---|---|---:|"
    for ref in references:
        header += f" {ref} | this/{ref} |"
        rule += "---:|---:|"
    header += " better or equal |"
    rule += ":---:|"
    lines = [header, rule]
    for row in rows:
        ours = row.values[OURS]
        line = f"| {row.name} | {row.unit} | {_figure(ours)} |"
        for ref in references:
            theirs = row.values[ref]
            line += f" {_figure(theirs)} | {ours / theirs if theirs else float('inf'):.3g} |"
        first = row.values[references[0]]
        ok = ours >= first if row.higher_is_better else ours <= first
        lines.append(line + f" {'yes' if ok else 'no'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10, help="length of each pulsar-perf run")
    parser.add_argument("--rate", type=int, default=1000, help="msg/s of the latency run")
    parser.add_argument("--results", type=Path, help="also write the table (Markdown) to this file")
    parser.add_argument("--pulsar-fsync", action="store_true",
                        help="also measure Pulsar with its bookie fsyncing the journal before acknowledging "
                             "(journalSyncData=true), as this endpoint fsyncs before a receipt")
    args = parser.parse_args()
    targets: list[tuple[str, Callable[[Path], AbstractContextManager[UnderTest]]]] = [
        (OURS, endpoint_target),
        (PULSAR, lambda work: pulsar_target(work / "default", False)),
    ]
    if args.pulsar_fsync:
        targets.append((PULSAR_FSYNC, lambda work: pulsar_target(work / "fsync", True)))
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        work = Path(tmp)
        for name, target in targets:
            print(f"measuring {name} ...", flush=True)
            began = time.monotonic()
            with target(work) as under_test:
                figures = measure(Perf(work, under_test.service_url), args.seconds, args.rate)
                figures["startup"] = under_test.startup_seconds
                figures["answer"] = under_test.answer_seconds
                figures["rss"] = under_test.peak_rss() / 2**20
            results[name] = figures
            print(f"  done in {time.monotonic() - began:.0f} s: {figures}", flush=True)
    table = render(rows_for(results, args.rate), [name for name, _ in targets[1:]])
    print(table)
    if args.results:
        command = "python bench/compare.py " + " ".join(sys.argv[1:])
        args.results.write_text(results_markdown(table, command.strip(), args.seconds))


def results_markdown(table: str, command: str, seconds: int) -> str:
    return f"""# This endpoint versus Apache Pulsar standalone

Made by `{command}` ({time.strftime("%Y-%m-%d")}), on one machine, one target
after the other. "better or equal" compares with the Pulsar standalone as it ships (first Pulsar column).

{table}

How it was measured:

- Client: Pulsar's own `pulsar-perf` (`org.apache.pulsar:pulsar-testclient` 4.0.8, the newest published; it runs
  on the 4.2.4 client libraries), the same for every target, {seconds} s per run, 100-byte messages; throughput rows
  use an unlimited rate with at most 10,000 messages outstanding per producer (`-o 10000`: pulsar-perf's default
  queue is unbounded and its JVM runs out of heap against a broker slower than it offers), the latency rows a
  fixed rate with batching off. Transactions: `pulsar-perf produce -txn
  -nmt N` (one producer; a transaction commits every N messages), transactions/s = msg/s / N. Producer rates
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
