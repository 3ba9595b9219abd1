"""The broker service behind every connection, and the Twisted factory that serves it."""

from __future__ import annotations

import json
import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from twisted.internet import protocol

from engine.broker import Broker
from engine.errors import BrokerError
from engine.names import TopicName
from engine.non_persistent import MESSAGE_ID, NonPersistentSubscription, NonPersistentTopic
from engine.store import StoredSchema
from engine.subscription import Consumer, SubType
from engine.transactions import TxnId
from proxy.connection import ConnectionTimeouts, PulsarConnection, sticky_ranges
from proxy.transactions import check_transactional_send
from wire.framing import MessageBody
from wire.message_id import MessageId, signed64
from wire.pulsar_api_pb2 import CommandSeek, CommandSend, CommandSubscribe, Schema, ServerError

if TYPE_CHECKING:
    from engine.topic import Producer

log = logging.getLogger(__name__)

VERSION = "0.1.0"


class BrokerService:
    """What connections share: the engine, the advertised address and counters."""

    def __init__(
        self,
        broker: Broker,
        reactor: Any,
        advertised_address: str | None,
        port: int,
        timeouts: ConnectionTimeouts,
    ) -> None:
        self.broker = broker
        self.timeouts = timeouts
        self.reactor = reactor
        self.advertised_address = advertised_address
        self.port = port
        self.server_version = f"pulsar-txn-proxy {VERSION}"
        self.connections: set[PulsarConnection] = set()
        #: Connections with frames written during this turn of the reactor, flushed together at its end.
        self._unflushed: list[PulsarConnection] = []

    def flush_later(self, connection: PulsarConnection) -> None:
        """Flush ``connection`` at the end of this turn (one timed call for every connection written to)."""
        if not self._unflushed:
            self.reactor.callLater(0, self.flush_written)
        self._unflushed.append(connection)

    def flush_written(self) -> None:
        """Flush every connection written to since the last flush."""
        unflushed, self._unflushed = self._unflushed, []
        for connection in unflushed:
            connection.flush()

    # -- lookup ---------------------------------------------------------------------------------

    def service_url(self, connection: PulsarConnection) -> str:
        """The broker URL lookups answer: the advertised address, else the address the client reached."""
        host = self.advertised_address or connection.transport.getHost().host
        return f"pulsar://{host}:{self.port}"

    def partitioned_metadata(self, topic: str) -> int:
        """Partition count answered to PARTITIONED_METADATA."""
        return self.broker.partitioned_metadata(topic)

    def check_lookup(self, topic: str) -> None:
        """Validate a LOOKUP's topic (every topic of an existing namespace is served here)."""
        name = TopicName.parse(topic)
        if name.namespace_name not in self.broker.namespaces:
            raise BrokerError(ServerError.TopicNotFound, "Namespace not found")

    # -- schemas -------------------------------------------------------------------------------

    def register_schema(self, name: TopicName, schema: Schema) -> int:
        """Register the schema a producer or consumer declared; its version."""
        properties = {kv.key: kv.value for kv in schema.properties}
        return self.broker.schemas.register(
            name.partitioned_parent.full, schema.type, schema.name, schema.schema_data, properties
        )

    @staticmethod
    def schema_proto(schema: StoredSchema) -> dict[str, object]:
        """A stored schema as the fields of a ``Schema`` message."""
        properties = json.loads(schema.properties)
        return {
            "name": schema.name,
            "schema_data": schema.data,
            "type": schema.type,
            "properties": [{"key": k, "value": v} for k, v in properties.items()],
        }

    # -- producing -----------------------------------------------------------------------------

    def publish(
        self,
        connection: PulsarConnection,
        producer: Producer,
        send: CommandSend,
        message: MessageBody,
        sequence_id: int,
        highest: int | None,
    ) -> None:
        """Append a message; the receipt goes out once it is durable (at once on a non-persistent topic).

        ``sequence_id`` and ``highest`` (its highest sequence id, if it gave one) are read from ``send`` already.
        """
        topic = producer.topic
        assert topic is not None
        transactional = send.HasField("txnid_most_bits") or send.HasField("txnid_least_bits")
        if isinstance(topic, NonPersistentTopic):
            if transactional:
                # As Pulsar: its non-persistent topic throws on a transactional publish, which closes the connection.
                connection.close("PublishTxnMessage is not supported by non-persistent topic")
                return
            connection.receipt(producer, sequence_id, highest, MESSAGE_ID)
            topic.publish(producer, message.body, message.metadata)
            return
        txn = None
        if transactional:
            txn = TxnId(send.txnid_most_bits, send.txnid_least_bits)
            try:
                check_transactional_send(connection, producer, txn)
            except BrokerError as exc:
                connection.receipt(producer, sequence_id, highest, exc)
                return
        # Deduplication compares sequence ids as Java longs; the receipt echoes them as they came.
        topic.publish(
            producer,
            signed64(sequence_id),
            -1 if highest is None else signed64(highest),
            message.body,
            message.metadata,
            partial(connection.receipt, producer, sequence_id, highest),
            txn,
        )

    # -- consuming -----------------------------------------------------------------------------

    def subscribe(self, connection: PulsarConnection, request: CommandSubscribe) -> Consumer:
        """Attach a consumer as a SUBSCRIBE asks."""
        topic = self.broker.client_topic(request.topic, create=request.force_topic_creation)
        if request.HasField("schema"):
            self.register_schema(topic.name, request.schema)
        sub_type = SubType(request.subType)
        sticky, ranges = False, []
        if sub_type == SubType.KEY_SHARED and request.HasField("keySharedMeta"):
            sticky, ranges = sticky_ranges(request)
        consumer = Consumer(
            request.consumer_id,
            request.consumer_name,
            connection,
            priority=request.priority_level,
            epoch=request.consumer_epoch if request.HasField("consumer_epoch") else None,
            hash_ranges=ranges,
            read_compacted=request.read_compacted,
            metadata={kv.key: kv.value for kv in request.metadata},
        )
        if isinstance(topic, NonPersistentTopic):
            topic.subscribe(
                request.subscription,
                sub_type,
                consumer,
                durable=request.durable,
                sticky=sticky,
            )
            return consumer
        start_entry = None
        if not request.durable and request.HasField("start_message_id"):
            start_entry = self._reader_start(topic, MessageId.from_proto(request.start_message_id))
        topic.subscribe(
            request.subscription,
            sub_type,
            consumer,
            durable=request.durable,
            earliest=request.initialPosition == CommandSubscribe.Earliest,
            start_entry=start_entry,
            sticky=sticky,
        )
        return consumer

    @staticmethod
    def _reader_start(topic: Any, start: MessageId) -> int | None:
        """First entry a reader gets: ``start`` itself (the client drops what it must not see); None at latest."""
        if start.is_latest:
            return None
        return start.start_entry(topic.ledger_id, topic.first_entry_id(), topic.read_limit + 1)

    def unsubscribe(self, consumer: Consumer, force: bool) -> None:
        """Delete the consumer's subscription (only its last consumer may, unless forced)."""
        subscription = consumer.subscription
        assert subscription is not None
        if len(subscription.consumers) > 1 and not force:
            raise BrokerError(ServerError.MetadataError, "Unconnected or shared consumer attempting to unsubscribe")
        subscription.consumers.remove(consumer)
        consumer.subscription = None
        subscription.close_consumers()
        subscription.topic.remove_subscription(subscription)

    def seek(self, consumer: Consumer, request: CommandSeek) -> None:
        """Reset the consumer's subscription and disconnect its consumers (they re-subscribe)."""
        subscription = consumer.subscription
        assert subscription is not None
        if not (request.HasField("message_publish_time") or request.HasField("message_id")):
            raise BrokerError(ServerError.MetadataError, "Message id and message publish time were not present")
        if isinstance(subscription, NonPersistentSubscription):
            return  # as Pulsar: nothing is stored to move to, so the seek succeeds and changes nothing
        topic = subscription.topic
        if request.HasField("message_publish_time"):
            entry = topic.entry_at_time(signed64(request.message_publish_time))
        else:
            target = MessageId.from_proto(request.message_id)
            entry = target.start_entry(topic.ledger_id, topic.first_entry_id(), topic.read_limit + 1)
        subscription.reset(entry)
        subscription.close_consumers()


class PulsarFactory(protocol.ServerFactory):
    """Builds a :class:`PulsarConnection` per accepted socket."""

    noisy = False

    def __init__(self, service: BrokerService) -> None:
        self.service = service

    def buildProtocol(self, addr: object) -> PulsarConnection:  # noqa: N802 (Twisted's name)
        return PulsarConnection(self.service)
