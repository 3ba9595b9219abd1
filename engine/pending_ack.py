"""Pending acknowledgements of one subscription: acks made inside transactions, held until they end.

An acknowledged position is held, not applied to the cursor. A second acknowledgement of a position held
individually (in any transaction), or of one the cursor already acknowledged, is a TransactionConflict; so
is a cumulative ack of another transaction while one is pending, or one not after the mark-delete position.
Positions held by individual acks are not dispatched; those under a pending cumulative ack are (on a rewind).
Commit applies the transaction's acks to the cursor; abort releases them. Every held ack is a redo record in
the store. As Pulsar's pending-ack log, the end is first recorded durably (an end record, in the commit that ends
the transaction), and applied or released only then; the cursor that applies it and the removal of the records go
into a later commit together, and recovery applies an end record it finds. An end whose record was lost (a failed
commit) leaves the acks held, to be ended again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.errors import BrokerError
from engine.transactions import TxnAction, TxnId, conflict
from wire.pulsar_api_pb2 import ServerError

if TYPE_CHECKING:
    from engine.subscription import Consumer, Subscription


#: ``(entry_id, still-unacknowledged batch indexes or None for the whole entry, batch size)``, as an ACK carries it.
Ack = tuple[int, int | None, int]


@dataclass
class _TxnAcks:
    """What one transaction holds on this subscription."""

    #: entry id -> (acknowledged batch indexes as a mask, or None for the whole entry; batch size). Several acks of
    #: one entry in one transaction add up to one hold, released (and redelivered) once.
    individual: dict[int, tuple[int | None, int]] = field(default_factory=dict)
    #: The cumulative acknowledgement: up to the entry before ``entry_id``, and of ``entry_id`` every index not in
    #: ``unacked`` (None: the whole entry).
    cumulative: tuple[int, int | None] | None = None


#: Marks an entry no transaction held before an acknowledgement.
_ABSENT = object()


@dataclass
class _Undo:
    """What one acknowledgement changed, to take back if its record is lost."""

    created: bool
    cumulative: tuple[int, int | None] | None
    held_cumulative: tuple[TxnId, int, int | None] | None
    #: (entry id, what the transaction held of it before or _ABSENT, its entry in the transaction's acks or None)
    individual: list[tuple[int, object, tuple[int | None, int] | None]] = field(default_factory=list)
    #: Entries the consumer held as delivered before.
    delivered: list[int] = field(default_factory=list)


def _cumulative_rank(entry_id: int, unacked: int | None) -> tuple[int, int]:
    """Orders cumulative positions as Pulsar's compareToWithAckSet: by entry, then by fewer indexes left."""
    return entry_id, -(unacked or 0).bit_count()


