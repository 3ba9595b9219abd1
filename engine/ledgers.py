"""Where a topic's entries would lie in Pulsar's ledgers, so that retention deletes what Pulsar deletes.

Pulsar stores a topic in a chain of ledgers and deletes acknowledged data a whole ledger at a time, never the open
one: a ledger rolls over once it holds ``managedLedgerMaxEntriesPerLedger`` entries and is at least
``managedLedgerMinLedgerRolloverTimeMinutes`` old, or once it is ``managedLedgerMaxLedgerRolloverTimeMinutes`` old
and not empty. This endpoint keeps a topic in one table, so it only keeps the ends of those would-be ledgers:
retention trims up to the end of the newest closed ledger that every subscription has acknowledged.

Loading a topic (a restart, an unload) opens a new ledger, as in Pulsar, which closes the one before: what was
stored then lies in one closed ledger (the ends of the ledgers inside it are not kept across loads). Measured on
Pulsar 4.2.4 (conformance scenarios ``retention.*``): a loaded topic whose subscriptions acknowledged its closed
ledgers deletes them at once; one without subscriptions keeps them until the next retention check (or admin trim).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass


@dataclass(frozen=True)
class LedgerRollover:
    """When a ledger rolls over (broker.conf's settings and defaults)."""

    max_entries: int = 50_000
    min_minutes: int = 10
    max_minutes: int = 240

    def due(self, entries: int, age_ms: int) -> bool:
        """Whether a ledger holding ``entries`` entries, opened ``age_ms`` ago, rolls over now."""
        if entries <= 0:
            return False
        if age_ms >= self.max_minutes * 60_000:
            return True
        return entries >= self.max_entries and age_ms >= self.min_minutes * 60_000


class Ledgers:
    """The ends of a topic's closed ledgers and the start of its open one."""

    def __init__(self, last_entry: int, now_ms: int) -> None:
        #: Last entry of each closed ledger still holding entries, ascending: what is stored when the topic loads
        #: (``last_entry`` being its last entry) is one closed ledger.
        self.closed_ends: list[int] = [last_entry] if last_entry >= 0 else []
        #: First entry of the open ledger, and when it was opened (the topic was loaded).
        self.open_first = last_entry + 1
        self.opened_ms = now_ms
        #: The first entry retention has not deleted (its deletion may still be on its way to the store).
        self.first_kept = 0

    def roll(self, last_entry: int, now_ms: int, rollover: LedgerRollover) -> None:
        """Close the ledgers that rolled over by now, ``last_entry`` being the last entry stored.

        Pulsar checks at every add; this runs at each policy check, so it rolls over as Pulsar would have in the
        meantime: without a minimum rollover time, every ``max_entries`` entries; else once, at ``last_entry``.
        """
        while True:
            entries = last_entry - self.open_first + 1
            if not rollover.due(entries, now_ms - self.opened_ms):
                return
            end = last_entry
            if rollover.min_minutes == 0 and entries > rollover.max_entries:
                end = self.open_first + rollover.max_entries - 1
            self.closed_ends.append(end)
            self.open_first = end + 1
            self.opened_ms = now_ms

    def reopen(self, last_entry: int, now_ms: int) -> None:
        """Close the open ledger if it holds entries (up to ``last_entry``) and open a new one, as Pulsar loads a
        topic again after an unload."""
        if last_entry >= self.open_first:
            self.closed_ends.append(last_entry)
            self.open_first = last_entry + 1
        self.opened_ms = now_ms

    def deletable_upto(self, consumed: int) -> int:
        """The last entry of the newest closed ledger whose entries are all at or below ``consumed`` (-1: none)."""
        index = bisect_right(self.closed_ends, consumed)
        return self.closed_ends[index - 1] if index else -1

    def deleted_upto(self, entry: int) -> None:
        """Forget the closed ledgers whose entries are all gone (up to and including ``entry``)."""
        del self.closed_ends[: bisect_right(self.closed_ends, entry)]
        self.first_kept = max(self.first_kept, entry + 1)

    def spans(self, first_entry: int, last_entry: int) -> list[tuple[int, int]]:
        """The ``(first, last)`` entries of each ledger still holding entries, the open one last (it may be empty:
        ``last < first``), the entries stored being ``first_entry`` to ``last_entry``."""
        spans, first = [], max(first_entry, self.first_kept)
        for end in self.closed_ends:
            if end >= first:
                spans.append((first, end))
            first = end + 1
        return [*spans, (self.open_first, last_entry)]
