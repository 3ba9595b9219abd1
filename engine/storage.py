"""What the engine needs of its durable store: the interface :class:`engine.store.Store` (SQLite) satisfies.

The engine reads committed state directly (catalog, logs, cursors, the transaction log...), writes the rare catalog
changes at once (``next_value``, ``create_topic``, ``put_metadata``, ``add_schema``...), and *stages* everything else
(``stage_*``) for the group commit: ``take_staged`` hands the staged writes to a commit runner, which makes them
durable with ``write`` (possibly on another thread, one call at a time). Another store (in memory, or one that
injects faults for a simulation) stands in for SQLite by satisfying this protocol; ``tests/test_storage.py`` checks
that the SQLite store does, method by method.
"""

from __future__ import annotations

from typing import Protocol

from engine.store import StagedWrites, StoredSchema, TopicRecord


class Storage(Protocol):
    """The durable store of one engine. Called from the engine's thread only, except :meth:`write`."""

    @property
    def has_staged(self) -> bool:
        """Whether writes are staged for the next commit."""
        ...

    def close(self) -> None:
        """Close the database (staged writes that were not committed are dropped)."""
        ...

    def next_value(self, name: str) -> int:
        """Increment and return a durable counter (starting at 1)."""
        ...

    def topics(self) -> dict[str, TopicRecord]:
        """Every topic partition that has a log."""
        ...

    def create_topic(self, name: str, created_ms: int) -> TopicRecord:
        """Create the log of a topic partition, with its creation time (metadata kind ``TOPIC_CREATED``): its ids
        are handed out now, and the next group commit makes it durable."""
        ...

    def stage_topics(self, created: list[tuple[str, int, int, int]]) -> None:
        """Stage again the creations of a commit that failed (``StagedWrites.topics``)."""
        ...

    def delete_topic(self, name: str, topic_id: int) -> None:
        """Drop a topic partition's log, cursors and producer state."""
        ...

    def partitioned_topics(self) -> dict[str, int]:
        """Partitioned topics and their partition counts."""
        ...

    def set_partitioned_topic(self, name: str, partitions: int | None) -> None:
        """Record (or, with ``None``, remove) a partitioned topic."""
        ...

    def metadata(self, kind: str) -> dict[str, str]:
        """Catalog records of one kind (tenants, namespaces, terminated topics...), by name."""
        ...

    def put_metadata(self, kind: str, name: str, value: str | None) -> None:
        """Write (or, with ``None``, delete) a catalog record at once."""
        ...

    def last_entry_id(self, topic_id: int) -> int:
        """The id of the last stored entry, or -1."""
        ...

    def first_entry_id(self, topic_id: int) -> int:
        """The id of the first stored entry, or -1."""
        ...

    def read(self, topic_id: int, start: int, end: int, max_bytes: int | None = None) -> list[tuple[int, bytes]]:
        """Committed entries with ``start <= entry_id <= end``, in order; with ``max_bytes``, only as many as it
        takes to reach that many bytes of bodies (at least one)."""
        ...

    def read_ids(self, topic_id: int, ids: list[int], max_bytes: int | None = None) -> list[tuple[int, bytes]]:
        """Committed entries with the given ids, in order; ``max_bytes`` as in :meth:`read`."""
        ...

    def entry_at_time(self, topic_id: int, publish_time_ms: int) -> int | None:
        """The first entry published at or after ``publish_time_ms``."""
        ...

    def entries_size(self, topic_id: int, after: int, upto: int) -> tuple[int, int]:
        """Count and total bytes of the committed entries with ``after < entry_id <= upto``."""
        ...

    def newest_over_size(self, topic_id: int, upto: int, max_bytes: int) -> int | None:
        """The newest entry at or below ``upto`` such that it and the entries after it (to ``upto``) exceed
        ``max_bytes``; None if they all fit."""
        ...

    def stage_trim(self, topic_id: int, upto: int) -> None:
        """Stage the deletion of the entries up to and including ``upto`` (retention)."""
        ...

    def stage_entry(self, topic_id: int, entry_id: int, publish_time: int, body: bytes) -> None:
        """Stage an entry for the next commit."""
        ...

    def stage_entries(self, topic_id: int, rows: list[tuple[int, int, bytes]]) -> None:
        """Stage entries ``(entry id, publish time, body)``, in order, for the next commit."""
        ...

    def compaction(self, topic_id: int) -> tuple[int, int, int, int] | None:
        """A topic's compacted view: ``(horizon, ledger id, entries, bytes)``, or None if it never had one."""
        ...

    def compacted_read(self, topic_id: int, start: int, end: int, limit: int) -> list[tuple[int, bytes]]:
        """Up to ``limit`` entries of a topic's compacted view with ``start <= entry_id <= end``, in order."""
        ...

    def compacted_last(self, topic_id: int) -> tuple[int, bytes] | None:
        """The last entry of a topic's compacted view."""
        ...

    def stage_compaction(self, topic_id: int, horizon: int, ledger_id: int, rows: list[tuple[int, bytes]]) -> None:
        """Stage a new compacted view ``(entry_id, body)`` up to ``horizon``, replacing the previous one."""
        ...

    def cursors(self, topic_id: int) -> dict[str, str]:
        """Stored cursor states of a topic partition, by subscription name."""
        ...

    def stage_cursor(self, topic_id: int, name: str, state: str | None) -> None:
        """Stage a cursor's new state (``None`` deletes it) for the next commit."""
        ...

    def producer_sequences(self, topic_id: int) -> dict[str, int]:
        """The highest stored sequence id per producer name."""
        ...

    def stage_sequence(self, topic_id: int, producer: str, sequence_id: int) -> None:
        """Stage a producer's highest sequence id for the next commit."""
        ...

    def counter(self, name: str) -> int:
        """A durable counter's value (0 if never set)."""
        ...

    def stage_counter(self, name: str, value: int) -> None:
        """Stage a counter's new value."""
        ...

    def txn_log(self) -> list[tuple[int, int, str]]:
        """Every coordinator log record ``(tc_id, txn sequence, record)``, oldest first."""
        ...

    def stage_txn_record(self, tc_id: int, txn: int, record: str) -> None:
        """Stage a coordinator log record."""
        ...

    def stage_txn_removal(self, tc_id: int, txn: int) -> None:
        """Stage the removal of a finished transaction's records (it has no records staged after this)."""
        ...

    def txn_buffer_snapshot(self, topic_id: int) -> str | None:
        """A topic's latest transaction-buffer snapshot."""
        ...

    def stage_txn_buffer_snapshot(self, topic_id: int, state: str) -> None:
        """Stage a transaction-buffer snapshot."""
        ...

    def pending_acks(self, topic_id: int) -> list[tuple[str, int, int, str]]:
        """Pending-ack redo records ``(subscription, txn most, txn least, record)``, oldest first."""
        ...

    def stage_pending_ack(self, topic_id: int, subscription: str, txn: tuple[int, int], record: str) -> None:
        """Stage a pending-ack redo record."""
        ...

    def stage_pending_ack_removal(self, topic_id: int, subscription: str, txn: tuple[int, int]) -> None:
        """Stage the removal of a transaction's pending acks on a subscription."""
        ...

    def schemas(self, topic: str) -> list[StoredSchema]:
        """Every schema version of a topic, oldest first."""
        ...

    def add_schema(self, topic: str, schema: StoredSchema) -> None:
        """Store a new schema version at once."""
        ...

    def delete_schemas(self, topic: str) -> None:
        """Drop every schema version of a topic at once."""
        ...

    def take_staged(self) -> StagedWrites | None:
        """Empty the staging area and return what it held (None if nothing)."""
        ...

    def commit(self) -> None:
        """Make every staged write durable now."""
        ...

    def write(self, staged: StagedWrites) -> None:
        """Make taken writes durable in one transaction (may run on another thread, one call at a time)."""
        ...
