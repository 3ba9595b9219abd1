"""Entries kept in memory for dispatch without reading the store: one cache per topic partition, all within one
broker-wide budget (Pulsar's ``managedLedgerCacheSizeMB``), so that memory does not grow with the number of topics.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.entry import Entry

#: Entries and bytes one topic partition keeps at most, whatever the budget.
TOPIC_ENTRIES = 20_000
TOPIC_BYTES = 32 * 1024 * 1024
#: An eviction frees the budget down to this share of it, so that it does not run on every append.
EVICT_TO = 0.8


class CacheBudget:
    """The bytes all topic caches may hold together; when over, the least recently appended-to caches give up
    their confirmed entries (entries not yet durable stay: they are the only copy readers have until the commit)."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self.used = 0
        self._caches: OrderedDict[EntryCache, None] = OrderedDict()

    def charge(self, cache: EntryCache, size: int) -> None:
        self.used += size
        try:
            self._caches.move_to_end(cache)  # the cache appended to last (one lookup, where it is known)
        except KeyError:
            self._caches[cache] = None

    def release(self, size: int) -> None:
        self.used -= size

    def forget(self, cache: EntryCache) -> None:
        """A topic is closed: its cache no longer counts."""
        self._caches.pop(cache, None)
        cache.clear()

    def trim(self) -> None:
        """Evict confirmed entries, least recently appended-to caches first, until the budget is kept."""
        if self.used <= self.limit:
            return
        target = int(self.limit * EVICT_TO)
        for cache in list(self._caches):
            if self.used <= target:
                break
            cache.evict(self.used - target)
            if not cache:
                del self._caches[cache]


class EntryCache:
    """The newest entries of one topic partition, contiguous by entry id; ``confirmed`` is the last durable one."""

    def __init__(self, budget: CacheBudget) -> None:
        self._budget = budget
        self._entries: list[Entry] = []
        self._bytes = 0
        self.confirmed = -1

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def first(self) -> int | None:
        """The id of the oldest cached entry, or None."""
        return self._entries[0].entry_id if self._entries else None

    def get(self, entry_id: int) -> Entry | None:
        if self._entries and entry_id >= self._entries[0].entry_id:
            index = entry_id - self._entries[0].entry_id
            if index < len(self._entries):
                return self._entries[index]
        return None

    def span(self, start: int, end: int) -> list[Entry]:
        """Cached entries ``start..end`` (inclusive; ``start`` at or after the first cached entry)."""
        first = self._entries[0].entry_id if self._entries else start
        return self._entries[start - first : end - first + 1]

    def append(self, entry: Entry) -> None:
        self._entries.append(entry)
        self._bytes += len(entry.body)
        self._budget.charge(self, len(entry.body))

    def extend(self, entries: list[Entry], size: int) -> None:
        """Append ``entries`` (in order, after the last cached one), whose bodies hold ``size`` bytes together."""
        self._entries.extend(entries)
        self._bytes += size
        self._budget.charge(self, size)

    def confirm(self, upto: int) -> None:
        """Entries up to ``upto`` are durable; keep the topic's own bound, then the broker's."""
        self.confirmed = max(self.confirmed, upto)
        if len(self._entries) > TOPIC_ENTRIES or self._bytes > TOPIC_BYTES:
            self._drop_front(len(self._entries) // 4 or 1)
        self._budget.trim()

    def drop_unconfirmed(self) -> None:
        """Forget entries after the last durable one (their commit failed)."""
        freed = 0
        while self._entries and self._entries[-1].entry_id > self.confirmed:
            freed += len(self._entries.pop().body)
        self._bytes -= freed
        self._budget.release(freed)

    def evict(self, wanted: int) -> None:
        """Drop confirmed entries from the front until ``wanted`` bytes are freed or none are left."""
        freed = count = 0
        for entry in self._entries:
            if entry.entry_id > self.confirmed or freed >= wanted:
                break
            freed += len(entry.body)
            count += 1
        self._drop_front(count)

    def clear(self) -> None:
        self._drop_front(len(self._entries))

    def _drop_front(self, count: int) -> None:
        freed = sum(len(entry.body) for entry in self._entries[:count])
        del self._entries[:count]
        self._bytes -= freed
        self._budget.release(freed)
