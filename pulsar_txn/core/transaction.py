"""A transaction's state as the client sees it, as the Java client keeps it: OPEN until commit/abort starts or its
timeout passes (then TIME_OUT: every operation on it raises, as Java's ``checkIfOpen`` does); the partitions and
subscriptions registered with the coordinator; the sends in flight a commit waits for; the consumers that
acknowledged in it, redelivered after an abort."""

from __future__ import annotations

from enum import Enum
from typing import Any, NamedTuple

from pulsar_txn.exceptions import InvalidTxnStatusError


class TxnId(NamedTuple):
    """A transaction id: the coordinator id in ``most``, that coordinator's sequence in ``least``."""

    most: int
    least: int

    def __str__(self) -> str:
        return f"({self.most},{self.least})"


class TxnState(Enum):
    """Java's ``Transaction.State``."""

    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    ABORTING = "ABORTING"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"
    ERROR = "ERROR"
    TIME_OUT = "TIME_OUT"


class TransactionCore:
    """One transaction. ``opened_at`` and ``now`` are on the same monotonic clock."""

    def __init__(self, txn_id: TxnId, timeout_ms: int, opened_at: float) -> None:
        self.txn_id = txn_id
        self.timeout_ms = timeout_ms
        self.deadline = opened_at + timeout_ms / 1000
        self._state = TxnState.OPEN
        #: Topic partitions registered with ADD_PARTITION_TO_TXN.
        self.partitions: set[str] = set()
        #: (topic partition, subscription) pairs registered with ADD_SUBSCRIPTION_TO_TXN.
        self.subscriptions: set[tuple[str, str]] = set()
        #: Messages sent in the transaction whose receipt has not come.
        self.ops = 0
        #: Operations in the transaction (sends, acknowledgements) that failed: as the Java client's
        #: ``hasOpsFailed``, its commit aborts it instead and raises :class:`TransactionHasOperationFailedError`.
        self.failed_ops = 0
        #: Consumers (any object) that acknowledged in the transaction, redelivered after an abort.
        self.ack_consumers: list[Any] = []
        #: Producers (any object) that sent in the transaction, flushed before the commit.
        self.producers: list[Any] = []

    def state(self, now: float) -> TxnState:
        """The state at ``now``: an OPEN transaction past its timeout is TIME_OUT."""
        if self._state is TxnState.OPEN and now >= self.deadline:
            self._state = TxnState.TIME_OUT
        return self._state

    def check_open(self, now: float) -> None:
        """Raise :class:`InvalidTxnStatusError` unless the transaction is OPEN at ``now``."""
        state = self.state(now)
        if state is not TxnState.OPEN:
            raise InvalidTxnStatusError(f"transaction {self.txn_id} is {state.value}, expected OPEN")

    def begin_end(self, commit: bool, now: float) -> None:
        """Move to COMMITTING or ABORTING (an abort is allowed from TIME_OUT and ERROR too, and from COMMITTING: a
        commit of a transaction with failed operations aborts it)."""
        state = self.state(now)
        if commit:
            self.check_open(now)
            self._state = TxnState.COMMITTING
        else:
            if state not in (TxnState.OPEN, TxnState.TIME_OUT, TxnState.ERROR, TxnState.ABORTING, TxnState.COMMITTING):
                raise InvalidTxnStatusError(f"transaction {self.txn_id} is {state.value}, cannot abort")
            self._state = TxnState.ABORTING

    def ended(self, commit: bool, ok: bool) -> None:
        """END_TXN answered: COMMITTED / ABORTED, or ERROR when it failed."""
        if ok:
            self._state = TxnState.COMMITTED if commit else TxnState.ABORTED
        else:
            self._state = TxnState.ERROR

    def used_by_consumer(self, consumer: Any) -> None:
        if not any(c is consumer for c in self.ack_consumers):
            self.ack_consumers.append(consumer)

    def used_by_producer(self, producer: Any) -> None:
        if not any(p is producer for p in self.producers):
            self.producers.append(producer)
