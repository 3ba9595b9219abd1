"""Where a topic's entries would lie in Pulsar's ledgers, so that retention deletes what Pulsar deletes.

Pulsar stores a topic in a chain of ledgers and deletes acknowledged data a whole ledger at a time, never the open
one: a ledger rolls over once it holds ``managedLedgerMaxEntriesPerLedger`` entries and is at least
``managedLedgerMinLedgerRolloverTimeMinutes`` old, or once it is ``managedLedgerMaxLedgerRolloverTimeMinutes`` old
and not empty. This endpoint keeps a topic in one table, so it only keeps the ends of those would-be ledgers:
retention trims up to the end of the newest closed ledger that every subscription has acknowledged.

Loading a topic (a restart) opens a new ledger in Pulsar, which closes the one before; here what is stored stays
in the open ledger. Pulsar then deletes what was acknowledged after a clean restart, yet kept the outputs of a
transactional loop through kill -9 (the conformance scenario ``crash_loop``); keeping them is the side that loses
nothing.
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

    def __init__(self, now_ms: int) -> None:
        #: Last entry of each closed ledger still holding entries, ascending (none are kept across restarts: what
        #: is stored when the topic loads is in the open ledger).
        self.closed_ends: list[int] = []
        #: First entry of the open ledger, and when it was opened (the topic was loaded).
        self.open_first = 0
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

    def deletable_upto(self, consumed: int) -> int:
        """The last entry of the newest closed ledger whose entries are all at or below ``consumed`` (-1: none)."""
        index = bisect_right(self.closed_ends, consumed)
        return self.closed_ends[index - 1] if index else -1

    def deleted_upto(self, entry: int) -> None:
        """Forget the closed ledgers whose entries are all gone (up to and including ``entry``)."""
        del self.closed_ends[: bisect_right(self.closed_ends, entry)]
        self.first_kept = max(self.first_kept, entry + 1)
