"""The group commit: which commits are small, where each kind runs, and multi-row transaction-log writes."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.broker import COMMIT_RETRY_SECONDS, SMALL_COMMIT_BYTES, SMALL_COMMIT_ENTRIES, Broker, InlineCommits
from engine.clock import ManualClock
from engine.store import ROWS_PER_STATEMENT, Store, StoreFullError
from engine.topic import AccessMode, Producer
from engine.transactions import TxnAction
from proxy.commits import ThreadedCommits
from wire.framing import make_body
from wire.pulsar_api_pb2 import MessageMetadata

TOPIC = "persistent://public/default/group-commit"


class RecordingCommits(InlineCommits):
    """Commits inline, remembering whether the broker called each commit small."""

    def __init__(self) -> None:
        self.small: list[bool] = []

    def run(self, work: Callable[[], None], done: Callable[[BaseException | None], None], small: bool) -> None:
        self.small.append(small)
        super().run(work, done, small)


class Sink:
    def close_producer(self, producer: Producer) -> None:
        pass

    def producer_ready(self, producer: Producer) -> None:
        pass


def _publish(broker: Broker, clock: ManualClock, payloads: list[bytes]) -> list[object]:
    """Publish ``payloads`` in one turn and let the commit run; the receipts' results."""
    topic = broker.topic(TOPIC)
    producer = Producer(1, "p", AccessMode.SHARED, 0, Sink())
    topic.add_producer(producer)
    results: list[object] = []
    for seq, payload in enumerate(payloads):
        meta = MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1)
        topic.publish(producer, seq, -1, make_body(meta, payload), meta, results.append)
    clock.advance(0)
    topic.remove_producer(producer)
    return results


def test_commits_that_replies_wait_for_are_small_only_up_to_the_limits(tmp_path: Path) -> None:
    clock, commits = ManualClock(), RecordingCommits()
    broker = Broker(Store(tmp_path / "store.sqlite"), clock, commits=commits)
    # A commit that creates a topic is never small (tests/test_topic_creation.py).
    assert len(_publish(broker, clock, [b"first"])) == 1
    assert len(_publish(broker, clock, [b"one"])) == 1
    assert len(_publish(broker, clock, [b"m"] * SMALL_COMMIT_ENTRIES)) == SMALL_COMMIT_ENTRIES
    assert len(_publish(broker, clock, [b"m"] * (SMALL_COMMIT_ENTRIES + 1))) == SMALL_COMMIT_ENTRIES + 1
    assert len(_publish(broker, clock, [b"x" * (SMALL_COMMIT_BYTES + 1)])) == 1
    assert commits.small == [False, True, True, False, False]
    # A commit nobody waits for (a counter, here) is never small, however little it holds.
    broker.store.stage_counter("c", 1)
    broker.request_flush()
    clock.advance(0)
    assert commits.small[-1] is False
    assert broker.store.counter("c") == 1
    broker.close()


def test_no_commit_is_small_while_a_transaction_is_open(tmp_path: Path) -> None:
    """Its client has requests on the way that need no commit: a commit on the engine's thread would hold them up."""
    clock, commits = ManualClock(), RecordingCommits()
    broker = Broker(Store(tmp_path / "store.sqlite"), clock, commits=commits)
    opened: list[object] = []
    broker.coordinators.new_txn(0, 60_000, opened.append)
    clock.advance(0)
    [txn] = opened
    assert len(_publish(broker, clock, [b"one"])) == 1
    ended: list[object] = []
    broker.coordinators.end(txn, TxnAction.COMMIT, ended.append)  # type: ignore[arg-type]
    clock.advance(0)
    assert ended == [None]
    assert len(_publish(broker, clock, [b"two"])) == 1
    # The send and the end while the transaction was open are not small; the send after it ended is.
    assert commits.small[-3:] == [False, False, True]
    broker.close()


