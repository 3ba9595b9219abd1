"""The transaction buffer of one topic partition: read-committed isolation over the topic log.

Transactional entries are appended to the log at once. ``ongoing`` maps each open transaction to its
first entry, in log order; consumers may read only up to ``max_read_position``, just before the first
entry of the oldest open transaction (or the last entry when none is open), so ordinary messages
appended behind an open transaction wait for it, as in Pulsar. Ending a transaction appends a commit
or abort marker; as in Pulsar, the transaction ends here only once its marker is durable (``confirmed``): a
commit that loses the marker (a full disk) leaves it open here, to be ended again. Aborted transactions are
remembered so dispatch skips their entries. As Pulsar's buffer, each
partition learns its coordinators' low-water marks from the ends it sees, and refuses sends in transactions at or
below them; a later send in a transaction that ended elsewhere is stored as aborted (see ``appended``).

Snapshots of ``max_read_position`` and the aborted set are taken every N changes (ends, and plain
appends while no transaction is open) or T seconds after one; recovery
loads the latest snapshot and replays only the log after its ``max_read_position``. A topic that never
saw a transactional entry has no snapshot and needs no replay.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.clock import Cancellable, now_ms
from engine.entry import Entry
from engine.transactions import TxnAction, TxnId
from wire.framing import make_body
from wire.pulsar_api_pb2 import MarkerType, MessageMetadata

if TYPE_CHECKING:
    from engine.topic import Topic

log = logging.getLogger(__name__)

MARKER_PRODUCER = "__txn_marker"
_MARKERS = {TxnAction.COMMIT: MarkerType.TXN_COMMIT, TxnAction.ABORT: MarkerType.TXN_ABORT}
#: The metadata of markers; the fields that differ between markers are set before each use (see ``_append_marker``).
_MARKER_METADATA = MessageMetadata(producer_name=MARKER_PRODUCER, sequence_id=0)
#: Entries the recovery replay reads from the store at a time.
_REPLAY_CHUNK = 1000


@dataclass
class SnapshotPolicy:
    """When to snapshot: after ``max_changes`` ends, or ``interval_seconds`` after a change."""

    max_changes: int = 1000
    interval_seconds: float = 5.0


class TransactionBuffer:
    """Transaction state of one topic partition."""

    def __init__(self, topic: Topic, policy: SnapshotPolicy) -> None:
        self.topic = topic
        self.policy = policy
        self.ongoing: dict[TxnId, int] = {}
        self.aborted: dict[TxnId, int] = {}
        #: Coordinator id -> the highest low-water mark an end on this partition named (in memory, as in Pulsar).
        self.low_water_marks: dict[int, int] = {}
        #: Coordinator id -> the low-water mark up to which ``ongoing`` was last searched for transactions left behind
        #: (see :meth:`end`); forgotten when a failed commit loses markers.
        self._swept: dict[int, int] = {}
        #: A snapshot is stored or on its way. ``_snapshot_stored``: one is durable; ``_snapshot_text``: one to write
        #: with the topic's next commit; ``_snapshot_in_flight``: one in the commit in flight. A failed commit loses
        #: both (their positions may name entries it lost).
        self.has_snapshot = False
        self._snapshot_stored = False
        self._snapshot_text: str | None = None
        self._snapshot_in_flight = False
        #: Figures of the last recovery.
        self.recovered_from_snapshot = False
        self.replayed_entries = 0
        self.snapshots_taken = 0
        #: Transactions committed here since the topic was loaded; when the last snapshot and recovery ran.
        self.committed = 0
        self.last_snapshot_ms = 0
        self.recover_start_ms = 0
        self.recover_end_ms = 0
        self._changes = 0
        self._timer: Cancellable | None = None
        #: Ends whose marker is staged, not durable yet: transaction -> (marker entry id, action).
        self._ending: dict[TxnId, tuple[int, TxnAction]] = {}

    # -- reading ------------------------------------------------------------------------------

    @property
    def max_read_position(self) -> int:
        """The last entry consumers may read."""
        if self.ongoing:
            return min(next(iter(self.ongoing.values())) - 1, self.topic.last_confirmed)
        return self.topic.last_confirmed

    def ending(self, txn: TxnId) -> bool:
        """Whether ``txn``'s marker is staged here and not durable yet."""
        return txn in self._ending

    def is_aborted(self, txn: tuple[int, int]) -> bool:
        return TxnId(*txn) in self.aborted

    def hides(self, entry: Entry) -> bool:
        """Markers and entries of aborted transactions are never dispatched."""
        return bool(entry.marker) or (entry.txn is not None and TxnId(*entry.txn) in self.aborted)

    # -- writing ------------------------------------------------------------------------------

    def below_low_water_mark(self, txn: TxnId) -> bool:
        """Whether an end seen here named a low-water mark of ``txn``'s coordinator at or above it."""
        return self.low_water_marks.get(txn.most, -1) >= txn.least

    def appended(self, entry: Entry) -> None:
        """A transactional entry was staged.

        Pulsar accepts a send in a transaction that ended (a timed-out one, say) and never delivers it. Here such
        an entry never holds back reads either: one of a transaction aborted here is hidden at once, and one of a
        transaction that will write no marker here (one never opened, or one that ends without this partition) is
        followed by an abort marker of its own.
        """
        if entry.txn in self.ongoing:  # a TxnId equals and hashes as its (most, least) tuple
            return
        txn = TxnId(*entry.txn)  # type: ignore[misc]
        if not self.has_snapshot:
            # The first transactional entry of this topic: record the state before it, so that
            # recovery knows where to start replaying.
            self._stage_snapshot(entry.entry_id - 1)
        if txn in self.aborted:
            return
        self.ongoing[txn] = entry.entry_id
        meta = self.topic.broker.coordinators.live(txn)
        if meta is None or self.topic.name.full not in meta.partitions:
            log.info("%s: %s writes no marker here; entry %d stored as aborted", self.topic.name, txn, entry.entry_id)
            self._end_one(txn, TxnAction.ABORT)

    def rolled_back(self, last_confirmed: int) -> None:
        """Staged entries were lost: forget transactions that started in them, and ends whose marker was lost (those
        transactions stay open here until ended again)."""
        for txn in [t for t, first in self.ongoing.items() if first > last_confirmed]:
            del self.ongoing[txn]
        for txn in [t for t, (marker, _) in self._ending.items() if marker > last_confirmed]:
            del self._ending[txn]
        self._swept.clear()
        if self._snapshot_in_flight or self._snapshot_text is not None:
            # Recovery starts from the snapshot stored before, if any: without one, the next transactional entry
            # stages one again.
            self._snapshot_in_flight, self._snapshot_text = False, None
            self.has_snapshot = self._snapshot_stored
            if self.has_snapshot:
                self._changed()

    def confirmed(self, last_confirmed: int) -> None:
        """Entries up to ``last_confirmed`` are durable (and a snapshot staged with them): end the transactions whose
        markers are among them."""
        if self._snapshot_in_flight:
            self._snapshot_in_flight = False
            self._snapshot_stored = True
        if not self._ending:
            return
        for txn, (marker, action) in list(self._ending.items()):
            if marker > last_confirmed:
                continue
            del self._ending[txn]
            self.ongoing.pop(txn, None)
            if action is TxnAction.ABORT:
                self.aborted[txn] = marker
            else:
                self.committed += 1
            self._changed()

    def end(self, txn: TxnId, action: TxnAction, low_water_mark: int) -> None:
        """Commit or abort ``txn`` here; also abort older transactions of its coordinator left behind."""
        self._end_one(txn, action)
        self.low_water_marks[txn.most] = max(self.low_water_marks.get(txn.most, -1), low_water_mark)
        if low_water_mark <= self._swept.get(txn.most, -1):
            # Nothing below this mark can have been left behind since the last search: a transaction that starts
            # here after it is above every mark its coordinator gave (or ends here at once, see ``appended``).
            # Many ends in a row (a restart's timed-out transactions) would otherwise each search them all.
            return
        self._swept[txn.most] = low_water_mark
        for stale in [
            t for t in self.ongoing if t.most == txn.most and t.least <= low_water_mark and t not in self._ending
        ]:
            log.info("%s: aborting %s below the low-water mark %d", self.topic.name, stale, low_water_mark)
            self._end_one(stale, TxnAction.ABORT)

    def _end_one(self, txn: TxnId, action: TxnAction) -> None:
        """Stage ``txn``'s marker; it ends here once the marker is durable (:meth:`confirmed`)."""
        if txn in self._ending:
            return  # its marker is on its way
        self._ending[txn] = (self._append_marker(txn, action), action)

    def plain_appended(self) -> None:
        """A non-transactional entry was staged. With no transaction open it moves ``max_read_position``: count it
        towards the next snapshot, so that recovery does not replay the plain traffic since the last transaction."""
        if self.has_snapshot and not self.ongoing:
            self._changed()

    def _changed(self) -> None:
        self._changes += 1
        if self._changes >= self.policy.max_changes:
            self._stage_snapshot(self.max_read_position)
        elif self._timer is None:
            self._timer = self.topic.clock.call_later(self.policy.interval_seconds, self._timed_snapshot)

    def _append_marker(self, txn: TxnId, action: TxnAction) -> int:
        # One metadata object is refilled for every marker (building one from keyword arguments costs more, and a
        # marker is written per transaction and partition); the topic keeps only the body and the Entry made of it.
        meta = _MARKER_METADATA
        meta.publish_time = now_ms(self.topic.clock)
        meta.marker_type = _MARKERS[action]
        meta.txnid_most_bits, meta.txnid_least_bits = txn
        return self.topic.append_marker(make_body(meta, b""), meta)

    # -- snapshots and recovery ---------------------------------------------------------------

    def _timed_snapshot(self) -> None:
        self._timer = None
        if self._changes:
            self._stage_snapshot(self.max_read_position)

    def _stage_snapshot(self, max_read: int) -> None:
        state = {
            "max_read_position": max_read,
            "aborted": [[t.most, t.least, marker] for t, marker in self.aborted.items()],
        }
        self._snapshot_text = json.dumps(state)
        self.topic.broker.staged(self.topic)
        self.has_snapshot = True
        self.snapshots_taken += 1
        self.last_snapshot_ms = now_ms(self.topic.clock)
        self._changes = 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def stage_snapshot_write(self) -> None:
        """Put the snapshot taken since the last commit, if any, into the commit being made."""
        if self._snapshot_text is not None:
            self.topic.store.stage_txn_buffer_snapshot(self.topic.topic_id, self._snapshot_text)
            self._snapshot_text = None
            self._snapshot_in_flight = True

    def recover(self) -> None:
        """Load the latest snapshot and replay the log after its ``max_read_position``."""
        self.recover_start_ms = now_ms(self.topic.clock)
        text = self.topic.store.txn_buffer_snapshot(self.topic.topic_id)
        if text is None:
            self.recover_end_ms = self.recover_start_ms
            return
        state = json.loads(text)
        self.has_snapshot = self._snapshot_stored = True
        self.recovered_from_snapshot = True
        self.aborted = {TxnId(most, least): marker for most, least, marker in state["aborted"]}
        position = state["max_read_position"] + 1
        last = self.topic.last_confirmed
        replayed = 0
        while position <= last:
            rows = self.topic.store.read(self.topic.topic_id, position, min(last, position + _REPLAY_CHUNK - 1))
            if not rows:
                break
            for entry_id, body in rows:
                self._replay(Entry.from_body(entry_id, body))
                position = entry_id + 1
            replayed += len(rows)
        self.replayed_entries = replayed
        self.recover_end_ms = now_ms(self.topic.clock)
        log.info(
            "%s: transaction buffer recovered from snapshot, replayed %d entries, %d open, %d aborted",
            self.topic.name,
            replayed,
            len(self.ongoing),
            len(self.aborted),
        )

    def _replay(self, entry: Entry) -> None:
        if entry.txn is None:
            return
        txn = TxnId(*entry.txn)
        if entry.marker == MarkerType.TXN_COMMIT:
            self.ongoing.pop(txn, None)
        elif entry.marker == MarkerType.TXN_ABORT:
            self.ongoing.pop(txn, None)
            self.aborted[txn] = entry.entry_id
        elif not entry.marker and txn not in self.aborted:
            self.ongoing.setdefault(txn, entry.entry_id)
