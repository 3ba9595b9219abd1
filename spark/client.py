"""Pulsar with transactions for Python: a client shaped like the official ``pulsar-client``, plus transactions.

The official Python client has no transaction API; this one speaks the Pulsar binary protocol itself (on the
project's ``wire`` codec, with blocking sockets) and works against this endpoint and against Apache Pulsar with
``transactionCoordinatorEnabled=true``::

    from spark.client import Client

    client = Client("pulsar://localhost:6650")
    producer = client.create_producer("persistent://public/default/out")
    consumer = client.subscribe("persistent://public/default/in", "my-sub")

    msg = consumer.receive(timeout_millis=5000)
    txn = client.new_transaction(timeout_ms=60_000)
    producer.send(msg.data().upper(), partition_key=msg.partition_key(), txn=txn)
    consumer.acknowledge(msg, txn=txn)
    txn.commit()          # or txn.abort(): the send is dropped and the message comes back
    client.close()

Over TLS with a token (``AuthenticationBasic(user, password)`` and ``AuthenticationTLS(cert, key)`` likewise)::

    client = Client("pulsar+ssl://broker:6651", authentication=AuthenticationToken(token),
                    tls_trust_certs_file_path="ca.pem")

What differs from the official client: sends are either synchronous (:meth:`Producer.send`, one entry per
message, returns the :class:`MessageId`) or queued into batches (:meth:`Producer.send_async`, confirmed by
:meth:`Producer.flush`, no per-message callback); consumers read one non-partitioned topic; a client and
everything made from it belong to one thread. Errors are :class:`PulsarError` subclasses named after Pulsar's
codes (``AuthenticationError``, ``TransactionConflictError``, ``InvalidTxnStatusError``,
``TransactionNotFoundError``, ...); a ``receive`` that times out raises :class:`Timeout`.

The Spark connector writes through this client; the protocol pieces live in :mod:`spark.protocol` (connections,
lookups) and :mod:`spark.txn_client` (coordinators, batching producers, transactional acknowledgements).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from enum import Enum

from spark import txn_client
from spark.protocol import (
    AuthenticationError,
    AuthorizationError,
    ConnectionLostError,
    InvalidTxnStatusError,
    NotAllowedError,
    OperationTimeoutError,
    ProducerBusyError,
    PulsarError,
    ServiceNotReadyError,
    TlsVerificationError,
    TopicNotFoundError,
    TransactionConflictError,
    TransactionCoordinatorNotFoundError,
    TransactionNotFoundError,
)
from spark.security import Security
from spark.txn_client import ReceivedMessage, Transaction, TxnId, TxnState
from wire.message_id import MessageId
from wire.pulsar_api_pb2 import CommandSubscribe

__all__ = [
    "AuthenticationBasic",
    "AuthenticationError",
    "AuthenticationTLS",
    "AuthenticationToken",
    "AuthorizationError",
    "Client",
    "ConnectionLostError",
    "Consumer",
    "ConsumerType",
    "InitialPosition",
    "InvalidTxnStatusError",
    "Message",
    "MessageId",
    "NotAllowedError",
    "OperationTimeoutError",
    "Producer",
    "ProducerBusyError",
    "PulsarError",
    "Security",
    "ServiceNotReadyError",
    "Timeout",
    "TlsVerificationError",
    "TopicNotFoundError",
    "Transaction",
    "TransactionConflictError",
    "TransactionCoordinatorNotFoundError",
    "TransactionNotFoundError",
    "TxnId",
    "TxnState",
]


class Timeout(PulsarError):  # noqa: N818 (the official client's name)
    """Nothing arrived within a ``receive`` timeout (the official client's ``pulsar.Timeout``)."""


def AuthenticationToken(token: str | Callable[[], str]) -> Security:  # noqa: N802 (the official client's names)
    """A JSON Web Token, or a supplier of fresh ones (asked again when the broker challenges an expired token)."""
    return Security.token(token)


def AuthenticationBasic(username: str, password: str) -> Security:  # noqa: N802
    """A user name and password (the broker's ``basic`` provider)."""
    return Security.basic(username, password)


def AuthenticationTLS(certificate_path: str, private_key_path: str) -> Security:  # noqa: N802
    """A client certificate and its key, presented over ``pulsar+ssl://`` (the broker's ``tls`` provider)."""
    return Security.tls(certificate_path, private_key_path)


class ConsumerType(Enum):
    """Subscription types, named as in the official client."""

    Exclusive = CommandSubscribe.Exclusive
    Shared = CommandSubscribe.Shared
    Failover = CommandSubscribe.Failover
    KeyShared = CommandSubscribe.Key_Shared


class InitialPosition(Enum):
    """Where a new subscription starts."""

    Latest = CommandSubscribe.Latest
    Earliest = CommandSubscribe.Earliest


class Message:
    """A received message, with the official client's accessors."""

    def __init__(self, received: ReceivedMessage, partition: int = -1) -> None:
        self.received = received
        self._id = MessageId(received.ledger, received.entry, partition, received.batch_index)

    def data(self) -> bytes:
        return self.received.value

    def message_id(self) -> MessageId:
        """``(ledger, entry, partition, batch_index)``; batch index -1 for a message stored alone."""
        return self._id

    def partition_key(self) -> str:
        """The key, "" without one (as the official client)."""
        return self.received.key or ""

    def properties(self) -> dict[str, str]:
        return dict(self.received.properties)

    def publish_timestamp(self) -> int:
        """Milliseconds since the epoch."""
        return self.received.publish_time

    def event_timestamp(self) -> int:
        """Milliseconds since the epoch; 0 when not set."""
        return self.received.event_time

    def redelivery_count(self) -> int:
        return self.received.redelivery_count

    def topic_name(self) -> str:
        return self.received.topic

    def __repr__(self) -> str:
        return f"Message({self._id}, {self.received.value[:40]!r})"


class Producer(txn_client.Producer):
    """A producer on a topic (a partitioned one routes by key, round robin without)."""

    def send(  # type: ignore[override]
        self,
        content: bytes,
        partition_key: str | bytes | None = None,
        properties: Mapping[str, str] | None = None,
        event_timestamp: int | None = None,
        txn: Transaction | None = None,
    ) -> MessageId:
        """Send one message (in ``txn`` if given) and return its id once the broker stored it."""
        return self.send_and_wait(content, key=partition_key, properties=properties, event_time=event_timestamp,
                                  txn=txn)

    def send_async(
        self,
        content: bytes,
        partition_key: str | bytes | None = None,
        properties: Mapping[str, str] | None = None,
        event_timestamp: int | None = None,
        txn: Transaction | None = None,
    ) -> None:
        """Queue a message into the open batch; :meth:`flush` (or the transaction's commit) confirms it."""
        super().send(content, key=partition_key, properties=properties, event_time=event_timestamp, txn=txn)


class Consumer(txn_client.Consumer):
    """A consumer of one non-partitioned topic; acknowledgements may be part of a transaction."""

    def receive(self, timeout_millis: int | None = None) -> Message:  # type: ignore[override]
        """The next message; without a timeout, waits until one comes (raises :class:`Timeout` otherwise)."""
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        while True:
            wait = 1.0 if deadline is None else max(0.0, deadline - time.monotonic())
            received = super().receive(wait)
            if received is not None:
                return Message(received)
            if deadline is not None:
                raise Timeout(f"no message on {self.topic} within {timeout_millis} ms")

    def acknowledge(self, message: Message, txn: Transaction | None = None) -> None:  # type: ignore[override]
        """Acknowledge one message; in ``txn``, it counts only when the transaction commits."""
        super().acknowledge(message.received, txn)

    def acknowledge_cumulative(self, message: Message, txn: Transaction | None = None) -> None:
        """Acknowledge this message and every one before it (Exclusive and Failover subscriptions)."""
        super().acknowledge(message.received, txn, cumulative=True)


class Client(txn_client.TransactionClient):
    """A Pulsar client with transactions; one per thread."""

    def __init__(
        self,
        service_url: str,
        authentication: Security | None = None,
        operation_timeout_seconds: float = 30.0,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool | None = None,
        tls_validate_hostname: bool | None = None,
        batching_max_messages: int = txn_client.BATCH_MAX_MESSAGES,
        batching_max_bytes: int = txn_client.BATCH_MAX_BYTES,
    ) -> None:
        """``authentication``: :func:`AuthenticationToken`, :func:`AuthenticationBasic`, :func:`AuthenticationTLS`
        or any :class:`Security`; the ``tls_*`` arguments given override its TLS settings. Unlike the official
        client, the broker's host name is checked by default (``tls_validate_hostname=False`` turns it off)."""
        tls = {
            "tls_trust_certs_file": tls_trust_certs_file_path,
            "tls_allow_insecure_connection": tls_allow_insecure_connection,
            "tls_validate_hostname": tls_validate_hostname,
        }
        security = replace(authentication or Security(), **{k: v for k, v in tls.items() if v is not None})
        super().__init__(service_url, operation_timeout_seconds, batching_max_messages, batching_max_bytes, security)

    def __enter__(self) -> Client:
        return self

    def create_producer(self, topic: str, producer_name: str | None = None) -> Producer:  # type: ignore[override]
        """A producer on ``topic`` (partitioned or not); it connects on its first send."""
        return Producer(self, topic, producer_name)

    def subscribe(  # type: ignore[override]
        self,
        topic: str,
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        initial_position: InitialPosition = InitialPosition.Latest,
        receiver_queue_size: int = 1000,
    ) -> Consumer:
        """A consumer on a durable subscription of a non-partitioned topic (created at ``initial_position``)."""
        return Consumer(self, topic, subscription_name, receiver_queue_size, consumer_type.value,
                        initial_position.value)

    def new_transaction(self, timeout_ms: int = 60_000) -> Transaction:
        """Open a transaction; the coordinator aborts it if it has not ended within ``timeout_ms``."""
        return super().new_transaction(timeout_ms)

    def transaction(self, txn_id: TxnId, timeout_ms: int = 60_000) -> Transaction:
        """A handle on an open transaction known by its id (e.g. opened in another process): send in it, end it."""
        return Transaction(self, TxnId(*txn_id), timeout_ms)
