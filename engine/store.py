"""Durable storage on SQLite in WAL mode: topic logs, cursors, producer sequence ids and schemas.

Writes are staged and made durable together by :meth:`Store.commit` (one fsync for many messages:
the group commit). Every topic partition's log lives in one table keyed by topic id and entry id together (see
:data:`ENTRY_ID_BITS`), so a topic's appends and range reads walk one contiguous range of one B-tree, and creating
a topic changes no schema. Deleted data gives its pages back to the file system (auto_vacuum INCREMENTAL).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import NamedTuple, TypeVar

#: Rows per statement. One multi-row INSERT (or DELETE) binds all its rows and runs once; ``executemany`` runs once per
#: row and hands the GIL back for each run, so under load the writer thread waited for the busy reactor thread once
#: per row (inserting 500 entries took 5-10 ms instead of about 1).
ROWS_PER_STATEMENT = 256

#: A store written before pages were given back (auto_vacuum NONE) up to this size is converted when it opens (a
#: VACUUM: seconds); a larger one is left as it is, with a warning (its free pages are reused, not given back).
MIGRATE_AT_OPEN_BYTES = 1 << 30
#: Free pages kept for reuse after deletions (4 MiB of 4 KiB pages): fewer are not worth giving back.
FREE_PAGES_KEPT = 1024
#: Free pages given back to the file system after one commit, at most (64 MiB): a large trim is given back over
#: several commits, so that no commit waits long behind it.
FREE_PAGES_PER_COMMIT = 16384
#: Bytes the WAL is cut back to once checkpointed (SQLite leaves it at its largest size otherwise).
WAL_SIZE_LIMIT = 8 << 20
#: Milliseconds a connection waits for another one's lock.
BUSY_TIMEOUT_MS = 10_000

#: Raises a counter to a value (never lowers it: values are handed out before their commit, see Store._hand_out).
RAISE_COUNTER = "INSERT INTO counters VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)"

#: Every topic partition's log lives in the table ``entries``, keyed by its topic id shifted left by this many bits
#: plus the entry id: one B-tree for all topics, each topic a contiguous range of it. (A table per topic made every
#: topic created cost more than the one before: SQLite reads its whole schema again after each change of it.)
ENTRY_ID_BITS = 40
#: The largest entry id a topic partition may have.
MAX_ENTRY_ID = (1 << ENTRY_ID_BITS) - 1
#: Store metadata kind of topic partitions' creation times (epoch milliseconds).
TOPIC_CREATED = "topic_created"

log = logging.getLogger(__name__)
_T = TypeVar("_T")

# sqlite3 binds a parameter at once only if it is exactly an int, float, str or bytearray; anything else, bytes
# included, is first looked up among the adapters and then probed for ``__adapt__`` and ``__conform__``. Adapting
# bytes to themselves (``bytes(b) is b``) makes that one look-up: 1,500 fewer instructions per entry written.
sqlite3.register_adapter(bytes, bytes)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY, topic_id INTEGER NOT NULL UNIQUE, ledger_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS partitioned_topics (name TEXT PRIMARY KEY, partitions INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS cursors (
    topic_id INTEGER NOT NULL, name TEXT NOT NULL, state TEXT NOT NULL, PRIMARY KEY (topic_id, name));
CREATE TABLE IF NOT EXISTS producer_sequences (
    topic_id INTEGER NOT NULL, producer TEXT NOT NULL, sequence_id INTEGER NOT NULL,
    PRIMARY KEY (topic_id, producer));
CREATE TABLE IF NOT EXISTS txn_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, tc_id INTEGER NOT NULL, txn INTEGER NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS txn_log_by_txn ON txn_log (tc_id, txn);
CREATE TABLE IF NOT EXISTS txn_buffer_snapshots (topic_id INTEGER PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pending_acks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, topic_id INTEGER NOT NULL, subscription TEXT NOT NULL,
    txn_most INTEGER NOT NULL, txn_least INTEGER NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS pending_acks_by_txn ON pending_acks (topic_id, subscription, txn_most, txn_least);
CREATE TABLE IF NOT EXISTS schemas (
    topic TEXT NOT NULL, version INTEGER NOT NULL, type INTEGER NOT NULL, name TEXT NOT NULL,
    data BLOB NOT NULL, properties TEXT NOT NULL, PRIMARY KEY (topic, version));
CREATE TABLE IF NOT EXISTS compacted_entries (
    topic_id INTEGER NOT NULL, entry_id INTEGER NOT NULL, body BLOB NOT NULL, PRIMARY KEY (topic_id, entry_id));
CREATE TABLE IF NOT EXISTS compactions (
    topic_id INTEGER PRIMARY KEY, horizon INTEGER NOT NULL, ledger_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    entry_id INTEGER PRIMARY KEY, publish_time INTEGER NOT NULL, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS metadata (
    kind TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (kind, name));
"""


