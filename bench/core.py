"""Core messaging figures with the official Python client against a local server on durable storage.

Prints: batched and non-batched produce throughput, batched consume throughput, publish latency
p50/p99 at a fixed rate, server start-up time and peak RSS. Run: ``make bench`` or
``.venv/bin/python bench/core.py [--messages N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pulsar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.server_process import ServerProcess

PAYLOAD = b"x" * 100


def _client(url: str, **options: object) -> pulsar.Client:
    return pulsar.Client(
        url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error), operation_timeout_seconds=30, **options
    )


def produce(url: str, topic: str, count: int, batching: bool, **client_options: object) -> float:
    """Messages per second for ``count`` send_async calls with no callback, then flush (``client_options``: more
    options of the client, e.g. authentication and TLS)."""
    client = _client(url, **client_options)
    producer = client.create_producer(
        topic,
        batching_enabled=batching,
        batching_max_messages=1000,
        batching_max_publish_delay_ms=10,
        max_pending_messages=5000,
        block_if_queue_full=True,
    )
    started = time.perf_counter()
    for _ in range(count):
        producer.send_async(PAYLOAD, None)
    producer.flush()
    elapsed = time.perf_counter() - started
    client.close()
    return count / elapsed


def consume(url: str, topic: str, count: int) -> float:
    """Messages per second received from the start of ``topic`` (cumulative ack every 1000)."""
    client = _client(url)
    consumer = client.subscribe(
        topic, f"bench-{uuid.uuid4().hex[:6]}", initial_position=pulsar.InitialPosition.Earliest,
        receiver_queue_size=5000,
    )
    started = time.perf_counter()
    for i in range(count):
        msg = consumer.receive(10_000)
        if i % 1000 == 999:
            consumer.acknowledge_cumulative(msg)
    elapsed = time.perf_counter() - started
    client.close()
    return count / elapsed


def latency(url: str, topic: str, rate: int, seconds: float) -> tuple[float, float, int]:
    """p50 and p99 (ms) of synchronous non-batched sends paced at ``rate`` per second."""
    client = _client(url)
    producer = client.create_producer(topic, batching_enabled=False)
    samples = []
    interval = 1.0 / rate
    next_at = time.perf_counter()
    end = next_at + seconds
    while next_at < end:
        now = time.perf_counter()
        if now < next_at:
            time.sleep(next_at - now)
        began = time.perf_counter()
        producer.send(PAYLOAD)
        samples.append((time.perf_counter() - began) * 1000)
        next_at += interval
    client.close()
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1], len(samples)


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size (VmHWM) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000, help="messages for the batched runs")
    parser.add_argument("--unbatched", type=int, default=50_000, help="messages for the non-batched run")
    parser.add_argument("--rate", type=int, default=1000, help="messages per second for the latency run")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the latency run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", "--log-level", "WARNING").start()
        try:
            url = server.url
            run = uuid.uuid4().hex[:8]
            batched_topic = f"persistent://public/default/bench-batched-{run}"
            rows = [
                ("server start-up to first accepted connection (ms)", server.startup_seconds * 1000),
                ("batched produce, 100 B (msg/s)", produce(url, batched_topic, args.messages, batching=True)),
                (
                    "non-batched send_async, 100 B (msg/s)",
                    produce(url, f"persistent://public/default/bench-plain-{run}", args.unbatched, batching=False),
                ),
                ("batched consume (msg/s)", consume(url, batched_topic, args.messages)),
            ]
            p50, p99, n = latency(url, f"persistent://public/default/bench-lat-{run}", args.rate, args.seconds)
            rows += [
                (f"publish latency p50 at {args.rate} msg/s (ms, {n} sends)", p50),
                (f"publish latency p99 at {args.rate} msg/s (ms)", p99),
                ("server peak RSS (MiB)", peak_rss_mb(server.process.pid)),  # type: ignore[union-attr]
            ]
        finally:
            server.stop()
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>12,.1f}")


if __name__ == "__main__":
    main()
