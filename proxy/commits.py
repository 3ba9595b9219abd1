"""Group commits on a thread of their own, so the reactor keeps serving while SQLite fsyncs."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class ThreadedCommits:
    """A :class:`engine.broker.CommitRunner` backed by one writer thread.

    The store write runs on the thread (sqlite3 releases the GIL while it works and fsyncs); its
    completion is handed back to the reactor thread with ``callFromThread``.
    """

    def __init__(self, reactor: Any) -> None:
        self._reactor = reactor
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="group-commit")

    def run(self, work: Callable[[], None], done: Callable[[BaseException | None], None]) -> None:
        def finished(future: Future[None]) -> None:
            self._reactor.callFromThread(done, future.exception())

        self._executor.submit(work).add_done_callback(finished)

    def drain(self) -> None:
        self._executor.shutdown(wait=True)
