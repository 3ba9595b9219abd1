"""The example pipeline: two source topics of JSON events -> windowed aggregates -> a sink topic, exactly once.

Events look like ``{"key": "sensor-3", "amount": 7, "event_time": 1700000012345}`` (event time in ms).
The query reads ``source-a1`` and ``source-a2``, counts and sums ``amount`` per key in tumbling
event-time windows, with a watermark so late data is bounded, and appends each finished window to
``sink-b`` as JSON (key = the event key) through the exactly-once sink. :func:`run_demo` does all of it
against a private endpoint process; ``pulsar-txn-proxy demo`` calls it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulsar_txn.core.names import full_topic_name
from spark.reader import EARLIEST, PartitionReader, TopicProbe, is_empty, message_id_bytes
from spark.security import Security, new_client

SOURCES = ("source-a1", "source-a2")
SINK = "sink-b"
EVENT_SCHEMA = "key string, amount bigint, event_time bigint"


@dataclass(frozen=True)
class Event:
    """One input event."""

    key: str
    amount: int
    event_time: int

    def to_json(self) -> bytes:
        return json.dumps({"key": self.key, "amount": self.amount, "event_time": self.event_time}).encode()


def build_query(
    spark: Any,
    service_url: str,
    checkpoint: str,
    *,
    sources: Iterable[str] = SOURCES,
    sink: str = SINK,
    window: str = "10 seconds",
    watermark: str = "5 seconds",
    starting_offsets: str = "earliest",
    max_records_per_trigger: int | None = None,
    sink_format: str = "pulsar",
    trigger: dict[str, Any] | None = None,
    client_options: Mapping[str, str] | None = None,
) -> Any:
    """Start the pipeline's streaming query; returns the ``StreamingQuery``.

    ``client_options``: more options of the source and the sink alike (TLS and authentication:
    ``pulsar.client.authPluginClassName``, ...).
    """
    from pyspark.sql import functions as F  # noqa: N812 (PySpark's usual alias)

    reader = (
        spark.readStream.format("pulsar")
        .option("service.url", service_url)
        .option("topics", ",".join(sources))
        .option("startingOffsets", starting_offsets)
        .options(**(client_options or {}))
    )
    if max_records_per_trigger:
        reader = reader.option("maxRecordsPerTrigger", max_records_per_trigger)
    events = (
        reader.load()
        .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        .select("e.key", "e.amount", F.timestamp_millis("e.event_time").alias("ts"))
        .where(F.col("key").isNotNull())
    )
    aggregates = (
        events.withWatermark("ts", watermark)
        .groupBy(F.window("ts", window), "key")
        .agg(F.count("*").alias("events"), F.sum("amount").alias("total"))
    )
    out = aggregates.select(
        F.col("key").alias("__key"),
        F.to_json(
            F.struct(
                F.col("key"),
                F.unix_millis(F.col("window.start")).alias("window_start"),
                F.unix_millis(F.col("window.end")).alias("window_end"),
                F.col("events"),
                F.col("total"),
            )
        ).alias("value"),
    )
    writer = (
        out.writeStream.format(sink_format)
        .option("service.url", service_url)
        .option("topic", full_topic_name(sink))
        .option("checkpointLocation", checkpoint)
        .options(**(client_options or {}))
        .outputMode("append")
    )
    return writer.trigger(**(trigger or {"processingTime": "1 second"})).start()


def sample_events(count: int, keys: int = 5, start_ms: int = 1_700_000_000_000, seed: int = 7) -> list[Event]:
    """``count`` events over ``keys`` keys, one every 100 ms of event time, slightly out of order."""
    rng = random.Random(seed)
    events = []
    for i in range(count):
        jitter = rng.randint(-2000, 0)
        events.append(Event(f"key-{rng.randrange(keys)}", rng.randint(1, 9), start_ms + i * 100 + jitter))
    return events


def window_totals(events: Iterable[Event], window_ms: int = 10_000) -> dict[tuple[str, int], tuple[int, int]]:
    """Reference result: ``(key, window start) -> (events, total)``."""
    totals: dict[tuple[str, int], tuple[int, int]] = {}
    for event in events:
        slot = (event.key, event.event_time - event.event_time % window_ms)
        count, total = totals.get(slot, (0, 0))
        totals[slot] = (count + 1, total + event.amount)
    return totals


def produce(service_url: str, topic: str, events: Iterable[Event], authentication: Security | None = None) -> int:
    """Publish events as JSON (no transaction); returns how many."""
    with new_client(service_url, authentication) as client:
        producer = client.create_producer(topic, batching_enabled=True)
        sent = 0
        for event in events:
            producer.send_async(event.to_json(), None, partition_key=event.key)
            sent += 1
        producer.flush()
        producer.close()
    return sent


def read_topic(service_url: str, topic: str, authentication: Security | None = None) -> list[dict[str, Any]]:
    """Every committed message of a topic (all partitions), decoded from JSON."""
    rows = []
    with new_client(service_url, authentication) as client:
        probe = TopicProbe(client)
        try:
            for partition in client.get_topic_partitions(topic):
                last = probe.last_position(partition)
                if last is None or is_empty(last):
                    continue
                reader = PartitionReader(client, partition, EARLIEST, last, poll_timeout=10.0)
                rows.extend(json.loads(m.value or b"null") for m in reader.messages())
        finally:
            probe.close()
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """The sink's records as a text table, ordered by window and key."""
    header = ("window_start (UTC)", "window_end", "key", "events", "total")
    lines = []
    for row in sorted(rows, key=lambda r: (r["window_start"], r["key"])):
        start = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row["window_start"] / 1000))
        end = time.strftime("%H:%M:%S", time.gmtime(row["window_end"] / 1000))
        lines.append((start, end, row["key"], str(row["events"]), str(row["total"])))
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]
    out = [" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    out.append("-+-".join("-" * w for w in widths))
    out.extend(" | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines)
    return "\n".join(out)


# -- the demo ---------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def endpoint(data_dir: Path) -> Iterator[str]:
    """This project's endpoint on the embedded store, as a child process; yields its service URL."""
    port = _free_port()
    command = [
        sys.executable, "-m", "proxy", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--data-dir", str(data_dir), "--advertised-address", "127.0.0.1", "--log-level", "WARNING",
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the endpoint did not start") from None
                time.sleep(0.05)
        yield f"pulsar://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def spark_session(
    app: str = "pulsar-pipeline", cores: int = 2, master: str | None = None, conf: dict[str, str] | None = None
) -> Any:
    """A SparkSession with the ``pulsar`` source registered (Python workers use this interpreter).

    ``master``: ``local[cores]`` by default, else a cluster's URL (``spark://host:7077``); ``conf``: more settings.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from spark.datasource import PulsarDataSource

    builder = (
        SparkSession.builder.master(master or f"local[{cores}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.sql.streaming.stateStore.providerClass",
                "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(PulsarDataSource)
    return session


def wait_for_windows(
    service_url: str, topic: str, windows: set[tuple[str, int]], timeout: float, authentication: Security | None = None
) -> list[dict[str, Any]]:
    """Poll a topic until every ``(key, window start)`` in ``windows`` is there; the matching records."""
    deadline = time.monotonic() + timeout
    while True:
        rows = [r for r in read_topic(service_url, topic, authentication) if (r["key"], r["window_start"]) in windows]
        if len({(r["key"], r["window_start"]) for r in rows}) >= len(windows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


def offsets_after_current_end(
    service_url: str, topics: Iterable[str], authentication: Security | None = None
) -> str:
    """``startingOffsets`` JSON that starts each topic partition after its current last message."""
    offsets: dict[str, Any] = {}
    with new_client(service_url, authentication) as client:
        probe = TopicProbe(client)
        try:
            for topic in topics:
                for partition in client.get_topic_partitions(topic):
                    last = probe.last_position(partition)
                    if last is None or is_empty(last):
                        offsets[partition] = "earliest"
                    else:  # the (possibly absent) message right after the last one is the first read
                        offsets[partition] = list(message_id_bytes(last.ledger, last.entry, -1, last.index + 1, 1))
        finally:
            probe.close()
    return json.dumps(offsets)


def run_demo(
    events_per_source: int = 500, keep: str | None = None, service_url: str | None = None, master: str | None = None
) -> int:
    """Publish sample events, run the pipeline, print the result table; 0 when the aggregates are exact.

    Without ``service_url``, an endpoint is started on a store in ``keep`` (or a temporary directory).
    Each run reads only the events it published (its own checkpoint and starting offsets), with event
    times from the current time, so runs against a long-lived endpoint do not disturb each other.
    """
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="pulsar-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        with ExitStack() as stack:
            url = service_url or stack.enter_context(endpoint(work / "data"))
            print(f"endpoint: {url}" + ("" if service_url else f" (started, data in {work / 'data'})"))
            now = int(time.time() * 1000)
            first = now - now % 10_000
            a1 = sample_events(events_per_source, start_ms=first, seed=1)
            a2 = sample_events(events_per_source, start_ms=first, seed=2)
            # One last event per source moves the watermark past every window of the sample.
            end_ms = max(e.event_time for e in a1 + a2) + 20_000
            starting = offsets_after_current_end(url, SOURCES)
            produce(url, SOURCES[0], [*a1, Event("end-of-input", 0, end_ms)])
            produce(url, SOURCES[1], [*a2, Event("end-of-input", 0, end_ms)])
            expected = window_totals(a1 + a2)
            print(f"published {len(a1) + 1} events to {SOURCES[0]} and {len(a2) + 1} to {SOURCES[1]}")
            print(f"starting Spark ({master or 'local[2]'}) ...")
            session = spark_session("pulsar-demo", master=master)
            checkpoint = work / f"checkpoint-{time.strftime('%Y%m%dT%H%M%S')}"
            query = build_query(session, url, str(checkpoint), starting_offsets=starting)
            rows = wait_for_windows(url, SINK, set(expected), timeout=300)
            query.stop()
            session.stop()
            print(f"\n{SINK}: {len(rows)} windows of this run (read committed)\n")
            print(format_table(rows))
            got = {(r["key"], r["window_start"]): (r["events"], r["total"]) for r in rows}
            exact = got == expected and len(rows) == len(got)
            verdict = "match the input exactly, each once" if exact else "DO NOT match the input"
            print(f"\n{len(rows)} records; the aggregates {verdict} ({time.monotonic() - started:.0f} s)")
            return 0 if exact else 1
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
