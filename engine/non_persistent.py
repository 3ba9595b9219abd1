"""Non-persistent topics (``non-persistent://``): nothing is stored, a message only goes to who is connected.

As Pulsar's ``NonPersistentTopic``, ``NonPersistentSubscription`` and ``NonPersistentDispatcher*``:

- a publish is answered at once, and every message id is ``0:0``: the receipt and each delivered MESSAGE carry
  ledger 0, entry 0 (there is no position in a log);
- the message is handed to each subscription as it arrives. Exclusive and Failover give it to the active consumer,
  Shared to the next consumer with permits (round robin by priority), Key_Shared to the consumer owning its key.
  A consumer without permits, or whose connection is backed up (it does not read), does not get it: the message is
  dropped for that subscription (counted, Pulsar's ``msgDropRate``), never delivered later;
- a subscription lives while it has consumers: the last one leaving removes it, so a consumer subscribing later
  (even at Earliest) only gets what is published from then on;
- acknowledgements, redelivery requests and seeks have nothing to act on and change nothing;
- no entry, cursor or sequence id is written to the store: a restart forgets these topics (their partitioned-topic
  metadata and schemas are kept, as Pulsar keeps them in its metadata and schema stores);
- a topic without producers and subscriptions for a whole policy check interval is dropped, as Pulsar deletes
  inactive topics (``brokerDeleteInactiveTopicsEnabled``, every minute by default).
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.entry import Entry
from engine.errors import BrokerError
from engine.names import TopicName
from engine.subscription import Consumer, ConsumerGroup, Delivery, SubType
from engine.topic import Producer, ProducerHost, TopicHost, check_consumer_limits
from wire.pulsar_api_pb2 import MessageMetadata, ServerError

#: Ledger and entry id of every non-persistent message.
MESSAGE_ID = 0


class NonPersistentSubscription(ConsumerGroup):
    """The consumers of one subscription of a non-persistent topic, and the drops when none can take a message."""

    def __init__(self, topic: NonPersistentTopic, name: str, sub_type: SubType, durable: bool) -> None:
        super().__init__(topic.name, name, sub_type)
        self.topic = topic
        self.durable = durable
        #: Messages no consumer of this subscription could take.
        self.messages_dropped = 0

    def _failover_index(self) -> int:
        # Pulsar passes partition 0 for a non-partitioned topic: Failover then takes the first consumer by name.
        return max(self.topic_name.partition_index, 0)

    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach a consumer; the subscription goes away with its last one."""
        if consumer not in self.consumers:
            return
        self._detach(consumer)
        if not self.consumers:
            self.topic.remove_subscription(self)

    def flow(self, consumer: Consumer, permits: int) -> None:
        """Grant ``permits`` more messages to a consumer (nothing waits for them)."""
        consumer.permits += permits

    def acknowledge(self, consumer: Consumer | None, acks: Iterable[tuple[int, int | None]], cumulative: bool) -> None:
        """Acknowledgements have nothing to act on."""

    def redeliver(self, consumer: Consumer, entry_ids: list[int] | None) -> None:
        """Nothing is kept to deliver again."""

    def backlog(self) -> int:
        """Nothing is stored, so nothing is behind."""
        return 0

    def dispatch(self, entry: Entry) -> None:
        """Hand a just-published message to the consumer it is for, or drop it."""
        if self.sub_type == SubType.KEY_SHARED:
            consumer = self._owner_of(entry.sticky_key)
            if consumer is None:
                return  # no consumer owns the key: Pulsar lets the message go without counting a drop
        elif self.single_active:
            consumer = self._active
        else:
            consumer = self._next_round_robin(Consumer.ready)
        if consumer is None or not consumer.ready():
            self.messages_dropped += entry.num_messages
            return
        consumer.permits -= entry.num_messages
        self._send(consumer, [Delivery(entry, 0, None)])


class NonPersistentTopic(ProducerHost):
    """One non-persistent topic partition (or non-partitioned topic), in memory only."""

    #: Message ids of these topics name no ledger.
    ledger_id = MESSAGE_ID

    def __init__(self, broker: TopicHost, name: TopicName) -> None:
        super().__init__(broker, name)
        self.subscriptions: dict[str, NonPersistentSubscription] = {}
        #: Messages and bytes delivered on subscriptions since removed (the topic's totals keep them, as Pulsar's).
        self.removed_messages_out = 0
        self.removed_bytes_out = 0
        #: When a policy check first found the topic unused (epoch ms), None while it is in use.
        self.idle_since: int | None = None

    @property
    def in_use(self) -> bool:
        """Whether producers or subscriptions are attached."""
        return bool(self.producers or self.waiting_producers or self.subscriptions)

    def last_sequence_id(self, producer_name: str) -> int:
        """Nothing is deduplicated: Pulsar tells producers of non-persistent topics -1."""
        return -1

    def publish(self, producer: Producer, body: bytes, metadata: MessageMetadata) -> None:
        """Hand a message to every subscription now."""
        entry = Entry.from_metadata(MESSAGE_ID, body, metadata)
        self.messages_in += entry.num_messages
        self.bytes_in += len(body)
        producer.messages_in += entry.num_messages
        producer.bytes_in += len(body)
        for subscription in list(self.subscriptions.values()):
            subscription.dispatch(entry)

    def subscribe(
        self, sub_name: str, sub_type: SubType, consumer: Consumer, *, durable: bool, sticky: bool
    ) -> NonPersistentSubscription:
        """Attach a consumer, creating the subscription if it has none."""
        if consumer.read_compacted:
            raise BrokerError(ServerError.NotAllowedError, "readCompacted only valid on persistent topics")
        subscription = self.subscriptions.get(sub_name)
        limits = self.broker.namespaces.limits(self.name)
        check_consumer_limits(self.name, limits, self.subscriptions, sub_type, subscription, check_types=False)
        if subscription is None:
            subscription = NonPersistentSubscription(self, sub_name, sub_type, durable)
        subscription.add_consumer(consumer, sub_type, sticky)
        self.subscriptions[sub_name] = subscription
        return subscription

    def remove_subscription(self, subscription: NonPersistentSubscription) -> None:
        """Forget a subscription (its last consumer left, or it was unsubscribed)."""
        if self.subscriptions.get(subscription.name) is subscription:
            del self.subscriptions[subscription.name]
            self.removed_messages_out += subscription.messages_out
            self.removed_bytes_out += subscription.bytes_out
