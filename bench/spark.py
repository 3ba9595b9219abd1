"""Spark connector figures: PySpark 4 in local[2] against a local endpoint on durable storage.

Prints:
- streaming read into the no-op sink (msg/s);
- the example pipeline end to end (two JSON source topics -> windowed aggregates -> exactly-once sink);
- micro-batch latency at a 1 s trigger while events arrive at a steady rate (p50/p95 of batch durations);
- the exactly-once sink against a plain at-least-once write of the same data (msg/s and their ratio;
  medians of three alternating runs each).

Throughput is given two ways: wall time of a ``Trigger.AvailableNow`` query from ``start()`` to its end
(query start-up included), and the rate over the batches' own durations (``triggerExecution``). A small
query (and a small pipeline run) goes first to warm the JVM and the Python workers up; each query still
pays its own start-up (planning, Spark's Python planner and commit processes), about 1-3 s.
The exactly-once figures (pipeline, sink cost) are taken in local mode and on a local standalone cluster (a master
and two workers started with PySpark's launcher; this process is the driver, the executors are the workers' JVMs).
Run: ``.venv/bin/python bench/spark.py [--messages N] [--events N] [--deployments local,cluster]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pulsar_txn import Client
from spark.cluster import LocalCluster, py_files
from spark.pipeline import Event, build_query, produce, read_topic, sample_events, spark_session, window_totals
from tests.server_process import ServerProcess


def _name(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


def _rates(query: Any, wall: float, messages: int) -> dict[str, float]:
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    rows = sum(p["numInputRows"] for p in progress)
    return {"wall": messages / wall, "batches": rows / busy if busy else 0.0, "count": len(progress), "rows": rows}


def _fill(url: str, topic: str, count: int) -> None:
    """``count`` JSON events of about 70 bytes."""
    produce(url, topic, sample_events(count, keys=50, seed=11))


def read_noop(spark: Any, url: str, messages: int) -> dict[str, float]:
    topic = _name("bench-read")
    _fill(url, topic, messages)
    started = time.perf_counter()
    query = (
        spark.readStream.format("pulsar").option("service.url", url).option("topic", topic)
        .option("startingOffsets", "earliest").load()
        .writeStream.format("noop").trigger(availableNow=True).start()
    )
    query.awaitTermination()
    return _rates(query, time.perf_counter() - started, messages)


def pipeline(spark: Any, url: str, events: int, work: Path) -> dict[str, float]:
    sources = (_name("source-a1"), _name("source-a2"))
    sink = _name("sink-b")
    a1, a2 = sample_events(events // 2, seed=1), sample_events(events - events // 2, seed=2)
    end = max(e.event_time for e in a1 + a2) + 60_000
    produce(url, sources[0], [*a1, Event("end-of-input", 0, end)])
    produce(url, sources[1], [*a2, Event("end-of-input", 0, end)])
    expected = window_totals(a1 + a2)
    started = time.perf_counter()
    query = build_query(
        spark, url, str(work / f"ck-{uuid.uuid4().hex[:6]}"), sources=sources, sink=sink,
        trigger={"availableNow": True},
    )
    query.awaitTermination()
    wall = time.perf_counter() - started
    rows = read_topic(url, sink)
    got = {(r["key"], r["window_start"]): (r["events"], r["total"]) for r in rows}
    result = _rates(query, wall, events)
    result["exact"] = float(got == expected and len(rows) == len(expected))
    return result


def latency(spark: Any, url: str, rate: int, seconds: float, work: Path) -> dict[str, float]:
    sources = (_name("source-a1"), _name("source-a2"))
    sink = _name("sink-b")
    stop = threading.Event()

    def feed() -> None:
        with Client(url) as client:
            producers = [client.create_producer(s, batching_enabled=True) for s in sources]
            sent = 0
            began = time.monotonic()
            while not stop.is_set():
                due = int((time.monotonic() - began) * rate)
                for _ in range(due - sent):
                    now = int(time.time() * 1000)
                    event = Event(f"key-{sent % 50}", 1, now)
                    producers[sent % 2].send_async(event.to_json(), None, partition_key=event.key)
                    sent += 1
                for producer in producers:
                    producer.flush()
                time.sleep(0.01)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    query = build_query(
        spark, url, str(work / f"ck-{uuid.uuid4().hex[:6]}"), sources=sources, sink=sink,
        starting_offsets="latest", trigger={"processingTime": "1 second"},
    )
    time.sleep(seconds)
    stop.set()
    feeder.join()
    query.processAllAvailable()  # stop between batches, not in the middle of one
    query.stop()
    durations = sorted(
        p["durationMs"]["triggerExecution"] for p in query.recentProgress[2:] if p["numInputRows"]
    )
    return {
        "p50": statistics.median(durations),
        "p95": durations[int(len(durations) * 0.95) - 1] if durations else 0.0,
        "batches": len(durations),
    }


def _copy(
    spark: Any, url: str, source: str, guarantee: str, work: Path, messages: int, per_batch: int | None
) -> dict[str, float]:
    started = time.perf_counter()
    reader = (
        spark.readStream.format("pulsar").option("service.url", url).option("topic", source)
        .option("startingOffsets", "earliest")
    )
    if per_batch:
        reader = reader.option("maxRecordsPerTrigger", per_batch)
    query = (
        reader.load().select("value", "__key")
        .writeStream.format("pulsar").option("service.url", url).option("topic", _name("bench-sink"))
        .option("deliveryGuarantee", guarantee)
        .option("checkpointLocation", str(work / f"ck-{uuid.uuid4().hex[:6]}"))
        .trigger(availableNow=True).start()
    )
    query.awaitTermination()
    return _rates(query, time.perf_counter() - started, messages)


def sink_compare(
    spark: Any, url: str, messages: int, work: Path, per_batch: int | None, rounds: int = 3
) -> dict[str, dict[str, float]]:
    """The same copy query into each sink, alternating, ``rounds`` times each: medians."""
    source = _name("bench-src")
    _fill(url, source, messages)
    _copy(spark, url, source, "at-least-once", work, messages, per_batch)  # warm-up
    runs: dict[str, list[dict[str, float]]] = {"at-least-once": [], "exactly-once": []}
    for _ in range(rounds):
        for guarantee in runs:
            runs[guarantee].append(_copy(spark, url, source, guarantee, work, messages, per_batch))
    return {
        guarantee: {key: statistics.median(r[key] for r in results) for key in ("wall", "batches")}
        for guarantee, results in runs.items()
    }


def _cluster_session(cluster: LocalCluster, work: Path) -> Any:
    """A SparkSession whose executors run on ``cluster`` (this process is the driver, as with spark-submit).

    The executors share this machine, so the project's zip reaches their Python workers through PYTHONPATH (the
    data source's tasks are not sent with ``addPyFile``'s includes).
    """
    shipped = str(py_files(work))
    return spark_session(
        "pulsar-bench-cluster",
        master=cluster.master_url,
        conf={
            "spark.executorEnv.PYTHONPATH": shipped,
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.pyspark.python": sys.executable,
        },
    )


def _exactly_once_figures(spark: Any, url: str, args: argparse.Namespace, work: Path, label: str) -> None:
    """The pipeline's rate and the exactly-once sink against at-least-once, on one Spark deployment."""
    pipeline(spark, url, 10_000, work)  # warm-up: the aggregation and the sink's code paths
    p = pipeline(spark, url, args.events, work)
    print(
        f"[{label}] pipeline end to end (exactly-once): {p['wall']:,.0f} rows/s wall ({args.events:,} events), "
        f"{p['batches']:,.0f} rows/s over batch durations; aggregates exact: {bool(p['exact'])}"
    )
    s = sink_compare(spark, url, args.messages, work, 10_000)
    once, least = s["exactly-once"], s["at-least-once"]
    print(
        f"[{label}] copy into the sink, {args.messages:,} messages in 10,000-message batches: exactly-once "
        f"{once['wall']:,.0f} rows/s wall ({once['batches']:,.0f} over batches), at-least-once "
        f"{least['wall']:,.0f} rows/s wall ({least['batches']:,.0f}); cost ratio at-least-once/exactly-once "
        f"{least['wall'] / once['wall']:.2f} wall ({least['batches'] / once['batches']:.2f} over batches)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000, help="messages for the read and sink runs")
    parser.add_argument("--events", type=int, default=400_000, help="events for the pipeline run")
    parser.add_argument("--rate", type=int, default=5_000, help="events/s during the latency run")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the latency run")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of each topic")
    parser.add_argument(
        "--deployments", default="local,cluster",
        help="local (local[2], with the read and latency figures) and/or cluster (a local standalone cluster: a "
        "master and 2 workers of 1 core each)",
    )
    args = parser.parse_args()
    deployments = args.deployments.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        server = ServerProcess(work / "data", "--default-partitions", str(args.partitions), "--log-level", "WARNING")
        server.start()
        try:
            if "local" in deployments:
                spark = spark_session("pulsar-bench")
                print(
                    f"PySpark {spark.version}, local[2], topics with {args.partitions} partitions, "
                    f"endpoint {server.url}"
                )
                read_noop(spark, server.url, 20_000)  # warm-up: JVM code paths, Python workers
                r = read_noop(spark, server.url, args.messages)
                print(
                    f"[local[2]] streaming read -> noop sink: {r['wall']:,.0f} msg/s wall ({args.messages:,} "
                    f"messages), {r['batches']:,.0f} msg/s over batch durations"
                )
                _exactly_once_figures(spark, server.url, args, work, "local[2]")
                lat = latency(spark, server.url, args.rate, args.seconds, work)
                print(
                    f"[local[2]] micro-batch latency at a 1 s trigger, {args.rate:,} events/s: p50 {lat['p50']:.0f} "
                    f"ms, p95 {lat['p95']:.0f} ms ({lat['batches']} batches)"
                )
                spark.stop()
            if "cluster" in deployments:
                with LocalCluster(work / "cluster", workers=2, cores=1, memory="1g") as cluster:
                    spark = _cluster_session(cluster, work)
                    print(f"standalone cluster {cluster.master_url}: 2 workers, 1 core and 512 MiB executors each")
                    _exactly_once_figures(spark, server.url, args, work, "cluster")
                    spark.stop()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
