"""The read side of the ``pulsar`` data source: batch and streaming readers.

Spark offsets are ``{topic-partition: [ledger, entry, index]}``: the last message already read of each
partition (``[-1, -1, -1]``: nothing). A micro-batch reads ``(start, end]`` of every partition, one Spark
task per partition, and ``end`` never goes past the last message id the broker reports, so only
committed data is read and a replayed batch reads exactly the same messages. Partitions that appear
later (a new topic matching ``topicsPattern``, more partitions) are read from their start.

``startingOffsets`` / ``endingOffsets`` JSON maps topic partitions to a message id as pulsar-spark writes
it (the serialized ``MessageIdData`` as a list of signed or unsigned bytes, e.g. ``__messageId`` of a
row), or to ``"earliest"`` / ``"latest"``; partitions not named start at the earliest (end at the latest).
The starting message is the first one read; the ending message is the first one not read.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from pulsar_txn import Client, ConnectError
from spark.backoff import RETRYABLE, Backoff
from spark.options import (
    SOURCE_OPTIONS,
    OptionError,
    backoff,
    check_names,
    get_bool,
    get_int,
    security,
    service_url,
    topic_name,
)
from spark.reader import (
    EARLIEST,
    Columns,
    DataLossError,
    PartitionReader,
    Position,
    TopicProbe,
    count_until,
    is_empty,
    parse_message_id,
)
from spark.schema import ValueSchema
from spark.security import Security, new_client
from wire.pulsar_api_pb2 import MessageMetadata

log = logging.getLogger(__name__)

R = TypeVar("R")

#: Rows per Arrow record batch handed to Spark.
ROWS_PER_BATCH = 8192


@dataclass(frozen=True)
class SourceOptions:
    """The reader options (plain data: Spark pickles it to executors)."""

    service_url: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    starting: str = "latest"
    ending: str = "latest"
    starting_time: int | None = None
    ending_time: int | None = None
    max_records_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    poll_timeout: float = 120.0
    admin_url: str | None = None
    backoff: Backoff = field(default_factory=Backoff)
    #: TLS and credentials (plain values, pickled to the executors with the rest).
    security: Security = field(default_factory=Security)

    @classmethod
    def parse(cls, options: Any, streaming: bool) -> SourceOptions:
        """From the (case-insensitive) options Spark passes; ``startingOffsets`` defaults as in pulsar-spark."""
        check_names(options, SOURCE_OPTIONS, "source")
        url = service_url(options)
        given = [k for k in ("topic", "topics", "topicsPattern") if options.get(k)]
        if len(given) != 1:
            raise OptionError("exactly one of 'topic', 'topics' or 'topicsPattern' is required")
        topics: tuple[str, ...] = ()
        pattern = None
        if given[0] == "topicsPattern":
            pattern = topic_name(options.get("topicsPattern"))
        else:
            names = options.get(given[0]).split(",") if given[0] == "topics" else [options.get("topic")]
            topics = tuple(topic_name(t.strip()) for t in names if t.strip())
        if streaming:
            for batch_only in ("endingOffsets", "endingTime"):
                if options.get(batch_only):
                    raise OptionError(f"'{batch_only}' is for batch queries only")
        for offsets, time_option in (("startingOffsets", "startingTime"), ("endingOffsets", "endingTime")):
            if options.get(offsets) and options.get(time_option):
                raise OptionError(f"give either '{offsets}' or '{time_option}', not both")
        return cls(
            service_url=url,
            topics=topics,
            pattern=pattern,
            starting=options.get("startingOffsets") or ("latest" if streaming else "earliest"),
            ending=options.get("endingOffsets") or "latest",
            starting_time=get_int(options, "startingTime", None),
            ending_time=get_int(options, "endingTime", None),
            max_records_per_trigger=get_int(options, "maxRecordsPerTrigger", None, 1),
            fail_on_data_loss=get_bool(options, "failOnDataLoss", True),
            poll_timeout=(get_int(options, "pollTimeoutMs", 120_000, 1) or 0) / 1000,
            admin_url=options.get("admin.url"),
            backoff=backoff(options),
            security=security(options),
        )

    def new_client(self) -> Client:
        """A client of the service URL with these options' TLS and credentials."""
        return new_client(self.service_url, self.security, self.backoff.attempt_seconds)


# -- shared per-process clients ----------------------------------------------------------------------

_CLIENTS: dict[tuple[str, Security, int, int], Client] = {}
_CLIENTS_LOCK = threading.Lock()