class StoreFullError(OSError):
    """The disk under the store is full: nothing more can be written until space comes back."""


@contextlib.contextmanager
def _full_disk_named() -> Iterator[None]:
    """Raise SQLite's "database or disk is full" as :class:`StoreFullError`, which says what to do about it."""
    try:
        yield
    except sqlite3.Error as exc:
        _name_full_disk(exc)
        raise


def _name_full_disk(exc: sqlite3.Error) -> None:
    """Raise ``exc`` as :class:`StoreFullError` if it is SQLite's "database or disk is full"."""
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        raise StoreFullError(f"No space left on device for the store ({exc})") from exc


class StagedWrites(NamedTuple):
    """Writes taken from the staging area, to be made durable together by :meth:`Store.write`."""

    entries: dict[int, list[tuple[int, int, bytes]]]
    cursors: dict[tuple[int, str], str | None]
    sequences: dict[tuple[int, str], int]
    #: Other writes, in order: (statement, parameters).
    ops: list[tuple[str, tuple[object, ...]]]
    #: Coordinator log records ``(tc_id, txn, record)`` to add, then the transactions ``(tc_id, txn)`` to remove.
    txn_records: list[tuple[int, int, str]]
    txn_removals: list[tuple[int, int]]
    #: Topic partitions created: ``(name, topic id, ledger id, creation time in epoch ms)``.
    topics: list[tuple[str, int, int, int]]

    @classmethod
    def empty(cls) -> StagedWrites:
        """A staging area holding nothing."""
        return cls(defaultdict(list), {}, {}, [], [], [], [])


class TopicRecord(NamedTuple):
    """A topic partition's identity in storage."""

    topic_id: int
    ledger_id: int


class StoredSchema(NamedTuple):
    """One version of a topic's schema."""

    version: int
    type: int
    name: str
    data: bytes
    properties: str


