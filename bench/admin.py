"""Admin API figures against a local server: topic stats with many subscriptions, /metrics over many topics, and
publish latency with and without admin traffic running at the same time.

Prints milliseconds per call (median, p99) of ``GET .../stats`` for a topic with 100 subscriptions and of
``GET /metrics`` with 1,000 loaded topics, then publish latency p50/p99 (synchronous sends) alone and while another
thread loops over stats and metrics requests. Run: ``.venv/bin/python bench/admin.py [--topics N]``.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pulsar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.server_process import ServerProcess, free_port


class Admin:
    """A keep-alive HTTP connection to the admin port."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        self.conn.request(method, path, body=body, headers=headers)
        response = self.conn.getresponse()
        return response.status, response.read()

    def timed(self, path: str, runs: int) -> list[float]:
        """Milliseconds of ``runs`` GETs of ``path``."""
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            status, _ = self.call("GET", path)
            times.append((time.perf_counter() - started) * 1000)
            assert status == 200, (path, status)
        return times


def _summary(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered):6.2f} ms, p99 {p99:6.2f} ms ({len(ordered)} calls)"


def _client(url: str) -> pulsar.Client:
    return pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error), operation_timeout_seconds=30)


def publish_latencies(url: str, topic: str, seconds: float) -> list[float]:
    """Milliseconds per synchronous send of a 100-byte message, for ``seconds``."""
    client = _client(url)
    producer = client.create_producer(topic, batching_enabled=False)
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        started = time.perf_counter()
        producer.send(b"x" * 100)
        times.append((time.perf_counter() - started) * 1000)
    client.close()
    return times


def render_cpu(topics: int) -> tuple[list[float], list[float]]:
    """CPU milliseconds of the two halves of a /metrics scrape over ``topics`` topics, in-process (load-independent):
    reading the engine (reactor thread) and rendering the text (worker thread)."""
    from engine.broker import Broker
    from engine.clock import ManualClock
    from engine.store import Store
    from proxy.admin.context import AdminContext
    from proxy.admin.metrics import render, snapshot

    class _Service:
        advertised_address = None
        port = 6650
        server_version = "bench"

    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker(Store(Path(tmp) / "store.sqlite"), ManualClock())
        for i in range(topics):
            broker.create_topic(f"persistent://public/default/cpu-{i}")
        ctx = AdminContext(broker, _Service(), 8080)
        snapshot(ctx)
        reads, renders = [], []
        for _ in range(10):
            started = time.thread_time()
            taken = snapshot(ctx)
            read = time.thread_time()
            render(taken)
            reads.append((read - started) * 1000)
            renders.append((time.thread_time() - read) * 1000)
        broker.close()
    return reads, renders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000, help="loaded topics for the /metrics figure")
    parser.add_argument("--subscriptions", type=int, default=100, help="subscriptions of the stats topic")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each publish latency run")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        admin_port = free_port()
        server = ServerProcess(Path(tmp) / "data", "--admin-port", str(admin_port), "--log-level", "WARNING").start()
        try:
            time.sleep(0.3)
            admin = Admin(admin_port)
            run = uuid.uuid4().hex[:6]

            # Stats of a topic with many subscriptions (and messages for them to have a backlog).
            topic = f"persistent://public/default/bench-stats-{run}"
            path = "/admin/v2/" + topic.replace("://", "/")
            client = _client(server.url)
            producer = client.create_producer(topic, batching_enabled=False)
            for i in range(args.subscriptions):
                status, _ = admin.call("PUT", f"{path}/subscription/sub-{i}", b'{"ledgerId":-1,"entryId":-1}')
                assert status == 204, status
            for _ in range(1000):
                producer.send_async(b"y" * 100, None)
            producer.flush()
            client.close()
            stats_times = admin.timed(path + "/stats", 200)
            print(f"stats, 1 topic x {args.subscriptions} subscriptions: {_summary(stats_times)}")

            # /metrics over many loaded topics.
            for i in range(args.topics):
                status, _ = admin.call("PUT", f"/admin/v2/persistent/public/default/bench-many-{run}-{i}")
                assert status == 204, status
            metrics_times = admin.timed("/metrics", 30)
            size = len(admin.call("GET", "/metrics")[1])
            print(f"/metrics, {args.topics + 1} topics ({size / 1024:.0f} KiB): {_summary(metrics_times)}")
            reads, renders = render_cpu(args.topics)
            print(
                f"/metrics CPU time in-process, {args.topics} topics: read engine {statistics.median(reads):.1f} ms"
                f" (reactor thread), render {statistics.median(renders):.1f} ms (worker thread)"
            )

            # Publish latency alone, then with an admin loop (stats + metrics) running beside it.
            lat_topic = f"persistent://public/default/bench-latency-{run}"
            alone = publish_latencies(server.url, lat_topic, args.seconds)
            stop = threading.Event()
            admin_calls = [0]

            def admin_load() -> None:
                busy = Admin(admin_port)
                while not stop.is_set():
                    busy.call("GET", path + "/stats")
                    busy.call("GET", "/metrics")
                    admin_calls[0] += 2

            loader = threading.Thread(target=admin_load, daemon=True)
            loader.start()
            loaded = publish_latencies(server.url, lat_topic, args.seconds)
            stop.set()
            loader.join()
            print(f"publish latency, no admin traffic:   {_summary(alone)}")
            print(f"publish latency, admin loop running: {_summary(loaded)} ({admin_calls[0]} admin calls)")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