def client_for(options: SourceOptions) -> Client:
    """A client for this process and thread (Spark reuses Python workers across tasks)."""
    key = (options.service_url, options.security, options.backoff.attempt_seconds, threading.get_ident())
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = options.new_client()
        return client


# -- topics and offsets -------------------------------------------------------------------------------


def resolve_partitions(client: Client, options: SourceOptions) -> list[str]:
    """The topic partitions the options name, now (patterns and partition counts are looked up again)."""
    topics = client.get_topics_matching(options.pattern) if options.pattern is not None else list(options.topics)
    partitions: list[str] = []
    for topic in topics:
        partitions.extend(client.get_topic_partitions(topic))
    return sorted(set(partitions))


def value_schema(client: Client, options: SourceOptions) -> ValueSchema:
    """The value schema of the topics read (the first topic with a schema decides; none: bytes)."""
    names = [topic_name(t) for t in options.topics] or resolve_partitions(client, options)
    for name in names:
        found = client.get_schema(name)
        if found is not None:
            return ValueSchema.of(found[0])
    return ValueSchema()


def _json_positions(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"{what} is neither 'earliest', 'latest' nor JSON: {exc}") from None
    if not isinstance(data, dict):
        raise OptionError(f"{what} JSON must be an object of topic-partition -> message id")
    return {topic_name(k): v for k, v in data.items()}


def _json_position(value: Any, latest: Position | None, what: str) -> Position:
    """A JSON offset value as a reading position: the named message is the first one read (or not read,
    for ``endingOffsets``, which end before it)."""
    if value == "earliest" or value == -2:
        return EARLIEST
    if value == "latest" or value == -1:
        return EARLIEST if latest is None or is_empty(latest) else latest
    if isinstance(value, list):
        return parse_message_id(value).before()
    if isinstance(value, dict):
        return Position(int(value["ledger"]), int(value["entry"]), int(value.get("batchIndex", 0))).before()
    raise OptionError(f"{what}: cannot read a message id from {value!r}")


def last_positions(probe: TopicProbe, partitions: Sequence[str]) -> dict[str, Position]:
    """The broker's last dispatchable message of each partition (EARLIEST when empty or missing)."""
    found = {}
    for partition in partitions:
        last = probe.last_position(partition)
        found[partition] = EARLIEST if last is None or is_empty(last) else last
    return found


def start_positions(
    spec: str, partitions: Sequence[str], latest: dict[str, Position]
) -> dict[str, Position]:
    """Reading starts (exclusive) from ``startingOffsets``."""
    if spec == "earliest":
        return dict.fromkeys(partitions, EARLIEST)
    if spec == "latest":
        return {p: latest[p] for p in partitions}
    given = _json_positions(spec, "startingOffsets")
    return {
        p: _json_position(given[p], latest[p], "startingOffsets") if p in given else EARLIEST for p in partitions
    }


def end_positions(spec: str, partitions: Sequence[str], latest: dict[str, Position]) -> dict[str, Position]:
    """Reading ends (inclusive) from ``endingOffsets``."""
    if spec == "latest":
        return {p: latest[p] for p in partitions}
    given = _json_positions(spec, "endingOffsets")
    ends = {}
    for p in partitions:
        if p not in given:
            ends[p] = latest[p]
        elif given[p] in ("earliest", -2):
            ends[p] = EARLIEST
        else:
            ends[p] = min(_json_position(given[p], latest[p], "endingOffsets"), latest[p])
    return ends


def time_position(client: Client, partition: str, publish_time: int, latest: Position, poll_timeout: float) -> Position:
    """The position just before the first message published at ``publish_time`` (ms) or later (``latest`` if none).

    Publish times are read from the entries' metadata from the start of the partition (there is no index).
    """
    if is_empty(latest):
        return EARLIEST
    reader = PartitionReader(client, partition, EARLIEST, latest, poll_timeout=poll_timeout, fail_on_data_loss=False)
    for ledger, entry, metadata, _ in reader.entries():
        if metadata.publish_time >= publish_time:
            return Position(ledger, entry, -1)
    return latest


def time_positions(
    client: Client, partitions: Sequence[str], publish_time: int, latest: dict[str, Position], poll_timeout: float
) -> dict[str, Position]:
    """:func:`time_position` of each partition."""
    return {p: time_position(client, p, publish_time, latest[p], poll_timeout) for p in partitions}


