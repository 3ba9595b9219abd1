"""Pending acknowledgements of one subscription: acks made inside transactions, held until they end.

An acknowledged position is held, not applied to the cursor, and not delivered again while held. A
second acknowledgement of a held position (in any transaction), or of one the cursor already
acknowledged, is a TransactionConflict. Commit applies the transaction's acks to the cursor; abort
releases them and the messages are delivered again. Every held ack is a redo record in the store,
removed in the same store transaction that applies or releases it.
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


@dataclass
class _TxnAcks:
    """What one transaction holds on this subscription."""

    #: ``(entry_id, acknowledged batch indexes or None for the whole entry, batch size)``.
    individual: list[tuple[int, int | None, int]] = field(default_factory=list)
    cumulative: int | None = None


class PendingAck:
    """Transactional acknowledgements of a subscription."""

    def __init__(self, subscription: Subscription) -> None:
        self.subscription = subscription
        #: entry id -> {txn: acknowledged batch indexes as a mask, or None for the whole entry}.
        self.held: dict[int, dict[TxnId, int | None]] = {}
        self.txns: dict[TxnId, _TxnAcks] = {}
        #: The transaction holding a cumulative ack, and its position.
        self.cumulative: tuple[TxnId, int] | None = None

    # -- queries used by dispatch --------------------------------------------------------------

    def holds(self, entry_id: int, batch_size: int) -> bool:
        """True when transactions hold the whole entry: all of it, or each of its unacknowledged batch indexes."""
        held = self.held.get(entry_id)
        if held:
            if any(mask is None for mask in held.values()):
                return True
            unacked = self.subscription.cursor.unacked_mask(entry_id)
            if unacked is None:
                unacked = (1 << batch_size) - 1
            if not unacked & ~self.held_indexes(entry_id):
                return True
        return self.cumulative is not None and entry_id <= self.cumulative[1]

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
        acks: list[tuple[int, int | None, int]],
        cumulative: bool,
        replay: bool = False,
    ) -> None:
        """Hold ``(entry_id, still-unacked mask or None, batch size)`` acks for ``txn``, or raise the conflict.

        ``consumer`` (None on replay) no longer holds the positions as delivered-unacknowledged.
        """
        if cumulative:
            self._check_cumulative(txn, acks)
        else:
            self._check_individual(txn, acks)
        sub = self.subscription
        if not replay:
            sub.topic.broker.coordinators.enlist_subscription(txn, sub.topic.name.full, sub.name)
        state = self.txns.setdefault(txn, _TxnAcks())
        if cumulative:
            entry_id = acks[0][0]
            state.cumulative = entry_id
            self.cumulative = (txn, entry_id)
        else:
            for entry_id, unacked, size in acks:
                acked = None if unacked is None else ((1 << size) - 1) & ~unacked
                holders = self.held.setdefault(entry_id, {})
                # Several batch-index acks of one entry in one transaction add up.
                previous = holders.get(txn, 0)
                holders[txn] = None if acked is None or previous is None else previous | acked
                state.individual.append((entry_id, acked, size))
                if consumer is not None and acked is None:
                    # A batch-index ack leaves the consumer holding the entry's other indexes.
                    consumer.pending.discard(entry_id)
        if not replay:
            record = {
                "cumulative": cumulative,
                "acks": [[e, None if m is None else format(m, "x"), s] for e, m, s in acks],
            }
            sub.topic.store.stage_pending_ack(sub.topic.topic_id, sub.name, txn, json.dumps(record))
            sub.topic.broker.request_flush()

    def _check_individual(self, txn: TxnId, acks: list[tuple[int, int | None, int]]) -> None:
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
            held = self.held.get(entry_id, {})
            if any(mask is None or mask & acked for mask in held.values()):
                raise conflict(f"[{txn}] batch indexes of position {entry_id} are already in pending ack status")

    def _check_cumulative(self, txn: TxnId, acks: list[tuple[int, int | None, int]]) -> None:
        if not self.subscription.single_active:
            raise BrokerError(
                ServerError.NotAllowedError,
                f"Transaction cumulative ack is not allowed on {self.subscription.sub_type.name} subscriptions",
            )
        if len(acks) != 1:
            raise BrokerError(ServerError.NotAllowedError, "Cumulative ack with a transaction takes one message id")
        entry_id = acks[0][0]
        if entry_id <= self.subscription.cursor.mark_delete:
            raise conflict(f"[{txn}] position {entry_id} is before the mark-delete position")
        if self.cumulative is not None and (self.cumulative[0] != txn or entry_id <= self.cumulative[1]):
            raise conflict(f"[{txn}] a cumulative ack of {self.cumulative[0]} is pending at {self.cumulative[1]}")

    # -- ending --------------------------------------------------------------------------------

    def end(self, txn: TxnId, action: TxnAction) -> None:
        """Apply (commit) or release (abort) what ``txn`` holds."""
        state = self.txns.pop(txn, None)
        if state is None:
            return  # nothing held, nothing recorded: an id that names no transaction of ours is not written
        sub = self.subscription
        sub.topic.store.stage_pending_ack_removal(sub.topic.topic_id, sub.name, txn)
        sub.topic.broker.request_flush()
        for entry_id, _, _ in state.individual:
            held = self.held.get(entry_id)
            if held is not None:
                held.pop(txn, None)
                if not held:
                    del self.held[entry_id]
        if self.cumulative is not None and self.cumulative[0] == txn:
            self.cumulative = None
        if action is TxnAction.COMMIT:
            acks = [(e, None if acked is None else ((1 << size) - 1) & ~acked) for e, acked, size in state.individual]
            sub.acknowledge(None, acks, cumulative=False)
            if state.cumulative is not None:
                sub.acknowledge(None, [(state.cumulative, None)], cumulative=True)
        else:
            entries = [e for e, _, _ in state.individual]
            if state.cumulative is not None:
                entries.append(state.cumulative)
            sub.redeliver_released(entries)

    def recover(self, records: list[tuple[TxnId, str]]) -> None:
        """Rebuild from redo records."""
        for txn, text in records:
            record = json.loads(text)
            acks = [(e, None if m is None else int(m, 16), s) for e, m, s in record["acks"]]
            try:
                self.acknowledge(txn, None, acks, record["cumulative"], replay=True)
            except BrokerError:
                continue
