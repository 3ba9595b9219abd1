"""Where a topic's entries would lie in Pulsar's ledgers (engine/ledgers.py), and the store's conversion to a
database that gives deleted pages back."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from engine.ledgers import LedgerRollover, Ledgers
from engine.store import Store

MINUTE = 60_000


def test_what_is_stored_when_a_topic_loads_is_one_closed_ledger() -> None:
    ledgers = Ledgers(last_entry=19, now_ms=0)
    assert ledgers.deletable_upto(11) == -1  # acknowledged in part: it stays whole
    assert ledgers.deletable_upto(19) == 19
    assert ledgers.spans(0, 21) == [(0, 19), (20, 21)]
    assert Ledgers(last_entry=-1, now_ms=0).spans(0, -1) == [(0, -1)]


def test_an_unload_closes_the_open_ledger_unless_it_is_empty() -> None:
    ledgers = Ledgers(last_entry=-1, now_ms=0)
    ledgers.reopen(last_entry=-1, now_ms=5)
    assert (ledgers.closed_ends, ledgers.open_first) == ([], 0)
    ledgers.reopen(last_entry=7, now_ms=10)
    assert (ledgers.closed_ends, ledgers.open_first, ledgers.opened_ms) == ([7], 8, 10)
    ledgers.deleted_upto(7)
    assert ledgers.spans(8, 9) == [(8, 9)]


def test_rollover_by_entries_without_a_minimum_time_splits_as_every_add_would() -> None:
    ledgers = Ledgers(last_entry=-1, now_ms=0)
    ledgers.roll(last_entry=21, now_ms=1000, rollover=LedgerRollover(max_entries=5, min_minutes=0))
    assert ledgers.closed_ends == [4, 9, 14, 19]
    assert ledgers.open_first == 20
    assert ledgers.deletable_upto(11) == 9
    ledgers.deleted_upto(9)
    assert (ledgers.closed_ends, ledgers.first_kept) == ([14, 19], 10)


def test_rollover_waits_for_the_minimum_time_then_closes_at_the_last_entry() -> None:
    rollover = LedgerRollover(max_entries=5, min_minutes=10, max_minutes=240)
    ledgers = Ledgers(last_entry=-1, now_ms=0)
    ledgers.roll(last_entry=11, now_ms=9 * MINUTE, rollover=rollover)
    assert ledgers.closed_ends == []
    ledgers.roll(last_entry=11, now_ms=10 * MINUTE, rollover=rollover)
    assert ledgers.closed_ends == [11]
    # An open ledger below the entry limit rolls over at the maximum time, unless it is empty.
    ledgers.roll(last_entry=13, now_ms=10 * MINUTE + 240 * MINUTE, rollover=rollover)
    assert ledgers.closed_ends == [11, 13]
    ledgers.roll(last_entry=13, now_ms=10 * MINUTE + 500 * MINUTE, rollover=rollover)
    assert ledgers.closed_ends == [11, 13]


def test_an_old_store_is_converted_to_give_pages_back(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    old = sqlite3.connect(path, isolation_level=None)
    old.execute("PRAGMA journal_mode=WAL")
    old.execute(
        "CREATE TABLE metadata (kind TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (kind, name))"
    )
    old.execute("INSERT INTO metadata VALUES ('tenants', 'kept', '{}')")
    old.close()
    store = Store(path)
    try:
        assert store.metadata("tenants") == {"kept": "{}"}
        assert store._db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL
    finally:
        store.close()


def test_the_file_shrinks_after_a_trim(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    store = Store(path)
    try:
        record = store.create_topic("persistent://public/default/t", 0)
        for batch in range(20):
            for i in range(100):
                store.stage_entry(record.topic_id, batch * 100 + i, 0, bytes(4000))
            store.commit()
        grown = sum(f.stat().st_size for f in tmp_path.glob("store.sqlite*"))
        store.stage_trim(record.topic_id, 1999)
        store.commit()
        shrunk = sum(f.stat().st_size for f in tmp_path.glob("store.sqlite*"))
    finally:
        store.close()
    assert grown > 8 << 20
    assert shrunk < 4.5 * (1 << 20) + (1 << 20)  # the free pages kept for reuse, and the rest


def test_a_topic_with_a_table_of_its_own_keeps_it(tmp_path: Path) -> None:
    """Stores written when each topic had its own log table: such a topic is read, written, trimmed and deleted in
    its table; topics created since share the one table."""
    path = tmp_path / "store.sqlite"
    store = Store(path)
    store.close()
    old = sqlite3.connect(path, isolation_level=None)
    old.execute(
        "CREATE TABLE ledger_7 (entry_id INTEGER PRIMARY KEY, publish_time INTEGER NOT NULL, body BLOB NOT NULL)"
    )
    old.execute("INSERT INTO topics VALUES ('persistent://public/default/old', 7, 70)")
    old.execute("INSERT INTO ledger_7 VALUES (0, 1, x'00'), (1, 2, x'01')")
    old.close()
    store = Store(path)
    try:
        new = store.create_topic("persistent://public/default/new", 0)
        store.stage_entry(7, 2, 3, b"\x02")
        store.stage_entry(new.topic_id, 0, 3, b"n")
        store.commit()
        assert store.read(7, 0, 10) == [(0, b"\x00"), (1, b"\x01"), (2, b"\x02")]
        assert store.read(new.topic_id, 0, 10) == [(0, b"n")]
        store.stage_trim(7, 0)
        store.commit()
        assert (store.first_entry_id(7), store.last_entry_id(7)) == (1, 2)
        store.delete_topic("persistent://public/default/old", 7)
        assert store._db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'ledger_7'").fetchone() == (0,)
        assert store.read(new.topic_id, 0, 10) == [(0, b"n")]
    finally:
        store.close()


def test_storage_stats_read_while_a_trim_commits_do_not_count_what_went(tmp_path: Path) -> None:
    """The admin trim's deletion is staged, then committed: a stats read in between (an internalStats request
    answered before the commit) counted the deleted entries from the cache (the conformance scenario
    retention.default-retention saw 20 entries where Pulsar has 0)."""
    from engine.policy_enforcer import trim_now
    from tests.test_engine_transactions import Harness

    harness = Harness(tmp_path, ledger_rollover=LedgerRollover(max_entries=5, min_minutes=0))
    for i in range(20):
        harness.send(b"m%d" % i)
    storage = harness.broker.stats.storage
    assert storage.of(harness.topic)[0] == 20
    assert trim_now(harness.broker, harness.topic) == 19
    assert storage.of(harness.topic) == (0, 0)  # staged, not yet committed
    harness.run()
    assert storage.of(harness.topic) == (0, 0)
