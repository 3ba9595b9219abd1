"""Transaction ids, statuses and the status machine shared by the coordinator, buffers and pending acks."""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import NamedTuple

from engine.errors import BrokerError
from wire.pulsar_api_pb2 import ServerError


class TxnId(NamedTuple):
    """A transaction id: the coordinator id in the most-significant bits, its sequence in the least."""

    most: int
    least: int

    def __str__(self) -> str:
        return f"({self.most},{self.least})"


class TxnAction(IntEnum):
    """What ends a transaction, numbered as the wire's ``TxnAction``."""

    COMMIT = 0
    ABORT = 1


class TxnStatus(Enum):
    """Coordinator-side status of a transaction."""

    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    COMMITTED = "COMMITTED"
    ABORTING = "ABORTING"
    ABORTED = "ABORTED"


#: The transitions the coordinator allows.
TRANSITIONS: dict[TxnStatus, frozenset[TxnStatus]] = {
    TxnStatus.OPEN: frozenset({TxnStatus.COMMITTING, TxnStatus.ABORTING}),
    TxnStatus.COMMITTING: frozenset({TxnStatus.COMMITTED}),
    TxnStatus.ABORTING: frozenset({TxnStatus.ABORTED}),
    TxnStatus.COMMITTED: frozenset(),
    TxnStatus.ABORTED: frozenset(),
}

#: The in-between status an action moves an open transaction to, and the final one after it.
ENDING = {TxnAction.COMMIT: TxnStatus.COMMITTING, TxnAction.ABORT: TxnStatus.ABORTING}
ENDED = {TxnAction.COMMIT: TxnStatus.COMMITTED, TxnAction.ABORT: TxnStatus.ABORTED}


def invalid_status(txn: TxnId, expected: TxnStatus, actual: TxnStatus) -> BrokerError:
    """The InvalidTxnStatus error Pulsar gives for a wrong transition, in its words."""
    return BrokerError(
        ServerError.InvalidTxnStatus,
        f"Expect Txn `{txn}` to be in {expected.value} status but it is in {actual.value} status",
    )


def not_found(txn: TxnId) -> BrokerError:
    """The TransactionNotFound error for an unknown or finished transaction, in Pulsar's words (spacing included)."""
    return BrokerError(ServerError.TransactionNotFound, f"The transaction with this txdID `{txn}`not found ")


def ended_below_low_water_mark(txn: TxnId) -> BrokerError:
    """The NotAllowed error of a send in a transaction that a partition knows to have ended."""
    message = f"Transaction [{txn}] has been ended. Please use a new transaction to send message."
    return BrokerError(ServerError.NotAllowedError, message)


def conflict(message: str) -> BrokerError:
    """A pending-ack conflict."""
    return BrokerError(ServerError.TransactionConflict, message)
