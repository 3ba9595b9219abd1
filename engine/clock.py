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
    """Wall-clock time, monotonic time and deferred calls.

    Wall time is only for what Pulsar records as a date (publish times, a transaction's start); deadlines, timers
    and durations use monotonic time, so that a step of the system clock neither stalls nor fires them.
    """

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never steps (only differences between its readings mean anything)."""
        ...

    def call_later(self, delay: float, fn: Callable[[], object]) -> Cancellable:
        """Run ``fn`` after ``delay`` seconds of monotonic time (0 means: soon, after the current work)."""
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
    """A clock for tests: time moves only when told, and deferred calls run on :meth:`advance`.

    :meth:`advance` moves wall and monotonic time together; :meth:`step_wall` steps the wall clock alone, as an
    administrator or NTP may step a system clock.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._monotonic = 0.0
        self._calls: list[tuple[float, int, _ManualCall]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def call_later(self, delay: float, fn: Callable[[], object]) -> _ManualCall:
        call = _ManualCall(fn)
        heapq.heappush(self._calls, (self._monotonic + delay, next(self._order), call))
        return call

    def advance(self, seconds: float = 0.0) -> None:
        """Move time forward and run every call that falls due, in order."""
        target = self._monotonic + seconds
        while self._calls and self._calls[0][0] <= target:
            when, _, call = heapq.heappop(self._calls)
            if when > self._monotonic:
                self._now += when - self._monotonic
                self._monotonic = when
            if not call.cancelled:
                call.fn()
        self._now += target - self._monotonic
        self._monotonic = target

    def step_wall(self, seconds: float) -> None:
        """Step the wall clock by ``seconds`` (negative: back) without moving monotonic time."""
        self._now += seconds


class SystemClock:
    """Real time with no scheduler of its own; the proxy supplies one backed by the reactor."""

    def __init__(self, schedule: Callable[[float, Callable[[], object]], Cancellable]) -> None:
        self._schedule = schedule

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, fn: Callable[[], object]) -> Cancellable:
        return self._schedule(delay, fn)
