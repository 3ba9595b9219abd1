"""The broker service behind every connection, and the Twisted factory that serves it."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
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
from proxy.listeners import Listeners, unknown_listener
from proxy.transactions import accepted_at_once, check_transactional_send
from wire.framing import MessageBody
from wire.message_id import MessageId, signed64
from wire.pulsar_api_pb2 import CommandSeek, CommandSubscribe, Schema, ServerError

if TYPE_CHECKING:
    from engine.topic import Producer
    from proxy.authentication import Authenticator

log = logging.getLogger(__name__)

VERSION = "0.1.0"
#: Pulsar's answer to a SEND larger than its topic's max message size policy.
_TOO_LARGE = "Exceed maximum message size"


class BrokerService:
    """What connections share: the engine, the advertised address and counters."""

    def __init__(
        self,
        broker: Broker,
        reactor: Any,
        advertised_address: str | None,
        port: int,
        timeouts: ConnectionTimeouts,
        listeners: Listeners | None = None,
        *,
        authenticator: Authenticator | None = None,
        authentication_refresh_check_seconds: float = 60.0,
    ) -> None:
        self.broker = broker
        self.timeouts = timeouts
        self.reactor = reactor
        self.advertised_address = advertised_address
        #: Named addresses lookups may ask for (None: no listener is advertised, and a lookup naming one fails).
        self.listeners = listeners
        self.port = port
        #: The TLS port (``pulsar+ssl://``), once it listens: lookups name it beside the plain URL, as Pulsar's.
        self.tls_port: int | None = None
        #: Checks the credentials of CONNECT (None or disabled: anyone may connect), and every this many seconds
        #: whether they expired (against ``clock``, epoch seconds, as token expiry times are).
        self.authenticator = authenticator
        self.authentication_refresh_check_seconds = authentication_refresh_check_seconds
        self.clock: Callable[[], float] = time.time
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

    def lookup_urls(self, listener_name: str, reached_host: str) -> tuple[str | None, str | None]:
        """The ``pulsar://`` and ``pulsar+ssl://`` URLs (None: none) a lookup answers: those of the listener it names,
        else the internal listener's; without advertised listeners, the advertised address or the host the client
        reached. A listener that is not advertised fails the lookup, as in Pulsar."""
        listeners = self.listeners
        if listener_name:
            listener = listeners.by_name.get(listener_name) if listeners is not None else None
            if listener is None:
                raise unknown_listener(listener_name)
            return listener.service_url, listener.service_url_tls
        host = self.advertised_address or reached_host
        tls = listeners.broker_url_tls if listeners is not None else None
        if tls is None and self.tls_port is not None:
            tls = f"pulsar+ssl://{host}:{self.tls_port}"
        if listeners is not None and listeners.internal.service_url:
            return listeners.internal.service_url, tls
        return f"pulsar://{host}:{self.port}", tls

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
        """Register the schema a producer declared (or GET_OR_CREATE_SCHEMA asked for); its version."""
        properties = {kv.key: kv.value for kv in schema.properties}
        return self.broker.schemas.register(
            name.partitioned_parent.full, schema.type, schema.name, schema.schema_data, properties, client=True
        )

    def check_consumer_schema(self, topic: Any, schema: Schema) -> None:
        """Let a consumer's schema in: it becomes the schema of an idle topic, else it must be compatible."""
        properties = {kv.key: kv.value for kv in schema.properties}
        self.broker.schemas.check_consumer(
            topic.name.partitioned_parent.full,
            schema.type,
            schema.name,
            schema.schema_data,
            properties,
            idle=_idle(topic),
        )

    @staticmethod
    def schema_proto(schema: StoredSchema, topic: TopicName) -> dict[str, object]:
        """A stored schema of ``topic`` as the fields of a ``Schema`` message, named as Pulsar names it (the topic's
        schema name, not the name a producer gave it)."""
        properties = json.loads(schema.properties)
        return {
            "name": topic.schema_name,
            "schema_data": schema.data,
            "type": schema.type,
            "properties": [{"key": k, "value": v} for k, v in properties.items()],
        }

    # -- producing -----------------------------------------------------------------------------

    def create_initial_subscription(self, topic: Any, name: str) -> None:
        """Create the subscription a producer names (``initial_subscription_name``, as the clients' dead-letter
        producers do) at the earliest entry, where it is missing, on a persistent topic, and allowed."""
        if isinstance(topic, NonPersistentTopic) or name in topic.subscriptions:
            return
        if not self.broker.namespaces.auto_subscription_creation(topic.name.namespace_name):
            raise BrokerError(
                ServerError.NotAllowedError,
                "Could not create the initial subscription due to the auto subscription creation is not allowed.",
            )
        topic.create_subscription(name, topic.first_entry_id())

    def publish_run(
        self,
        connection: PulsarConnection,
        producer: Producer,
        run: list[tuple[int, int, MessageBody]],
    ) -> None:
        """Publish plain (non-transactional) SENDs one producer sent in a row, ``(sequence id, highest sequence id or
        NO_ID, body)`` each as the SEND carried them, each as if alone: what is refused is answered
        at once, the rest in one :meth:`engine.topic.Topic.publish_run` whose receipts go out together once durable."""
        topic = producer.topic
        assert topic is not None
        if isinstance(topic, NonPersistentTopic):
            for sequence_id, highest, message in run:
                connection.receipt(producer, sequence_id, highest, MESSAGE_ID)
                topic.publish(producer, message.body, message.metadata)
            return
        limit = topic.broker.namespaces.max_message_size(topic.name)
        if limit:
            run = [item for item in run if not self._refused_as_too_large(connection, producer, item, limit)]
            if not run:
                return
        # The receipts echo the sequence ids as they came (the topic compares them as Java longs).
        topic.publish_run(producer, run, partial(connection.receipts, producer, run))

    def publish_txn_run(
        self,
        connection: PulsarConnection,
        producer: Producer,
        txn: TxnId,
        run: list[tuple[int, int, MessageBody]],
    ) -> None:
        """Publish SENDs one producer sent in a row in transaction ``txn``, each as if alone: each
        is checked against the transaction (what is refused is answered at once), the accepted ones are staged in
        order and answered together once durable.

        A check that has to look beyond the producer's open transaction (:func:`accepted_at_once`) can depend on what
        the sends before it staged (the first entry of a transaction unknown here stages its abort marker), so those
        are staged before it."""
        topic = producer.topic
        assert topic is not None
        if isinstance(topic, NonPersistentTopic):
            # As Pulsar: its non-persistent topic throws on a transactional publish, which closes the connection.
            connection.close("PublishTxnMessage is not supported by non-persistent topic")
            return
        limit = topic.broker.namespaces.max_message_size(topic.name)
        if accepted_at_once(producer, txn):
            # The producer's open transaction: every SEND of the run that is not too large is accepted (staging one
            # changes nothing of it).
            if limit:
                run = [item for item in run if not self._refused_as_too_large(connection, producer, item, limit)]
            if run:
                self._stage_txn_sends(connection, producer, txn, run)
            return
        accepted: list[tuple[int, int, MessageBody]] = []
        for item in run:
            if limit and self._refused_as_too_large(connection, producer, item, limit):
                continue
            if not accepted_at_once(producer, txn):
                if accepted:
                    self._stage_txn_sends(connection, producer, txn, accepted)
                    accepted = []
                try:
                    check_transactional_send(connection, producer, txn)
                except BrokerError as exc:
                    connection.receipt(producer, item[0], item[1], exc)
                    continue
            accepted.append(item)
        if accepted:
            self._stage_txn_sends(connection, producer, txn, accepted)

    @staticmethod
    def _stage_txn_sends(
        connection: PulsarConnection, producer: Producer, txn: TxnId, run: list[tuple[int, int, MessageBody]]
    ) -> None:
        """Stage accepted SENDs of ``txn``, answered together once durable (the receipts echo the sequence ids as they
        came)."""
        producer.topic.publish_txn_run(  # type: ignore[union-attr]
            producer, txn, run, partial(connection.receipts, producer, run)
        )

    @staticmethod
    def _refused_as_too_large(
        connection: PulsarConnection, producer: Producer, send: tuple[int, int, MessageBody], limit: int
    ) -> bool:
        """Answer a SEND larger than its topic's max message size (a chunk is not), as Pulsar does; whether it was."""
        sequence_id, highest, message = send
        if len(message.body) <= limit or (
            message.plain is None and message.txn is None and message.metadata.HasField("chunk_id")
        ):
            return False
        connection.receipt(producer, sequence_id, highest, BrokerError(ServerError.NotAllowedError, _TOO_LARGE))
        return True

    # -- consuming -----------------------------------------------------------------------------

    def subscribe(self, connection: PulsarConnection, request: CommandSubscribe) -> Consumer:
        """Attach a consumer as a SUBSCRIBE asks."""
        topic = self.broker.client_topic(request.topic, create=request.force_topic_creation)
        if request.HasField("schema"):
            self.check_consumer_schema(topic, request.schema)
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


def _idle(topic: Any) -> bool:
    """No producers, no consumers and nothing ever published (Pulsar's test before a consumer's schema is added)."""
    if topic.producers or any(s.consumers for s in topic.subscriptions.values()):
        return False
    if isinstance(topic, NonPersistentTopic):
        return topic.messages_in == 0
    return topic.next_entry_id == 0
