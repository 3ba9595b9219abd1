"""Transaction commands of one connection, routed to the engine's coordinators, buffers and pending acks."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from engine.cursor import words_to_mask
from engine.errors import BrokerError
from engine.names import TopicName
from engine.subscription import Consumer
from engine.transactions import TxnAction, TxnId, TxnStatus, ended_below_low_water_mark
from wire.message_id import MessageId
from wire.pulsar_api_pb2 import BaseCommand, CommandAck, ServerError

if TYPE_CHECKING:
    from engine.broker import Broker
    from engine.topic import Producer


class TxnConnection(Protocol):
    """The connection whose transaction commands these are (``proxy.connection.PulsarConnection`` satisfies it;
    passed down at construction)."""

    broker: Broker
    #: The role the client authenticated as (None: authentication is disabled).
    role: str | None
    #: The protocol version agreed at CONNECT.
    protocol_version: int

    def send(self, kind: int, **fields: object) -> None: ...

    def ack_response(self, request: CommandAck, exc: BrokerError | None) -> None: ...


T = BaseCommand
#: From this protocol version on, clients announce each coordinator with TC_CLIENT_CONNECT first.
TC_CONNECT_PROTOCOL_VERSION = 19

Handler = Callable[[BaseCommand, bytes | None], None]


@lru_cache(maxsize=4096)
def full_name(topic: str) -> str:
    """The full name of a topic as a client gave it (every transaction registers the same few partitions again);
    InvalidTopicName for a name that is none (not cached)."""
    return TopicName.parse(topic).full


def txn_of(request: Any) -> TxnId:
    """The transaction a request names."""
    return TxnId(request.txnid_most_bits, request.txnid_least_bits)


def ttl_ms(request: Any) -> int:
    """NEW_TXN's ``txn_ttl_millis`` read as Pulsar's coordinator reads it: a signed 64-bit value (2^64-1 is -1)."""
    value: int = request.txn_ttl_millis
    return value - 2**64 if value >= 2**63 else value


class TransactionCommands:
    """Handlers for TC_CLIENT_CONNECT, NEW_TXN, ADD_*_TO_TXN, END_TXN and END_TXN_ON_*."""

    def __init__(self, connection: TxnConnection) -> None:
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
        send = self.connection.send
        if exc is None:
            if txn is None:
                send(kind, request_id=request.request_id)
            else:
                send(kind, request_id=request.request_id, txnid_most_bits=txn.most, txnid_least_bits=txn.least)
            return
        fields: dict[str, object] = {"request_id": request.request_id}
        if txn is not None:
            fields.update(txnid_most_bits=txn.most, txnid_least_bits=txn.least)
        send(kind, **fields, error=exc.code, message=exc.message)

    def _run(self, kind: int, request: Any, txn: TxnId | None, action: Callable[[Callable[[Any], None]], None]) -> None:
        """Run ``action(done)``; answer ``kind`` when done (with the error it completed with: a failed commit), or
        with the error it raised."""

        def done(result: Any) -> None:
            self._reply(kind, request, txn, result if isinstance(result, BrokerError) else None)

        try:
            action(done)
        except BrokerError as exc:
            self._reply(kind, request, txn, exc)

    def _require_owner(self, txn: TxnId) -> None:
        """Refuse a role that neither opened ``txn`` nor is a super-user, as Pulsar's ``verifyTxnOwnership`` (a
        transaction opened without authentication may be used by anyone; an unknown one fails later, as not found)."""
        meta = self.coordinators.live(txn)
        role = self.connection.role
        if meta is None or meta.owner is None or meta.owner == role:
            return
        authorization = self.broker.authorization
        if authorization.enabled and authorization.is_super_user(role):
            return
        message = f"Client ({role}) is neither the owner of the transaction {txn} nor a super user"
        raise BrokerError(ServerError.TransactionNotFound, message)

    def _require_super_user(self, txn: TxnId) -> None:
        """Refuse a role that is not a super-user the commands Pulsar reserves for its coordinators (when roles are
        authenticated and authorization is on)."""
        role = self.connection.role
        authorization = self.broker.authorization
        if role is not None and authorization.enabled and not authorization.is_super_user(role):
            raise BrokerError(
                ServerError.TransactionNotFound,
                f"TC client ({role}) is not a super user, and is not allowed to operate on transaction {txn}",
            )

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

        def refuse(exc: BrokerError) -> None:
            self.connection.send(
                T.NEW_TXN_RESPONSE,
                request_id=request.request_id,
                txnid_most_bits=request.tc_id,
                error=exc.code,
                message=exc.message,
            )

        def done(result: TxnId | BrokerError) -> None:
            # The id is answered once it can never be handed out again; a commit that failed is answered with its error.
            if isinstance(result, BrokerError):
                refuse(result)
            else:
                self._reply(T.NEW_TXN_RESPONSE, request, result)

        try:
            self._require_connected(request.tc_id)
            self.coordinators.new_txn(request.tc_id, ttl_ms(request), done, self.connection.role)
        except BrokerError as exc:
            refuse(exc)

    def _on_add_partition(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.addPartitionToTxn
        txn = txn_of(request)

        def action(done: Callable[[Any], None]) -> None:
            self._require_connected(txn.most)
            self._require_owner(txn)
            given = {full_name(p): p for p in request.partitions}
            self.coordinators.add_partitions(txn, list(given), done, given)

        self._run(T.ADD_PARTITION_TO_TXN_RESPONSE, request, txn, action)

    def _on_add_subscription(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.addSubscriptionToTxn
        txn = txn_of(request)

        def action(done: Callable[[Any], None]) -> None:
            self._require_connected(txn.most)
            self._require_owner(txn)
            given = {TopicName.parse(s.topic).full: s.topic for s in request.subscription}
            subscriptions = [(TopicName.parse(s.topic).full, s.subscription) for s in request.subscription]
            self.coordinators.add_subscriptions(txn, subscriptions, done, given)

        self._run(T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, request, txn, action)

    def _on_end_txn(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.endTxn
        txn = txn_of(request)

        def action(done: Callable[[Any], None]) -> None:
            self._require_connected(txn.most)
            self._require_owner(txn)
            self.coordinators.end(txn, TxnAction(request.txn_action), done)

        self._run(T.END_TXN_RESPONSE, request, txn, action)

    # -- broker-to-broker requests, answered as a topic owner would ----------------------------

    def _on_end_on_partition(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.endTxnOnPartition
        txn = txn_of(request)

        def action(done: Callable[[Any], None]) -> None:
            topic = self.broker.existing_topic(request.topic)
            if topic is not None:
                self._require_super_user(txn)
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
                try:
                    self._require_super_user(txn)
                except BrokerError as exc:
                    raise BrokerError(exc.code, f"Handle end txn on subscription failed: {exc.message}") from None
                subscription.pending_ack.end(txn, TxnAction(request.txn_action))
            self.broker.after_commit(done, None)

        self._run(T.END_TXN_ON_SUBSCRIPTION_RESPONSE, request, txn, action)


def accepted_at_once(producer: Producer, txn: TxnId) -> bool:
    """Whether :func:`check_transactional_send` accepts a send of ``producer`` in ``txn`` without looking further: the
    producer's last accepted transaction, still open. The answer does not depend on what the sends before it staged
    (nothing staged ends a transaction), so a run of such sends can be checked before any of them is staged."""
    accepted = producer.accepted_txn
    return accepted is not None and accepted.txn == txn and accepted.status is TxnStatus.OPEN


def check_transactional_send(connection: TxnConnection, producer: Producer, txn: TxnId) -> None:
    """Refuse a send of ``producer`` in ``txn`` where Pulsar does, with NotAllowedError (the Java client reports it
    for that message alone); enlist the partition in an open transaction.

    Pulsar's broker does not ask the coordinator: a partition refuses only a transaction at or below the low-water
    mark it learned from ends of its coordinator's transactions, and appends anything else. So a send in a
    transaction that timed out or was aborted is appended here too, and never delivered; so is one in a transaction
    that was never opened (``TransactionBuffer.appended``). A send in an open transaction enlists its partition, as
    Pulsar's coordinator would have had it registered: the registration is answered before it is durable, and a crash
    can lose it while the client goes on sending. A transaction that ended without aborting here may have committed
    messages here, which Pulsar's later abort of the late message would hide as well: its sends are refused.
    """
    if accepted_at_once(producer, txn):
        return
    buffer = producer.topic.txn_buffer  # type: ignore[union-attr]
    if buffer.below_low_water_mark(txn):
        raise ended_below_low_water_mark(txn)
    if buffer.is_aborted(txn):
        return
    coordinators = connection.broker.coordinators
    meta = coordinators.live(txn)
    if meta is None:
        if coordinators.ended(txn):
            raise ended_below_low_water_mark(txn)
        return
    if meta.status is not TxnStatus.OPEN:
        if buffer.ending(txn):
            # Its marker is written here already: an entry after it would be neither ended nor hidden.
            raise ended_below_low_water_mark(txn)
        return
    coordinators.enlist_partition(txn, producer.topic.name.full)  # type: ignore[union-attr]
    producer.accepted_txn = meta


def transactional_ack(connection: TxnConnection, consumer: Consumer | None, request: CommandAck) -> None:
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
        cumulative = request.ack_type == CommandAck.Cumulative
        for mid in map(MessageId.from_proto, request.message_id):
            if mid.ledger > topic.ledger_id or (cumulative and mid.entry > topic.last_confirmed):
                # As Pulsar: accepted, and committing it acknowledges nothing. (An individual ack of an entry not
                # written yet is held, and committed it acknowledges that entry once written.)
                continue
            # Before the first entry (entry -1, an earlier ledger): the pending ack refuses it as acknowledged already,
            # as Pulsar does.
            entry = mid.entry if mid.ledger == topic.ledger_id else -1
            mask = words_to_mask(list(mid.ack_set)) if mid.ack_set else None
            size = mid.batch_size
            if mask is not None and size == 0:
                entries = topic.read_ids([entry])
                size = entries[0].num_messages if entries else mask.bit_length()
            acks.append((entry, mask, size))
        if acks:
            subscription.pending_ack.acknowledge(txn, consumer, acks, cumulative=cumulative)
    except BrokerError as exc:
        connection.ack_response(request, exc)
        return
    # Answered once the acknowledgements are held durably, or with the error of the commit that lost them.
    connection.broker.after_commit(
        lambda result: connection.ack_response(request, result if isinstance(result, BrokerError) else None), None
    )
