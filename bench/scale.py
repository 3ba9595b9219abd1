"""How the server's cost grows with the work: scale curves of this endpoint, and of a Pulsar standalone with --pulsar.

Each sweep varies one dimension and, at every point, runs a fixed load with Pulsar's own ``pulsar-perf`` while it
reads the server process's CPU time and memory:

- ``topics``: producers on 1 to 10,000 topics at a fixed total rate;
- ``subscriptions``: 1 to 1,000 subscriptions on one topic, each reading what a fixed-rate producer sends;
- ``backlog``: a stored backlog of 10^5 to 10^7 messages read from the start; then a restart, timed to the first
  CONNECT answered (start-up and recovery against the size of the store);
- ``transactions``: 10 to 10^5 open transactions (each with a message on a topic of its own coordinator's choice)
  beside a fixed-rate producer; then a restart, timed (this endpoint only: opening transactions without a client
  library needs the coordinators' lookups, which only this endpoint serves on any connection);
- ``connections``: 10 to 10,000 idle client connections (CONNECT answered, PINGs answered) beside a fixed-rate
  producer;
- ``retention``: the store's disk use after writing 64 MiB to 1 GiB to a subscribed topic, then after the
  subscription read and acknowledged it all, with no retention policy (Pulsar's default: acknowledged ledgers go) and
  ledgers of 1,000 entries (this endpoint only: Pulsar's bookie gives the space of deleted ledgers back only when its
  garbage collection compacts its entry logs, minutes later).

Figures per point: throughput, server CPU per message (user + system of the server process over the point's run,
divided by the messages it moved), publish latency p99 and the server's RSS. ``--full`` adds the large points.
This endpoint starts afresh for every point; ``--pulsar`` starts one standalone for all of Pulsar's points (it
takes a minute of CPU and 1 GiB to start), each point on topics of its own, the namespace unloaded after it.
Tables go to ``bench/SCALE.md`` and plots to ``bench/scale/<sweep>.png``.

Run: ``python bench/scale.py [--full] [--pulsar] [--only topics,backlog]`` (``make bench-scale``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.compare import PERF_MAIN, Perf, process_cpu  # noqa: E402
from tests.conformance.pulsar_standalone import PulsarStandalone  # noqa: E402
from tests.server_process import ServerProcess  # noqa: E402
from wire.commands import frame  # noqa: E402
from wire.framing import FrameDecoder, encode_payload_command, make_body  # noqa: E402
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata  # noqa: E402

#: What the curves mean, written by hand: copied into the results above the tables.
NOTES = ROOT / "bench" / "scale" / "notes.md"
#: The fixed load beside which a dimension grows: messages per second, and seconds per point.
RATE = 2000
SECONDS = 10
OURS = "this endpoint"
PULSAR = "Pulsar standalone"

SWEEPS: dict[str, tuple[list[int], list[int]]] = {
    # name: (default points, points --full adds)
    "topics": ([1, 10, 100, 1000], [10_000]),
    "subscriptions": ([1, 10, 100], [1000]),
    "backlog": ([100_000, 1_000_000], [10_000_000]),
    "transactions": ([10, 100, 1000, 10_000], [100_000]),
    "connections": ([10, 100, 1000], [10_000]),
    "retention": ([64, 256], [1024]),
}
UNITS = {
    "topics": "topics",
    "subscriptions": "subscriptions on one topic",
    "backlog": "messages stored",
    "transactions": "open transactions",
    "connections": "idle connections",
    "retention": "MiB written, read and trimmed",
}


@dataclass
class Point:
    """The figures of one point of a sweep."""

    x: int
    figures: dict[str, float] = field(default_factory=dict)


@dataclass
class Target:
    """A running server: URLs, its process, and a way to restart it (timed to the first CONNECT answered)."""

    name: str
    service_url: str
    admin_url: str
    pid: Callable[[], int]
    data_dir: Path
    restart: Callable[[], float]

    def cpu(self) -> float:
        return process_cpu(self.pid())()

    def rss_mib(self) -> float:
        return psutil.Process(self.pid()).memory_info().rss / 2**20


@contextlib.contextmanager
def endpoint(work: Path, *extra: str) -> Iterator[Target]:
    data = work / f"endpoint-{uuid.uuid4().hex[:6]}"
    server = ServerProcess(data, "--log-level", "WARNING", *extra).start(timeout=120)

    def restart() -> float:
        server.stop(timeout=120)
        server.start(timeout=600)
        return server.ready_seconds

    try:
        yield Target(OURS, server.url, server.admin_url, lambda: server.process.pid, data, restart)
    finally:
        server.stop(timeout=120)


class SharedPulsar:
    """One Pulsar standalone for every Pulsar point of a run (it takes a minute of CPU and 1 GiB to start): started at
    its first point, stopped at the end. Each point uses topics of its own, and at its end the namespace is unloaded,
    so that no point's topics stay loaded for the next (its RSS still carries the JVM's heap from the points before).
    """

    def __init__(self, work: Path) -> None:
        self.work = work
        self.standalone: PulsarStandalone | None = None

    @contextlib.contextmanager
    def point(self) -> Iterator[Target]:
        if self.standalone is None:
            self.standalone = PulsarStandalone(self.work / "pulsar").start()
        standalone = self.standalone

        def restart() -> float:
            began = time.monotonic()
            standalone.restart()
            return time.monotonic() - began

        try:
            yield Target(PULSAR, standalone.url, standalone.admin_url, lambda: standalone.process.pid,
                         standalone.data_dir, restart)
        finally:
            request = urllib.request.Request(f"{standalone.admin_url}/admin/v2/namespaces/public/default/unload",
                                             method="PUT")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(request, timeout=300).close()

    def stop(self) -> None:
        if self.standalone is not None:
            self.standalone.stop()
            self.standalone = None


def disk_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


class Load:
    """pulsar-perf runs against one target, each measured for the server's CPU."""

    def __init__(self, work: Path, target: Target) -> None:
        self.perf = Perf(work, target.service_url)
        self.target = target
        self.work = work

    def produce(self, topic: str, *args: str) -> dict[str, float]:
        run = self.perf.run("produce", topic, *args, server_cpu=self.target.cpu, timeout=3600)
        # A fixed-length run's rate is what it sent over its length (pulsar-perf's 10-second reports of a loaded
        # machine can miss the first seconds).
        rate = run.records / int(args[args.index("-time") + 1]) if "-time" in args else run.rate
        return {"throughput": rate, "cpu_us": run.cpu_micros(), "p99_ms": run.p99, "records": run.records,
                "cpu_s": run.cpu_seconds}

    def background(self, command: str, topic: str, *args: str) -> subprocess.Popen[str]:
        """A pulsar-perf command running while something else is measured (its output parsed at the end)."""
        argv = ["java", "-Xmx1g", f"-Dlog4j.configurationFile={self.perf.log4j}", "-cp", f"{self.perf.lib}/*",
                PERF_MAIN, str(self.perf.conf), command, "-u", self.target.service_url, *args, topic]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _received(output: str) -> int:
    """Messages a pulsar-perf consume run says it received in all."""
    for line in reversed(output.splitlines()):
        if "Aggregated throughput stats" in line and "records received" in line:
            return int(line.split("---")[1].split()[0])
    raise RuntimeError(f"pulsar-perf consume printed no total:\n{output[-3000:]}")


