"""Transaction figures: throughput, the cost of a transaction, and recovery of a large topic.

- Transactions per second, 1 message each, from N concurrent official Java clients (one PulsarClient and thread
  each, in one JVM: ``dev.pulsartxnproxy.TxnBench`` in tests/java), each looping newTransaction, send, commit.
- The cost of 100 messages in one transaction against the same 100 sent plainly, three ways. Latency: the time to
  send them inside one transaction (open, send, commit) against sending them plainly, alternating, on one client;
  medians and their ratio. Load: N clients each loop over units of 100 messages, in a transaction or plainly; the
  ratio of the plain to the transactional message rate. Server CPU: under that load, the server's CPU time per
  message in the two kinds of phase (read from /proc by the load generator as each phase starts and ends), which
  depends less on the host's steal and on the clients' own latency. Both batched and unbatched. The latency
  includes the Java client's own work between its steps (open, register the partition, send, commit): about 1.9 ms
  per transaction on our 2-core machines, against 0.6 ms for the server's three transaction commands (traced on
  the server), so even instant answers would leave about 1.5x unbatched.
- Recovery, in-process on the engine: a topic with 1,000,000 entries and a recent transaction-buffer snapshot is
  reopened; the time to load it and the entries its transaction buffer replayed. Then the same for a topic whose
  transactions came first, followed by 1,000,000 plain entries published through the engine and a kill.

With ``--pulsar`` the client figures (all but recovery) are measured again, with the same clients and harness, on an
Apache Pulsar standalone resolved from Maven Central (``tests/conformance/pulsar_standalone.py``; ``--journal-sync``
makes its bookie fsync before answering, as this endpoint does), and printed in a column beside this endpoint's.

Run: ``.venv/bin/python bench/txn.py [--pulsar]`` (needs Java 17+ and Maven, like the transaction tests).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.broker import Broker
from engine.clock import ManualClock
from engine.store import Store
from engine.subscription import Consumer, Delivery
from engine.topic import AccessMode, Producer
from engine.transactions import TxnAction, TxnId
from tests.conformance.pulsar_standalone import PulsarStandalone
from tests.server_process import ServerProcess
from tests.txn_harness import build_harness
from wire.framing import make_body
from wire.pulsar_api_pb2 import MessageMetadata

PAYLOAD = b"x" * 100
#: The cost figures are measured with the producer's batching off, then on.
MODES = ("unbatched", "batched")
RECOVERY_TOPIC = "persistent://public/default/recovery"
#: Entries written per store transaction while filling the recovery topic.
FILL_BATCH = 100_000
#: The load generator shares the cores with the server: C1-compiled code and the serial collector cost it about a
#: third less CPU than the defaults, for the same or more transactions per second.
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def java_bench(classpath: str, *args: object, timeout: float = 600) -> dict[str, Any]:
    """Run ``TxnBench`` and return its JSON line."""
    command = ["java", *JVM_OPTIONS, "-cp", classpath, "dev.pulsartxnproxy.TxnBench", *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"TxnBench {args} failed ({result.returncode}):\n{result.stdout}\n{result.stderr[-5000:]}")
    return json.loads(lines[-1])


def with_cpu_shares(figure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Measure ``figure`` and add the shares of this machine's CPU time, in percent, that the hypervisor gave to
    other machines (``steal_pct``) and that stayed idle (``idle_pct``) meanwhile.

    On a shared host the steal varies from run to run (0 to about 30% on our 2-core machines) and the
    transaction figures with it: three throughput runs of one build, one after the other, gave 932 txn/s while the
    steal was 0-5% and 513 while it was 11-28%.
    """
    before = psutil.cpu_times()
    figures = figure()
    after = psutil.cpu_times()
    # Linux counts guest time inside user and nice already.
    spent = {name: getattr(after, name) - getattr(before, name) for name in after._fields if "guest" not in name}
    total = sum(spent.values()) or 1.0
    return {**figures, "steal_pct": 100 * spent.get("steal", 0.0) / total, "idle_pct": 100 * spent["idle"] / total}


# -- recovery, in-process --------------------------------------------------------------------------------


class _Sink:
    """A producer connection that ignores what the engine tells it."""

    writable = True

    def close_producer(self, producer: Producer) -> None:
        pass

    def producer_ready(self, producer: Producer) -> None:
        pass

    def deliver(self, consumer: Consumer, deliveries: list[Delivery]) -> None:
        pass

    def active_consumer_change(self, consumer: Consumer, is_active: bool) -> None:
        pass

    def close_consumer(self, consumer: Consumer) -> None:
        pass