class Store:
    """The embedded store. Not thread-safe: the engine calls it from one thread."""

    def __init__(self, path: Path | str) -> None:
        self._db = self._connect(path)
        if str(path) != ":memory:":  # an in-memory database has no disk to give back
            _give_pages_back(self._db, path)
        self._db.executescript(_SCHEMA)
        #: Whether deletions give their pages back (auto_vacuum INCREMENTAL), which the writer does after commits.
        self._incremental = self._db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        #: Topic partitions created when each had a table of its own (``ledger_<topic id>``): they keep it.
        self._own_tables = {
            int(name.removeprefix("ledger_"))
            for (name,) in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'ledger_*'"
            )
        }
        # Group commits go through a connection of their own, so that they may run on another
        # thread while this one keeps reading (WAL lets readers and one writer work side by side).
        self._writer = self._connect(path)
        self._staged = StagedWrites.empty()
        #: The last value of each counter that :meth:`_hand_out` gave (a group commit then makes it durable).
        self._handed_out: dict[str, int] = {}
        #: Deletions committed outside the group commit (topics, schemas): counted on the engine's thread, and
        #: caught up with by the writer, which gives their pages back after its next commit.
        self._deletions_outside = 0
        self._deletions_seen = 0
        #: Whether free pages beyond one commit's share are left to give back (the writer's own).
        self._pages_left = False

    @staticmethod
    def _connect(path: Path | str) -> sqlite3.Connection:
        db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        if db.execute("PRAGMA page_count").fetchone()[0] == 0:
            # A new database, before anything writes its first page: it takes the setting at once (an existing
            # one is converted by _give_pages_back; setting it again would write, which a full disk refuses).
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        return db

    def close(self) -> None:
        """Close the database (staged writes that were not committed are dropped)."""
        self._writer.close()
        self._db.close()

    # -- counters and catalog: committed at once, they are rare ---------------------------------

    def next_value(self, name: str) -> int:
        """Increment and return a durable counter (starting at 1), committed at once; it counts the values
        :meth:`create_topic` handed out and has not committed yet."""
        with _full_disk_named(), self._db:
            self._db.execute("BEGIN IMMEDIATE")
            value = max(self.counter(name), self._handed_out.get(name, 0)) + 1
            self._db.execute(RAISE_COUNTER, (name, value))
        if name in self._handed_out:
            self._handed_out[name] = value
        return value

    def _hand_out(self, name: str) -> int:
        """The next value of a counter, made durable by the next group commit (which stages raising it)."""
        value = max(self._handed_out.get(name, 0), self.counter(name)) + 1
        self._handed_out[name] = value
        self._staged.ops.append((RAISE_COUNTER, (name, value)))
        return value

    def topics(self) -> dict[str, TopicRecord]:
        """Every topic partition that has a log."""
        rows = self._db.execute("SELECT name, topic_id, ledger_id FROM topics")
        return {name: TopicRecord(tid, lid) for name, tid, lid in rows}

    def create_topic(self, name: str, created_ms: int) -> TopicRecord:
        """Create the log of a topic partition, with its creation time (metadata kind :data:`TOPIC_CREATED`): its
        ids are handed out now, and the next group commit makes it durable (its disk sync is the commit's, on the
        commit runner's thread, not the engine's)."""
        record = TopicRecord(self._hand_out("topic_id"), self._hand_out("ledger_id"))
        self._staged.topics.append((name, record.topic_id, record.ledger_id, created_ms))
        return record

    def stage_topics(self, created: list[tuple[str, int, int, int]]) -> None:
        """Stage again the creations of a commit that failed (:attr:`StagedWrites.topics`)."""
        for _, topic_id, ledger_id, _ in created:
            self._staged.ops.append((RAISE_COUNTER, ("topic_id", topic_id)))
            self._staged.ops.append((RAISE_COUNTER, ("ledger_id", ledger_id)))
        self._staged.topics.extend(created)

    def delete_topic(self, name: str, topic_id: int) -> None:
        """Drop a topic partition's log, cursors and producer state."""
        for key in [k for k in self._staged.cursors if k[0] == topic_id]:
            del self._staged.cursors[key]
        self._staged.entries.pop(topic_id, None)
        self._staged.topics[:] = [created for created in self._staged.topics if created[1] != topic_id]
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            if topic_id in self._own_tables:
                self._db.execute(f"DROP TABLE IF EXISTS ledger_{topic_id}")
                self._own_tables.discard(topic_id)
            else:
                base = topic_id << ENTRY_ID_BITS
                self._db.execute("DELETE FROM entries WHERE entry_id BETWEEN ? AND ?", (base, base + MAX_ENTRY_ID))
            self._db.execute("DELETE FROM topics WHERE name = ?", (name,))
            self._db.execute("DELETE FROM cursors WHERE topic_id = ?", (topic_id,))
            self._db.execute("DELETE FROM producer_sequences WHERE topic_id = ?", (topic_id,))
            self._db.execute("DELETE FROM txn_buffer_snapshots WHERE topic_id = ?", (topic_id,))
            self._db.execute("DELETE FROM pending_acks WHERE topic_id = ?", (topic_id,))
            self._db.execute("DELETE FROM compacted_entries WHERE topic_id = ?", (topic_id,))
            self._db.execute("DELETE FROM compactions WHERE topic_id = ?", (topic_id,))
        self._deletions_outside += 1
        # A group commit taken before this may not have run yet: what it writes of the topic (its creation, its
        # entries) is deleted again by the next one.
        table, base = self._log_table(topic_id)
        self._staged.ops.extend(
            [
                ("DELETE FROM topics WHERE topic_id = ?", (topic_id,)),
                ("DELETE FROM cursors WHERE topic_id = ?", (topic_id,)),
                ("DELETE FROM producer_sequences WHERE topic_id = ?", (topic_id,)),
                (f"DELETE FROM {table} WHERE entry_id BETWEEN ? AND ?", (base, base + MAX_ENTRY_ID)),
                (
                    "DELETE FROM metadata WHERE kind = ? AND name = ?"
                    " AND NOT EXISTS (SELECT 1 FROM topics WHERE name = ?)",
                    (TOPIC_CREATED, name, name),
                ),
            ]
        )

    def partitioned_topics(self) -> dict[str, int]:
        """Partitioned topics and their partition counts."""
        return dict(self._db.execute("SELECT name, partitions FROM partitioned_topics"))

    def set_partitioned_topic(self, name: str, partitions: int | None) -> None:
        """Record (or, with ``None``, remove) a partitioned topic."""
        with self._db:
            if partitions is None:
                self._db.execute("DELETE FROM partitioned_topics WHERE name = ?", (name,))
            else:
                self._db.execute("INSERT OR REPLACE INTO partitioned_topics VALUES (?, ?)", (name, partitions))

    def metadata(self, kind: str) -> dict[str, str]:
        """Catalog records of one kind (tenants, namespaces, terminated topics...), by name."""
        return dict(self._db.execute("SELECT name, value FROM metadata WHERE kind = ?", (kind,)))

    def put_metadata(self, kind: str, name: str, value: str | None) -> None:
        """Write (or, with ``None``, delete) a catalog record at once."""
        with self._db:
            if value is None:
                self._db.execute("DELETE FROM metadata WHERE kind = ? AND name = ?", (kind, name))
            else:
                self._db.execute("INSERT OR REPLACE INTO metadata VALUES (?, ?, ?)", (kind, name, value))

    # -- topic logs ---------------------------------------------------------------------------

    def _log_table(self, topic_id: int) -> tuple[str, int]:
        """The table holding a topic partition's entries, and what its keys add to the entry ids."""
        if topic_id in self._own_tables:
            return f"ledger_{topic_id}", 0
        return "entries", topic_id << ENTRY_ID_BITS

    def last_entry_id(self, topic_id: int) -> int:
        """The id of the last stored entry, or -1."""
        table, base = self._log_table(topic_id)
        row = self._db.execute(
            f"SELECT entry_id FROM {table} WHERE entry_id BETWEEN ? AND ? ORDER BY entry_id DESC LIMIT 1",
            (base, base + MAX_ENTRY_ID),
        ).fetchone()
        return -1 if row is None else row[0] - base

    def first_entry_id(self, topic_id: int) -> int:
        """The id of the first stored entry, or -1."""
        table, base = self._log_table(topic_id)
        row = self._db.execute(
            f"SELECT entry_id FROM {table} WHERE entry_id BETWEEN ? AND ? ORDER BY entry_id LIMIT 1",
            (base, base + MAX_ENTRY_ID),
        ).fetchone()
        return -1 if row is None else row[0] - base

    def read(self, topic_id: int, start: int, end: int, max_bytes: int | None = None) -> list[tuple[int, bytes]]:
        """Committed entries with ``start <= entry_id <= end``, in order; with ``max_bytes``, only as many as it
        takes to reach that many bytes of bodies (at least one)."""
        table, base = self._log_table(topic_id)
        rows = self._db.execute(
            f"SELECT entry_id - ?, body FROM {table} WHERE entry_id BETWEEN ? AND ? ORDER BY entry_id",
            (base, base + max(start, 0), base + min(end, MAX_ENTRY_ID)),
        )
        return rows.fetchall() if max_bytes is None else up_to_bytes(rows, max_bytes, _body_size)

    def read_ids(self, topic_id: int, ids: list[int], max_bytes: int | None = None) -> list[tuple[int, bytes]]:
        """Committed entries with the given ids, in order; ``max_bytes`` as in :meth:`read`."""
        table, base = self._log_table(topic_id)
        marks = ",".join("?" * len(ids))
        rows = self._db.execute(
            f"SELECT entry_id - ?, body FROM {table} WHERE entry_id IN ({marks}) ORDER BY entry_id",
            (base, *(base + i for i in ids)),
        )
        return rows.fetchall() if max_bytes is None else up_to_bytes(rows, max_bytes, _body_size)

    def entry_at_time(self, topic_id: int, publish_time_ms: int) -> int | None:
        """The first entry published at or after ``publish_time_ms``."""
        table, base = self._log_table(topic_id)
        row = self._db.execute(
            f"SELECT entry_id FROM {table} WHERE entry_id BETWEEN ? AND ? AND publish_time >= ?"
            " ORDER BY entry_id LIMIT 1",
            (base, base + MAX_ENTRY_ID, publish_time_ms),
        ).fetchone()
        return None if row is None else row[0] - base

    def entries_size(self, topic_id: int, after: int, upto: int) -> tuple[int, int]:
        """Count and total bytes of the committed entries with ``after < entry_id <= upto``."""
        table, base = self._log_table(topic_id)
        row = self._db.execute(
            f"SELECT count(*), coalesce(sum(length(body)), 0) FROM {table} WHERE entry_id BETWEEN ? AND ?",
            (base + max(after + 1, 0), base + min(upto, MAX_ENTRY_ID)),
        ).fetchone()
        return row[0], row[1]

    def newest_over_size(self, topic_id: int, upto: int, max_bytes: int) -> int | None:
        """The newest entry at or below ``upto`` such that it and the entries after it (to ``upto``) exceed
        ``max_bytes``; None if they all fit."""
        table, base = self._log_table(topic_id)
        row = self._db.execute(
            f"SELECT entry_id FROM (SELECT entry_id, sum(length(body)) OVER (ORDER BY entry_id DESC) AS acc"
            f" FROM {table} WHERE entry_id BETWEEN ? AND ?) WHERE acc > ? ORDER BY entry_id DESC LIMIT 1",
            (base, base + min(upto, MAX_ENTRY_ID), max_bytes),
        ).fetchone()
        return None if row is None else row[0] - base

    def stage_trim(self, topic_id: int, upto: int) -> None:
        """Stage the deletion of the entries up to and including ``upto`` (retention)."""
        table, base = self._log_table(topic_id)
        self._staged.ops.append(
            (f"DELETE FROM {table} WHERE entry_id BETWEEN ? AND ?", (base, base + min(upto, MAX_ENTRY_ID)))
        )

    def stage_entry(self, topic_id: int, entry_id: int, publish_time: int, body: bytes) -> None:
        """Stage an entry for the next commit."""
        self._staged.entries[topic_id].append((entry_id, publish_time, body))

    def stage_entries(self, topic_id: int, rows: list[tuple[int, int, bytes]]) -> None:
        """Stage entries ``(entry id, publish time, body)``, in order, for the next commit."""
        self._staged.entries[topic_id].extend(rows)

    # -- compacted views ------------------------------------------------------------------------

    def compaction(self, topic_id: int) -> tuple[int, int, int, int] | None:
        """A topic's compacted view: ``(horizon, ledger id, entries, bytes)``, or None if it never had one."""
        row = self._db.execute("SELECT horizon, ledger_id FROM compactions WHERE topic_id = ?", (topic_id,)).fetchone()
        if row is None:
            return None
        count, size = self._db.execute(
            "SELECT count(*), coalesce(sum(length(body)), 0) FROM compacted_entries WHERE topic_id = ?", (topic_id,)
        ).fetchone()
        return row[0], row[1], count, size

    def compacted_read(self, topic_id: int, start: int, end: int, limit: int) -> list[tuple[int, bytes]]:
        """Up to ``limit`` entries of a topic's compacted view with ``start <= entry_id <= end``, in order."""
        return self._db.execute(
            "SELECT entry_id, body FROM compacted_entries WHERE topic_id = ? AND entry_id BETWEEN ? AND ?"
            " ORDER BY entry_id LIMIT ?",
            (topic_id, start, end, limit),
        ).fetchall()

    def compacted_last(self, topic_id: int) -> tuple[int, bytes] | None:
        """The last entry of a topic's compacted view."""
        return self._db.execute(
            "SELECT entry_id, body FROM compacted_entries WHERE topic_id = ? ORDER BY entry_id DESC LIMIT 1",
            (topic_id,),
        ).fetchone()

    def stage_compaction(self, topic_id: int, horizon: int, ledger_id: int, rows: list[tuple[int, bytes]]) -> None:
        """Stage a new compacted view ``(entry_id, body)`` up to ``horizon``, replacing the previous one."""
        ops = self._staged.ops
        ops.append(("DELETE FROM compacted_entries WHERE topic_id = ?", (topic_id,)))
        with_topic = [(topic_id, *row) for row in rows]
        ops.extend(_row_statements("INSERT INTO compacted_entries VALUES", "(?, ?, ?)", ", ", with_topic))
        ops.append(("INSERT OR REPLACE INTO compactions VALUES (?, ?, ?)", (topic_id, horizon, ledger_id)))

    # -- cursors and producer sequences ------------------------------------------------------

    def cursors(self, topic_id: int) -> dict[str, str]:
        """Stored cursor states of a topic partition, by subscription name."""
        rows = self._db.execute("SELECT name, state FROM cursors WHERE topic_id = ?", (topic_id,))
        return dict(rows)

    def stage_cursor(self, topic_id: int, name: str, state: str | None) -> None:
        """Stage a cursor's new state (``None`` deletes it) for the next commit."""
        self._staged.cursors[(topic_id, name)] = state

    def producer_sequences(self, topic_id: int) -> dict[str, int]:
        """The highest stored sequence id per producer name."""
        rows = self._db.execute("SELECT producer, sequence_id FROM producer_sequences WHERE topic_id = ?", (topic_id,))
        return dict(rows)

    def stage_sequence(self, topic_id: int, producer: str, sequence_id: int) -> None:
        """Stage a producer's highest sequence id for the next commit."""
        self._staged.sequences[(topic_id, producer)] = sequence_id

    # -- transactions -------------------------------------------------------------------------

    def counter(self, name: str) -> int:
        """A durable counter's value (0 if never set)."""
        row = self._db.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()
        return row[0] if row else 0

    def stage_counter(self, name: str, value: int) -> None:
        """Stage a counter's new value."""
        self._staged.ops.append(("INSERT OR REPLACE INTO counters VALUES (?, ?)", (name, value)))

    def txn_log(self) -> list[tuple[int, int, str]]:
        """Every coordinator log record ``(tc_id, txn sequence, record)``, oldest first."""
        return self._db.execute("SELECT tc_id, txn, record FROM txn_log ORDER BY seq").fetchall()

    def stage_txn_record(self, tc_id: int, txn: int, record: str) -> None:
        """Stage a coordinator log record."""
        self._staged.txn_records.append((tc_id, txn, record))

    def stage_txn_removal(self, tc_id: int, txn: int) -> None:
        """Stage the removal of a finished transaction's records (it has no records staged after this)."""
        self._staged.txn_removals.append((tc_id, txn))

    def txn_buffer_snapshot(self, topic_id: int) -> str | None:
        """A topic's latest transaction-buffer snapshot."""
        row = self._db.execute("SELECT state FROM txn_buffer_snapshots WHERE topic_id = ?", (topic_id,)).fetchone()
        return row[0] if row else None

    def stage_txn_buffer_snapshot(self, topic_id: int, state: str) -> None:
        """Stage a transaction-buffer snapshot."""
        self._staged.ops.append(("INSERT OR REPLACE INTO txn_buffer_snapshots VALUES (?, ?)", (topic_id, state)))

    def pending_acks(self, topic_id: int) -> list[tuple[str, int, int, str]]:
        """Pending-ack redo records ``(subscription, txn most, txn least, record)``, oldest first."""
        return self._db.execute(
            "SELECT subscription, txn_most, txn_least, record FROM pending_acks WHERE topic_id = ? ORDER BY seq",
            (topic_id,),
        ).fetchall()

    def stage_pending_ack(self, topic_id: int, subscription: str, txn: tuple[int, int], record: str) -> None:
        """Stage a pending-ack redo record."""
        self._staged.ops.append(
            (
                "INSERT INTO pending_acks (topic_id, subscription, txn_most, txn_least, record) VALUES (?, ?, ?, ?, ?)",
                (topic_id, subscription, *txn, record),
            )
        )

    def stage_pending_ack_removal(self, topic_id: int, subscription: str, txn: tuple[int, int]) -> None:
        """Stage the removal of a transaction's pending acks on a subscription."""
        self._staged.ops.append(
            (
                "DELETE FROM pending_acks WHERE topic_id = ? AND subscription = ? AND txn_most = ? AND txn_least = ?",
                (topic_id, subscription, *txn),
            )
        )

    # -- schemas ------------------------------------------------------------------------------

    def schemas(self, topic: str) -> list[StoredSchema]:
        """Every schema version of a topic, oldest first."""
        rows = self._db.execute(
            "SELECT version, type, name, data, properties FROM schemas WHERE topic = ? ORDER BY version",
            (topic,),
        )
        return [StoredSchema(*row) for row in rows]

    def add_schema(self, topic: str, schema: StoredSchema) -> None:
        """Store a new schema version at once."""
        with self._db:
            self._db.execute("INSERT INTO schemas VALUES (?, ?, ?, ?, ?, ?)", (topic, *schema))

    def delete_schemas(self, topic: str) -> None:
        """Drop every schema version of a topic at once."""
        with self._db:
            self._db.execute("DELETE FROM schemas WHERE topic = ?", (topic,))
        self._deletions_outside += 1

    # -- the group commit --------------------------------------------------------------------

    @property
    def has_staged(self) -> bool:
        return any(self._staged)

    def take_staged(self) -> StagedWrites | None:
        """Empty the staging area and return what it held (None if nothing)."""
        if not self.has_staged:
            return None
        staged, self._staged = self._staged, StagedWrites.empty()
        return staged

    def commit(self) -> None:
        """Make every staged write durable now."""
        staged = self.take_staged()
        if staged is not None:
            self.write(staged)

    def write(self, staged: StagedWrites) -> None:
        """Make taken writes durable in one transaction (may run on another thread, one call at a time); then, if
        it or a commit before it deleted something, give free pages back."""
        try:  # what _full_disk_named() does, without a context manager's cost at every commit
            _write(self._writer, staged, self._log_table)
        except sqlite3.Error as exc:
            _name_full_disk(exc)
            raise
        outside = self._deletions_outside
        if self._incremental and (self._pages_left or outside != self._deletions_seen or _deletes(staged)):
            self._deletions_seen = outside
            self._pages_left = _free_pages(self._writer)


