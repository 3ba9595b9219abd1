"""Topic compaction against a local server: how fast a large topic compacts, and publish latency meanwhile.

Fills a topic with N unbatched 100-byte messages over K keys (official Python client), triggers a compaction over
the admin API, and sends one message at a time while it runs. Prints the compaction's time (trigger to SUCCESS) and
entries per second, and the latency of the sends made meanwhile (median, max).
Run: ``.venv/bin/python bench/compaction.py [--entries N] [--keys K]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pulsar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.server_process import ServerProcess, free_port

TOPIC = "persistent://public/default/bench-compaction"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000, help="messages in the topic (one entry each)")
    parser.add_argument("--keys", type=int, default=1000, help="distinct keys among them")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-compaction-") as tmp:
        admin_port = free_port()
        server = ServerProcess(Path(tmp) / "data", "--admin-port", str(admin_port), "--log-level", "WARNING").start()
        client = pulsar.Client(server.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            producer = client.create_producer(
                TOPIC, batching_enabled=False, max_pending_messages=5000, block_if_queue_full=True
            )
            for i in range(args.entries):
                producer.send_async(b"x" * 100, None, partition_key=f"k{i % args.keys}")
            producer.flush()
            url = f"http://127.0.0.1:{admin_port}/admin/v2/{TOPIC.replace('://', '/')}/compaction"
            started = time.monotonic()
            urllib.request.urlopen(urllib.request.Request(url, method="PUT"), timeout=30)
            sends: list[float] = []
            while True:
                status = json.loads(urllib.request.urlopen(url, timeout=30).read())["status"]
                if status != "RUNNING":
                    break
                began = time.monotonic()
                producer.send(b"y", partition_key="during")
                sends.append((time.monotonic() - began) * 1000)
            took = time.monotonic() - started
        finally:
            client.close()
            server.stop()
    print(
        f"compaction of {args.entries:,} entries over {args.keys:,} keys: {status} in {took:.2f} s "
        f"({args.entries / took:,.0f} entries/s)"
    )
    if sends:
        print(f"sends during it: {len(sends)}, median {statistics.median(sends):.1f} ms, max {max(sends):.1f} ms")


if __name__ == "__main__":
    main()
