"""A subscription's position in a topic log: what has been acknowledged, durably or not.

Entry ids are used directly (each topic partition has one ledger). ``mark_delete`` is the last entry
below which everything is acknowledged; ``acked`` holds entries acknowledged above it; ``batches``
holds, for partly acknowledged batch entries, a bitmask of the indexes still unacknowledged
(bit i set = index i not yet acknowledged, as in Pulsar's ack sets).
"""

from __future__ import annotations

import json

_U64 = (1 << 64) - 1


def words_to_mask(words: list[int]) -> int:
    """A Java ``BitSet.toLongArray()`` (signed 64-bit words, low word first) as one int."""
    mask = 0
    for i, word in enumerate(words):
        mask |= (word & _U64) << (64 * i)
    return mask


def mask_to_words(mask: int) -> list[int]:
    """The inverse of :func:`words_to_mask`, with signed words as protobuf int64 wants them."""
    words = []
    while mask:
        word = mask & _U64
        words.append(word - (1 << 64) if word >> 63 else word)
        mask >>= 64
    return words


class Cursor:
    """Acknowledgement state of one subscription."""

    __slots__ = ("acked", "batches", "mark_delete")

    def __init__(self, mark_delete: int) -> None:
        self.mark_delete = mark_delete
        self.acked: set[int] = set()
        self.batches: dict[int, int] = {}

    def is_acked(self, entry_id: int) -> bool:
        return entry_id <= self.mark_delete or entry_id in self.acked

    def ack(self, entry_id: int) -> bool:
        """Acknowledge a whole entry; False if it already was."""
        if self.is_acked(entry_id):
            return False
        self.batches.pop(entry_id, None)
        if entry_id == self.mark_delete + 1:
            self.mark_delete = entry_id
            self._advance()
        else:
            self.acked.add(entry_id)
        return True

    def ack_batch_indexes(self, entry_id: int, still_unacked: int) -> bool:
        """Apply an ack set (bits of indexes the client still holds unacknowledged, over the whole batch).

        Returns True when that completes the entry.
        """
        if self.is_acked(entry_id):
            return False
        remaining = self.batches.get(entry_id, still_unacked) & still_unacked
        if remaining:
            self.batches[entry_id] = remaining
            return False
        return self.ack(entry_id)

    def ack_cumulative(self, entry_id: int) -> None:
        """Acknowledge everything up to and including ``entry_id``."""
        if entry_id <= self.mark_delete:
            return
        self.mark_delete = entry_id
        self.acked = {e for e in self.acked if e > entry_id}
        self.batches = {e: m for e, m in self.batches.items() if e > entry_id}
        self._advance()

    def reset(self, next_entry: int) -> None:
        """Move to just before ``next_entry`` and forget every acknowledgement after it (seek)."""
        self.mark_delete = next_entry - 1
        self.acked.clear()
        self.batches.clear()

    def unacked_mask(self, entry_id: int) -> int | None:
        """The still-unacknowledged indexes of a partly acknowledged batch, or None."""
        return self.batches.get(entry_id)

    def _advance(self) -> None:
        acked = self.acked
        while self.mark_delete + 1 in acked:
            self.mark_delete += 1
            acked.discard(self.mark_delete)

    # -- persistence ----------------------------------------------------------------------------

    def dumps(self) -> str:
        """Serialise: mark-delete, acknowledged ranges above it, partial batches.

        The JSON text of ``{"mark_delete": int, "acked": [[start, end], ...], "batches": {"entry": "hex mask"}}`` as
        ``json.dumps`` writes it, written out directly (a cursor is written at nearly every commit, mostly with
        nothing acknowledged above its mark-delete; ``json.dumps`` cost several times more).
        """
        acked = ""
        if self.acked:
            ranges: list[list[int]] = []
            for e in sorted(self.acked):
                if ranges and ranges[-1][1] == e - 1:
                    ranges[-1][1] = e
                else:
                    ranges.append([e, e])
            acked = ", ".join([f"[{start}, {end}]" for start, end in ranges])
        batches = ", ".join([f'"{e}": "{m:x}"' for e, m in self.batches.items()]) if self.batches else ""
        return f'{{"mark_delete": {self.mark_delete}, "acked": [{acked}], "batches": {{{batches}}}}}'

    @classmethod
    def loads(cls, text: str) -> Cursor:
        """Inverse of :meth:`dumps`."""
        data = json.loads(text)
        cursor = cls(data["mark_delete"])
        for start, end in data["acked"]:
            cursor.acked.update(range(start, end + 1))
        cursor.batches = {int(e): int(m, 16) for e, m in data["batches"].items()}
        return cursor