def _topic(prefix: str) -> str:
    return f"persistent://public/default/scale-{prefix}-{uuid.uuid4().hex[:8]}"


# -- the sweeps ----------------------------------------------------------------------------------------------------


def sweep_topics(load: Load, n: int) -> dict[str, float]:
    return load.produce(_topic("topics"), "-t", str(n), "-r", str(RATE), "-time", str(SECONDS), "-s", "100",
                        "-o", "10000")


def sweep_subscriptions(load: Load, n: int) -> dict[str, float]:
    topic = _topic("subs")
    consumer = load.background("consume", topic, "-ns", str(n), "-ss", "sub", "-time", str(SECONDS + 30),
                               "-m", str(RATE * SECONDS * n))
    time.sleep(5 + n / 100)  # the subscriptions are made before the producer starts
    figures = load.produce(topic, "-r", str(RATE), "-time", str(SECONDS), "-s", "100", "-o", "10000")
    output, _ = consumer.communicate(timeout=SECONDS + 120)
    delivered = _received(output)
    # The producer's run saw the CPU of dispatching to every subscription too: per message delivered.
    figures["delivered"] = delivered
    figures["cpu_us_per_delivery"] = figures["cpu_s"] * 1e6 / max(delivered, 1)
    return figures


def sweep_backlog(load: Load, n: int) -> dict[str, float]:
    topic = _topic("backlog")
    # A subscription made first, so the backlog is kept; then the backlog written as fast as it goes.
    subprocess.run(_consume_argv(load, topic, "-ss", "sub", "-m", "1", "-time", "5"), capture_output=True,
                   check=False)
    load.produce(topic, "-m", str(n), "-r", "1000000", "-s", "100", "-o", "10000")
    store = disk_mib(load.target.data_dir)
    restart = load.target.restart()
    run = load.perf.run("consume", topic, "-ss", "sub", "-m", str(n), "-time", "3600",
                        server_cpu=load.target.cpu, timeout=7200)
    return {"throughput": run.rate, "cpu_us": run.cpu_micros(), "p99_ms": float("nan"), "store_mib": store,
            "restart_s": restart}


