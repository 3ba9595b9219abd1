"""The write side of the ``pulsar`` data source: batch and streaming writers, exactly-once by default.

Rows: ``value`` (binary or string; without a ``value`` column, the other columns as a JSON object),
``__key`` (string or binary), ``__topic`` (per-row target, else the ``topic`` option),
``__messageProperties`` (map<string,string>) and ``__eventTime`` (timestamp). ``__messageId`` and
``__publishTime`` are ignored.

Exactly-once streaming writes (``deliveryGuarantee=exactly-once``, the default):

1. Each task writes its rows inside its own Pulsar transaction and returns the transaction id as its
   commit message. A failing task aborts its transaction before it fails.
2. The driver's ``commit(messages, batchId)`` reads the sink's commit log (:mod:`spark.commit_log`). A
   batch id already ``done`` is a replay after a restart: its new transactions are aborted, nothing is
   written twice. Otherwise it adds a marker to every transaction, appends an ``intent`` (the
   transactions of the batch: the commit decision), commits every transaction, and appends ``done``.
3. An ``intent`` without ``done`` (the driver died while committing) is rolled forward by the next
   ``commit`` or ``abort`` of that batch; a transaction the coordinator no longer knows is resolved by
   its marker. Spark's ``abort`` aborts the transactions otherwise.

A task or driver step that loses the broker reconnects with exponential back-off (``reconnectBackoffInitialMs``,
``reconnectBackoffMaxMs``) for up to ``reconnectTimeoutMs``: a task keeps its rows and writes them again in a new
transaction once the old one is aborted; the driver's commit and abort run again (they are idempotent through
the commit log).

Tasks and driver go through :mod:`pulsar_txn` (the project's Python client with transactions): tasks write in their
transactions, the driver resumes them by id to mark and end them, and keeps the commit log.

Transactions of tasks that die without aborting (a killed executor) end by the coordinator's timeout
(``transactionTimeoutMs``); until then they hold back read-committed consumers of the topics they
wrote, as in Pulsar.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

import pulsar_txn
from pulsar_txn import InvalidTxnStatusError, PulsarException, TransactionNotFound, TxnId
from pulsar_txn.core.names import namespace_of
from spark.backoff import RETRYABLE, Backoff
from spark.commit_log import CommitLog, TaskTxn
from spark.options import (
    SINK_OPTIONS,
    OptionError,
    backoff,
    check_names,
    get_int,
    security,
    service_url,
    topic_name,
)
from spark.schema import META_NAMES
from spark.security import Security, new_client

log = logging.getLogger(__name__)

EXACTLY_ONCE = "exactly-once"
AT_LEAST_ONCE = "at-least-once"
#: Default transaction timeout: longer than a micro-batch and its commit must take.
DEFAULT_TXN_TIMEOUT_MS = 120_000


@dataclass(frozen=True)
class SinkOptions:
    """The writer options (plain data)."""

    service_url: str
    topic: str | None
    guarantee: str
    txn_timeout_ms: int
    sink_id: str
    commit_log_topic: str
    batch_max_messages: int = 1000
    backoff: Backoff = field(default_factory=Backoff)
    #: TLS and credentials (plain values, pickled to the executors with the rest).
    security: Security = field(default_factory=Security)

    @classmethod
    def parse(cls, options: Any, streaming: bool, extra: tuple[str, ...] = ()) -> SinkOptions:
        """From the options Spark passes; ``extra`` names options a subclass of the data source adds."""
        check_names(options, (*SINK_OPTIONS, *extra), "sink")
        url = service_url(options)
        topic = options.get("topic")
        topic = topic_name(topic) if topic else None
        guarantee = (options.get("deliveryGuarantee") or EXACTLY_ONCE).lower()
        if guarantee not in (EXACTLY_ONCE, AT_LEAST_ONCE):
            raise OptionError(f"deliveryGuarantee must be {EXACTLY_ONCE!r} or {AT_LEAST_ONCE!r}")
        sink_id = options.get("sinkId")
        if not sink_id:
            identity = options.get("checkpointLocation") or ""
            if streaming and guarantee == EXACTLY_ONCE and not identity:
                raise OptionError("an exactly-once streaming sink needs 'checkpointLocation' or 'sinkId'")
            sink_id = hashlib.sha1(f"{identity}|{topic}".encode()).hexdigest()[:16]
        namespace = namespace_of(topic) if topic else "public/default"
        log_topic = options.get("commitLogTopic") or f"persistent://{namespace}/__spark_sink_{sink_id}"
        return cls(
            service_url=url,
            topic=topic,
            guarantee=guarantee,
            txn_timeout_ms=get_int(options, "transactionTimeoutMs", DEFAULT_TXN_TIMEOUT_MS, 1),
            sink_id=sink_id,
            commit_log_topic=topic_name(log_topic),
            batch_max_messages=get_int(options, "batchingMaxMessages", 1000, 1),
            backoff=backoff(options),
            security=security(options),
        )

    @property
    def transactional(self) -> bool:
        return self.guarantee == EXACTLY_ONCE


@dataclass
class TaskCommit(WriterCommitMessage):
    """What a task reports to the driver."""

    partition: int
    attempt: int
    rows: int
    txn: tuple[int, int] | None = None


_CLIENTS: dict[tuple[str, Security, int], pulsar_txn.Client] = {}


def _client_key(options: SinkOptions) -> tuple[str, Security, int]:
    return options.service_url, options.security, options.backoff.attempt_seconds


def client_for(options: SinkOptions) -> pulsar_txn.Client:
    """The client of this process (Spark reuses Python workers): tasks write through it, the driver ends the tasks'
    transactions and keeps the commit log with it."""
    key = _client_key(options)
    client = _CLIENTS.get(key)
    if client is None:
        client = _CLIENTS[key] = new_client(*key)
    return client


def _task_identity() -> tuple[int, int]:
    """``(partition id, attempt)`` of the running Spark task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return 0, 0
    return context.partitionId(), context.attemptNumber()


