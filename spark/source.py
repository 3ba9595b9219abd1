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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from spark.protocol import Client, full_topic_name
from spark.reader import (
    EARLIEST,
    Columns,
    PartitionReader,
    Position,
    TopicProbe,
    count_until,
    is_empty,
    parse_message_id,
)
from spark.schema import ValueSchema

log = logging.getLogger(__name__)

#: Rows per Arrow record batch handed to Spark.
ROWS_PER_BATCH = 8192


class OptionError(ValueError):
    """An option is missing, unknown in value, or contradicts another."""


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"not a boolean: {value!r}")


@dataclass(frozen=True)
class SourceOptions:
    """The reader options (plain data: Spark pickles it to executors)."""

    service_url: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    starting: str = "latest"
    ending: str = "latest"
    max_records_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    poll_timeout: float = 120.0
    admin_url: str | None = None

    @classmethod
    def parse(cls, options: Any, streaming: bool) -> SourceOptions:
        """From the (case-insensitive) options Spark passes; ``startingOffsets`` defaults as in pulsar-spark."""
        url = options.get("service.url")
        if not url:
            raise OptionError("option 'service.url' is required (e.g. pulsar://localhost:6650)")
        given = [k for k in ("topic", "topics", "topicsPattern") if options.get(k)]
        if len(given) != 1:
            raise OptionError("exactly one of 'topic', 'topics' or 'topicsPattern' is required")
        topics: tuple[str, ...] = ()
        pattern = None
        if given[0] == "topicsPattern":
            pattern = full_topic_name(options.get("topicsPattern"))
        else:
            names = options.get(given[0]).split(",") if given[0] == "topics" else [options.get("topic")]
            topics = tuple(full_topic_name(t.strip()) for t in names if t.strip())
        limit = options.get("maxRecordsPerTrigger")
        if streaming and options.get("endingOffsets"):
            raise OptionError("'endingOffsets' is for batch queries only")
        return cls(
            service_url=url,
            topics=topics,
            pattern=pattern,
            starting=options.get("startingOffsets") or ("latest" if streaming else "earliest"),
            ending=options.get("endingOffsets") or "latest",
            max_records_per_trigger=int(limit) if limit else None,
            fail_on_data_loss=_bool(options.get("failOnDataLoss"), True),
            poll_timeout=int(options.get("pollTimeoutMs") or 120_000) / 1000,
            admin_url=options.get("admin.url"),
        )


# -- shared per-process clients ----------------------------------------------------------------------

_CLIENTS: dict[tuple[str, int], Client] = {}
_CLIENTS_LOCK = threading.Lock()


def client_for(service_url: str) -> Client:
    """A client for this process and thread (Spark reuses Python workers across tasks)."""
    key = (service_url, threading.get_ident())
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = Client(service_url)
        return client


# -- topics and offsets -------------------------------------------------------------------------------


def resolve_partitions(client: Client, options: SourceOptions) -> list[str]:
    """The topic partitions the options name, now (patterns and partition counts are looked up again)."""
    if options.pattern is not None:
        return client.topics_matching(options.pattern)
    partitions: list[str] = []
    for topic in options.topics:
        partitions.extend(client.partition_names(topic))
    return sorted(set(partitions))


def value_schema(client: Client, options: SourceOptions) -> ValueSchema:
    """The value schema of the topics read (the first topic with a schema decides; none: bytes)."""
    names = [full_topic_name(t) for t in options.topics] or resolve_partitions(client, options)
    for name in names:
        found = client.schema(name)
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
    return {full_topic_name(k): v for k, v in data.items()}


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
    client = client_for(options.service_url)
    arrow_schema = schema.arrow_schema()
    versions: dict[bytes, str | None] = {}

    def writer_schema(version: bytes) -> str | None:
        if version not in versions:
            found = client.schema(part.topic, int.from_bytes(version, "big", signed=True))
            versions[version] = found[0].schema_data.decode() if found else None
        return versions[version]

    after, until = Position(*part.after), Position(*part.until)
    decode = None if schema.is_bytes else schema.decoder(writer_schema)
    columns = Columns(part.topic, after, until, len(schema.columns()), decode)
    reader = PartitionReader(
        client,
        part.topic,
        after,
        until,
        poll_timeout=options.poll_timeout,
        fail_on_data_loss=options.fail_on_data_loss,
    )
    for ledger, entry, metadata, payload in reader.entries():
        columns.add(ledger, entry, metadata, payload)
        if len(columns) >= ROWS_PER_BATCH:
            yield _batch(columns, arrow_schema)
            columns.clear()
    if len(columns):
        yield _batch(columns, arrow_schema)


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
        client = Client(self.options.service_url)
        probe = TopicProbe(client)
        try:
            names = resolve_partitions(client, self.options)
            latest = last_positions(probe, names)
        finally:
            probe.close()
            client.close()
        starts = start_positions(self.options.starting, names, latest)
        ends = end_positions(self.options.ending, names, latest)
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
            self._client = Client(self.options.service_url)
        return self._client

    @property
    def probe(self) -> TopicProbe:
        if self._probe is None:
            self._probe = TopicProbe(self.client)
        return self._probe

    def _latest(self) -> dict[str, Position]:
        return last_positions(self.probe, resolve_partitions(self.client, self.options))

    def initialOffset(self) -> dict:  # noqa: N802 (Spark's names)
        latest = self._latest()
        return to_offset(start_positions(self.options.starting, sorted(latest), latest))

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
            ends[partition] = max(first, latest.get(partition, first))
        if isinstance(limit, ReadMaxRows):
            ends = self._limit(begin, ends, limit.max_rows)
        return to_offset(ends)

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
        return [
            RangePartition(p, tuple(begin.get(p, EARLIEST)), tuple(e))
            for p, e in sorted(from_offset(end).items())
            if e > begin.get(p, EARLIEST)
        ]

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
