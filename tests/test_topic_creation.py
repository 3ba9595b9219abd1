"""Creating a topic writes nothing on the engine's (the reactor's) thread: its creation is staged and the group
commit makes it durable on the commit runner's thread, so a slow disk holds up no answer meanwhile."""

from __future__ import annotations

import threading
from pathlib import Path

from engine.broker import COMMIT_RETRY_SECONDS, Broker
from engine.clock import ManualClock
from engine.store import StagedWrites, Store
from proxy.commits import ThreadedCommits
from tests.test_group_commit import CallsFromThreads, FailingCommits

NAMESPACE = "persistent://public/default/"


class SlowDisk(Store):
    """A store whose group commits wait until the test lets them finish (a disk sync that takes its time), and that
    records every write transaction begun on the engine's connection."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.release = threading.Event()
        self.writing = threading.Event()
        self.writer_threads: list[int] = []
        self.engine_writes: list[str] = []
        self._db.set_trace_callback(self._traced)

    def _traced(self, statement: str) -> None:
        if statement.upper().startswith(("BEGIN", "COMMIT", "INSERT", "UPDATE", "DELETE")):
            self.engine_writes.append(statement)

    def write(self, staged: StagedWrites) -> None:
        self.writer_threads.append(threading.get_ident())
        self.writing.set()
        assert self.release.wait(10), "the test never released the commit"
        super().write(staged)


def test_topic_creation_commits_on_the_writer_thread_while_the_engine_keeps_answering(tmp_path: Path) -> None:
    store = SlowDisk(tmp_path / "store.sqlite")
    reactor, clock = CallsFromThreads(), ManualClock()
    commits = ThreadedCommits(reactor)
    broker = Broker(store, clock, commits=commits)
    store.engine_writes.clear()  # what opening the store wrote (its boot counter)
    engine = threading.get_ident()

    first = broker.topic(NAMESPACE + "created-1")
    clock.advance(0)  # the group commit starts: its write waits for the slow disk
    assert store.writing.wait(10)
    # The engine's thread is free meanwhile: it loads, creates and answers for other topics.
    second = broker.topic(NAMESPACE + "created-2")
    assert broker.topic(NAMESPACE + "created-1") is first
    assert broker.topics_of_namespace("public/default") == [NAMESPACE + "created-1", NAMESPACE + "created-2"]
    assert (first.topic_id, first.ledger_id) != (second.topic_id, second.ledger_id)
    assert store.engine_writes == []
    store.release.set()
    reactor.run_next()  # the first commit completes on the engine's thread; the second creation commits next
    clock.advance(0)
    reactor.run_next()
    assert engine not in store.writer_threads and len(store.writer_threads) == 2
    assert store.engine_writes == []
    commits.drain()
    store.close()

    reopened = Store(tmp_path / "store.sqlite")
    try:
        records = reopened.topics()
        assert records[NAMESPACE + "created-1"] == (first.topic_id, first.ledger_id)
        assert records[NAMESPACE + "created-2"] == (second.topic_id, second.ledger_id)
        # Ids handed out before their commit are not handed out again (compaction asks for ledger ids at once).
        assert reopened.next_value("ledger_id") > max(first.ledger_id, second.ledger_id)
    finally:
        reopened.close()


def test_a_creation_a_failed_commit_lost_is_written_again(tmp_path: Path) -> None:
    """The topic exists in memory at once; a commit that fails takes its creation with it, and the broker writes it
    again, as it does a lost acknowledgement."""
    store = Store(tmp_path / "store.sqlite")
    clock, commits = ManualClock(), FailingCommits(1)
    broker = Broker(store, clock, commits=commits)
    topic = broker.topic(NAMESPACE + "lost-once")
    clock.advance(0)
    assert commits.failures == 0 and NAMESPACE + "lost-once" not in Store(tmp_path / "store.sqlite").topics()
    clock.advance(COMMIT_RETRY_SECONDS)
    broker.close()
    reopened = Store(tmp_path / "store.sqlite")
    try:
        assert reopened.topics()[NAMESPACE + "lost-once"] == (topic.topic_id, topic.ledger_id)
    finally:
        reopened.close()