def _give_pages_back(db: sqlite3.Connection, path: Path | str) -> None:
    """Make a store give the pages of deleted data back to the file system (auto_vacuum INCREMENTAL).

    A new database takes the setting when it is opened; one written before it had none, and SQLite only converts a
    database by rewriting it (VACUUM), which a store up to :data:`MIGRATE_AT_OPEN_BYTES` gets here.
    """
    if db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
        return  # a new database took the setting (see Store._connect), or a converted one
    size = db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
    if size > MIGRATE_AT_OPEN_BYTES:
        log.warning(
            "%s (%d MiB) was written without auto_vacuum: deleted data leaves free pages that are reused but not "
            "given back; to give them back, stop the server and run: python -c \"import sqlite3; sqlite3.connect('%s', "
            "isolation_level=None).executescript('PRAGMA auto_vacuum=INCREMENTAL; VACUUM')\"",
            path,
            size >> 20,
            path,
        )
        return
    with _full_disk_named():
        db.execute("PRAGMA auto_vacuum=INCREMENTAL")
        db.execute("VACUUM")
    log.info("%s: converted to auto_vacuum=INCREMENTAL (%d MiB)", path, size >> 20)


def _deletes(staged: StagedWrites) -> bool:
    """Whether staged writes delete rows (and so may leave free pages): trims, replaced compacted views, removed
    cursors and pending acks.

    Not the coordinator log records of ended transactions: nearly every commit of a transactional client removes
    some, a few rows whose pages the next transactions' records fill again (the query after each such commit cost
    its writer a statement more per commit); their free pages are given back with the next other deletion's.
    """
    return any(statement.startswith("DELETE") for statement, _ in staged.ops) or any(
        state is None for state in staged.cursors.values()
    )