def _open_broker(path: Path, clock: ManualClock) -> Broker:
    return Broker(Store(path / "store.sqlite"), clock)


def _fill(path: Path, entries: int) -> float:
    """Write ``entries`` plain entries to the recovery topic in large store transactions; seconds taken."""
    broker = _open_broker(path, ManualClock())
    topic = broker.topic(RECOVERY_TOPIC)
    began = time.perf_counter()
    publish_time = int(time.time() * 1000)
    body = make_body(MessageMetadata(producer_name="fill", sequence_id=0, publish_time=publish_time), PAYLOAD)
    for start in range(topic.next_entry_id, topic.next_entry_id + entries, FILL_BATCH):
        for entry_id in range(start, min(start + FILL_BATCH, topic.next_entry_id + entries)):
            broker.store.stage_entry(topic.topic_id, entry_id, publish_time, body)
        broker.store.commit()
    elapsed = time.perf_counter() - began
    broker.close()
    return elapsed


def _publish(path: Path, entries: int) -> float:
    """Publish ``entries`` plain entries to the recovery topic through the engine (as producers do); seconds."""
    clock = ManualClock(time.time())
    broker = _open_broker(path, clock)
    topic = broker.topic(RECOVERY_TOPIC)
    producer = Producer(2, "plain", AccessMode.SHARED, 0, _Sink())
    topic.add_producer(producer)
    meta = MessageMetadata(producer_name="plain", sequence_id=0, publish_time=int(clock.now() * 1000))
    body = make_body(meta, PAYLOAD)
    results: list[object] = []
    began = time.perf_counter()
    for i in range(entries):
        topic.publish(producer, i, -1, body, meta, results.append)
        if i % 10_000 == 9_999:
            clock.advance(0)
            results.clear()
    clock.advance(0)
    elapsed = time.perf_counter() - began
    # Closed without a final snapshot, as by a kill: what the last snapshot recorded is what recovery starts from.
    broker.store.close()
    return elapsed


def _transactions(path: Path, count: int, snapshot: bool) -> None:
    """Run ``count`` transactions of 3 messages on the recovery topic (every 4th aborts); ``snapshot``: let the
    transaction buffer's timed snapshot happen before closing."""
    clock = ManualClock(time.time())
    broker = _open_broker(path, clock)
    topic = broker.topic(RECOVERY_TOPIC)
    producer = Producer(1, "txn", AccessMode.SHARED, 0, _Sink())
    topic.add_producer(producer)
    results: list[object] = []
    sequence = 0
    for i in range(count):
        box: list[TxnId] = []
        broker.coordinators.new_txn(0, 60_000, box.append)
        clock.advance(0)
        txn = box[0]
        broker.coordinators.add_partitions(txn, [RECOVERY_TOPIC], results.append)
        for _ in range(3):
            sequence += 1
            meta = MessageMetadata(producer_name="txn", sequence_id=sequence, publish_time=int(clock.now() * 1000))
            meta.txnid_most_bits, meta.txnid_least_bits = txn
            topic.publish(producer, sequence, -1, make_body(meta, PAYLOAD), meta, results.append, txn)
        clock.advance(0)
        action = TxnAction.ABORT if i % 4 == 3 else TxnAction.COMMIT
        broker.coordinators.end(txn, action, results.append)
        clock.advance(0)
        clock.advance(0)
    if snapshot:
        clock.advance(broker.config.snapshot_policy.interval_seconds + 1)
        clock.advance(0)
    broker.close()


def _load(path: Path) -> dict[str, Any]:
    """Open a broker on the store and load the recovery topic; timings and the buffer's recovery figures."""
    began = time.perf_counter()
    broker = _open_broker(path, ManualClock(time.time()))
    opened = time.perf_counter()
    topic = broker.topic(RECOVERY_TOPIC)
    loaded = time.perf_counter()
    figures = {
        "entries": topic.last_confirmed + 1,
        "broker_open_s": opened - began,
        "topic_load_s": loaded - opened,
        "replayed_entries": topic.txn_buffer.replayed_entries,
        "from_snapshot": topic.txn_buffer.recovered_from_snapshot,
        "aborted_txns": len(topic.txn_buffer.aborted),
    }
    broker.close()
    return figures


