"""The option enums of ``pulsar-client``, with its member names and values (the values are the protocol's)."""

from __future__ import annotations

from enum import IntEnum


class _Named(IntEnum):
    """Printed ``Type.Member`` as the official client's enums (an ``IntEnum`` prints its value)."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class CompressionType(_Named):
    NONE = 0
    LZ4 = 1
    ZLib = 2
    ZSTD = 3
    SNAPPY = 4


class ConsumerType(_Named):
    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3


class InitialPosition(_Named):
    Latest = 0
    Earliest = 1


class PartitionsRoutingMode(_Named):
    UseSinglePartition = 0
    RoundRobinDistribution = 1
    CustomPartition = 2


class BatchingType(_Named):
    Default = 0
    KeyBased = 1


class ProducerAccessMode(_Named):
    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class RegexSubscriptionMode(_Named):
    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2


class KeySharedMode(_Named):
    AutoSplit = 0
    Sticky = 1


class LoggerLevel(_Named):
    Debug = 0
    Info = 1
    Warn = 2
    Error = 3


class ConsumerCryptoFailureAction(_Named):
    FAIL = 0
    DISCARD = 1
    CONSUME = 2


_RESULTS = [
    "Ok",
    "UnknownError",
    "InvalidConfiguration",
    "Timeout",
    "LookupError",
    "ConnectError",
    "ReadError",
    "AuthenticationError",
    "AuthorizationError",
    "ErrorGettingAuthenticationData",
    "BrokerMetadataError",
    "BrokerPersistenceError",
    "ChecksumError",
    "ConsumerBusy",
    "NotConnected",
    "AlreadyClosed",
    "InvalidMessage",
    "ConsumerNotInitialized",
    "ProducerNotInitialized",
    "ProducerBusy",
    "TooManyLookupRequestException",
    "InvalidTopicName",
    "InvalidUrl",
    "ServiceUnitNotReady",
    "OperationNotSupported",
    "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException",
    "ProducerQueueIsFull",
    "MessageTooBig",
    "TopicNotFound",
    "SubscriptionNotFound",
    "ConsumerNotFound",
    "UnsupportedVersionError",
    "TopicTerminated",
    "CryptoError",
    "IncompatibleSchema",
    "ConsumerAssignError",
    "CumulativeAcknowledgementNotAllowedError",
    "TransactionCoordinatorNotFoundError",
    "InvalidTxnStatusError",
    "NotAllowedError",
    "TransactionConflict",
    "TransactionNotFound",
    "ProducerFenced",
    "MemoryBufferIsFull",
    "Interrupted",
]
#: What ``send_async`` callbacks receive first: ``Result.Ok`` or the name of the error (``pulsar.Result``).
Result = _Named("Result", [(name, value) for value, name in enumerate(_RESULTS)], module=__name__)


def result_of(error: BaseException | None) -> Result:
    """The :data:`Result` of an error (``Ok`` for None)."""
    if error is None:
        return Result.Ok
    for cls in type(error).__mro__:
        if cls.__name__ in Result.__members__:
            return Result[cls.__name__]
    return Result.UnknownError