class CallsFromThreads:
    """The part of a reactor ThreadedCommits uses: calls handed over from other threads, run when the test says."""

    def __init__(self) -> None:
        self.calls: queue.Queue[tuple[Callable[..., Any], tuple[Any, ...]]] = queue.Queue()

    def callFromThread(self, fn: Callable[..., Any], *args: Any) -> None:  # noqa: N802 (Twisted's name)
        self.calls.put((fn, args))

    def run_next(self) -> None:
        fn, args = self.calls.get(timeout=10)
        fn(*args)


def test_threaded_commits_run_small_ones_here_and_large_ones_on_the_writer_thread() -> None:
    reactor = CallsFromThreads()
    commits = ThreadedCommits(reactor)
    here = threading.get_ident()
    ran_on: list[int] = []
    outcomes: list[BaseException | None] = []
    # What the server sends after each commit's completions: once each, after them, on the reactor thread.
    flushed: list[tuple[int, int]] = []
    commits.after_completions = lambda: flushed.append((len(outcomes), threading.get_ident()))
    commits.run(lambda: ran_on.append(threading.get_ident()), outcomes.append, small=True)
    assert ran_on == [here] and outcomes == [None] and flushed == [(1, here)]
    commits.run(lambda: ran_on.append(threading.get_ident()), outcomes.append, small=False)
    reactor.run_next()
    assert ran_on[1] != here and outcomes == [None, None] and flushed[1:] == [(2, here)]

    def fail() -> None:
        raise OSError("disk full")

    commits.run(fail, outcomes.append, small=True)
    commits.run(fail, outcomes.append, small=False)
    reactor.run_next()
    assert [str(outcome) for outcome in outcomes[2:]] == ["disk full", "disk full"]
    assert flushed[2:] == [(3, here), (4, here)]
    commits.drain()


def test_transaction_log_records_and_removals_beyond_one_statement(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.sqlite")
    txns = ROWS_PER_STATEMENT + 44
    for txn in range(txns):
        store.stage_txn_record(txn % 16, txn, f"open {txn}")
        store.stage_txn_record(txn % 16, txn, f"partition {txn}")
    store.commit()
    assert store.txn_log() == [
        (txn % 16, txn, f"{op} {txn}") for txn in range(txns) for op in ("open", "partition")
    ]
    for txn in range(1, txns):
        store.stage_txn_removal(txn % 16, txn)
    # A transaction opened and removed within the same commit leaves nothing either.
    store.stage_txn_record(5, 10_000, "open 10000")
    store.stage_txn_removal(5, 10_000)
    store.commit()
    assert store.txn_log() == [(0, 0, "open 0"), (0, 0, "partition 0")]
    store.close()


class FailingCommits(InlineCommits):
    """Commits inline; the first ``failures`` fail as a full disk makes them fail."""

    def __init__(self, failures: int) -> None:
        self.failures = failures

    def run(self, work: Callable[[], None], done: Callable[[BaseException | None], None], small: bool) -> None:
        if self.failures:
            self.failures -= 1
            done(StoreFullError("No space left on device for the store (database or disk is full)"))
            return
        super().run(work, done, small)


def test_acknowledgements_a_failed_commit_lost_are_written_again(tmp_path: Path) -> None:
    clock, commits = ManualClock(), FailingCommits(0)
    broker = Broker(Store(tmp_path / "store.sqlite"), clock, commits=commits)
    assert _publish(broker, clock, [b"a", b"b"]) == [0, 1]
    topic = broker.topic(TOPIC)
    subscription = topic.create_subscription("s", 0)
    clock.advance(0)
    commits.failures = 2
    subscription.acknowledge(None, [(0, None)], cumulative=False)
    clock.advance(0)
    assert json.loads(broker.store.cursors(topic.topic_id)["s"])["mark_delete"] == -1
    # Written again after a pause (not on every turn while the disk stays full), until a commit succeeds.
    clock.advance(COMMIT_RETRY_SECONDS)
    assert commits.failures == 0
    assert json.loads(broker.store.cursors(topic.topic_id)["s"])["mark_delete"] == -1
    clock.advance(COMMIT_RETRY_SECONDS)
    assert json.loads(broker.store.cursors(topic.topic_id)["s"])["mark_delete"] == 0
    broker.close()