def recovery(entries: int, workdir: Path) -> dict[str, Any]:
    """Recovery of a topic with ``entries`` entries and a recent snapshot (transactions ran after the fill)."""
    path = workdir / "recovery"
    path.mkdir()
    fill_s = _fill(path, entries)
    _transactions(path, 40, snapshot=True)
    figures = _load(path)
    figures["fill_s"] = fill_s
    return figures


def recovery_after_plain_traffic(entries: int, workdir: Path) -> dict[str, Any]:
    """Recovery of a topic whose transactions ran first, followed by ``entries`` plain entries published through
    the engine and a kill: the snapshot must have followed the plain traffic (Pulsar #19200)."""
    path = workdir / "recovery-plain"
    path.mkdir()
    _transactions(path, 40, snapshot=True)
    publish_s = _publish(path, entries)
    figures = _load(path)
    figures["publish_s"] = publish_s
    return figures


# -- the report -----------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients for the throughput figure")
    parser.add_argument("--seconds", type=float, default=10, help="measured seconds of the throughput figure")
    parser.add_argument("--warmup", type=float, default=3, help="warm-up seconds before measuring")
    parser.add_argument("--messages", type=int, default=100, help="messages per transaction for the cost figure")
    parser.add_argument("--repetitions", type=int, default=100, help="repetitions of the cost figure")
    parser.add_argument(
        "--rounds", type=int, default=5, help="plain/transactional rounds of the cost under load (ratios vary by round)"
    )
    parser.add_argument("--phase-seconds", type=float, default=4, help="measured seconds of each phase of a round")
    parser.add_argument("--entries", type=int, default=1_000_000, help="entries of the recovered topic")
    parser.add_argument(
        "--pulsar",
        action="store_true",
        help="also measure the client figures on an Apache Pulsar standalone (the reference), after this endpoint",
    )
    parser.add_argument(
        "--journal-sync", action="store_true", help="with --pulsar: the bookie fsyncs its journal before each answer"
    )
    args = parser.parse_args()

    classpath = build_harness()
    reference: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as tmp:
        workdir = Path(tmp)
        server = ServerProcess(workdir / "data", "--log-level", "WARNING").start()
        try:
            ours = measure(classpath, server.url, server.process.pid, args)
        finally:
            server.stop()
        if args.pulsar:
            with PulsarStandalone(workdir / "pulsar", journal_sync=args.journal_sync) as pulsar:
                assert pulsar.process is not None
                reference = measure(classpath, pulsar.url, pulsar.process.pid, args)
        ours["recovery"] = recovery(args.entries, workdir)
        ours["recovery_plain"] = recovery_after_plain_traffic(args.entries, workdir)

    rows = figure_rows(ours, args)
    header = ["figure", "this endpoint", "target", "details"]
    if reference is not None:
        header.insert(2, "Pulsar")
        reference_rows = figure_rows(reference, args)
        rows = [(*row[:2], other[1], *row[2:]) for row, other in zip(rows, reference_rows, strict=True)]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(widths[i]) if i < len(widths) else cell for i, cell in enumerate(row)))
    print("steal: CPU time the hypervisor gave to other machines during the figure; idle: CPU time left unused")
    if reference is not None:
        sync = "with" if args.journal_sync else "without"
        print(f"Pulsar: an Apache Pulsar standalone ({sync} journal fsync), same clients and figures; its details:")
        for row in reference_rows:
            if row[3]:
                print(f"  {row[0]}: {row[3]}")
    print(json.dumps({"endpoint": ours, "pulsar": reference}))


def measure(classpath: str, url: str, pid: int, args: argparse.Namespace) -> dict[str, Any]:
    """The figures the Java clients measure on one target, whose server runs as process ``pid``."""
    topic = f"persistent://public/default/bench-txn-{uuid.uuid4().hex[:8]}"
    throughput = with_cpu_shares(
        lambda: java_bench(classpath, "throughput", url, topic, args.clients, args.seconds, args.warmup)
    )
    costs = {
        mode: with_cpu_shares(
            lambda mode=mode: java_bench(
                classpath, "cost", url, f"{topic}-cost-{mode}", args.messages, args.repetitions, mode
            )
        )
        for mode in MODES
    }
    loads = {
        mode: with_cpu_shares(
            lambda mode=mode: java_bench(
                classpath,
                "load",
                url,
                f"{topic}-load-{mode}",
                args.clients,
                args.messages,
                args.phase_seconds,
                args.rounds,
                mode,
                pid,
            )
        )
        for mode in MODES
    }
    for load in loads.values():
        load["server_cpu"] = server_cpu_per_message(load)
    return {"throughput": throughput, "cost": costs, "load": loads}


