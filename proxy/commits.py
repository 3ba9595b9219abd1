"""Group commits: large ones on a thread of their own, so the reactor keeps serving while SQLite fsyncs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

from engine.broker import InlineCommits

Work = Callable[[], None]
Done = Callable[[BaseException | None], None]


class ThreadedCommits:
    """A :class:`engine.broker.CommitRunner` backed by one writer thread.

    A large store write runs on the thread (sqlite3 releases the GIL while it works and fsyncs), so the reactor
    keeps reading and parsing meanwhile; its completion is handed back to the reactor thread with
    ``callFromThread``. A small one runs on the reactor thread: the two hand-overs (waking the writer, then the
    reactor, each also waiting for the GIL) take about half as long as the write itself, and a client waiting for
    a few replies gains nothing from the overlap. The broker calls no commit small while a transaction is open (see
    ``engine.broker.SMALL_COMMIT_ENTRIES``): transactional clients have requests on the way that need no commit.

    The thread takes its work from a ``SimpleQueue``, with no future per commit: a transaction's messages make one
    commit each or so (a client ends it only once its sends are durable), and a ``ThreadPoolExecutor``'s submit and
    future cost about as much reactor time per commit as the rest of the hand-over (bench/TXN_PATH.md).

    ``after_completions`` runs right after each commit's ``done``: the server sends the receipts and answers that
    the commit completed from there, rather than after the next turn has read and handled every request that
    arrived meanwhile (8 clients looping over one-message transactions: about 20% more transactions per second).
    """

    def __init__(self, reactor: Any) -> None:
        self._reactor = reactor
        self._here = InlineCommits()
        self._work: SimpleQueue[tuple[Work, Done] | None] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self.after_completions: Callable[[], None] = lambda: None

    def run(self, work: Work, done: Done, small: bool) -> None:
        if small:
            self._here.run(work, lambda error: self._completed(done, error), small)
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._writer, name="group-commit", daemon=True)
            self._thread.start()
        self._work.put((work, done))

    def _completed(self, done: Done, error: BaseException | None) -> None:
        done(error)
        self.after_completions()

    def _writer(self) -> None:
        """The writer thread: each commit in turn, its completion handed to the reactor; None stops it."""
        while (item := self._work.get()) is not None:
            work, done = item
            error: BaseException | None = None
            try:
                work()
            except BaseException as exc:  # handed to the reactor thread, which reports it (a full disk...)
                error = exc
            self._reactor.callFromThread(self._completed, done, error)

    def drain(self) -> None:
        """Wait for the commits handed to the thread, and stop it."""
        if self._thread is not None:
            self._work.put(None)
            self._thread.join()
            self._thread = None
