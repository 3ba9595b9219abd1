"""Deadlines of many items behind one scheduled call, as a transaction timeout tracker needs.

Scheduling one clock call per transaction fills the event loop's timer heap with calls that are almost all cancelled
(a transaction usually ends long before it times out), and every later timer pays for that heap. This tracker keeps its
own heap of ``(deadline, order, key)`` and asks the clock for a single call, at the earliest deadline. Removing a key
only forgets it; its heap entry is dropped when it comes up, or when stale entries outnumber live ones.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from engine.clock import Cancellable, Clock

K = TypeVar("K", bound=Hashable)

#: Below this many heap entries the tracker never compacts.
_COMPACT_FLOOR = 1024


class DeadlineTracker(Generic[K]):
    """Calls ``expired(key)`` once the clock passes the key's deadline, unless the key was discarded first."""

    def __init__(self, clock: Clock, expired: Callable[[K], None]) -> None:
        self._clock = clock
        self._expired = expired
        self._deadlines: dict[K, float] = {}
        self._heap: list[tuple[float, int, K]] = []
        self._order = itertools.count()
        self._call: Cancellable | None = None
        self._call_at = float("inf")

    def __len__(self) -> int:
        return len(self._deadlines)

    def __contains__(self, key: object) -> bool:
        return key in self._deadlines

    def add(self, key: K, deadline: float) -> None:
        """Expire ``key`` at ``deadline`` (the clock's monotonic seconds); replaces an earlier deadline of the key."""
        self._deadlines[key] = deadline
        heapq.heappush(self._heap, (deadline, next(self._order), key))
        if deadline < self._call_at:
            self._schedule(deadline)
        elif len(self._heap) > _COMPACT_FLOOR and len(self._heap) > 2 * len(self._deadlines):
            self._compact()

    def discard(self, key: K) -> None:
        """Forget ``key``; it will not expire."""
        self._deadlines.pop(key, None)

    def _compact(self) -> None:
        self._heap = [item for item in self._heap if self._deadlines.get(item[2]) == item[0]]
        heapq.heapify(self._heap)

    def _schedule(self, deadline: float) -> None:
        if self._call is not None:
            self._call.cancel()
        self._call_at = deadline
        self._call = self._clock.call_later(max(deadline - self._clock.monotonic(), 0.0), self._fire)

    def _fire(self) -> None:
        self._call, self._call_at = None, float("inf")
        now = self._clock.monotonic()
        heap = self._heap
        due: list[K] = []
        while heap and heap[0][0] <= now:
            deadline, _, key = heapq.heappop(heap)
            if self._deadlines.get(key) == deadline:
                del self._deadlines[key]
                due.append(key)
        while heap and self._deadlines.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        if heap:
            self._schedule(heap[0][0])
        for key in due:
            self._expired(key)
