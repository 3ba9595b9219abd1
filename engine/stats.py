"""Engine-side figures for the admin API and metrics: storage sizes, rates and the publish latency.

Counters live on the engine objects (topics, producers, subscriptions, consumers); this module turns them into
what Pulsar reports: rates over a sliding window, stored bytes per topic (kept up to date incrementally so that a
scrape of many topics stays cheap) and a histogram of how long publishes wait for their group commit.
"""

from __future__ import annotations

import bisect
import time
import weakref
from collections import deque
from typing import TYPE_CHECKING

from engine.clock import Clock, now_ms

if TYPE_CHECKING:
    from engine.store import Store
    from engine.topic import Topic

#: Rates are measured over samples at least this many seconds apart...
SAMPLE_SECONDS = 5.0
#: ...kept for this long (the window is between 5 and 60 seconds wide).
WINDOW_SECONDS = 60.0
#: Upper bounds (milliseconds) of the publish latency buckets, as Pulsar's ``pulsar_storage_write_latency_le_*``.
LATENCY_BUCKETS_MS = (0.5, 1.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 1000.0)


class StorageTracker:
    """Entries and bytes stored per topic partition, counted once and then only for what was added."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: topic_id -> (last entry counted, entries, bytes).
        self._known: dict[int, tuple[int, int, int]] = {}

    def of(self, topic: Topic) -> tuple[int, int]:
        """``(entries, bytes)`` of a topic's committed log."""
        upto = topic.last_confirmed
        known = self._known.get(topic.topic_id)
        if known is None:
            # Entries retention is deleting no longer count, though the deletion may not be committed yet.
            count, size = self.store.entries_size(topic.topic_id, topic.ledgers.first_kept - 1, upto)
        elif known[0] < upto:
            added, added_bytes = self.store.entries_size(topic.topic_id, known[0], upto)
            count, size = known[1] + added, known[2] + added_bytes
        else:
            return known[1], known[2]
        self._known[topic.topic_id] = (upto, count, size)
        return count, size

    def forget(self, topic_id: int) -> None:
        """Count a topic again from scratch next time (entries were deleted)."""
        self._known.pop(topic_id, None)


class Rates:
    """Per-second rates of counters, over a sliding window of samples, per engine object."""

    def __init__(self) -> None:
        self._samples: weakref.WeakKeyDictionary[object, deque[tuple[float, tuple[int, ...]]]] = (
            weakref.WeakKeyDictionary()
        )

    def of(self, owner: object, counters: tuple[int, ...]) -> tuple[float, ...]:
        """The rates of ``counters`` (current values) since the oldest sample of ``owner`` in the window."""
        now = time.monotonic()
        samples = self._samples.get(owner)
        if samples is None:
            samples = deque()
            self._samples[owner] = samples
        while len(samples) > 1 and now - samples[1][0] >= WINDOW_SECONDS:
            samples.popleft()
        if not samples or now - samples[-1][0] >= SAMPLE_SECONDS:
            samples.append((now, counters))
        since, base = samples[0]
        elapsed = now - since
        if elapsed < 1.0:
            return tuple(0.0 for _ in counters)
        return tuple(max(0, c - b) / elapsed for c, b in zip(counters, base, strict=True))


class LatencyHistogram:
    """Milliseconds publishes waited for their commit, in Pulsar's buckets."""

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.count = 0
        self.sum_ms = 0.0

    def observe(self, ms: float, times: int = 1) -> None:
        """Record ``times`` publishes that waited ``ms``."""
        self.buckets[bisect.bisect_left(LATENCY_BUCKETS_MS, ms)] += times
        self.count += times
        self.sum_ms += ms * times

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, publishes at or below it)`` per bucket, the last bound being infinity."""
        total, out = 0, []
        for bound, count in zip((*LATENCY_BUCKETS_MS, float("inf")), self.buckets, strict=True):
            total += count
            out.append((bound, total))
        return out


class BrokerStats:
    """Figures of the whole broker."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.started_ms = now_ms(clock)
        self.storage = StorageTracker(store)
        self.rates = Rates()
        self.publish_latency = LatencyHistogram()
        #: When the transaction coordinators started and finished recovering their log.
        self.recover_start_ms = 0
        self.recover_end_ms = 0
        self._flush_requested = 0.0

    def flush_requested(self) -> None:
        """A group commit was scheduled: publishes from now on wait for it."""
        self._flush_requested = time.perf_counter()

    def flushed(self, publishes: int) -> None:
        """The scheduled group commit is durable; ``publishes`` completions waited for it."""
        if publishes and self._flush_requested:
            self.publish_latency.observe((time.perf_counter() - self._flush_requested) * 1000, publishes)
