"""pulsar_txn beside the official Python client (``pulsar-client``) on the same broker, in the same run.

Prints messages per second for each client: batched produce (``send_async`` + ``flush``), synchronous produce
(``send``), consume (``receive`` + ``acknowledge`` of a backlog of ``CONSUME_FACTOR`` times ``--messages``: a
consumer drains 20,000 messages in about a tenth of a second, too short a time to measure on a shared machine); and
pulsar_txn's transactions per second: a consume-transform-produce loop (one message received, sent and acknowledged
per transaction) and an open-send-commit loop, the latter also by the official Java client with ``--java`` (the
``TxnBench throughput`` loop of tests/java, one client; the official Python client has no transactions). Each
figure is the median of ``--rounds`` runs, the clients alternating. On a shared machine the figures move with the
load of the others: compare columns of the same run.

Run: ``.venv/bin/python bench/python_client.py [--messages N] [--java] [--service-url pulsar://host:6650]`` (without
``--service-url`` a local endpoint on durable storage is started and stopped).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import pulsar

import pulsar_txn
from tests.server_process import ServerProcess

CLIENTS: dict[str, ModuleType] = {"pulsar-client": pulsar, "pulsar_txn": pulsar_txn}
PAYLOAD = b"x" * 100
#: The consume figure reads this many times ``--messages``.
CONSUME_FACTOR = 5


def _topic(tag: str) -> str:
    return f"persistent://public/default/bench-{tag}-{uuid.uuid4().hex[:8]}"


def _make(module: ModuleType, url: str):
    if module is pulsar:
        return pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    return pulsar_txn.Client(url)


def produce_batched(module: ModuleType, url: str, messages: int) -> float:
    client = _make(module, url)
    producer = client.create_producer(
        _topic("batched"), batching_enabled=True, batching_max_publish_delay_ms=10, block_if_queue_full=True
    )
    began = time.perf_counter()
    for _ in range(messages):
        producer.send_async(PAYLOAD, None)
    producer.flush()
    rate = messages / (time.perf_counter() - began)
    client.close()
    return rate


def produce_sync(module: ModuleType, url: str, messages: int) -> float:
    client = _make(module, url)
    producer = client.create_producer(_topic("sync"))
    count = max(1, messages // 20)
    began = time.perf_counter()
    for _ in range(count):
        producer.send(PAYLOAD)
    rate = count / (time.perf_counter() - began)
    client.close()
    return rate


def consume(module: ModuleType, url: str, messages: int) -> float:
    topic = _topic("consume")
    filler = _make(pulsar, url)
    producer = filler.create_producer(topic, batching_enabled=True, block_if_queue_full=True)
    for _ in range(messages):
        producer.send_async(PAYLOAD, None)
    producer.flush()
    filler.close()
    client = _make(module, url)
    consumer = client.subscribe(topic, "bench", initial_position=module.InitialPosition.Earliest)
    began = time.perf_counter()
    for _ in range(messages):
        consumer.acknowledge(consumer.receive(10000))
    rate = messages / (time.perf_counter() - began)
    client.close()
    return rate


def transactions(url: str, messages: int) -> float:
    source, sink = _topic("txn-in"), _topic("txn-out")
    count = max(1, messages // 50)
    filler = _make(pulsar, url)
    producer = filler.create_producer(source, batching_enabled=True, block_if_queue_full=True)
    for _ in range(count):
        producer.send_async(PAYLOAD, None)
    producer.flush()
    filler.close()
    client = pulsar_txn.Client(url)
    consumer = client.subscribe(source, "bench", initial_position=pulsar_txn.InitialPosition.Earliest)
    out = client.create_producer(sink)
    began = time.perf_counter()
    for _ in range(count):
        msg = consumer.receive(10000)
        with client.new_transaction() as txn:
            out.send(msg.data(), txn=txn)
            consumer.acknowledge(msg, txn=txn)
    rate = count / (time.perf_counter() - began)
    client.close()
    return rate


def open_send_commit(url: str, messages: int) -> float:
    count = max(1, messages // 50)
    client = pulsar_txn.Client(url)
    producer = client.create_producer(_topic("txn-loop"))
    began = time.perf_counter()
    for _ in range(count):
        txn = client.new_transaction()
        producer.send(PAYLOAD, txn=txn)
        txn.commit()
    rate = count / (time.perf_counter() - began)
    client.close()
    return rate


def java_open_send_commit(url: str, seconds: float) -> float:
    from bench.txn import java_bench
    from tests.txn_harness import build_harness

    return java_bench(build_harness(), "throughput", url, _topic("java-txn"), 1, seconds, 2)["txn_per_second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--service-url", default=None)
    parser.add_argument("--java", action="store_true", help="also the Java client's open-send-commit loop (Maven)")
    args = parser.parse_args()
    server = None
    url = args.service_url
    if url is None:
        server = ServerProcess(Path(tempfile.mkdtemp(prefix="bench-python-client-")) / "data").start()
        url = server.url
    try:
        figures: list[tuple[str, dict[str, Callable[[], float]]]] = [
            (
                "produce, batched (msg/s)",
                {n: lambda m=m: produce_batched(m, url, args.messages) for n, m in CLIENTS.items()},
            ),
            (
                "produce, send() each (msg/s)",
                {n: lambda m=m: produce_sync(m, url, args.messages) for n, m in CLIENTS.items()},
            ),
            (
                f"consume + ack, {CONSUME_FACTOR * args.messages} messages (msg/s)",
                {n: lambda m=m: consume(m, url, CONSUME_FACTOR * args.messages) for n, m in CLIENTS.items()},
            ),
            (
                "transactions: receive, send, ack, commit (txn/s)",
                {"pulsar_txn": lambda: transactions(url, args.messages)},
            ),
            ("transactions: open, send, commit (txn/s)", {"pulsar_txn": lambda: open_send_commit(url, args.messages)}),
        ]
        if args.java:
            figures.append(
                ("  the same loop, official Java client (txn/s)", {"java": lambda: java_open_send_commit(url, 10)})
            )
        print(f"broker {url}, {args.messages} messages of {len(PAYLOAD)} bytes, median of {args.rounds} rounds")
        print(f"{'figure':<52}{'pulsar-client':>16}{'pulsar_txn':>14}{'java' if args.java else '':>8}")
        for label, runs in figures:
            results: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(args.rounds):
                for name, run in runs.items():
                    results[name].append(run())
            cells = [
                f"{statistics.median(results[name]):>{w}.0f}" if name in results else f"{'n/a':>{w}}"
                for name, w in (("pulsar-client", 16), ("pulsar_txn", 14), ("java", 8))
                if name != "java" or args.java
            ]
            print(f"{label:<52}{''.join(cells)}", flush=True)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
