"""Start-up with a big store: build a store of a given size with open transactions in it, then time the server's
start to the first CONNECT answered.

Building 10 GB through a client would take an hour here, so the store is made in two parts. First the real path:
a server on a new data directory, ``--transactions`` transactions opened through the binary protocol (NEW_TXN,
ADD_PARTITION_TO_TXN, one SEND each, left open with an hour's timeout, or ``--txn-timeout-ms``), then a
clean stop. Then bulk: ``--gib`` GiB of 1 MiB messages spread over ``--topics`` topics and ``--small`` small
messages on one more topic, written directly through :class:`engine.store.Store` as the server writes them (one
stored body per entry, group commits of many entries). Then the server starts ``--starts`` times on it, each timed.

Run: ``python bench/big_store.py --gib 10 --transactions 10000 --dir /work/tmp/big`` (prints JSON; ``--keep``
keeps the store, else it is deleted; ``--reuse`` times the starts on a store an earlier ``--keep`` run left;
``--starts 0`` only builds). Each
start reports its wall-clock time and the server's CPU time until the first CONNECT was answered.

With a short ``--txn-timeout-ms`` (say 60000) the transactions time out while the store is filled, so the first start
recovers them as expired and aborts them; the starts wait for that (``--txn-timeout-ms`` after the last one opened,
if the fill took less) and also report when the server had ended every transaction (its ``pulsar_txn_active_count``
metric read 0, polled every 50 ms), in seconds from its start, and its CPU time then.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.scale import RawClient  # noqa: E402
from engine.store import Store  # noqa: E402
from tests.server_process import ServerProcess  # noqa: E402
from wire.framing import make_body  # noqa: E402
from wire.pulsar_api_pb2 import MessageMetadata  # noqa: E402

BIG_PAYLOAD = 1 << 20
SMALL_PAYLOAD = 100
ENTRIES_PER_COMMIT = 64


def _body(producer: str, sequence: int, payload: bytes) -> bytes:
    metadata = MessageMetadata(producer_name=producer, sequence_id=sequence, publish_time=int(time.time() * 1000))
    return make_body(metadata, payload)


def fill(store_path: Path, gib: float, topics: int, small: int) -> None:
    """Append ``gib`` GiB of 1 MiB entries over ``topics`` topics and ``small`` small entries on one topic."""
    store = Store(store_path)
    payload = bytes(range(256)) * (BIG_PAYLOAD // 256)
    now = int(time.time() * 1000)
    records = [store.create_topic(f"persistent://public/default/big-{i}", now) for i in range(topics)]
    total = int(gib * (1 << 30)) // BIG_PAYLOAD
    written = 0
    while written < total:
        for _ in range(ENTRIES_PER_COMMIT):
            record = records[written % topics]
            store.stage_entry(record.topic_id, written // topics, now, _body("bulk", written, payload))
            written += 1
        store.commit()
    record = store.create_topic("persistent://public/default/big-small", now)
    for start in range(0, small, 10_000):
        for i in range(start, min(start + 10_000, small)):
            store.stage_entry(record.topic_id, i, now, _body("bulk-small", i, b"s" * SMALL_PAYLOAD))
        store.commit()
    store._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def active_transactions(admin_url: str) -> int:
    """The server's transactions not yet ended, from its ``pulsar_txn_active_count`` metric (all coordinators)."""
    with urllib.request.urlopen(f"{admin_url}/metrics", timeout=30) as response:
        text = response.read().decode()
    lines = [line for line in text.splitlines() if line.startswith("pulsar_txn_active_count{")]
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in lines)


def wait_for_no_transactions(server: ServerProcess, timeout: float = 600.0) -> None:
    """Wait until the server reports no transaction left (polled every 50 ms; the admin API may come up later)."""
    began = time.monotonic()
    while time.monotonic() < began + timeout:
        try:
            if active_transactions(server.admin_url) == 0:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"transactions still open after {timeout} s")


def disk_gib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / (1 << 30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="data directory to make (must not exist)")
    parser.add_argument("--gib", type=float, default=10.0)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--small", type=int, default=1_000_000, help="small messages on one more topic")
    parser.add_argument("--transactions", type=int, default=10_000, help="open transactions")
    parser.add_argument("--txn-timeout-ms", type=int, help="the open transactions' timeout (default: an hour)")
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--reuse", action="store_true", help="only time the starts on an existing --dir")
    args = parser.parse_args()
    result: dict[str, float] = {}
    server = ServerProcess(args.dir, "--log-level", "WARNING")
    try:
        if not args.reuse:
            began = time.monotonic()
            server.start(timeout=120)
            with RawClient(server.url) as raw:
                timeout_ms = args.txn_timeout_ms or 3_600_000
                raw.open_transactions(args.transactions, "persistent://public/default/big-txn", timeout_ms=timeout_ms)
            opened = time.monotonic()
            server.stop(timeout=120)
            result["transactions_open_s"] = time.monotonic() - began
            began = time.monotonic()
            fill(args.dir / "store.sqlite", args.gib, args.topics, args.small)
            result["fill_s"] = time.monotonic() - began
            if args.txn_timeout_ms is not None:
                time.sleep(max(0.0, opened + args.txn_timeout_ms / 1000 + 1 - time.monotonic()))
        result["store_gib"] = disk_gib(args.dir)
        starts, cpus, ended, ended_cpus = [], [], [], []
        for _ in range(args.starts):
            began = time.monotonic()
            server.start(timeout=600)
            assert server.process is not None
            cpus.append(cpu_seconds(server.process.pid))
            starts.append(server.ready_seconds)
            if args.txn_timeout_ms is not None:
                wait_for_no_transactions(server)
                ended.append(time.monotonic() - began)
                ended_cpus.append(cpu_seconds(server.process.pid))
            server.stop(timeout=120)
        if starts:
            result["start_to_connect_s"] = sorted(starts)[len(starts) // 2]
        result["start_to_connect_all_s"] = starts  # type: ignore[assignment]
        result["cpu_to_connect_all_s"] = cpus  # type: ignore[assignment]
        if ended:
            result["start_to_all_ended_all_s"] = ended  # type: ignore[assignment]
            result["cpu_to_all_ended_all_s"] = ended_cpus  # type: ignore[assignment]
    finally:
        server.stop(timeout=120)
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