def planned_starts(
    client: Client, options: SourceOptions, partitions: Sequence[str], latest: dict[str, Position]
) -> dict[str, Position]:
    """Where reading starts (exclusive): ``startingTime`` or ``startingOffsets``."""
    if options.starting_time is not None:
        return time_positions(client, partitions, options.starting_time, latest, options.poll_timeout)
    return start_positions(options.starting, partitions, latest)


def planned_ends(
    client: Client, options: SourceOptions, partitions: Sequence[str], latest: dict[str, Position]
) -> dict[str, Position]:
    """Where a batch read ends (inclusive): ``endingTime`` (messages published before it) or ``endingOffsets``."""
    if options.ending_time is not None:
        return time_positions(client, partitions, options.ending_time, latest, options.poll_timeout)
    return end_positions(options.ending, partitions, latest)


def to_offset(positions: dict[str, Position]) -> dict[str, list[int]]:
    """Spark offset dict (sorted keys, so equal offsets serialize equally)."""
    return {p: positions[p].to_list() for p in sorted(positions)}


def from_offset(offset: dict[str, Any]) -> dict[str, Position]:
    return {p: Position(*v) for p, v in offset.items()}


# -- reading a range -----------------------------------------------------------------------------------


@dataclass
class RangePartition(InputPartition):
    """One Spark task: the messages of ``topic`` in ``(after, until]``."""

    topic: str
    after: tuple[int, int, int]
    until: tuple[int, int, int]


def read_range(options: SourceOptions, schema: ValueSchema, part: RangePartition) -> Iterator[pa.RecordBatch]:
    """The rows of one range as Arrow record batches."""
    client = client_for(options)
    arrow_schema = schema.arrow_schema()
    versions: dict[bytes, str | None] = {}

    def writer_schema(version: bytes) -> str | None:
        if version not in versions:
            found = client.get_schema(part.topic, int.from_bytes(version, "big", signed=True))
            versions[version] = found[0].schema_data.decode() if found else None
        return versions[version]

    after, until = Position(*part.after), Position(*part.until)
    decode = None if schema.is_bytes else schema.decoder(writer_schema)
    columns = Columns(part.topic, after, until, len(schema.columns()), decode)
    for ledger, entry, metadata, payload in _entries(options, part.topic, after, until):
        columns.add(ledger, entry, metadata, payload)
        if len(columns) >= ROWS_PER_BATCH:
            yield _batch(columns, arrow_schema)
            columns.clear()
    if len(columns):
        yield _batch(columns, arrow_schema)


def _entries(
    options: SourceOptions, topic: str, after: Position, until: Position
) -> Iterator[tuple[int, int, MessageMetadata, bytes]]:
    """The entries of ``(after, until]``; a lost broker is reconnected to (with back-off) and reading resumes
    after the last entry handed out."""
    retrier = options.backoff.retrier(f"reading {topic}")
    while True:
        reader = PartitionReader(
            client_for(options),
            topic,
            after,
            until,
            poll_timeout=options.poll_timeout,
            fail_on_data_loss=options.fail_on_data_loss,
        )
        try:
            for item in reader.entries():
                yield item
                after = reader.last_seen
                retrier.progress()
            return
        except RETRYABLE as exc:
            retrier.failed(exc)


def _batch(columns: Columns, schema: pa.Schema) -> pa.RecordBatch:
    data = [
        *columns.values,
        columns.keys,
        [columns.topic] * len(columns),
        columns.ids,
        columns.published,
        columns.events,
        columns.properties,
    ]
    return pa.RecordBatch.from_arrays(
        [pa.array(column, type=field.type) for column, field in zip(data, schema, strict=True)], schema=schema
    )


# -- batch ------------------------------------------------------------------------------------------


