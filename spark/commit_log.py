"""Durable state of an exactly-once sink, kept in Pulsar topics so it works on any Pulsar broker.

Two companion topics per sink:

- the **commit log** (``commitLogTopic``): written only by the driver, never in a transaction, so no
  open transaction ever hides its records. An ``intent`` record lists the transactions of micro-batch
  ``N`` before any of them is committed (the commit decision); a ``done`` record says batch ``N`` is
  fully committed. The last ``done`` batch is the sink's "last committed batch id".
- the **markers** topic (``<commitLogTopic>-markers``): before recording the decision, the driver adds one
  marker message *inside each task's transaction* (any client may send in a transaction it knows the id
  of), so the marker is visible exactly when the task's data is. After a crash, a transaction the
  coordinator no longer knows is resolved by its marker: visible means committed, skipped means aborted
  (e.g. timed out). Markers are written by the driver rather than by the tasks so that the transactions
  of a replayed batch, still open while an interrupted commit is resolved, do not hide the markers.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

from pulsar_txn import Client, Producer, Transaction
from spark.reader import EARLIEST, PartitionReader, Position, TopicProbe, is_empty

log = logging.getLogger(__name__)

#: Records read from the end of the commit log first; the window doubles until a ``done`` is found.
TAIL_WINDOW = 16


@dataclass
class TaskTxn:
    """What one task wrote for a batch: its transaction, marker position and row count."""

    partition: int
    attempt: int
    txn: tuple[int, int]
    marker: tuple[int, int, int]
    rows: int

    def to_json(self) -> dict[str, object]:
        return {
            "partition": self.partition,
            "attempt": self.attempt,
            "txn": list(self.txn),
            "marker": list(self.marker),
            "rows": self.rows,
        }

    @classmethod
    def from_json(cls, data: dict) -> TaskTxn:
        return cls(data["partition"], data["attempt"], tuple(data["txn"]), tuple(data["marker"]), data["rows"])


@dataclass
class SinkState:
    """The sink's last fully committed batch (-1: none) and a commit decision after it, if any."""

    last_done: int = -1
    intent_batch: int | None = None
    intent: list[TaskTxn] = field(default_factory=list)


def markers_partition(client: Client, commit_log_topic: str) -> str:
    """The topic partition that holds a sink's markers."""
    return client.get_topic_partitions(f"{commit_log_topic}-markers")[0]


class CommitLog:
    """Reads and appends the commit log and markers of one sink."""

    def __init__(self, client: Client, topic: str, sink_id: str) -> None:
        self.client = client
        # If the broker creates topics partitioned, the log lives in partition 0 (one ordered log).
        self.topic = client.get_topic_partitions(topic)[0]
        self.markers_topic = markers_partition(client, topic)
        self.sink_id = sink_id
        self._producer: Producer | None = None
        self._markers: Producer | None = None

    def _append(self, record: dict[str, object]) -> Position:
        if self._producer is None:
            self._producer = self.client.create_producer(self.topic)
        record = {"sink": self.sink_id, "time": int(time.time() * 1000), **record}
        mid = self._producer.send(json.dumps(record).encode(), partition_key=self.sink_id)
        return Position(mid.ledger_id(), mid.entry_id(), 0)

    def write_marker(self, batch_id: int, partition: int, attempt: int, txn: Transaction) -> tuple[int, int, int]:
        """Add a marker to a task's transaction; its position."""
        if self._markers is None:
            self._markers = self.client.create_producer(self.markers_topic)
        record = {"sink": self.sink_id, "kind": "marker", "batch": batch_id, "partition": partition,
                  "attempt": attempt, "txn": list(txn.id)}
        mid = self._markers.send(json.dumps(record).encode(), partition_key=self.sink_id, txn=txn)
        return (mid.ledger_id(), mid.entry_id(), 0)

    def write_intent(self, batch_id: int, txns: list[TaskTxn]) -> None:
        """Record the decision to commit ``txns`` as batch ``batch_id``."""
        self._append({"kind": "intent", "batch": batch_id, "txns": [t.to_json() for t in txns]})

    def write_done(self, batch_id: int) -> None:
        """Record that batch ``batch_id`` is fully committed."""
        self._append({"kind": "done", "batch": batch_id})

    def state(self) -> SinkState:
        """The latest ``done`` record and any ``intent`` after it, read from the end of the log."""
        probe = TopicProbe(self.client)
        try:
            last = probe.last_position(self.topic)
        finally:
            probe.close()
        if last is None or is_empty(last):
            return SinkState()
        window = TAIL_WINDOW
        while True:
            first = last.entry - window
            after = Position(last.ledger, first - 1, 0) if first > 0 else EARLIEST
            state, complete = self._scan(after, last)
            if complete or after == EARLIEST:
                return state
            window *= 4

    def _scan(self, after: Position, last: Position) -> tuple[SinkState, bool]:
        state = SinkState()
        found_done = False
        reader = PartitionReader(self.client, self.topic, after, last, poll_timeout=10.0)
        for message in reader.messages():
            record = json.loads(message.value or b"{}")
            if record.get("sink") != self.sink_id:
                continue
            batch = record["batch"]
            if record["kind"] == "done":
                found_done = True
                if batch > state.last_done:
                    state.last_done = batch
                if state.intent_batch is not None and state.intent_batch <= batch:
                    state.intent_batch, state.intent = None, []
            elif record["kind"] == "intent" and batch > state.last_done:
                state.intent_batch = batch
                state.intent = [TaskTxn.from_json(t) for t in record["txns"]]
        return state, found_done

    def marker_committed(self, marker: tuple[int, int, int], wait: float = 30.0) -> bool | None:
        """Whether the transaction that wrote ``marker`` committed: True, False (aborted), None (cannot tell).

        A plain record is appended to the markers topic first, so that "the broker dispatches past the
        marker" becomes observable; while an older open transaction hides the end of the topic, the
        answer waits for it (up to ``wait`` seconds).
        """
        position = Position(*marker)
        producer = self.client.create_producer(self.markers_topic)
        mid = producer.send(json.dumps({"sink": self.sink_id, "kind": "probe"}).encode())
        probe_position = Position(mid.ledger_id(), mid.entry_id(), 0)
        deadline = time.monotonic() + wait
        probe = TopicProbe(self.client)
        try:
            while True:
                reader = PartitionReader(
                    self.client, self.markers_topic, position.before(), position, poll_timeout=5.0,
                    fail_on_data_loss=False,
                )
                if any(m.position == position for m in reader.messages()):
                    return True
                last = probe.last_position(self.markers_topic)
                if last is not None and last >= probe_position:
                    return False
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.5)
        finally:
            probe.close()