class _RowWriter:
    """Turns Arrow batches into messages on per-topic producers."""

    def __init__(self, options: SinkOptions, client: pulsar_txn.Client, txn: pulsar_txn.Transaction | None) -> None:
        self.options = options
        self.client = client
        self.txn = txn
        self.producers: dict[str, pulsar_txn.Producer] = {}
        self.rows = 0
        self.error: pulsar_txn.PulsarException | None = None

    def producer(self, topic: str) -> pulsar_txn.Producer:
        producer = self.producers.get(topic)
        if producer is None:
            producer = self.producers[topic] = self.client.create_producer(
                topic,
                batching_enabled=True,
                batching_max_messages=self.options.batch_max_messages,
                block_if_queue_full=True,
            )
        return producer

    def _sent(self, result: pulsar_txn.Result, message_id: object) -> None:
        if result != pulsar_txn.Result.Ok and self.error is None:
            error = getattr(pulsar_txn, result.name, pulsar_txn.PulsarException)
            self.error = error(f"a send of the sink failed: {result.name}")

    def write(self, batch: pa.RecordBatch) -> None:
        names = batch.schema.names
        if "value" in names:
            values = batch.column("value").to_pylist()
        else:
            data = [n for n in names if n not in META_NAMES]
            if not data:
                raise OptionError("rows need a 'value' column or data columns to write")
            values = [json.dumps(r, default=str, separators=(",", ":")) for r in batch.select(data).to_pylist()]
        count = batch.num_rows
        keys = batch.column("__key").to_pylist() if "__key" in names else [None] * count
        topics = batch.column("__topic").to_pylist() if "__topic" in names else None
        props = batch.column("__messageProperties").to_pylist() if "__messageProperties" in names else None
        events = None
        if "__eventTime" in names:
            micros = batch.column("__eventTime").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
            events = micros.to_pylist()
        fixed = self.producer(self.options.topic) if self.options.topic and topics is None else None
        txn = self.txn
        for i in range(count):
            value = values[i]
            if value is None:
                value = b""
            elif isinstance(value, str):
                value = value.encode()
            if fixed is not None:
                producer = fixed
            else:
                target = topics[i] if topics is not None else None
                target = target or self.options.topic
                if not target:
                    raise OptionError("no target topic: set the 'topic' option or a '__topic' column")
                producer = self.producer(topic_name(target))
            event = events[i] // 1000 if events is not None and events[i] is not None else None
            producer.send_async(
                value,
                self._sent,
                partition_key=keys[i],
                properties=dict(props[i]) if props is not None and props[i] else None,
                event_timestamp=event,
                txn=txn,
            )
        self.rows += count

    def flush(self) -> None:
        """Wait for every send; raise the first that failed."""
        for producer in self.producers.values():
            producer.flush()
        if self.error is not None:
            raise self.error