def _consume_argv(load: Load, topic: str, *args: str) -> list[str]:
    return ["java", "-Xmx1g", f"-Dlog4j.configurationFile={load.perf.log4j}", "-cp", f"{load.perf.lib}/*",
            PERF_MAIN, str(load.perf.conf), "consume", "-u", load.target.service_url, *args, topic]


def sweep_transactions(load: Load, n: int) -> dict[str, float]:
    with RawClient(load.target.service_url) as raw:
        raw.open_transactions(n, _topic("txn"))
        figures = load.produce(_topic("beside-txn"), "-r", str(RATE), "-time", str(SECONDS), "-s", "100",
                               "-o", "10000")
    figures["restart_s"] = load.target.restart()
    figures["store_mib"] = disk_mib(load.target.data_dir)
    return figures


def sweep_connections(load: Load, n: int) -> dict[str, float]:
    with IdleConnections(load.target.service_url, n):
        return load.produce(_topic("conns"), "-r", str(RATE), "-time", str(SECONDS), "-s", "100", "-o", "10000")


#: Settings of the retention sweep: ledgers of 1,000 entries that roll over at once (Pulsar's defaults, 50,000
#: entries and at least 10 minutes, would keep a short run's data in its open ledger).
RETENTION_LEDGERS = ("--managed-ledger-max-entries-per-ledger", "1000",
                     "--managed-ledger-min-ledger-rollover-time-minutes", "0")


