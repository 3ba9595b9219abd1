"""The exceptions of ``pulsar-client`` 3.x, by the same names and in the same hierarchy: every error is a
:class:`PulsarException`; a broker's ``ServerError`` code maps to the class the official client raises for it."""

from __future__ import annotations

from typing import Any

from wire.pulsar_api_pb2 import ServerError


class PulsarException(Exception):  # noqa: N818 (the official client's names)
    """Any error of the client; ``code`` is the broker's ``ServerError`` value when the broker sent one."""

    def __init__(self, message: str = "", code: int | None = None) -> None:
        super().__init__(message)
        self.code = code

    def error(self) -> Any:
        """The ``Result`` of this error (e.g. ``Result.Timeout``), as ``pulsar.asyncio.PulsarException.error()``."""
        from pulsar_txn.enums import result_of

        return result_of(self)


def _make(name: str, doc: str) -> type[PulsarException]:
    return type(name, (PulsarException,), {"__doc__": doc, "__module__": __name__})


UnknownError = _make("UnknownError", "An error without a more precise class.")
InvalidConfiguration = _make("InvalidConfiguration", "An argument or setting is not valid.")
Timeout = _make("Timeout", "No answer (or no message) within the timeout.")
LookupError = _make("LookupError", "The topic lookup failed.")
ConnectError = _make("ConnectError", "The connection to a broker could not be opened or was lost.")
ReadError = _make("ReadError", "Reading from a broker connection failed.")
AuthenticationError = _make("AuthenticationError", "The broker refused the credentials.")
AuthorizationError = _make("AuthorizationError", "The role may not do this.")
ErrorGettingAuthenticationData = _make("ErrorGettingAuthenticationData", "The credentials could not be read.")
BrokerMetadataError = _make("BrokerMetadataError", "The broker failed on its metadata.")
BrokerPersistenceError = _make("BrokerPersistenceError", "The broker failed to store.")
ChecksumError = _make("ChecksumError", "A message failed its checksum.")
ConsumerBusy = _make("ConsumerBusy", "An exclusive subscription already has a consumer.")
NotConnected = _make("NotConnected", "Not connected to the broker.")
AlreadyClosed = _make("AlreadyClosed", "The client, producer or consumer is closed.")
InvalidMessage = _make("InvalidMessage", "The message is not valid.")
ConsumerNotInitialized = _make("ConsumerNotInitialized", "The consumer is not ready.")
ProducerNotInitialized = _make("ProducerNotInitialized", "The producer is not ready.")
ProducerBusy = _make("ProducerBusy", "A producer of that name, or an exclusive producer, exists already.")
TooManyLookupRequestException = _make("TooManyLookupRequestException", "The broker refuses more lookups now.")
InvalidTopicName = _make("InvalidTopicName", "The topic name is not valid.")
InvalidUrl = _make("InvalidUrl", "The service URL is not valid.")
ServiceUnitNotReady = _make("ServiceUnitNotReady", "The broker does not serve that topic now.")
OperationNotSupported = _make("OperationNotSupported", "Not supported here.")
ProducerBlockedQuotaExceededError = _make("ProducerBlockedQuotaExceededError", "Backlog quota exceeded.")
ProducerBlockedQuotaExceededException = _make("ProducerBlockedQuotaExceededException", "Backlog quota exceeded.")
ProducerQueueIsFull = _make("ProducerQueueIsFull", "``max_pending_messages`` reached and not blocking.")
MessageTooBig = _make("MessageTooBig", "The message exceeds the broker's max message size.")
TopicNotFound = _make("TopicNotFound", "No such topic.")
SubscriptionNotFound = _make("SubscriptionNotFound", "No such subscription.")
ConsumerNotFound = _make("ConsumerNotFound", "No such consumer.")
UnsupportedVersionError = _make("UnsupportedVersionError", "The broker does not support this.")
TopicTerminated = _make("TopicTerminated", "The topic was terminated.")
CryptoError = _make("CryptoError", "Encryption failed.")
IncompatibleSchema = _make("IncompatibleSchema", "The schema is not compatible with the topic's.")
ConsumerAssignError = _make("ConsumerAssignError", "No consumer could be assigned.")
CumulativeAcknowledgementNotAllowedError = _make(
    "CumulativeAcknowledgementNotAllowedError", "Cumulative acknowledgement on a Shared or Key_Shared subscription."
)
TransactionCoordinatorNotFoundError = _make(
    "TransactionCoordinatorNotFoundError", "No such transaction coordinator, or transactions are off on the broker."
)
InvalidTxnStatusError = _make("InvalidTxnStatusError", "The transaction is not open (ended, or timed out).")
TransactionHasOperationFailedError = _make(
    "TransactionHasOperationFailedError",
    "A send or acknowledgement in the transaction failed: its commit aborted it (the Java client's "
    "TransactionHasOperationFailedException).",
)
NotAllowedError = _make("NotAllowedError", "The broker does not allow this.")
TransactionConflict = _make("TransactionConflict", "Another transaction acknowledged this message.")
TransactionNotFound = _make("TransactionNotFound", "The coordinator does not know it (ended, timed out).")
ProducerFenced = _make("ProducerFenced", "An exclusive producer took the topic.")
MemoryBufferIsFull = _make("MemoryBufferIsFull", "The client's memory limit is reached.")
Interrupted = _make("Interrupted", "The operation was interrupted.")

