"""The simulated disk: the real :class:`engine.store.Store` on an in-memory SQLite database.

A write reaches the database only by committing (the store writes in whole transactions), so the database holds
exactly what was made durable; a crash closes the server's connection (which rolls back what was not committed),
keeps the database and throws away the server. The disk fills up for real (``PRAGMA max_page_count`` makes SQLite
answer ``SQLITE_FULL``), and a crash can interrupt a write half-way (a progress handler aborts the transaction, which
SQLite rolls back).
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
from pathlib import Path

from engine.store import StagedWrites, Store

#: What a commit appends to the WAL while the disk is full (more than a page: it needs a new one).
PAGE_BYTES = 8192
#: SQLite's default (and largest) page limit: no limit in practice.
UNLIMITED_PAGES = 1_073_741_823


#: Numbers the simulated disks of a process: each is an in-memory database of its own name.
_DISKS = itertools.count()


class SimDisk:
    """The database that survives crashes, and whether the disk is full.

    The database is a named in-memory one (SQLite's ``memdb``, which connections of one process share), kept by a
    connection of the disk's own that runs nothing: each life of the server opens its own connection to it (as a
    server opens the file it finds, with new prepared statements) and a crash closes it, rather than the database
    being copied out at each crash and in again at each start.
    """

    def __init__(self) -> None:
        self._uri = f"file:/sim-disk-{next(_DISKS)}?vfs=memdb"
        #: Keeps the database while no server has it open; None until the disk is first opened.
        self._keeper: sqlite3.Connection | None = None
        self.db: sqlite3.Connection | None = None
        self.full = False
        self._interrupting = False

    def open(self) -> sqlite3.Connection:
        """A connection to what was committed before the last crash (the one server's only connection); on a new
        disk, to a copy of :func:`_new_store_image` (what the store's schema makes of an empty database)."""
        if self._keeper is None:
            self._keeper = self._connect()
            _new_store_image().backup(self._keeper)
        db = self.db = self._connect()
        if self.full:  # a new connection has no limit
            self._apply_limit()
        return db

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self._uri, uri=True, isolation_level=None, check_same_thread=False)

    def crash(self) -> None:
        """Keep what was committed; the connection dies with the server (rolling back what it had not committed)."""
        db = self.db
        if db is None:
            return
        if db.in_transaction:
            db.execute("ROLLBACK")
        db.close()
        self.db = None

    def set_full(self, full: bool) -> None:
        self.full = full
        self._apply_limit()

    def _apply_limit(self) -> None:
        if self.db is None:
            return
        if self.full:
            pages = self.db.execute("PRAGMA page_count").fetchone()[0]
            self.db.execute(f"PRAGMA max_page_count = {max(pages, 1)}")
        else:
            self.db.execute(f"PRAGMA max_page_count = {UNLIMITED_PAGES}")

    def interrupt_next_write(self, steps: int) -> None:
        """Abort the write about to run after ``steps`` SQLite VM steps (a crash inside one write)."""
        assert self.db is not None
        self.db.set_progress_handler(lambda: 1, steps)
        self._interrupting = True

    def clear_interrupt(self) -> None:
        if self._interrupting and self.db is not None:
            self.db.set_progress_handler(None, 0)
        self._interrupting = False


@functools.cache
def _new_store_image() -> sqlite3.Connection:
    """The database a store makes of an empty one (its schema), once a process: each scenario's disk starts as a
    copy of it (a server then starts on it as on any disk it finds), instead of creating the schema again."""
    disk = SimDisk()
    disk._keeper = disk._connect()  # an empty database, not this image
    SimStore(disk)
    image = sqlite3.connect(":memory:", check_same_thread=False)
    disk._keeper.backup(image)
    disk.crash()
    disk._keeper.close()
    return image


class SimStore(Store):
    """The production store, its two connections being the simulated disk's one connection.

    On a real disk the store's WAL grows with every commit, so a full disk fails every group commit; an in-memory
    database rewrites a row in place. So while the disk is full, each group commit also appends a page to a table of
    its own, which SQLite refuses with ``SQLITE_FULL`` (and the commit with it).
    """

    def __init__(self, disk: SimDisk) -> None:
        self._disk = disk
        self._sim_db = disk.open()
        super().__init__(":memory:")
        self._sim_db.execute("CREATE TABLE IF NOT EXISTS sim_wal_growth (page BLOB NOT NULL)")

    def _connect(self, path: Path | str) -> sqlite3.Connection:  # type: ignore[override]
        return self._sim_db

    def write(self, staged: StagedWrites) -> None:
        if self._disk.full:
            staged.ops.append(("INSERT INTO sim_wal_growth VALUES (zeroblob(?))", (PAGE_BYTES,)))
        super().write(staged)