def sweep_retention(load: Load, mib: int) -> dict[str, float]:
    """No retention policy (Pulsar's default: nothing acknowledged is kept): the store's disk use before, after
    writing ``mib`` MiB to a subscribed topic, and after that subscription read and acknowledged it all."""
    topic = _topic("retention")
    path = topic.replace("://", "/")
    before = disk_mib(load.target.data_dir)
    subprocess.run(_consume_argv(load, topic, "-ss", "sub", "-m", "1", "-time", "5"), capture_output=True,
                   check=False)
    # One message per entry (no batching), so that the open ledger left at the end holds at most 1,000 KB.
    load.produce(topic, "-m", str(mib * 2**20 // 1000), "-r", "1000000", "-s", "1000", "-o", "10000", "-db")
    written = disk_mib(load.target.data_dir)
    stored = _admin(load.target.admin_url, f"/admin/v2/{path}/stats")["msgInCounter"]
    load.perf.run("consume", topic, "-ss", "sub", "-m", str(stored), "-time", "3600", server_cpu=load.target.cpu)
    acked = time.monotonic()
    trimmed = written
    while time.monotonic() - acked < 120:  # policy checks every second; the pages are given back after the trim
        time.sleep(1)
        trimmed = disk_mib(load.target.data_dir)
        if trimmed < before + (written - before) / 10:
            break
    stats = _admin(load.target.admin_url, f"/admin/v2/{path}/internalStats")
    return {"disk_before_mib": before, "disk_written_mib": written, "disk_after_acks_mib": trimmed,
            "seconds_to_give_back": time.monotonic() - acked, "entries_left": stats["numberOfEntries"]}


def _admin(admin_url: str, path: str, body: dict | None = None) -> dict:
    """GET an admin path's JSON, or POST ``body`` to it."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(admin_url + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read()
    return json.loads(text) if text else {}


SWEEP_FUNCTIONS: dict[str, Callable[[Load, int], dict[str, float]]] = {
    "topics": sweep_topics,
    "subscriptions": sweep_subscriptions,
    "backlog": sweep_backlog,
    "transactions": sweep_transactions,
    "connections": sweep_connections,
    "retention": sweep_retention,
}
ENDPOINT_ONLY = {"transactions", "retention"}


# -- raw protocol clients --------------------------------------------------------------------------------------------


def _address(service_url: str) -> tuple[str, int]:
    host, port = service_url.removeprefix("pulsar://").rstrip("/").split(":")
    return host, int(port)


class RawClient:
    """One connection speaking the binary protocol directly: opens transactions in bulk (pipelined)."""

    def __init__(self, service_url: str) -> None:
        self.sock = socket.create_connection(_address(service_url), timeout=120)
        self.decoder = FrameDecoder()
        self.request_id = 0
        self._send(frame(BaseCommand.CONNECT, client_version="scale-bench", protocol_version=20))
        self._answers(1)

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def _send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _answers(self, count: int) -> list[BaseCommand]:
        """The next ``count`` answers other than PINGs (which are answered)."""
        answers: list[BaseCommand] = []
        while len(answers) < count:
            data = self.sock.recv(1 << 20)
            if not data:
                raise RuntimeError("the server closed the connection")
            for item in self.decoder.feed(data):
                if item.command.type == BaseCommand.PING:
                    self._send(frame(BaseCommand.PONG))
                elif item.command.type in (BaseCommand.ERROR, BaseCommand.SEND_ERROR):
                    raise RuntimeError(f"the server answered {item.command}")
                else:
                    answers.append(item.command)
        return answers

    def _next_id(self) -> int:
        self.request_id += 1
        return self.request_id

    def open_transactions(self, n: int, topic: str, batch: int = 1000, timeout_ms: int = 3_600_000) -> None:
        """``n`` transactions left open (an hour's timeout unless ``timeout_ms``), each with one message sent on
        ``topic``."""
        self._send(frame(BaseCommand.TC_CLIENT_CONNECT_REQUEST, request_id=self._next_id(), tc_id=0))
        self._answers(1)
        self._send(frame(BaseCommand.PRODUCER, topic=topic, producer_id=1, request_id=self._next_id()))
        self._answers(1)
        sequence = 0
        for start in range(0, n, batch):
            count = min(batch, n - start)
            out = b"".join(frame(BaseCommand.NEW_TXN, request_id=self._next_id(), txn_ttl_millis=timeout_ms, tc_id=0)
                           for _ in range(count))
            self._send(out)
            txns = [(a.newTxnResponse.txnid_most_bits, a.newTxnResponse.txnid_least_bits)
                    for a in self._answers(count)]
            self._send(b"".join(frame(BaseCommand.ADD_PARTITION_TO_TXN, request_id=self._next_id(),
                                      txnid_most_bits=most, txnid_least_bits=least, partitions=[topic])
                                for most, least in txns))
            self._answers(count)
            sends = []
            for most, least in txns:
                sequence += 1
                metadata = MessageMetadata(producer_name="scale-bench", sequence_id=sequence,
                                           publish_time=int(time.time() * 1000))
                command = BaseCommand(type=BaseCommand.SEND)
                command.send.producer_id = 1
                command.send.sequence_id = sequence
                command.send.txnid_most_bits = most
                command.send.txnid_least_bits = least
                sends.append(encode_payload_command(command, make_body(metadata, b"x" * 100)))
            self._send(b"".join(sends))
            self._answers(count)


class IdleConnections:
    """``n`` connections that said CONNECT and then only answer PINGs, from a thread of their own."""

    def __init__(self, service_url: str, n: int) -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < n + 1024:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 4096), hard))
        self.address = _address(service_url)
        self.n = n
        self.selector = selectors.DefaultSelector()
        self.socks: list[socket.socket] = []
        self.running = False

    def __enter__(self) -> IdleConnections:
        hello = frame(BaseCommand.CONNECT, client_version="scale-idle", protocol_version=20)
        for _ in range(self.n):
            sock = socket.create_connection(self.address, timeout=60)
            sock.sendall(hello)
            self.socks.append(sock)
        for sock in self.socks:  # every CONNECTED read before the load starts
            decoder = FrameDecoder()
            while not any(i.command.type == BaseCommand.CONNECTED for i in decoder.feed(sock.recv(65536))):
                pass
            sock.setblocking(False)
            self.selector.register(sock, selectors.EVENT_READ, FrameDecoder())
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return self

    def _serve(self) -> None:
        while self.running:
            for key, _ in self.selector.select(timeout=0.5):
                with contextlib.suppress(BlockingIOError):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    for item in key.data.feed(data):
                        if item.command.type == BaseCommand.PING:
                            key.fileobj.sendall(frame(BaseCommand.PONG))  # type: ignore[union-attr]

    def __exit__(self, *exc: object) -> None:
        self.running = False
        self.thread.join()
        for sock in self.socks:
            sock.close()


# -- output --------------------------------------------------------------------------------------------------------


def render(results: dict[str, dict[str, list[Point]]]) -> str:
    """Markdown tables, one per sweep: a row per point, a column per figure and target."""
    parts = []
    for sweep, by_target in results.items():
        parts.append(f"### {sweep} ({UNITS[sweep]})\n")
        names = sorted({k for points in by_target.values() for p in points for k in p.figures})
        header = "| " + UNITS[sweep] + " | target | " + " | ".join(names) + " |"
        parts.append(header)
        parts.append("|" + "---:|" * (len(names) + 2))
        for target, points in by_target.items():
            for point in points:
                cells = [_cell(point.figures.get(name)) for name in names]
                parts.append(f"| {point.x:,} | {target} | " + " | ".join(cells) + " |")
        parts.append("")
    return "\n".join(parts)


def _cell(value: float | None) -> str:
    if value is None or value != value:
        return ""
    return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"


def plot(results: dict[str, dict[str, list[Point]]], out: Path) -> list[Path]:
    """One PNG per sweep: a panel per figure, a line per target, the swept dimension on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for sweep, by_target in results.items():
        names = sorted({k for points in by_target.values() for p in points for k in p.figures})
        fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.4), squeeze=False)
        for ax, name in zip(axes[0], names, strict=True):
            for target, points in by_target.items():
                xs = [p.x for p in points if name in p.figures]
                ys = [p.figures[name] for p in points if name in p.figures]
                if xs:
                    ax.plot(xs, ys, marker="o", label=target)
            ax.set_xscale("log")
            ax.set_title(name, fontsize=9)
            ax.set_xlabel(UNITS[sweep], fontsize=8)
            ax.grid(True, alpha=0.3)
        axes[0][0].legend(fontsize=8)
        fig.suptitle(sweep)
        fig.tight_layout()
        path = out / f"{sweep}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also the large points (10,000 topics, 10^7 messages...)")
    parser.add_argument("--pulsar", action="store_true", help="the same points on a Pulsar standalone where they apply")
    parser.add_argument("--only", help="comma list of sweeps: " + ",".join(SWEEPS))
    parser.add_argument("--no-endpoint", action="store_true", help="with --pulsar: Pulsar's points only")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "SCALE.md")
    parser.add_argument("--plots", type=Path, default=ROOT / "bench" / "scale")
    parser.add_argument("--render", type=Path, metavar="JSON",
                        help="write the tables and plots of an earlier run's results.json, running nothing")
    args = parser.parse_args()
    if args.render:
        write_results(load_results(args.render), args, "python bench/scale.py " + " ".join(sys.argv[1:]))
        return
    command = "python bench/scale.py " + " ".join(sys.argv[1:])
    results = measure(args)
    (args.plots).mkdir(parents=True, exist_ok=True)
    (args.plots / "results.json").write_text(json.dumps(
        {sweep: {name: [[p.x, p.figures] for p in points] for name, points in by_target.items()}
         for sweep, by_target in results.items()}, indent=1))
    write_results(results, args, command)