def _drop_client(options: SinkOptions) -> None:
    """Forget this process's client of these options (after a failure left its connections in doubt)."""
    client = _CLIENTS.pop(_client_key(options), None)
    if client is not None:
        client.close()


def write_task(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> TaskCommit:
    """Write one task's rows; in exactly-once mode inside a transaction left open for the driver.

    The task keeps its rows until they are written: when the broker is lost, the transaction is aborted
    once it can be reached again (with back-off) and the rows are written anew in a new transaction.
    """
    partition, attempt = _task_identity()
    retrier = options.backoff.retrier(f"writing the rows of task {partition}")
    source = iter(batches)
    kept: list[pa.RecordBatch] = []
    stale: list[TxnId] = []

    def rows() -> Iterator[pa.RecordBatch]:
        yield from kept
        for batch in source:
            if batch.num_rows:
                kept.append(batch)
                yield batch

    while True:
        client = client_for(options)
        txn: pulsar_txn.Transaction | None = None
        try:
            while stale:
                _end_quietly(client_for(options), stale[0], commit=False)
                stale.pop(0)
            writer = _RowWriter(options, client, None)
            for batch in rows():
                if options.transactional and txn is None:
                    txn = writer.txn = client.new_transaction(options.txn_timeout_ms)
                writer.write(batch)
            writer.flush()
            return TaskCommit(partition, attempt, writer.rows, tuple(txn.id) if txn else None)
        except RETRYABLE as exc:
            if txn is not None:
                stale.append(txn.id)
            _drop_client(options)
            retrier.failed(exc)
        except BaseException:
            if txn is not None:
                try:
                    txn.abort()
                except PulsarException as exc:
                    log.warning("could not abort %s after a task failure: %s", txn, exc)
            _drop_client(options)
            raise


def _end_quietly(client: pulsar_txn.Client, txn: tuple[int, int], commit: bool) -> bool:
    """End a transaction; False when the coordinator no longer knows it (already ended)."""
    resumed = client.resume_transaction(TxnId(*txn))
    try:
        if commit:
            resumed.commit()
        else:
            resumed.abort()
        return True
    except (TransactionNotFound, InvalidTxnStatusError):
        return False


def _tasks(messages: list[WriterCommitMessage | None]) -> list[TaskCommit]:
    return [m for m in messages if isinstance(m, TaskCommit) and m.txn is not None]


class ExactlyOnceCommitter:
    """The driver side of exactly-once writes (one instance per commit or abort call)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self.client = client_for(options)
        self.log = CommitLog(self.client, options.commit_log_topic, options.sink_id)

    def commit(self, messages: list[WriterCommitMessage | None], batch_id: int) -> None:
        tasks = _tasks(messages)
        state = self.log.state()
        if batch_id <= state.last_done:
            log.info("batch %d of sink %s was committed before: discarding its replay", batch_id, self.options.sink_id)
            self._abort_all(tasks)
            return
        if state.intent_batch is not None:
            if state.intent_batch > batch_id:
                raise PulsarException(
                    f"sink {self.options.sink_id}: the commit log has batch {state.intent_batch} pending but Spark "
                    f"commits batch {batch_id}; was the checkpoint replaced? Use a new sinkId."
                )
            replay = tasks if state.intent_batch == batch_id else []
            self.finish(state.intent_batch, state.intent, replay)
            if state.intent_batch == batch_id:
                return
        recorded = self.mark(batch_id, tasks)
        self.log.write_intent(batch_id, recorded)
        self.finish(batch_id, recorded, [])

    def mark(self, batch_id: int, tasks: list[TaskCommit]) -> list[TaskTxn]:
        """Add a marker to each task's transaction (see :mod:`spark.commit_log`)."""
        recorded = []
        for task in tasks:
            assert task.txn is not None
            txn = self.client.resume_transaction(TxnId(*task.txn), self.options.txn_timeout_ms)
            marker = self.log.write_marker(batch_id, task.partition, task.attempt, txn)
            recorded.append(TaskTxn(task.partition, task.attempt, task.txn, marker, task.rows))
        return recorded

    def finish(self, batch_id: int, intent: list[TaskTxn], replay: list[TaskCommit]) -> None:
        """Roll a recorded commit decision forward; a lost transaction is replaced by the replay's."""
        lost = []
        for task in intent:
            if _end_quietly(self.client, task.txn, commit=True):
                continue
            committed = self.log.marker_committed(task.marker)
            if committed is None:
                log.warning("cannot tell whether %s committed; assuming it did", task.txn)
            elif not committed:
                lost.append(task)
        used: set[tuple[int, int]] = set()
        if lost:
            by_partition = {t.partition: t for t in replay}
            missing = [t.partition for t in lost if t.partition not in by_partition]
            if missing:
                raise PulsarException(
                    f"batch {batch_id}: transactions of partitions {missing} were aborted before their commit "
                    "(timed out? raise transactionTimeoutMs); restart the query: the batch is completed from its "
                    "replay"
                )
            substitutes = [by_partition[t.partition] for t in lost]
            keep = [t for t in intent if t not in lost]
            log.warning(
                "batch %d: %d transaction(s) timed out before the commit; committing the replay's instead",
                batch_id,
                len(lost),
            )
            self.log.write_intent(batch_id, keep + self.mark(batch_id, substitutes))
            for task in substitutes:
                _end_quietly(self.client, task.txn, commit=True)  # type: ignore[arg-type]
                used.add(task.txn)  # type: ignore[arg-type]
        self._abort_all([t for t in replay if t.txn not in used])
        self.log.write_done(batch_id)

    def abort(self, messages: list[WriterCommitMessage | None], batch_id: int) -> None:
        tasks = _tasks(messages)
        try:
            state = self.log.state()
        except PulsarException as exc:
            log.warning("cannot read the commit log of sink %s: %s", self.options.sink_id, exc)
            state = None
        if state is not None and state.intent_batch == batch_id and batch_id > state.last_done:
            log.warning("batch %d: the commit was decided before the failure; completing it", batch_id)
            intent_txns = {t.txn for t in state.intent}
            self.finish(batch_id, state.intent, [t for t in tasks if t.txn not in intent_txns])
            return
        self._abort_all(tasks)

    def _abort_all(self, tasks: list[TaskCommit]) -> None:
        for task in tasks:
            assert task.txn is not None
            _end_quietly(self.client, task.txn, commit=False)


class PulsarBatchWriter(DataSourceArrowWriter):
    """``df.write.format("pulsar")``: in exactly-once mode the whole job appears at once, or nothing."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        return write_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        for task in _tasks(messages):
            self.options.backoff.run(
                lambda task=task: client_for(self.options).resume_transaction(TxnId(*task.txn)).commit(),  # type: ignore[misc]
                f"committing transaction {task.txn}",
                on_retry=lambda: _drop_client(self.options),
            )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        for task in _tasks(messages):
            self.options.backoff.run(
                lambda task=task: _end_quietly(client_for(self.options), task.txn, commit=False),
                f"aborting transaction {task.txn}",
                on_retry=lambda: _drop_client(self.options),
            )


class PulsarStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("pulsar")``: exactly-once across task failures and driver restarts."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        return write_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        if self.options.transactional:
            self.options.backoff.run(
                lambda: ExactlyOnceCommitter(self.options).commit(messages, batchId),
                f"committing batch {batchId}",
                on_retry=lambda: _drop_client(self.options),
            )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        if self.options.transactional:
            self.options.backoff.run(
                lambda: ExactlyOnceCommitter(self.options).abort(messages, batchId),
                f"aborting batch {batchId}",
                on_retry=lambda: _drop_client(self.options),
            )