class PendingAck:
    """Transactional acknowledgements of a subscription.

    Per transaction the state is OPEN (holding acks, :meth:`acknowledge`) until :meth:`end` moves it to committed
    (its acks applied to the cursor) or aborted (released); either way it is then forgotten. As in Pulsar 4.2.4
    (PendingAckHandleImpl): dispatch filters the positions and batch indexes held by individual acks, not those
    under a pending cumulative ack; an aborted individual ack redelivers its entries (each once); an aborted
    cumulative ack redelivers nothing (the consumer asks for redelivery, or reconnects).
    """

    def __init__(self, subscription: Subscription) -> None:
        self.subscription = subscription
        #: entry id -> {txn: acknowledged batch indexes as a mask, or None for the whole entry}.
        self.held: dict[int, dict[TxnId, int | None]] = {}
        self.txns: dict[TxnId, _TxnAcks] = {}
        #: The transaction holding a cumulative ack, its entry and that entry's still-unacknowledged indexes.
        self.cumulative: tuple[TxnId, int, int | None] | None = None
        #: Transactions whose end record is staged, not durable yet.
        self._ending: set[TxnId] = set()

    # -- queries used by dispatch --------------------------------------------------------------

    def holds(self, entry_id: int, batch_size: int) -> bool:
        """True when individual acks hold the whole entry: all of it, or each of its unacknowledged batch indexes."""
        held = self.held.get(entry_id)
        if not held:
            return False
        if any(mask is None for mask in held.values()):
            return True
        unacked = self.subscription.cursor.unacked_mask(entry_id)
        if unacked is None:
            unacked = (1 << batch_size) - 1
        return not unacked & ~self.held_indexes(entry_id)

    def held_indexes(self, entry_id: int) -> int:
        """Batch indexes of the entry held by transactions (a mask; 0 if none)."""
        mask = 0
        for acked in self.held.get(entry_id, {}).values():
            if acked is not None:
                mask |= acked
        return mask

    # -- acknowledging ------------------------------------------------------------------------

    def acknowledge(
        self,
        txn: TxnId,
        consumer: Consumer | None,
        acks: list[Ack],
        cumulative: bool,
        replay: bool = False,
    ) -> None:
        """Hold ``acks`` for ``txn`` (the transaction is OPEN on this subscription from now), or raise the conflict.

        ``consumer`` (None on replay) no longer holds the positions as delivered-unacknowledged.
        """
        if cumulative:
            self._check_cumulative(txn, acks)
        else:
            self._check_individual(txn, acks)
        sub = self.subscription
        if not replay:
            sub.topic.broker.coordinators.enlist_subscription(txn, sub.topic.name.full, sub.name)
        created = txn not in self.txns
        state = self.txns.setdefault(txn, _TxnAcks())
        undo = _Undo(created, state.cumulative, self.cumulative)
        if cumulative:
            entry_id, unacked, _ = acks[0]
            state.cumulative = (entry_id, unacked)
            self.cumulative = (txn, entry_id, unacked)
        else:
            for entry_id, unacked, size in acks:
                acked = None if unacked is None else ((1 << size) - 1) & ~unacked
                holders = self.held.setdefault(entry_id, {})
                undo.individual.append((entry_id, holders.get(txn, _ABSENT), state.individual.get(entry_id)))
                previous = holders.get(txn, 0)
                holders[txn] = None if acked is None or previous is None else previous | acked
                state.individual[entry_id] = (holders[txn], size)
                if consumer is not None and acked is None and entry_id in consumer.pending:
                    # A batch-index ack leaves the consumer holding the entry's other indexes.
                    consumer.pending.discard(entry_id)
                    undo.delivered.append(entry_id)
        if not replay:
            sub.topic.store.stage_pending_ack(sub.topic.topic_id, sub.name, txn, _ack_record(acks, cumulative))
            sub.topic.broker.after_commit(lambda result: self._stored(txn, consumer, undo, result), None)

    def _stored(self, txn: TxnId, consumer: Consumer | None, undo: _Undo, result: object) -> None:
        """The record of an acknowledgement was stored, or lost with its commit: then, as in Pulsar (which holds an
        acknowledgement once its record is written), it is not held, and the consumer holds its entries again."""
        state = self.txns.get(txn)
        if not isinstance(result, BaseException) or state is None or txn in self._ending:
            return
        for entry_id, holder, kept in reversed(undo.individual):
            holders = self.held.get(entry_id, {})
            if holder is _ABSENT:
                holders.pop(txn, None)
                if not holders:
                    self.held.pop(entry_id, None)
            else:
                holders[txn] = holder  # type: ignore[assignment]
            if kept is None:
                state.individual.pop(entry_id, None)
            else:
                state.individual[entry_id] = kept
        state.cumulative = undo.cumulative
        self.cumulative = undo.held_cumulative
        if undo.created and not state.individual and state.cumulative is None:
            del self.txns[txn]
        if consumer is not None and consumer in self.subscription.consumers:
            consumer.pending.update(e for e in undo.delivered if not self.subscription.cursor.is_acked(e))
        elif undo.delivered:
            # The consumer left meanwhile, its entries held: they were not among what it gave back then.
            self.subscription.give_back(undo.delivered)

    def _check_individual(self, txn: TxnId, acks: list[Ack]) -> None:
        cursor = self.subscription.cursor
        for entry_id, unacked, size in acks:
            if cursor.is_acked(entry_id):
                raise conflict(f"[{txn}] position {entry_id} has been acked on subscription {self.subscription.name}")
            if unacked is None:
                if entry_id in self.held:
                    raise conflict(f"[{txn}] position {entry_id} is already in pending ack status")
                continue
            acked = ((1 << size) - 1) & ~unacked
            partial = cursor.unacked_mask(entry_id)
            if partial is not None and acked & ~partial:
                raise conflict(f"[{txn}] batch indexes of position {entry_id} have been acked")
            # A transaction may acknowledge its own held indexes again: clients that acknowledge a batch message by
            # message in a transaction (the Go client) send ack sets that include the indexes acknowledged before.
            held = self.held.get(entry_id, {})
            if any(mask is None or mask & acked for holder, mask in held.items() if holder != txn):
                raise conflict(f"[{txn}] batch indexes of position {entry_id} are already in pending ack status")

    def _check_cumulative(self, txn: TxnId, acks: list[Ack]) -> None:
        if not self.subscription.single_active:
            raise BrokerError(
                ServerError.NotAllowedError,
                f"Transaction cumulative ack is not allowed on {self.subscription.sub_type.name} subscriptions",
            )
        if len(acks) != 1:
            raise BrokerError(ServerError.NotAllowedError, "Cumulative ack with a transaction takes one message id")
        entry_id, unacked, _ = acks[0]
        if entry_id <= self.subscription.cursor.mark_delete:
            raise conflict(f"[{txn}] position {entry_id} is before the mark-delete position")
        if self.cumulative is not None:
            holder, held_entry, held_unacked = self.cumulative
            if holder != txn or _cumulative_rank(entry_id, unacked) <= _cumulative_rank(held_entry, held_unacked):
                raise conflict(f"[{txn}] a cumulative ack of {holder} is pending at {held_entry}")

    # -- ending --------------------------------------------------------------------------------

    def end(self, txn: TxnId, action: TxnAction) -> None:
        """Record the end of ``txn`` here; once the record is durable, commit (apply) or abort (release) what it
        holds, and forget it."""
        if txn not in self.txns or txn in self._ending:
            return  # nothing held, nothing recorded (an id that names no transaction of ours), or ending already
        sub = self.subscription
        self._ending.add(txn)
        record = json.dumps({"end": action.name.lower()})
        sub.topic.store.stage_pending_ack(sub.topic.topic_id, sub.name, txn, record)
        sub.topic.broker.after_commit(lambda result: self._recorded(txn, action, result), None)

    def _recorded(self, txn: TxnId, action: TxnAction, result: object) -> None:
        self._ending.discard(txn)
        if isinstance(result, BaseException):
            return  # the end record was lost: the acks stay held until the transaction is ended again
        self._apply_end(txn, action)

    def _apply_end(self, txn: TxnId, action: TxnAction) -> None:
        """Apply or release what ``txn`` holds, and stage the removal of its records (with the cursor it changed)."""
        sub = self.subscription
        sub.topic.store.stage_pending_ack_removal(sub.topic.topic_id, sub.name, txn)
        sub.topic.broker.request_flush()
        state = self.txns.pop(txn, None)
        if state is None:
            return
        for entry_id in state.individual:
            held = self.held.get(entry_id)
            if held is not None:
                held.pop(txn, None)
                if not held:
                    del self.held[entry_id]
        if self.cumulative is not None and self.cumulative[0] == txn:
            self.cumulative = None
        if action is TxnAction.COMMIT:
            acks = [
                (e, None if acked is None else ((1 << size) - 1) & ~acked)
                for e, (acked, size) in state.individual.items()
            ]
            sub.acknowledge(None, acks, cumulative=False)
            if state.cumulative is not None:
                sub.acknowledge(None, [state.cumulative], cumulative=True)
        elif state.individual:
            # Pulsar redelivers what an aborted individual ack held; after an aborted cumulative ack the consumer
            # asks for redelivery itself (a broker-side rewind would reorder its messages).
            sub.redeliver_released(list(state.individual))

    def recover(self, records: list[tuple[TxnId, str]]) -> None:
        """Rebuild from redo records; apply the ends recorded (a crash came before their cursor was written)."""
        for txn, text in records:
            record = json.loads(text)
            if "end" in record:
                self._apply_end(txn, TxnAction[record["end"].upper()])
                continue
            acks = [(e, None if m is None else int(m, 16), s) for e, m, s in record["acks"]]
            try:
                self.acknowledge(txn, None, acks, record["cumulative"], replay=True)
            except BrokerError:
                continue


def _ack_record(acks: list[Ack], cumulative: bool) -> str:
    """The JSON text of a transaction's acknowledgements, ``{"cumulative": bool, "acks": [[entry, "hex mask" or null,
    batch size], ...]}``, as ``json.dumps`` writes it, written out directly (it is written for every transactional
    acknowledgement; ``json.dumps`` cost several times more)."""
    acked = ", ".join([f"[{e}, null, {s}]" if m is None else f'[{e}, "{m:x}", {s}]' for e, m, s in acks])
    flag = "true" if cumulative is True else "false" if cumulative is False else json.dumps(cumulative)
    return f'{{"cumulative": {flag}, "acks": [{acked}]}}'