_BY_CODE: dict[int, type[PulsarException]] = {
    ServerError.UnknownError: UnknownError,
    ServerError.MetadataError: BrokerMetadataError,
    ServerError.PersistenceError: BrokerPersistenceError,
    ServerError.AuthenticationError: AuthenticationError,
    ServerError.AuthorizationError: AuthorizationError,
    ServerError.ConsumerBusy: ConsumerBusy,
    ServerError.ServiceNotReady: ServiceUnitNotReady,
    ServerError.ProducerBlockedQuotaExceededError: ProducerBlockedQuotaExceededError,
    ServerError.ProducerBlockedQuotaExceededException: ProducerBlockedQuotaExceededException,
    ServerError.ChecksumError: ChecksumError,
    ServerError.UnsupportedVersionError: UnsupportedVersionError,
    ServerError.TopicNotFound: TopicNotFound,
    ServerError.SubscriptionNotFound: SubscriptionNotFound,
    ServerError.ConsumerNotFound: ConsumerNotFound,
    ServerError.TooManyRequests: TooManyLookupRequestException,
    ServerError.TopicTerminatedError: TopicTerminated,
    ServerError.ProducerBusy: ProducerBusy,
    ServerError.InvalidTopicName: InvalidTopicName,
    ServerError.IncompatibleSchema: IncompatibleSchema,
    ServerError.ConsumerAssignError: ConsumerAssignError,
    ServerError.TransactionCoordinatorNotFound: TransactionCoordinatorNotFoundError,
    ServerError.InvalidTxnStatus: InvalidTxnStatusError,
    ServerError.NotAllowedError: NotAllowedError,
    ServerError.TransactionConflict: TransactionConflict,
    ServerError.TransactionNotFound: TransactionNotFound,
    ServerError.ProducerFenced: ProducerFenced,
}


def from_server_error(code: int, message: str) -> PulsarException:
    """The exception for a broker's ``ServerError`` code and message."""
    try:
        name = ServerError.Name(code)
    except ValueError:
        name = str(code)
    return _BY_CODE.get(code, UnknownError)(f"{name}: {message}", code)


#: Errors after which a request may succeed on a new connection or a little later.
RETRYABLE: tuple[type[PulsarException], ...] = (
    ConnectError,
    NotConnected,
    ServiceUnitNotReady,
    TooManyLookupRequestException,
    TransactionCoordinatorNotFoundError,
)
