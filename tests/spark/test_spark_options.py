"""The options of the ``pulsar`` data source (issue 22, defect 3): unknown names fail at load()/save()/start()
naming the option and listing the valid ones; the documented options each change what is read."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import name, partitioned, publish

from tests.test_admin_http import Http


def _read(session: Any, url: str, **options: Any) -> Any:
    reader = session.read.format("pulsar").option("service.url", url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _stream(session: Any, url: str, **options: Any) -> Any:
    reader = session.readStream.format("pulsar").option("service.url", url)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _texts(frame: Any) -> list[str]:
    return [r.v for r in frame.selectExpr("cast(value as string) as v").collect()]


def test_a_misspelled_read_option_fails_load_naming_it_and_listing_the_valid_ones(session: Any, server: Any) -> None:
    topic = name("typo")
    publish(server.url, topic, ["m0"])
    with pytest.raises(Exception, match="unknown option 'startingofsets'") as failure:
        _read(session, server.url, topic=topic, startingOfsets="latest")  # load() alone must fail
    text = str(failure.value)
    assert "did you mean 'startingOffsets'?" in text
    for valid in ("startingOffsets", "startingTime", "endingTime", "failOnDataLoss", "reconnectTimeoutMs"):
        assert valid in text


def test_unknown_write_options_fail_save_and_start(session: Any, server: Any, tmp_path: Path) -> None:
    topic = name("typo-w")
    frame = session.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="unknown option 'deliveryguarante'"):
        frame.write.format("pulsar").option("service.url", server.url).option("topic", topic).option(
            "deliveryGuarante", "at-least-once"
        ).mode("append").save()
    publish(server.url, topic, ["m0"])
    stream = _stream(session, server.url, topic=topic, startingOffsets="earliest").select("value")
    # Spark makes a streaming sink's writer when the query starts running: the query fails at once.
    query = (
        stream.writeStream.format("pulsar")
        .option("service.url", server.url)
        .option("topic", name("out"))
        .option("transactionTimeout", "1000")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    with pytest.raises(Exception, match=r"unknown option 'transactiontimeout'.*valid options:.*transactionTimeoutMs"):
        query.awaitTermination(60)


def test_bad_values_are_reported_with_their_option(session: Any, server: Any) -> None:
    topic = name("values")
    with pytest.raises(Exception, match="option 'maxRecordsPerTrigger' must be an integer, not 'many'"):
        _stream(session, server.url, topic=topic, maxRecordsPerTrigger="many").writeStream.format("noop").start()
    with pytest.raises(Exception, match="option 'failOnDataLoss' must be true or false"):
        _read(session, server.url, topic=topic, failOnDataLoss="maybe")
    with pytest.raises(Exception, match="give either 'startingOffsets' or 'startingTime'"):
        _read(session, server.url, topic=topic, startingOffsets="earliest", startingTime=1)


def test_starting_and_ending_time_select_by_publish_time(session: Any, server: Any) -> None:
    topic = name("times")
    publish(server.url, topic, [f"a{i}" for i in range(5)])
    time.sleep(0.2)
    t1 = int(time.time() * 1000)
    time.sleep(0.2)
    publish(server.url, topic, [f"b{i}" for i in range(5)], batching=False)
    time.sleep(0.2)
    t2 = int(time.time() * 1000)
    time.sleep(0.2)
    publish(server.url, topic, [f"c{i}" for i in range(5)])
    a, b, c = ([f"{g}{i}" for i in range(5)] for g in "abc")
    assert _texts(_read(session, server.url, topic=topic, startingTime=t1)) == b + c
    assert _texts(_read(session, server.url, topic=topic, endingTime=t2)) == a + b
    assert _texts(_read(session, server.url, topic=topic, startingTime=t1, endingTime=t2)) == b
    assert _texts(_read(session, server.url, topic=topic, startingTime=int(time.time() * 1000) + 60_000)) == []
    table = f"t_{uuid.uuid4().hex[:8]}"
    query = (
        _stream(session, server.url, topic=topic, startingTime=t2)
        .selectExpr("cast(value as string) as v")
        .writeStream.format("memory")
        .queryName(table)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert [r.v for r in session.table(table).collect()] == c


def test_per_partition_offsets_name_earliest_and_latest(session: Any, server: Any) -> None:
    topic = partitioned(server, "per-part", 2)
    publish(server.url, f"{topic}-partition-0", [f"p0-{i}" for i in range(4)])
    publish(server.url, f"{topic}-partition-1", [f"p1-{i}" for i in range(4)])
    p0, p1 = f"{topic}-partition-0", f"{topic}-partition-1"
    # A partition at "latest" reads nothing; one not named starts at the earliest.
    assert _texts(_read(session, server.url, topic=topic, startingOffsets=f'{{"{p0}": "latest"}}')) == [
        f"p1-{i}" for i in range(4)
    ]
    # Ending at "earliest" reads nothing of that partition.
    assert _texts(_read(session, server.url, topic=topic, endingOffsets=f'{{"{p1}": "earliest"}}')) == [
        f"p0-{i}" for i in range(4)
    ]


def test_a_deleted_topic_fails_the_query_unless_fail_on_data_loss_is_false(
    session: Any, server: Any, tmp_path: Path
) -> None:
    topic = name("deleted")
    publish(server.url, topic, [f"m{i}" for i in range(10)])
    seen: list[str] = []

    def run(**options: Any) -> Any:
        return (
            _stream(session, server.url, topic=topic, startingOffsets="earliest", **options)
            .selectExpr("cast(value as string) as v")
            .writeStream.foreachBatch(lambda batch, _: seen.extend(r.v for r in batch.collect()))
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )

    run().awaitTermination()
    assert len(seen) == 10
    status = Http(server.admin_url).request("DELETE", f"/admin/v2/{topic.replace('://', '/')}?force=true")[0]
    assert status == 204
    with pytest.raises(Exception, match=r"deleted or truncated.*failOnDataLoss=false"):
        run().awaitTermination()
    run(failOnDataLoss="false").awaitTermination()
    assert len(seen) == 10
