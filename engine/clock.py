"""Time, injected: the engine reads the time and schedules work only through a :class:`Clock`."""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class Cancellable(Protocol):
    """A scheduled call that can be cancelled."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Wall-clock time and deferred calls."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    def call_later(self, delay: float, fn: Callable[[], object]) -> Cancellable:
        """Run ``fn`` after ``delay`` seconds (0 means: soon, after the current work)."""
        ...


def now_ms(clock: Clock) -> int:
    """The clock's time in whole milliseconds."""
    return int(clock.now() * 1000)


class _ManualCall:
    __slots__ = ("cancelled", "fn")

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock for tests: time moves only when told, and deferred calls run on :meth:`advance`."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._calls: list[tuple[float, int, _ManualCall]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, fn: Callable[[], object]) -> _ManualCall:
        call = _ManualCall(fn)
        heapq.heappush(self._calls, (self._now + delay, next(self._order), call))
        return call

    def advance(self, seconds: float = 0.0) -> None:
        """Move time forward and run every call that falls due, in order."""
        target = self._now + seconds
        while self._calls and self._calls[0][0] <= target:
            when, _, call = heapq.heappop(self._calls)
            self._now = max(self._now, when)
            if not call.cancelled:
                call.fn()
        self._now = target


class SystemClock:
    """Real time with no scheduler of its own; the proxy supplies one backed by the reactor."""

    def __init__(self, schedule: Callable[[float, Callable[[], object]], Cancellable]) -> None:
        self._schedule = schedule

    def now(self) -> float:
        return time.time()

    def call_later(self, delay: float, fn: Callable[[], object]) -> Cancellable:
        return self._schedule(delay, fn)
