"""pulsar_txn beside the official Python client (``pulsar-client``) on the same broker, in the same run.

Prints messages per second for each client: batched produce (``send_async`` + ``flush``), synchronous produce
(``send``), consume (``receive`` + ``acknowledge`` of a backlog of ``CONSUME_FACTOR`` times ``--messages``: a
consumer drains 20,000 messages in about a tenth of a second, too short a time to measure on a shared machine); and
pulsar_txn's transactions per second: a consume-transform-produce loop (one message received, sent and acknowledged
per transaction) and an open-send-commit loop, the latter also by the official Java client with ``--java`` (the
``TxnBench throughput`` loop of tests/java, one client; the official Python client has no transactions). Each
figure is the median of ``--rounds`` runs, the clients alternating. On a shared machine the figures move with the
load of the others: compare columns of the same run.

The asyncio rows put ``pulsar_txn.asyncio`` beside ``pulsar.asyncio`` (the official client's, over the C++ client's
callbacks): produce with ``await send`` in windows of ``asyncio.gather`` (batched) and in a loop of each of
``ASYNC_TASKS`` tasks (batching off), consume with ``await receive`` + ``await acknowledge``, and (pulsar_txn only)
``new_transaction`` / ``await send(txn=)`` / ``commit``. ``--asyncio-before REV`` adds a column for the
``pulsar_txn/asyncio.py`` of git revision ``REV`` run on today's blocking client (before/after in one run).

Run: ``.venv/bin/python bench/python_client.py [--messages N] [--java] [--asyncio-before REV] [--only asyncio]
[--service-url pulsar://host:6650]`` (without ``--service-url`` a local endpoint on durable storage is started and
stopped).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import pulsar
import pulsar.asyncio

import pulsar_txn
import pulsar_txn.asyncio
from tests.server_process import ServerProcess

CLIENTS: dict[str, ModuleType] = {"pulsar-client": pulsar, "pulsar_txn": pulsar_txn}
PAYLOAD = b"x" * 100
#: The consume figure reads this many times ``--messages``.
CONSUME_FACTOR = 5
#: Concurrent sends of the asyncio produce figures: the window of one ``asyncio.gather`` (below the producer's
#: default ``max_pending_messages``), and the tasks awaiting ``send`` one message at a time.
ASYNC_WINDOW = 500
ASYNC_TASKS = 16


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


def _before_module(rev: str) -> ModuleType:
    """``pulsar_txn/asyncio.py`` as of git revision ``rev``, imported as a module of its own."""
    root = Path(__file__).resolve().parent.parent
    source = subprocess.run(
        ["git", "show", f"{rev}:pulsar_txn/asyncio.py"], cwd=root, check=True, capture_output=True, text=True
    ).stdout
    module = ModuleType(f"pulsar_txn_asyncio_{rev}")
    exec(compile(source, f"{rev}:pulsar_txn/asyncio.py", "exec"), module.__dict__)
    return module


def _aio_client(aio: ModuleType, url: str):
    if aio is pulsar.asyncio:
        return aio.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    return aio.Client(url)


def aio_produce_windows(aio: ModuleType, url: str, messages: int) -> float:
    async def run() -> float:
        client = _aio_client(aio, url)
        producer = await client.create_producer(_topic("aio-batched"))
        windows = max(1, messages // ASYNC_WINDOW)
        began = time.perf_counter()
        for _ in range(windows):
            await asyncio.gather(*(producer.send(PAYLOAD) for _ in range(ASYNC_WINDOW)))
        rate = windows * ASYNC_WINDOW / (time.perf_counter() - began)
        await client.close()
        return rate

    return asyncio.run(run())


def aio_produce_tasks(aio: ModuleType, url: str, messages: int) -> float:
    async def run() -> float:
        client = _aio_client(aio, url)
        producer = await client.create_producer(_topic("aio-tasks"), batching_enabled=False)
        each = max(1, messages // 10 // ASYNC_TASKS)

        async def task() -> None:
            for _ in range(each):
                await producer.send(PAYLOAD)

        began = time.perf_counter()
        await asyncio.gather(*(task() for _ in range(ASYNC_TASKS)))
        rate = each * ASYNC_TASKS / (time.perf_counter() - began)
        await client.close()
        return rate

    return asyncio.run(run())


def aio_consume(aio: ModuleType, url: str, messages: int) -> float:
    topic = _topic("aio-consume")
    filler = _make(pulsar, url)
    producer = filler.create_producer(topic, batching_enabled=True, block_if_queue_full=True)
    for _ in range(messages):
        producer.send_async(PAYLOAD, None)
    producer.flush()
    filler.close()

    async def run() -> float:
        client = _aio_client(aio, url)
        consumer = await client.subscribe(topic, "bench", initial_position=pulsar.InitialPosition.Earliest)
        began = time.perf_counter()
        for _ in range(messages):
            await consumer.acknowledge(await consumer.receive())
        rate = messages / (time.perf_counter() - began)
        await client.close()
        return rate

    return asyncio.run(run())


def aio_open_send_commit(aio: ModuleType, url: str, messages: int) -> float:
    async def run() -> float:
        count = max(1, messages // 50)
        client = aio.Client(url)
        producer = await client.create_producer(_topic("aio-txn"), batching_enabled=False)
        began = time.perf_counter()
        for _ in range(count):
            txn = await client.new_transaction()
            await producer.send(PAYLOAD, txn=txn)
            await txn.commit()
        rate = count / (time.perf_counter() - began)
        await client.close()
        return rate

    return asyncio.run(run())


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
    parser.add_argument("--asyncio-before", metavar="REV", help="a column for pulsar_txn/asyncio.py of git REV")
    parser.add_argument("--only", choices=["asyncio"], help="only the asyncio rows")
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
        if args.only == "asyncio":
            figures = []
        aio: dict[str, ModuleType] = {"pulsar-client": pulsar.asyncio, "pulsar_txn": pulsar_txn.asyncio}
        if args.asyncio_before:
            aio["before"] = _before_module(args.asyncio_before)
        txn_aio = {n: m for n, m in aio.items() if n != "pulsar-client"}
        n_tasks = max(1, args.messages // 10 // ASYNC_TASKS) * ASYNC_TASKS
        figures += [
            (
                f"asyncio produce, gather windows of {ASYNC_WINDOW} (msg/s)",
                {n: lambda m=m: aio_produce_windows(m, url, args.messages) for n, m in aio.items()},
            ),
            (
                f"asyncio produce, {ASYNC_TASKS} tasks x await send, {n_tasks} (msg/s)",
                {n: lambda m=m: aio_produce_tasks(m, url, args.messages) for n, m in aio.items()},
            ),
            (
                f"asyncio consume + ack, {args.messages} messages (msg/s)",
                {n: lambda m=m: aio_consume(m, url, args.messages) for n, m in aio.items()},
            ),
            (
                "asyncio transactions: open, send, commit (txn/s)",
                {n: lambda m=m: aio_open_send_commit(m, url, args.messages) for n, m in txn_aio.items()},
            ),
        ]
        columns = [("pulsar-client", 16), ("pulsar_txn", 14)]
        if args.java:
            columns.append(("java", 8))
        if args.asyncio_before:
            columns.append(("before", 10))
        print(f"broker {url}, {args.messages} messages of {len(PAYLOAD)} bytes, median of {args.rounds} rounds")
        if args.asyncio_before:
            print(f"before: pulsar_txn/asyncio.py of {args.asyncio_before} on this tree's blocking client")
        print(f"{'figure':<52}{''.join(f'{name:>{w}}' for name, w in columns)}")
        for label, runs in figures:
            results: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(args.rounds):
                for name, run in runs.items():
                    results[name].append(run())
            cells = [
                f"{statistics.median(results[name]):>{w}.0f}" if name in results else f"{'n/a':>{w}}"
                for name, w in columns
            ]
            print(f"{label:<52}{''.join(cells)}", flush=True)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