def _free_pages(db: sqlite3.Connection) -> bool:
    """Give free pages beyond :data:`FREE_PAGES_KEPT` back to the file system, up to :data:`FREE_PAGES_PER_COMMIT`;
    whether more are left to give back after the next commit.

    The commit before this succeeded whatever happens here: a failure is logged, and the pages stay free for reuse.
    """
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    if free <= FREE_PAGES_KEPT:
        return False
    try:
        # One page per step, and Python's execute() steps once: executescript() steps to the end.
        db.executescript(f"PRAGMA incremental_vacuum({min(free, FREE_PAGES_PER_COMMIT)});")
        # The file shrinks when the WAL is checkpointed: now if no reader is in the way (no waiting), which also
        # empties the WAL; else at a later automatic checkpoint.
        db.execute("PRAGMA busy_timeout=0")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except sqlite3.Error as exc:
        log.warning("giving free pages back failed (%s); they stay free for reuse", exc)
        return False
    finally:
        db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return free - FREE_PAGES_PER_COMMIT > FREE_PAGES_KEPT


def _write(db: sqlite3.Connection, staged: StagedWrites, log_table: Callable[[int], tuple[str, int]]) -> None:
    """One transaction of staged writes on ``db`` (``log_table`` names where a topic's entries go)."""
    entries, cursors, sequences, ops, txn_records, txn_removals, topics = staged
    # One cursor for every statement (a connection's execute() makes a cursor for each).
    cursor = db.cursor()
    execute = cursor.execute
    execute("BEGIN")
    try:
        for name, topic_id, ledger_id, created_ms in topics:
            execute("INSERT INTO topics VALUES (?, ?, ?)", (name, topic_id, ledger_id))
            execute("INSERT OR REPLACE INTO metadata VALUES (?, ?, ?)", (TOPIC_CREATED, name, str(created_ms)))
        # The entries of all topics sharing the one table go in together: statements of many rows each, however
        # many topics the commit holds.
        shared: list[tuple[int, int, bytes]] = []
        for topic_id, rows in entries.items():
            table, base = log_table(topic_id)
            if base:
                shared.extend([(base + entry_id, publish_time, body) for entry_id, publish_time, body in rows])
            elif rows:
                _execute_rows(cursor, f"INSERT INTO {table} VALUES", "(?, ?, ?)", ", ", rows)
        if shared:
            _execute_rows(cursor, "INSERT INTO entries VALUES", "(?, ?, ?)", ", ", shared)
        for (topic_id, name), state in cursors.items():
            if state is None:
                execute("DELETE FROM cursors WHERE topic_id = ? AND name = ?", (topic_id, name))
            else:
                execute("INSERT OR REPLACE INTO cursors VALUES (?, ?, ?)", (topic_id, name, state))
        if sequences:
            cursor.executemany(
                "INSERT OR REPLACE INTO producer_sequences VALUES (?, ?, ?)",
                [(t, p, s) for (t, p), s in sequences.items()],
            )
        for statement, params in ops:
            execute(statement, params)
        if txn_records:
            _execute_rows(cursor, "INSERT INTO txn_log (tc_id, txn, record) VALUES", "(?, ?, ?)", ", ", txn_records)
        if txn_removals:
            _execute_rows(cursor, "DELETE FROM txn_log WHERE", "(tc_id = ? AND txn = ?)", " OR ", txn_removals)
        execute("COMMIT")
    except BaseException:
        # A failed COMMIT (a full disk) may have rolled the transaction back already.
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def up_to_bytes(items: Iterable[_T], max_bytes: int, size: Callable[[_T], int]) -> list[_T]:
    """The first of ``items``, up to the one that brings their ``size`` to ``max_bytes`` (at least one): an item
    after it is never taken, so a database cursor reads no further."""
    taken: list[_T] = []
    total = 0
    for item in items:
        taken.append(item)
        total += size(item)
        if total >= max_bytes:
            break
    return taken