def load_results(path: Path) -> dict[str, dict[str, list[Point]]]:
    """Results saved by an earlier run."""
    saved = json.loads(path.read_text())
    return {sweep: {name: [Point(x, figures) for x, figures in points] for name, points in by_target.items()}
            for sweep, by_target in saved.items()}


def measure(args: argparse.Namespace) -> dict[str, dict[str, list[Point]]]:
    """Run the chosen sweeps."""
    chosen = args.only.split(",") if args.only else list(SWEEPS)
    results: dict[str, dict[str, list[Point]]] = {}
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        work = Path(tmp)
        perf_work = work / "perf"
        perf_work.mkdir()
        shared_pulsar = SharedPulsar(work)
        try:
            _sweeps(args, chosen, work, perf_work, shared_pulsar, results, began)
        finally:
            shared_pulsar.stop()
    return results


def _sweeps(args: argparse.Namespace, chosen: list[str], work: Path, perf_work: Path, shared_pulsar: SharedPulsar,
            results: dict[str, dict[str, list[Point]]], began: float) -> None:
    """Run each chosen sweep on each target, adding its points to ``results``."""
    for sweep in chosen:
        points, large = SWEEPS[sweep]
        xs = points + (large if args.full else [])
        # Policy checks every second where they are measured (retention), else at the default (60 s; Pulsar's
        # run every 60 to 120 s): each check walks every loaded topic.
        extra = ("--policy-check-interval-seconds", "1", *RETENTION_LEDGERS) if sweep == "retention" else ()
        kinds = [] if args.no_endpoint else [(OURS, lambda extra=extra: endpoint(work, *extra))]
        if args.pulsar and sweep not in ENDPOINT_ONLY:
            kinds.append((PULSAR, shared_pulsar.point))
        for name, start in kinds:
            for x in xs:
                # A fresh endpoint per point (one point's leftovers, topics and backlog, do not weigh on the next);
                # one Pulsar for all its points, its namespace unloaded after each (SharedPulsar).
                with start() as target:
                    load = Load(perf_work, target)
                    figures = SWEEP_FUNCTIONS[sweep](load, x)
                    figures["rss_mib"] = target.rss_mib()
                figures.pop("records", None)
                figures.pop("cpu_s", None)
                results.setdefault(sweep, {}).setdefault(name, []).append(Point(x, figures))
                print(f"[{time.monotonic() - began:6.0f} s] {sweep} {x:,} {name}: "
                      + ", ".join(f"{k}={_cell(v)}" for k, v in figures.items()), flush=True)


def write_results(results: dict[str, dict[str, list[Point]]], args: argparse.Namespace, command: str) -> None:
    """The tables (with the notes) to ``args.results``, a plot per sweep under ``args.plots``."""
    table = render(results)
    print(table)
    plots = plot(results, args.plots)
    links = "\n".join(f"![{p.stem}](scale/{p.name})" for p in plots)
    # What the curves mean (their knees explained, figures measured by other scripts) is kept by hand beside them.
    notes = NOTES.read_text() if NOTES.exists() else ""
    args.results.write_text(f"# Scale curves\n\nMade by `{command.strip()}` ({time.strftime('%Y-%m-%d')}) on "
                            f"{os.cpu_count()} cores; {RATE} msg/s of 100 B beside each dimension, {SECONDS} s per "
                            f"point, a fresh endpoint per point, one Pulsar standalone for all of its points."
                            f"\n\n{notes}\n{table}\n{links}\n")
    print(f"wrote {args.results} and {len(plots)} plots under {args.plots}")


if __name__ == "__main__":
    main()
