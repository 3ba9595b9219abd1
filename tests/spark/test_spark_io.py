"""The ``pulsar`` data source: batch round trips, streaming reads (earliest, JSON offsets, patterns), schemas."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from pathlib import Path
from typing import Any

import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, Record, String
from spark_helpers import name, partitioned, publish, read_committed, values

UTC = dt.UTC


def _read(session: Any, url: str, **options: str) -> Any:
    reader = session.read.format("pulsar").option("service.url", url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _stream(session: Any, url: str, **options: Any) -> Any:
    reader = session.readStream.format("pulsar").option("service.url", url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _drain(frame: Any, table: str) -> list[Any]:
    """Run a streaming frame to the end of what is there now (Trigger.AvailableNow); its rows."""
    frame.writeStream.format("memory").queryName(table).trigger(availableNow=True).start().awaitTermination()
    return frame.sparkSession.table(table).collect()


def test_batch_write_then_read_round_trip(session: Any, server: Any) -> None:
    topic = name("rt")
    event = dt.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)
    rows = [(f"v{i}", f"k{i % 3}", {"n": str(i)}, event) for i in range(50)]
    frame = session.createDataFrame(
        rows, "value string, __key string, __messageProperties map<string,string>, __eventTime timestamp"
    )
    frame.write.format("pulsar").option("service.url", server.url).option("topic", topic).mode("append").save()

    back = _read(session, server.url, topic=topic).collect()
    assert sorted((r.value.decode(), r["__key"].decode(), r["__messageProperties"]["n"]) for r in back) == sorted(
        (v, k, p["n"]) for v, k, p, _ in rows
    )
    assert {r["__topic"] for r in back} == {topic}
    assert {r["__eventTime"].replace(tzinfo=UTC) for r in back} == {event}
    assert all(r["__publishTime"] is not None for r in back)
    # The official client sees the same messages, keys and properties.
    official = read_committed(server.url, topic, 800)
    assert sorted((m.data().decode(), m.partition_key(), m.properties()["n"]) for m in official) == sorted(
        (v, k, p["n"]) for v, k, p, _ in rows
    )
    # __messageId is the serialized MessageIdData of each message.
    ids = [pulsar.MessageId.deserialize(r["__messageId"]) for r in back]
    assert {(m.ledger_id(), m.entry_id(), m.batch_index()) for m in ids} == {
        (m.message_id().ledger_id(), m.message_id().entry_id(), m.message_id().batch_index()) for m in official
    }


def test_batch_write_routes_rows_by_topic_column_and_reads_a_topic_list(session: Any, server: Any) -> None:
    first, second = name("route-a"), name("route-b")
    rows = [(f"x{i}".encode(), first if i % 2 else second) for i in range(20)]
    frame = session.createDataFrame(rows, "value binary, __topic string")
    frame.write.format("pulsar").option("service.url", server.url).mode("append").save()
    # Two tasks write concurrently: each topic holds its rows, in no particular order.
    assert sorted(values(read_committed(server.url, first, 800))) == sorted(f"x{i}" for i in range(1, 20, 2))
    assert sorted(values(read_committed(server.url, second, 800))) == sorted(f"x{i}" for i in range(0, 20, 2))

    back = _read(session, server.url, topics=f"{first},{second}").collect()
    assert sorted((r["__topic"], r.value) for r in back) == sorted((t, v) for v, t in rows)


def test_rows_without_value_column_are_written_as_json(session: Any, server: Any) -> None:
    topic = name("json")
    frame = session.createDataFrame([("a", 1), ("b", 2)], "key string, amount int")
    frame.write.format("pulsar").option("service.url", server.url).option("topic", topic).mode("append").save()
    assert sorted(values(read_committed(server.url, topic, 800))) == [
        '{"key":"a","amount":1}',
        '{"key":"b","amount":2}',
    ]


def test_partitioned_topics_are_split_by_partition_and_keys_routed(session: Any, server: Any) -> None:
    topic = partitioned(server, "parts", 3)
    rows = [(f"v{i}", f"key-{i % 10}") for i in range(300)]
    frame = session.createDataFrame(rows, "value string, __key string")
    frame.write.format("pulsar").option("service.url", server.url).option("topic", topic).mode("append").save()

    reader = _read(session, server.url, topic=topic)
    assert reader.rdd.getNumPartitions() == 3
    back = reader.collect()
    assert sorted((r.value.decode(), r["__key"].decode()) for r in back) == sorted(rows)
    assert {r["__topic"] for r in back} == {f"{topic}-partition-{i}" for i in range(3)}
    partitions_of_key: dict[str, set[str]] = {}
    for r in back:
        partitions_of_key.setdefault(r["__key"].decode(), set()).add(r["__topic"])
    assert all(len(p) == 1 for p in partitions_of_key.values())


def test_compressed_messages_are_read_with_every_codec(session: Any, server: Any) -> None:
    topic = name("codecs")
    expected = []
    for codec in ("LZ4", "ZLib", "ZSTD", "SNAPPY"):
        for batching in (True, False):
            sent = [f"{codec}-{batching}-{i}-" + "compressible " * 20 for i in range(30)]
            publish(server.url, topic, sent, batching=batching, compression=getattr(pulsar.CompressionType, codec))
            expected += sent
    assert [r.value.decode() for r in _read(session, server.url, topic=topic).collect()] == expected


def test_batch_read_between_json_offsets(session: Any, server: Any) -> None:
    topic = name("range")
    ids = publish(server.url, topic, [f"m{i}" for i in range(10)], batching=False)
    start = list(ids[2].serialize())
    end = list(ids[7].serialize())
    frame = _read(
        session,
        server.url,
        topic=topic,
        startingOffsets=f'{{"{topic}": {start}}}',
        endingOffsets=f'{{"{topic}": {end}}}',
    )
    assert [r.value.decode() for r in frame.collect()] == [f"m{i}" for i in range(2, 7)]


def test_streaming_read_from_earliest_then_only_new_messages(session: Any, server: Any, tmp_path: Path) -> None:
    topic = name("stream")
    publish(server.url, topic, [f"a{i}" for i in range(40)])
    frame = _stream(session, server.url, topic=topic, startingOffsets="earliest").selectExpr(
        "cast(value as string) as v"
    )
    seen: list[list[str]] = []

    def run() -> None:
        query = (
            frame.writeStream.foreachBatch(lambda batch, _: seen.append([r.v for r in batch.collect()]))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    run()
    assert seen == [[f"a{i}" for i in range(40)]]
    publish(server.url, topic, [f"b{i}" for i in range(5)])
    run()  # restarted from the checkpoint: only what came since
    assert seen[1:] == [[f"b{i}" for i in range(5)]]


def test_streaming_read_from_a_json_offset_inside_a_batch(session: Any, server: Any) -> None:
    topic = name("offset")
    publish(server.url, topic, [f"m{i}" for i in range(60)])  # batches of 25 messages per entry
    ids = {r.value.decode(): r["__messageId"] for r in _read(session, server.url, topic=topic).collect()}
    start = [b - 256 if b > 127 else b for b in ids["m30"]]  # signed bytes, as pulsar-spark writes them
    frame = _stream(session, server.url, topic=topic, startingOffsets=f'{{"{topic}": {start}}}')
    rows = _drain(frame.selectExpr("cast(value as string) as v"), f"t_{uuid.uuid4().hex[:8]}")
    assert [r.v for r in rows] == [f"m{i}" for i in range(30, 60)]


def test_read_from_an_id_before_the_first_entry_reads_everything(session: Any, server: Any) -> None:
    """An id of entry -1 (before the ledger's first entry, as a client's "entry before" or an empty ledger's last
    message id names it) travels as 2^64-1; Pulsar reads it as -1, so reading starts at the first message."""
    topic = name("before-first")
    ids = publish(server.url, topic, [f"m{i}" for i in range(60)])
    before_first = list(pulsar.MessageId(-1, ids[0].ledger_id(), -1, -1).serialize())
    for frame in (
        _read(session, server.url, topic=topic, startingOffsets=f'{{"{topic}": {before_first}}}'),
        _stream(session, server.url, topic=topic, startingOffsets=f'{{"{topic}": {before_first}}}'),
    ):
        if frame.isStreaming:
            rows = _drain(frame.selectExpr("cast(value as string) as v"), f"t_{uuid.uuid4().hex[:8]}")
        else:
            rows = frame.selectExpr("cast(value as string) as v").collect()
        assert [r.v for r in rows] == [f"m{i}" for i in range(60)]


def test_available_now_with_a_record_limit_makes_several_batches(session: Any, server: Any) -> None:
    first, second = name("lim-a"), name("lim-b")
    publish(server.url, first, [f"a{i}" for i in range(70)])
    publish(server.url, second, [f"b{i}" for i in range(30)])
    frame = _stream(
        session, server.url, topics=f"{first},{second}", startingOffsets="earliest", maxRecordsPerTrigger=40
    ).selectExpr("cast(value as string) as v")
    table = f"t_{uuid.uuid4().hex[:8]}"
    query = frame.writeStream.format("memory").queryName(table).trigger(availableNow=True).start()
    query.awaitTermination()
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [40, 40, 20]
    assert sorted(r.v for r in session.table(table).collect()) == sorted(
        [f"a{i}" for i in range(70)] + [f"b{i}" for i in range(30)]
    )


def test_pattern_source_picks_up_a_new_topic(session: Any, server: Any) -> None:
    prefix = f"pat-{uuid.uuid4().hex[:8]}"
    publish(server.url, f"persistent://public/default/{prefix}-one", ["one-0", "one-1"])
    frame = _stream(
        session,
        server.url,
        topicsPattern=f"persistent://public/default/{prefix}-.*",
        startingOffsets="earliest",
    ).selectExpr("cast(value as string) as v", "__topic")
    table = f"t_{uuid.uuid4().hex[:8]}"
    query = frame.writeStream.format("memory").queryName(table).trigger(processingTime="300 milliseconds").start()
    try:

        def seen() -> set[str]:
            return {r.v for r in session.table(table).collect()}

        deadline = time.monotonic() + 60
        while seen() != {"one-0", "one-1"} and time.monotonic() < deadline:
            time.sleep(0.3)
        assert seen() == {"one-0", "one-1"}
        publish(server.url, f"persistent://public/default/{prefix}-two", ["two-0"])
        while "two-0" not in seen() and time.monotonic() < deadline:
            time.sleep(0.3)
        assert seen() == {"one-0", "one-1", "two-0"}
    finally:
        query.stop()


class Reading(Record):
    sensor = String()
    value = Integer()


def test_values_are_decoded_by_the_topic_schema(session: Any, server: Any) -> None:
    avro, text = name("avro"), name("text")
    client = pulsar.Client(server.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        producer = client.create_producer(avro, schema=AvroSchema(Reading))
        for i in range(3):
            producer.send(Reading(sensor=f"s{i}", value=i * 10))
        strings = client.create_producer(text, schema=pulsar.schema.StringSchema())
        strings.send("hello")
    finally:
        client.close()
    frame = _read(session, server.url, topic=avro)
    assert frame.columns[:2] == ["sensor", "value"]
    assert dict(frame.dtypes)["value"] == "int"
    assert sorted((r.sensor, r.value) for r in frame.collect()) == [("s0", 0), ("s1", 10), ("s2", 20)]
    texts = _read(session, server.url, topic=text)
    assert dict(texts.dtypes)["value"] == "string"
    assert [r.value for r in texts.collect()] == ["hello"]


def test_missing_options_are_reported(session: Any, server: Any) -> None:
    with pytest.raises(Exception, match="exactly one of 'topic', 'topics' or 'topicsPattern'"):
        session.read.format("pulsar").option("service.url", server.url).load().collect()
