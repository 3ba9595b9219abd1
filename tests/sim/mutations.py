"""Mutations: real defects (most of them fixed once) put back into the running server, to show that the checks
catch them. Each one patches the production code in this process only, for one run, and takes the patch away after.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from engine.broker import Broker
from engine.coordinator import Coordinators
from engine.pending_ack import PendingAck
from engine.store import Store
from engine.subscription import Subscription
from engine.topic import Topic
from engine.transactions import TxnAction
from engine.txn_buffer import TransactionBuffer
from proxy.connection import PulsarConnection

#: Seconds between the two halves of a split commit marker.
SPLIT_MARKER_SECONDS = 2.0


def _receipt_before_durable() -> Callable[[], None]:
    original = Broker.after_commit

    def after_commit(self: Broker, callback: Callable[[Any], None], value: Any) -> None:
        func = getattr(callback, "func", None)
        receipts = (PulsarConnection.receipt, PulsarConnection.receipts)  # one SEND's, a run of SENDs'
        if getattr(func, "__func__", None) in receipts and isinstance(value, int | list):
            callback(value)  # the receipts, before the entries are durable
            return
        original(self, callback, value)

    Broker.after_commit = after_commit  # type: ignore[method-assign]
    return lambda: setattr(Broker, "after_commit", original)


def _skip_sequence_store() -> Callable[[], None]:
    original = Store.stage_sequence
    Store.stage_sequence = lambda self, topic_id, producer, sequence_id: None  # type: ignore[method-assign]
    return lambda: setattr(Store, "stage_sequence", original)


def _read_past_open_txn() -> Callable[[], None]:
    original = TransactionBuffer.__dict__["max_read_position"]
    TransactionBuffer.max_read_position = property(lambda self: self.topic.last_confirmed)  # type: ignore[assignment]
    return lambda: setattr(TransactionBuffer, "max_read_position", original)


def _split_commit_marker() -> Callable[[], None]:
    original = TransactionBuffer.end
    ended: dict[Any, int] = {}

    def end(self: TransactionBuffer, txn: Any, action: TxnAction, low_water_mark: int) -> None:
        count = ended.get(txn, 0)
        ended[txn] = count + 1
        if count == 0 or action is not TxnAction.COMMIT:
            original(self, txn, action, low_water_mark)
            return

        def later() -> None:
            original(self, txn, action, low_water_mark)
            self.topic.broker.request_flush()

        self.topic.clock.call_later(SPLIT_MARKER_SECONDS, later)

    TransactionBuffer.end = end  # type: ignore[method-assign]
    return lambda: setattr(TransactionBuffer, "end", original)


def _lost_partition_registration() -> Callable[[], None]:
    original = Coordinators._enlist_partition

    def enlist(self: Coordinators, meta: Any, partition: str, given: str | None = None) -> None:
        if partition not in meta.partitions:
            meta.partitions.append(partition)  # in memory only: no record in the coordinator's log

    Coordinators._enlist_partition = enlist  # type: ignore[method-assign]
    return lambda: setattr(Coordinators, "_enlist_partition", original)


def _success_after_failed_commit() -> Callable[[], None]:
    original = Coordinators._end_failed

    def end_failed(self: Coordinators, meta: Any, error: Any) -> None:
        meta.held = True  # nobody ends it again: the client was told it ended
        waiters, meta.waiters = meta.waiters, []
        for waiter in waiters:
            waiter(None)  # success, although the commit of the end failed

    Coordinators._end_failed = end_failed  # type: ignore[method-assign]
    return lambda: setattr(Coordinators, "_end_failed", original)


def _end_applied_before_durable() -> Callable[[], None]:
    end_one, end = TransactionBuffer._end_one, PendingAck.end
    end_failed_original, status_stored_original = Coordinators._end_failed, Coordinators._status_stored

    def buffer_end_one(self: TransactionBuffer, txn: Any, action: TxnAction) -> None:
        end_one(self, txn, action)
        self.confirmed(self.topic.next_entry_id)  # ended here as the marker is staged, not once it is durable

    def pending_ack_end(self: PendingAck, txn: Any, action: TxnAction) -> None:
        if txn in self.txns and txn not in self._ending:
            self._apply_end(txn, action)  # applied as the end is staged, not once its record is durable
        end(self, txn, action)

    def end_failed(self: Coordinators, meta: Any, error: Any) -> None:
        self.coordinators[meta.txn.most].txns.pop(meta.txn.least, None)  # forgotten: ended in memory, never again
        waiters, meta.waiters = meta.waiters, []
        for waiter in waiters:
            waiter(error)

    def status_stored(self: Coordinators, meta: Any, result: Any, delay_ms: int) -> None:
        status_stored_original(self, meta, None, delay_ms)  # the second step, whether the first was stored or not

    TransactionBuffer._end_one = buffer_end_one  # type: ignore[method-assign]
    PendingAck.end = pending_ack_end  # type: ignore[method-assign]
    Coordinators._end_failed = end_failed  # type: ignore[method-assign]
    Coordinators._status_stored = status_stored  # type: ignore[method-assign]

    def undo() -> None:
        TransactionBuffer._end_one = end_one  # type: ignore[method-assign]
        PendingAck.end = end  # type: ignore[method-assign]
        Coordinators._end_failed = end_failed_original  # type: ignore[method-assign]
        Coordinators._status_stored = status_stored_original  # type: ignore[method-assign]

    return undo


def _sequences_stored_by_earlier_commit() -> Callable[[], None]:
    original = Topic.committed

    def committed(self: Topic, upto: int) -> None:
        self._sequences_in_flight = dict(self._sequences)  # staged for the next commit too, taken as stored now
        original(self, upto)

    Topic.committed = committed  # type: ignore[method-assign]
    return lambda: setattr(Topic, "committed", original)


def _acks_lost_by_failed_commit() -> Callable[[], None]:
    original = Topic.commit_failed

    def commit_failed(self: Topic) -> bool:
        self._cursors_in_flight = {}  # the cursors staged with the failed commit are not written again
        return original(self)

    Topic.commit_failed = commit_failed  # type: ignore[method-assign]
    return lambda: setattr(Topic, "commit_failed", original)


def _earliest_skips_staged() -> Callable[[], None]:
    original = Topic.first_entry_id

    def first_entry_id(self: Topic) -> int:
        first = self.store.first_entry_id(self.topic_id)
        return self.next_entry_id if first < 0 else first

    Topic.first_entry_id = first_entry_id  # type: ignore[method-assign]
    return lambda: setattr(Topic, "first_entry_id", original)


def _txn_ids_reserved_before_stored() -> Callable[[], None]:
    original = Broker.after_commit

    def after_commit(self: Broker, callback: Callable[[Any], None], value: Any) -> None:
        if getattr(callback, "__qualname__", "") == "Coordinators.new_txn.<locals>.stored":
            stored = callback
            callback = lambda result: stored(None)  # noqa: E731 (reserved, whether the commit stored it or not)
        original(self, callback, value)

    Broker.after_commit = after_commit  # type: ignore[method-assign]
    return lambda: setattr(Broker, "after_commit", original)


def _producers_kept_after_lost_write() -> Callable[[], None]:
    original = Topic.disconnect_producers
    Topic.disconnect_producers = lambda self: None  # type: ignore[method-assign]
    return lambda: setattr(Topic, "disconnect_producers", original)


def _lost_txn_buffer_snapshot() -> Callable[[], None]:
    original = TransactionBuffer.rolled_back

    def rolled_back(self: TransactionBuffer, last_confirmed: int) -> None:
        counted = self.has_snapshot
        original(self, last_confirmed)
        self.has_snapshot = counted  # a snapshot the failed commit lost still counts as taken: none is staged again

    TransactionBuffer.rolled_back = rolled_back  # type: ignore[method-assign]
    return lambda: setattr(TransactionBuffer, "rolled_back", original)


def _lost_coordinator_log_record() -> Callable[[], None]:
    original = Coordinators.records_lost
    Coordinators.records_lost = lambda self, records: None  # type: ignore[method-assign]
    return lambda: setattr(Coordinators, "records_lost", original)


def _ack_lost_after_consumer_left() -> Callable[[], None]:
    original = Subscription.give_back
    Subscription.give_back = lambda self, entry_ids: None  # type: ignore[method-assign]
    return lambda: setattr(Subscription, "give_back", original)


#: name -> (what the defect is, how to inject it: returns how to take it away)
MUTATIONS: dict[str, tuple[str, Callable[[], Callable[[], None]]]] = {
    "receipt-before-durable": (
        "a SEND's receipt goes out when the entry is staged, before its commit is durable",
        _receipt_before_durable,
    ),
    "skip-sequence-store": (
        "producers' highest sequence ids are never written to the store (deduplication forgets them on restart)",
        _skip_sequence_store,
    ),
    "read-past-open-txn": (
        "the transaction buffer's max read position moves past open transactions",
        _read_past_open_txn,
    ),
    "split-commit-marker": (
        "a multi-partition commit writes its markers in two commits, seconds apart",
        _split_commit_marker,
    ),
    "lost-partition-registration": (
        "a partition registered in a transaction is not written to the coordinator's log (a crash loses it)",
        _lost_partition_registration,
    ),
    "txn-success-after-failed-commit": (
        "END_TXN answers success although the commit of the end failed",
        _success_after_failed_commit,
    ),
    "end-applied-before-durable": (
        "an END_TXN whose commit fails is applied all the same in memory (partitions, pending acks, coordinator)",
        _end_applied_before_durable,
    ),
    "sequences-stored-by-earlier-commit": (
        "a commit takes as stored the sequence ids staged for the next one (deduplication drops their resends)",
        _sequences_stored_by_earlier_commit,
    ),
    "producers-kept-after-lost-write": (
        "a topic whose write failed keeps its producers (a send on its way is stored ahead of the lost ones)",
        _producers_kept_after_lost_write,
    ),
    "acks-lost-by-failed-commit": (
        "the cursors staged with a failed group commit are not written again (their acknowledgements are lost)",
        _acks_lost_by_failed_commit,
    ),
    "txn-ids-reserved-before-stored": (
        "a block of transaction ids counts as reserved even when the commit storing it failed",
        _txn_ids_reserved_before_stored,
    ),
    "lost-txn-buffer-snapshot": (
        "a transaction-buffer snapshot lost by a failed commit still counts as taken (recovery may replay nothing)",
        _lost_txn_buffer_snapshot,
    ),
    "lost-coordinator-log-record": (
        "log records of open transactions that a failed commit lost are not written again",
        _lost_coordinator_log_record,
    ),
    "txn-ack-lost-after-consumer-left": (
        "entries held by a transactional ack whose record is lost after their consumer left go to nobody",
        _ack_lost_after_consumer_left,
    ),
    "earliest-skips-staged": (
        "a subscription created at the earliest position skips the entries of the commit in flight",
        _earliest_skips_staged,
    ),
}


@contextlib.contextmanager
def injected(name: str | None) -> Iterator[None]:
    """Run the body with the mutation ``name`` (None: none) in the code."""
    if name is None:
        yield
        return
    if name not in MUTATIONS:
        raise KeyError(f"unknown mutation {name!r}; --list-mutations lists them")
    undo = MUTATIONS[name][1]()
    try:
        yield
    finally:
        undo()