def figure_rows(figures: dict[str, Any], args: argparse.Namespace) -> list[tuple[str, str, str, str]]:
    """The table's rows ``(figure, value, target, details)`` of one target; "-" where it was not measured."""
    throughput = figures["throughput"]
    rows = [
        (
            f"transactions/s ({args.clients} clients, 1 msg each)",
            f"{throughput['txn_per_second']:,.0f}",
            ">= 1,000",
            f"p50 {throughput['latency_p50_ms']:.1f} ms, p99 {throughput['latency_p99_ms']:.1f} ms, "
            f"{throughput['failed']} failed, {_shares(throughput)}",
        )
    ]
    for mode, cost in figures["cost"].items():
        rows.append(
            (
                f"{args.messages} msgs in 1 txn vs plain ({mode})",
                f"{cost['ratio']:.2f}x",
                "<= 1.5x",
                f"txn {cost['txn_median_ms']:.1f} ms, plain {cost['plain_median_ms']:.1f} ms (medians of "
                f"{cost['repetitions']}), {_shares(cost)}",
            )
        )
    for mode, load in figures["load"].items():
        rows.append(
            (
                f"{args.messages} msgs in 1 txn vs plain, {args.clients} clients ({mode})",
                f"{load['ratio']:.2f}x",
                "<= 1.5x",
                f"msg/s txn {_rates(load['txn_msg_per_second'])}, plain {_rates(load['plain_msg_per_second'])} "
                f"(median of {args.rounds} alternating rounds), {load['failed']} failed, {_shares(load)}",
            )
        )
    for mode, load in figures["load"].items():
        cpu = load["server_cpu"]
        rows.append(
            (
                f"server CPU per msg, in 1 txn vs plain, {args.clients} clients ({mode})",
                f"{cpu['ratio']:.2f}x",
                "<= 1.5x",
                f"txn {cpu['txn_us']:.0f} us, plain {cpu['plain_us']:.0f} us (medians of the same rounds)",
            )
        )
    recovered, after_plain = figures.get("recovery"), figures.get("recovery_plain")
    rows.append(
        (
            f"recovery of {args.entries:,} entries",
            f"{recovered['topic_load_s']:.3f} s" if recovered else "-",
            "< 2 s",
            f"{recovered['entries']:,} in all, replayed {recovered['replayed_entries']}, snapshot "
            f"{recovered['from_snapshot']}, broker open "
            f"{recovered['broker_open_s']:.3f} s (fill {recovered['fill_s']:.1f} s)"
            if recovered
            else "",
        )
    )
    rows.append(
        (
            f"recovery, {args.entries:,} entries after the last txn",
            f"{after_plain['topic_load_s']:.3f} s" if after_plain else "-",
            "< 2 s",
            f"{after_plain['entries']:,} in all, replayed {after_plain['replayed_entries']}, snapshot "
            f"{after_plain['from_snapshot']} "
            f"(published through the engine in {after_plain['publish_s']:.1f} s, then killed)"
            if after_plain
            else "",
        )
    )
    return rows


def server_cpu_per_message(load: dict[str, Any]) -> dict[str, float]:
    """The medians of the server's CPU time per message in a load figure's plain and transactional phases
    (microseconds), and of the rounds' ratios transactional/plain: what a server pays per message, whatever the
    clients' latency and the host's steal."""
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")

    def per_message(phases: list[dict[str, Any]]) -> list[float]:
        return [phase["serverTicks"] * tick_us / (phase["units"] * load["messages"]) for phase in phases]

    plain, txn = per_message(load["plain_phases"]), per_message(load["txn_phases"])
    ratios = [t / p for t, p in zip(txn, plain, strict=True)]
    return {"plain_us": median(plain), "txn_us": median(txn), "ratio": median(ratios)}


def _shares(figures: dict[str, Any]) -> str:
    return f"steal {figures['steal_pct']:.0f}%, idle {figures['idle_pct']:.0f}%"


def _rates(values: list[float]) -> str:
    return "/".join(f"{v / 1000:.1f}k" for v in values)


if __name__ == "__main__":
    main()