def _body_size(row: tuple[int, bytes]) -> int:
    return len(row[1])


def _execute_rows(db: sqlite3.Cursor, head: str, row: str, separator: str, rows: Sequence[tuple[object, ...]]) -> None:
    """Run ``head`` followed by one ``row`` per row, joined by ``separator``: :data:`ROWS_PER_STATEMENT` rows a time."""
    if len(rows) <= ROWS_PER_STATEMENT:  # one statement (nearly always)
        if rows:
            db.execute(_statement(head, row, separator, len(rows)), tuple(chain.from_iterable(rows)))
        return
    for statement, params in _row_statements(head, row, separator, rows):
        db.execute(statement, params)


def _row_statements(
    head: str, row: str, separator: str, rows: Sequence[tuple[object, ...]]
) -> Iterator[tuple[str, tuple[object, ...]]]:
    """The statements ``head`` + ``row`` per row (joined by ``separator``) for :data:`ROWS_PER_STATEMENT` rows each,
    with their parameters."""
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[start : start + ROWS_PER_STATEMENT]
        yield _statement(head, row, separator, len(chunk)), tuple(chain.from_iterable(chunk))


@lru_cache(maxsize=1024)
def _statement(head: str, row: str, separator: str, rows: int) -> str:
    return f"{head} {separator.join([row] * rows)}"
