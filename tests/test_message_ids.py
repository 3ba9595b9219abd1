"""Message ids: signed ledger and entry ids over the unsigned wire fields, range checks, and where an id points in a
topic's log (the value type of ``wire/message_id.py`` and the Spark reader's positions built on it)."""

from __future__ import annotations

from typing import Any

import pulsar
import pytest

from pulsar_txn import Client
from spark.reader import PartitionReader, Position, parse_message_id
from wire.message_id import EARLIEST, INT64_MAX, INT64_MIN, LATEST, MessageId, signed64, unsigned64
from wire.pulsar_api_pb2 import MessageIdData

U64_MAX = 2**64 - 1


@pytest.mark.parametrize(
    ("raw", "signed"),
    [(0, 0), (5, 5), (INT64_MAX, INT64_MAX), (2**63, INT64_MIN), (U64_MAX, -1), (U64_MAX - 1, -2)],
)
def test_wire_values_are_java_longs(raw: int, signed: int) -> None:
    assert signed64(raw) == signed
    assert unsigned64(signed) == raw


@pytest.mark.parametrize("raw", [-1, 2**64])
def test_a_value_outside_uint64_is_not_a_wire_value(raw: int) -> None:
    with pytest.raises(ValueError):
        signed64(raw)


@pytest.mark.parametrize("value", [INT64_MIN - 1, INT64_MAX + 1])
def test_a_value_outside_int64_has_no_wire_form(value: int) -> None:
    with pytest.raises(ValueError):
        unsigned64(value)


def test_entry_minus_one_from_the_wire_is_before_the_first_entry() -> None:
    """The C++ client's cumulative ack "up to the entry before this batch": entry -1 as 2^64-1."""
    mid = MessageId.from_proto(MessageIdData(ledgerId=7, entryId=U64_MAX, batch_index=3, batch_size=10))
    assert (mid.ledger, mid.entry, mid.batch_index, mid.batch_size) == (7, -1, 3, 10)
    assert mid.stored_entry(7, 100) is None
    assert mid.start_entry(7, 0, 101) == 0


def test_round_trip_through_the_wire() -> None:
    for mid in (
        EARLIEST,
        LATEST,
        MessageId(3, -1),
        MessageId(3, 9, 2, 4, 5, (-8,)),
        MessageId(INT64_MIN, INT64_MAX),
    ):
        data = MessageIdData()
        data.ParseFromString(mid.to_proto().SerializeToString())
        assert MessageId.from_proto(data) == mid
    assert MessageId.from_proto(EARLIEST.to_proto()).is_earliest
    assert MessageId.from_proto(LATEST.to_proto()).is_latest
    assert (EARLIEST.to_proto().ledgerId, EARLIEST.to_proto().entryId) == (U64_MAX, U64_MAX)


@pytest.mark.parametrize(
    "fields",
    [
        (2**63, 0),
        (0, -(2**63) - 1),
        (0, 0, 2**31),
        (0, 0, -1, -(2**31) - 1),
        ("1", 0),
        (True, 0),
        (1.5, 0),
        (None, 0),
    ],
)
def test_untrusted_fields_are_range_checked(fields: tuple) -> None:
    with pytest.raises(ValueError):
        MessageId.checked(*fields)


def test_checked_accepts_the_full_ranges() -> None:
    assert MessageId.checked(INT64_MIN, INT64_MAX, 2**31 - 1, -(2**31)) == MessageId(
        INT64_MIN, INT64_MAX, 2**31 - 1, -(2**31)
    )


@pytest.mark.parametrize(
    ("mid", "stored"),
    [
        (MessageId(10, 0), 0),
        (MessageId(10, 4), 4),
        (MessageId(10, 5), None),  # beyond the last entry
        (MessageId(10, -1), None),  # before the first entry
        (MessageId(9, 2), None),  # an earlier ledger
        (MessageId(11, 0), None),  # a later ledger
        (EARLIEST, None),
        (LATEST, None),
    ],
)
def test_stored_entry(mid: MessageId, stored: int | None) -> None:
    assert mid.stored_entry(10, 4) == stored


@pytest.mark.parametrize(
    ("mid", "start"),
    [
        (EARLIEST, 2),
        (LATEST, 5),
        (MessageId(10, -1), 2),  # before the first entry: the first entry
        (MessageId(10, 0), 2),  # trimmed away: the first entry still stored
        (MessageId(10, 3), 3),
        (MessageId(10, 9), 5),  # beyond the end: the end
        (MessageId(9, 7), 2),  # an earlier ledger: the first entry
        (MessageId(11, 0), 5),  # a later ledger: the end
    ],
)
def test_start_entry(mid: MessageId, start: int) -> None:
    assert mid.start_entry(10, 2, 5) == start


def test_spark_reader_starts_after_an_id_before_the_first_entry(client: pulsar.Client, server: Any, topic: str) -> None:
    """The Spark reader reading after entry -1 of a ledger (a pulsar-spark offset naming the entry before the first,
    signed bytes as pulsar-spark writes them) gets every message, as from earliest."""
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10)
    for i in range(30):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    last = producer.send(b"last")
    raw = MessageId(last.ledger_id(), -1).to_proto().SerializeToString()
    after = parse_message_id([b - 256 if b > 127 else b for b in raw])
    assert after == Position(last.ledger_id(), -1, 0)
    until = Position(last.ledger_id(), last.entry_id(), 0)
    with Client(server.url) as spark_client:
        read = PartitionReader(spark_client, topic, after.before(), until, poll_timeout=10).messages()
        assert [m.value for m in read] == [f"m{i}".encode() for i in range(30)] + [b"last"]
