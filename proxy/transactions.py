"""Transaction commands of one connection, routed to the engine's coordinators, buffers and pending acks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.cursor import words_to_mask
from engine.errors import BrokerError
from engine.names import TopicName
from engine.subscription import Consumer
from engine.transactions import TxnAction, TxnId, TxnStatus
from wire.pulsar_api_pb2 import BaseCommand, CommandAck, ServerError

if TYPE_CHECKING:
    from engine.topic import Producer
    from proxy.connection import PulsarConnection

T = BaseCommand
#: From this protocol version on, clients announce each coordinator with TC_CLIENT_CONNECT first.
TC_CONNECT_PROTOCOL_VERSION = 19

Handler = Callable[[BaseCommand, bytes | None], None]


def txn_of(request: Any) -> TxnId:
    """The transaction a request names."""
    return TxnId(request.txnid_most_bits, request.txnid_least_bits)


class TransactionCommands:
    """Handlers for TC_CLIENT_CONNECT, NEW_TXN, ADD_*_TO_TXN, END_TXN and END_TXN_ON_*."""

    def __init__(self, connection: PulsarConnection) -> None:
        self.connection = connection
        self.broker = connection.broker
        self.coordinators = connection.broker.coordinators
        self.connected: set[int] = set()

    def register(self, handlers: dict[int, Handler]) -> None:
        """Add this object's handlers to a connection's routing table."""
        handlers.update(
            {
                T.TC_CLIENT_CONNECT_REQUEST: self._on_tc_connect,
                T.NEW_TXN: self._on_new_txn,
                T.ADD_PARTITION_TO_TXN: self._on_add_partition,
                T.ADD_SUBSCRIPTION_TO_TXN: self._on_add_subscription,
                T.END_TXN: self._on_end_txn,
                T.END_TXN_ON_PARTITION: self._on_end_on_partition,
                T.END_TXN_ON_SUBSCRIPTION: self._on_end_on_subscription,
            }
        )

    def _require_connected(self, tc_id: int) -> None:
        self.coordinators.coordinator(tc_id)
        if self.connection.protocol_version >= TC_CONNECT_PROTOCOL_VERSION and tc_id not in self.connected:
            raise BrokerError(
                ServerError.TransactionCoordinatorNotFound,
                f"Transaction coordinator {tc_id} was not connected with TC_CLIENT_CONNECT on this connection",
            )

    def _reply(self, kind: int, request: Any, txn: TxnId | None, exc: BrokerError | None = None) -> None:
        fields: dict[str, object] = {"request_id": request.request_id}
        if txn is not None:
            fields.update(txnid_most_bits=txn.most, txnid_least_bits=txn.least)
        if exc is not None:
            fields.update(error=exc.code, message=exc.message)
        self.connection.send(kind, **fields)

    def _run(self, kind: int, request: Any, txn: TxnId | None, action: Callable[[Callable[[Any], None]], None]) -> None:
        """Run ``action(done)``; answer ``kind`` when done, or with the error it raised."""
        try:
            action(lambda _: self._reply(kind, request, txn))
        except BrokerError as exc:
            self._reply(kind, request, txn, exc)

    # -- coordinator requests -----------------------------------------------------------------

    def _on_tc_connect(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.tcClientConnectRequest
        try:
            self.coordinators.coordinator(request.tc_id)
        except BrokerError as exc:
            self.connection.send(
                T.TC_CLIENT_CONNECT_RESPONSE,
                request_id=request.request_id,
                error=exc.code,
                message=exc.message,
            )
            return
        self.connected.add(request.tc_id)
        self.connection.send(T.TC_CLIENT_CONNECT_RESPONSE, request_id=request.request_id)

    def _on_new_txn(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.newTxn
        try:
            self._require_connected(request.tc_id)
            self.coordinators.new_txn(
                request.tc_id,
                request.txn_ttl_millis,
                lambda txn: self._reply(T.NEW_TXN_RESPONSE, request, txn),
            )
        except BrokerError as exc:
            self.connection.send(
                T.NEW_TXN_RESPONSE,
                request_id=request.request_id,
                txnid_most_bits=request.tc_id,
                error=exc.code,
                message=exc.message,
            )

    def _on_add_partition(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.addPartitionToTxn
        txn = txn_of(request)

        def action(done: Callable[[Any], None]) -> None:
            self._require_connected(txn.most)
            partitions = [TopicName.parse(p).full for p in request.partitions]
            self.coordinators.add_partitions(txn, partitions, done)

        self._run(T.ADD_PARTITION_TO_TXN_RESPONSE, request, txn, action)

    def _on_add_subscription(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.addSubscriptionToTxn
        txn = txn_of(request)

        def action(done: Callable[[Any], None]) -> None:
            self._require_connected(txn.most)
            subscriptions = [(TopicName.parse(s.topic).full, s.subscription) for s in request.subscription]
            self.coordinators.add_subscriptions(txn, subscriptions, done)

        self._run(T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, request, txn, action)

    def _on_end_txn(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.endTxn
        txn = txn_of(request)

        def action(done: Callable[[Any], None]) -> None:
            self._require_connected(txn.most)
            self.coordinators.end(txn, TxnAction(request.txn_action), done)

        self._run(T.END_TXN_RESPONSE, request, txn, action)

    # -- broker-to-broker requests, answered as a topic owner would ----------------------------

    def _on_end_on_partition(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.endTxnOnPartition
        txn = txn_of(request)

        def action(done: Callable[[Any], None]) -> None:
            topic = self.broker.existing_topic(request.topic)
            if topic is not None:
                topic.txn_buffer.end(txn, TxnAction(request.txn_action), request.txnid_least_bits_of_low_watermark)
            self.broker.after_commit(done, None)

        self._run(T.END_TXN_ON_PARTITION_RESPONSE, request, txn, action)

    def _on_end_on_subscription(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.endTxnOnSubscription
        txn = txn_of(request)

        def action(done: Callable[[Any], None]) -> None:
            topic = self.broker.existing_topic(request.subscription.topic)
            subscription = topic.subscriptions.get(request.subscription.subscription) if topic else None
            if subscription is not None:
                subscription.pending_ack.end(txn, TxnAction(request.txn_action))
            self.broker.after_commit(done, None)

        self._run(T.END_TXN_ON_SUBSCRIPTION_RESPONSE, request, txn, action)


def check_transactional_send(connection: PulsarConnection, producer: Producer, txn: TxnId) -> None:
    """Reject a send of ``producer`` in a transaction that is not open; enlist its partition in the transaction.

    The error is NotAllowedError, which the Java client reports for that message alone.
    """
    accepted = producer.accepted_txn
    if accepted is not None and accepted.txn == txn and accepted.status is TxnStatus.OPEN:
        return
    topic_name = producer.topic.name.full  # type: ignore[union-attr]
    try:
        meta = connection.broker.coordinators.enlist_partition(txn, topic_name)
    except BrokerError as exc:
        message = exc.message
        if exc.code == ServerError.TransactionNotFound:
            # Pulsar's words for a transaction its coordinator has ended (behind the low-water mark).
            message = f"Transaction [{txn}] has been ended. Please use a new transaction to send message."
        raise BrokerError(ServerError.NotAllowedError, message) from None
    producer.accepted_txn = meta


def transactional_ack(connection: PulsarConnection, consumer: Consumer | None, request: CommandAck) -> None:
    """Hold the acknowledgements of an ACK made inside a transaction; ACK_RESPONSE once durable."""
    if consumer is None or consumer.subscription is None:
        return
    txn = txn_of(request)
    subscription = consumer.subscription
    topic = subscription.topic
    if not topic.name.persistent:
        # Pulsar's consumer refuses before looking at the transaction (TransactionConflictException).
        failure = BrokerError(
            ServerError.TransactionConflict, "Transaction acknowledge only support the `PersistentSubscription`."
        )
        connection.ack_response(request, failure)
        return
    try:
        connection.broker.coordinators.require_open(txn)
        acks = []
        for mid in request.message_id:
            if mid.ledgerId != topic.ledger_id:
                continue
            mask = words_to_mask(list(mid.ack_set)) if len(mid.ack_set) else None
            size = mid.batch_size if mid.batch_size > 0 else 0
            if mask is not None and size == 0:
                entries = topic.read_ids([mid.entryId])
                size = entries[0].num_messages if entries else mask.bit_length()
            acks.append((mid.entryId, mask, size))
        subscription.pending_ack.acknowledge(txn, consumer, acks, cumulative=request.ack_type == CommandAck.Cumulative)
    except BrokerError as exc:
        connection.ack_response(request, exc)
        return
    connection.broker.after_commit(lambda _: connection.ack_response(request, None), None)
