"""The store asks SQLite for its free pages (to give them back) only after commits that deleted something, or after
a deletion outside the group commit: a commit of sends alone costs no extra query."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine import store as store_module
from engine.store import Store


class CountingStore(Store):
    """A store that counts the free-page queries its writer connection runs."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.queries = 0
        self._writer.set_trace_callback(self._traced)

    def _traced(self, statement: str) -> None:
        if "freelist_count" in statement:
            self.queries += 1


def _send(store: Store, topic_id: int, first: int, count: int, size: int = 100) -> None:
    for entry_id in range(first, first + count):
        store.stage_entry(topic_id, entry_id, 0, b"x" * size)
    store.commit()


def test_free_pages_are_looked_for_only_after_deletions(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "store.sqlite")
    record = store.create_topic("persistent://public/default/pages", 0)
    store.commit()
    _send(store, record.topic_id, 0, 100)
    _send(store, record.topic_id, 100, 100)
    store.stage_cursor(record.topic_id, "s", "{}")
    store.commit()
    store.stage_txn_record(0, 1, '{"op": "open"}')
    store.commit()
    store.stage_txn_removal(0, 1)  # a transaction ended: its records leave the coordinator log
    store.commit()
    assert store.queries == 0
    store.stage_trim(record.topic_id, 99)  # retention
    store.commit()
    assert store.queries == 1
    _send(store, record.topic_id, 200, 10)
    assert store.queries == 1
    store.stage_cursor(record.topic_id, "s", None)  # an unsubscribe
    store.commit()
    assert store.queries == 2
    other = store.create_topic("persistent://public/default/other", 0)
    store.commit()
    store.delete_topic("persistent://public/default/other", other.topic_id)  # outside the group commit
    assert store.queries == 2
    _send(store, record.topic_id, 210, 10)
    assert store.queries == 3
    _send(store, record.topic_id, 220, 10)
    assert store.queries == 3
    store.close()


def test_a_large_trim_is_given_back_over_the_commits_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At most FREE_PAGES_PER_COMMIT pages go back after one commit; the commits after it give back the rest, though
    they delete nothing themselves, then stop looking."""
    monkeypatch.setattr(store_module, "FREE_PAGES_KEPT", 8)
    monkeypatch.setattr(store_module, "FREE_PAGES_PER_COMMIT", 64)
    path = tmp_path / "store.sqlite"
    store = CountingStore(path)
    record = store.create_topic("persistent://public/default/large", 0)
    store.commit()
    for first in range(0, 2000, 500):
        _send(store, record.topic_id, first, 500, size=1000)  # about 2 MB
    store.stage_trim(record.topic_id, 1999)
    store.commit()
    assert store.queries == 1
    looking = []
    for first in range(2000, 2400, 10):
        _send(store, record.topic_id, first, 10)
        looking.append(store.queries)
    reader = sqlite3.connect(path)
    try:
        free = reader.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        reader.close()
    # The commits after the trim looked while pages were left (several of them), then stopped.
    assert looking[0] == 2 and looking[-1] == looking[-2] and looking[-1] > 4
    assert free <= 8 + 64
    store.close()