class PulsarBatchReader(DataSourceReader):
    """``spark.read.format("pulsar")``: a fixed range per partition, planned once."""

    def __init__(self, options: SourceOptions, schema: ValueSchema) -> None:
        self.options = options
        self.value_schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        return self.options.backoff.run(self._plan, "planning the batch read")

    def _plan(self) -> list[InputPartition]:
        client = self.options.new_client()
        probe = TopicProbe(client)
        try:
            names = resolve_partitions(client, self.options)
            latest = last_positions(probe, names)
            starts = planned_starts(client, self.options, names, latest)
            ends = planned_ends(client, self.options, names, latest)
        finally:
            probe.close()
            client.close()
        return [
            RangePartition(p, tuple(starts[p]), tuple(ends[p])) for p in names if ends[p] > starts[p]
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            # Spark plans one ``InputPartition(None)`` when partitions() finds nothing to read.
            return iter(())
        return read_range(self.options, self.value_schema, partition)


# -- streaming --------------------------------------------------------------------------------------


class PulsarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("pulsar")``.

    The planning methods run in one long-lived driver-side process per query run, which keeps a
    client and one idle subscription per partition for GET_LAST_MESSAGE_ID (never pickled).
    """

    def __init__(self, options: SourceOptions, schema: ValueSchema) -> None:
        self.options = options
        self.value_schema = schema
        self._client: Client | None = None
        self._probe: TopicProbe | None = None
        self._target: dict[str, Position] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_client=None, _probe=None)
        return state

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = self.options.new_client()
        return self._client

    @property
    def probe(self) -> TopicProbe:
        if self._probe is None:
            self._probe = TopicProbe(self.client)
        return self._probe

    def _retrying(self, work: Callable[[], R], what: str) -> R:
        """``work()`` with reconnects: a failed attempt drops the client and its subscriptions."""
        return self.options.backoff.run(work, what, on_retry=self.stop)

    def _latest(self) -> dict[str, Position]:
        return self._retrying(
            lambda: last_positions(self.probe, resolve_partitions(self.client, self.options)),
            "finding the end of the topics",
        )

    def initialOffset(self) -> dict:  # noqa: N802 (Spark's names)
        def initial() -> dict:
            latest = last_positions(self.probe, resolve_partitions(self.client, self.options))
            return to_offset(planned_starts(self.client, self.options, sorted(latest), latest))

        return self._retrying(initial, "finding the starting offsets")

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        if self.options.max_records_per_trigger:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._target = self._latest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # noqa: N802
        begin = from_offset(start)
        latest = self._target if self._target is not None else self._latest()
        ends = {}
        for partition in sorted(set(begin) | set(latest)):
            first = begin.get(partition, EARLIEST)
            last = latest.get(partition, EARLIEST)
            if last < first:
                # Deleted, or deleted and made again: what came after the last batch is gone.
                self._lost(partition, first, last)
                ends[partition] = last
            else:
                ends[partition] = last
        if isinstance(limit, ReadMaxRows):
            budget = limit.max_rows
            ends = self._retrying(lambda: self._limit(begin, ends, budget), "counting the records of a trigger")
        return to_offset(ends)

    def _lost(self, partition: str, first: Position, last: Position) -> None:
        text = (
            f"{partition}: the topic ends at {last.to_list()}, before the position already read "
            f"{first.to_list()}: it was deleted or truncated, and messages may have been lost"
        )
        if self.options.fail_on_data_loss:
            raise DataLossError(text + " (set failOnDataLoss=false to go on from its start)")
        log.warning("%s; going on from its start", text)

    def _limit(self, begin: dict[str, Position], ends: dict[str, Position], budget: int) -> dict[str, Position]:
        """Cut the ends so the batch holds at most ``budget`` messages, shared fairly among partitions."""
        cut = {p: begin.get(p, EARLIEST) for p in ends}
        pending = [p for p in sorted(ends) if ends[p] > cut[p]]
        while budget > 0 and pending:
            share = max(1, budget // len(pending))
            still = []
            for partition in pending:
                if budget <= 0:
                    break
                allowed = min(share, budget)
                position, taken = count_until(
                    self.client, partition, cut[partition], ends[partition], allowed, self.options.poll_timeout
                )
                if taken == 0:
                    # The broker reported messages after ``cut`` but none could be read (it is restarting).
                    raise ConnectError(
                        f"{partition}: no message after {cut[partition].to_list()} could be read, though the broker "
                        f"reported messages up to {ends[partition].to_list()}"
                    )
                cut[partition] = position
                budget -= taken
                if taken == allowed and position < ends[partition]:
                    still.append(partition)
            pending = still
        return cut

    def reportLatestOffset(self) -> dict | None:  # noqa: N802
        return None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin = from_offset(start)
        ranges = []
        for p, e in sorted(from_offset(end).items()):
            first = begin.get(p, EARLIEST)
            if e < first:  # the partition went back (see latestOffset): read it again from its start
                first = EARLIEST
            if e > first:
                ranges.append(RangePartition(p, tuple(first), tuple(e)))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        return read_range(self.options, self.value_schema, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the checkpoint's offsets are the reading position (no broker-side cursor)."""

    def stop(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None
        if self._client is not None:
            self._client.close()
            self._client = None
