"""Subscriptions: a cursor, the consumers attached to it, and the dispatch decisions between them.

Exclusive and Failover subscriptions have one active consumer that reads the log in order; an
unacknowledged message is delivered again by rewinding the read position to the cursor. Shared and
Key_Shared subscriptions spread entries over consumers and keep a replay set of entries to deliver
again (negatively acknowledged, or held by a consumer that left).

:class:`ConsumerGroup` holds what does not depend on a log (the consumers, the active one, the round robin and the
Key_Shared hash ring); non-persistent subscriptions (``engine.non_persistent``) share it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

import mmh3

from engine.clock import Cancellable, now_ms
from engine.cursor import Cursor
from engine.entry import Entry
from engine.errors import BrokerError
from engine.subscription_types import SubType
from wire.pulsar_api_pb2 import ServerError

if TYPE_CHECKING:
    from engine.names import TopicName
    from engine.topic import Topic

#: Entries one dispatch pass may read (to deliver, or to pass over: acknowledged, hidden, held) before it yields to
#: other work...
DISPATCH_BUDGET = 2000
#: ...and bytes: a connection that stops reading is noticed at the next pass, so this bounds what one consumer can
#: have buffered beyond its connection's limit; and a backlog of entries passed over is read a few MiB a turn.
DISPATCH_BYTES = 4 * 1024 * 1024
#: Entries a pass reads from the log at a time.
READ_CHUNK = 200
#: Key_Shared: stop reading ahead once this many entries wait for a consumer with no permits.
MAX_REPLAY_BACKLOG = 1000
#: Key_Shared hash space (Pulsar's ``DEFAULT_RANGE_SIZE``).
HASH_RANGE_SIZE = 1 << 16
#: Points per consumer on the Key_Shared AUTO_SPLIT hash ring.
RING_POINTS = 100
#: Delayed delivery granularity (Pulsar's ``delayedDeliveryTickTimeMillis``, not strict): a message due within one
#: tick of being read is delivered at once; held ones are released when the first of them is due (at most once a
#: tick), together with those due within the next tick, as Pulsar releases them.
DELAYED_DELIVERY_TICK_MS = 1000


@dataclass(slots=True)
class Delivery:
    """One entry sent to a consumer."""

    entry: Entry
    redelivery_count: int
    unacked_mask: int | None

    @property
    def permits(self) -> int:
        """The consumer's permits the delivery takes: the messages the client gets of it. As Pulsar, batch indexes that
        its ack set marks acknowledged (or held by transactions) are not counted: the Java client skips them without
        returning their permits, so counting them would leave a reconnecting consumer with none."""
        return self.entry.num_messages if self.unacked_mask is None else self.unacked_mask.bit_count()


class ConsumerSink(Protocol):
    """Where a consumer's traffic goes: the connection it came on.

    ``writable`` is False while the connection holds more unsent bytes than it should (its peer does not read):
    dispatch to its consumers waits until it is True again, and the sink then asks for a dispatch.
    """

    writable: bool

    def deliver(self, consumer: Consumer, deliveries: list[Delivery]) -> None: ...

    def active_consumer_change(self, consumer: Consumer, is_active: bool) -> None: ...

    def close_consumer(self, consumer: Consumer) -> None: ...

    def reached_end_of_topic(self, consumer: Consumer) -> None: ...


@dataclass(eq=False)
class Consumer:
    """A consumer attached to a subscription."""

    consumer_id: int
    name: str
    sink: ConsumerSink
    priority: int = 0
    epoch: int | None = None
    #: Key_Shared STICKY: inclusive hash ranges this consumer owns.
    hash_ranges: list[tuple[int, int]] = field(default_factory=list)
    permits: int = 0
    #: Entries delivered to this consumer and not yet acknowledged.
    pending: set[int] = field(default_factory=set)
    #: The subscription it is attached to (a ``Subscription`` or a ``NonPersistentSubscription``), else None.
    subscription: ConsumerGroup | None = None
    #: Messages and bytes delivered to this consumer.
    messages_out: int = 0
    bytes_out: int = 0
    #: Whether this consumer was told that its terminated topic has nothing more.
    told_end_of_topic: bool = False
    #: Exclusive and Failover: read the topic's compacted view up to its horizon, then the log after it.
    read_compacted: bool = False
    #: Shared and Key_Shared: entries it may hold unacknowledged before it gets no more (0: no limit).
    max_unacked: int = 0
    #: The properties the client gave the consumer (reported in topic stats).
    metadata: dict[str, str] = field(default_factory=dict)
    #: When its last FLOW came (epoch milliseconds; 0: none yet).
    last_flow_ms: int = 0

    def ready(self) -> bool:
        """Whether messages may go to this consumer now: it has permits, its connection is not backed up, and it is
        not blocked for holding too many unacknowledged messages."""
        return self.permits > 0 and self.sink.writable and not self.blocked_on_unacked

    @property
    def blocked_on_unacked(self) -> bool:
        """Whether it holds as many unacknowledged entries as it may (Shared and Key_Shared only, as in Pulsar)."""
        sub = self.subscription
        return 0 < self.max_unacked <= len(self.pending) and sub is not None and not sub.single_active


def _type_name(sub_type: SubType) -> str:
    return {SubType.KEY_SHARED: "Key_Shared"}.get(sub_type, sub_type.name.title())


def sticky_hash(key: bytes) -> int:
    """Murmur3 (32 bit) of a sticky key, as Pulsar hashes keys for Key_Shared."""
    return mmh3.hash(key, 0, signed=False) & 0x7FFFFFFF


def key_slot(key: bytes, ring: bool) -> int:
    """The slot of a sticky key (or of a hash ring point's name), as Pulsar's selectors make it: in 1..65535 for the
    consistent-hashing ring, in 0..65535 for fixed ranges (0 read as 1: 0 means "no hash" to its dispatchers)."""
    if ring:
        return sticky_hash(key) % (HASH_RANGE_SIZE - 1) + 1
    return sticky_hash(key) % HASH_RANGE_SIZE or 1


@lru_cache(maxsize=1024)
def ring_slots(name: str, index: int) -> tuple[int, ...]:
    """The slots of the ``RING_POINTS`` hash ring points of a Key_Shared consumer (``name NUL index NUL point``), in
    order: kept, as consumers come back under the same names and a ring is rebuilt at every join and leave."""
    return tuple(key_slot(f"{name}\0{index}\0{i}".encode(), ring=True) for i in range(RING_POINTS))


class ConsumerGroup:
    """The consumers of one subscription and the choice between them: the active one (Exclusive, Failover), the
    round robin (Shared) and the hash ring or fixed ranges (Key_Shared)."""

    def __init__(self, topic_name: TopicName, name: str, sub_type: SubType) -> None:
        self.topic_name = topic_name
        self.name = name
        self.sub_type = sub_type
        self.consumers: list[Consumer] = []
        self._active: Consumer | None = None
        self._round_robin = 0
        self._ring: list[tuple[int, Consumer]] = []
        #: Key_Shared ring: each consumer's index among the consumers of its name (its points' names carry it).
        self._name_index: dict[Consumer, int] = {}
        self.sticky_mode = False
        #: Messages and bytes delivered on this subscription.
        self.messages_out = 0
        self.bytes_out = 0

    @property
    def single_active(self) -> bool:
        return self.sub_type in (SubType.EXCLUSIVE, SubType.FAILOVER)

    @property
    def active_consumer(self) -> Consumer | None:
        return self._active

    def add_consumer(self, consumer: Consumer, sub_type: SubType, sticky: bool = False) -> None:
        """Attach a consumer, or raise the error Pulsar gives for the conflict."""
        if self.consumers and sub_type != self.sub_type:
            raise BrokerError(
                ServerError.ConsumerBusy,
                f"Subscription is of different type. Active subscription type of '{_type_name(self.sub_type)}'"
                f" is different than the connecting consumer's type '{_type_name(sub_type)}'.",
            )
        if not self.consumers:
            self.sub_type = sub_type
            self.sticky_mode = sticky
        if sub_type == SubType.EXCLUSIVE and self.consumers:
            raise BrokerError(ServerError.ConsumerBusy, "Exclusive consumer is already connected")
        if sub_type == SubType.KEY_SHARED:
            self._check_key_shared(consumer, sticky)
        consumer.subscription = self  # type: ignore[assignment]
        self.consumers.append(consumer)
        if self.single_active:
            previous = self._active
            self._pick_active()
            if self.sub_type == SubType.FAILOVER and self._active is previous and consumer is not previous:
                consumer.sink.active_consumer_change(consumer, False)
        elif sub_type == SubType.KEY_SHARED:
            self._rebuild_ring()

    def _check_key_shared(self, consumer: Consumer, sticky: bool) -> None:
        if self.consumers and sticky != self.sticky_mode:
            # Pulsar's answer (SubscriptionBusyException): ConsumerBusy, naming both modes.
            modes = {True: "STICKY", False: "AUTO_SPLIT"}
            raise BrokerError(
                ServerError.ConsumerBusy,
                f"Subscription is of different type. Active subscription key_shared mode of '{modes[self.sticky_mode]}'"
                f" is different than the connecting consumer's key_shared mode '{modes[sticky]}'.",
            )
        if not sticky:
            return
        if not consumer.hash_ranges:
            raise BrokerError(ServerError.ConsumerAssignError, "Ranges for KeyShared policy must not be empty.")
        for start, end in consumer.hash_ranges:
            if not 0 <= start <= end < HASH_RANGE_SIZE:
                raise BrokerError(ServerError.ConsumerAssignError, f"Fixed hash range {start}-{end} is invalid")
            for other in self.consumers:
                for o_start, o_end in other.hash_ranges:
                    if start <= o_end and o_start <= end:
                        raise BrokerError(
                            ServerError.ConsumerAssignError,
                            f"Range conflict with consumer {other.name}: {o_start}-{o_end}",
                        )

    def _detach(self, consumer: Consumer) -> None:
        """Take an attached consumer out of the choice: another becomes active, or the ring is rebuilt."""
        self.consumers.remove(consumer)
        consumer.subscription = None
        if self.single_active:
            if consumer is self._active:
                self._active = None
                self._pick_active()
        elif self.sub_type == SubType.KEY_SHARED:
            self._rebuild_ring()

    def close_consumers(self) -> None:
        """Disconnect every consumer (the client reconnects them)."""
        for consumer in list(self.consumers):
            self.consumers.remove(consumer)
            consumer.subscription = None
            consumer.pending.clear()
            consumer.sink.close_consumer(consumer)
        self._active = None

    def _failover_index(self) -> int:
        """The index Failover picks its active consumer by; negative: by consistent hashing of the topic name."""
        return self.topic_name.partition_index

    def _pick_active(self) -> None:
        if not self.consumers:
            return
        top = min(c.priority for c in self.consumers)
        ordered = sorted((c for c in self.consumers if c.priority == top), key=lambda c: c.name)
        index = self._failover_index()
        if self.sub_type != SubType.FAILOVER:
            chosen = ordered[0]
        elif index >= 0:
            chosen = ordered[index % len(ordered)]
        else:
            # Non-partitioned Failover: consistent hashing of the topic name over the consumers.
            ring = sorted(
                (sticky_hash(f"{c.name}{j}".encode()), i) for i, c in enumerate(ordered) for j in range(RING_POINTS)
            )
            point = bisect.bisect_left(ring, (sticky_hash(self.topic_name.full.encode()), -1))
            chosen = ordered[ring[point % len(ring)][1]]
        if chosen is self._active:
            return
        previous = self._active
        self._active = chosen
        if previous is not None:
            self._active_changed(previous)
        if self.sub_type == SubType.FAILOVER:
            self._announce_active()

    def _announce_active(self) -> None:
        """Failover: tell every consumer whether it is now the active one (at once here; a subscription may wait)."""
        self._tell_active()

    def _tell_active(self) -> None:
        for consumer in self.consumers:
            consumer.sink.active_consumer_change(consumer, consumer is self._active)

    def _active_changed(self, previous: Consumer) -> None:
        """Another consumer replaced ``previous`` as the active one."""

    def _rebuild_ring(self) -> None:
        """The consistent-hashing ring of Pulsar's Key_Shared selector: ``RING_POINTS`` points per consumer, each the
        slot of ``name NUL index NUL point`` (index: the consumer's among those of its name, the lowest free one when
        it joined); a point two consumers hash to belongs to the one that joined first."""
        for consumer in [c for c in self._name_index if c not in self.consumers]:
            del self._name_index[consumer]
        for consumer in self.consumers:
            if consumer not in self._name_index:
                taken = {i for c, i in self._name_index.items() if c.name == consumer.name}
                self._name_index[consumer] = min(set(range(len(taken) + 1)) - taken)
        points: dict[int, Consumer] = {}
        # The last joined first, each overwriting the points it shares with those that joined after it.
        for consumer in reversed(self.consumers):
            points.update(dict.fromkeys(ring_slots(consumer.name, self._name_index[consumer]), consumer))
        # By slot (each slot is one point's: the consumers are never compared).
        self._ring = sorted(points.items())

    def _owner_of(self, key: bytes) -> Consumer | None:
        """The Key_Shared consumer of a sticky key, if any: by fixed ranges, or the first ring point at or after the
        key's slot (wrapping around)."""
        if self.sticky_mode:
            slot = key_slot(key, ring=False)
            for consumer in self.consumers:
                if any(start <= slot <= end for start, end in consumer.hash_ranges):
                    return consumer
            return None
        if not self._ring:
            return None
        index = bisect.bisect_left(self._ring, key_slot(key, ring=True), key=lambda point: point[0])
        return self._ring[index % len(self._ring)][1]

    def _next_round_robin(self, ready: Callable[[Consumer], bool]) -> Consumer | None:
        """The next consumer that is ``ready``, among those of the best priority level."""
        candidates = [c for c in self.consumers if ready(c)]
        if not candidates:
            return None
        top = min(c.priority for c in candidates)
        candidates = [c for c in candidates if c.priority == top]
        self._round_robin = (self._round_robin + 1) % len(candidates)
        return candidates[self._round_robin]

    def _send(self, consumer: Consumer, deliveries: list[Delivery]) -> None:
        messages = sum(d.entry.num_messages for d in deliveries)
        size = sum(len(d.entry.body) for d in deliveries)
        consumer.messages_out += messages
        consumer.bytes_out += size
        self.messages_out += messages
        self.bytes_out += size
        consumer.sink.deliver(consumer, deliveries)


class HeldAcks(Protocol):
    """A subscription's pending acks (``engine.pending_ack.PendingAck``), as dispatch asks them what transactions
    hold."""

    def holds(self, entry_id: int, batch_size: int) -> bool: ...

    def held_indexes(self, entry_id: int) -> int: ...


class Subscription(ConsumerGroup):
    """One subscription on one topic partition."""

    def __init__(
        self,
        topic: Topic,
        name: str,
        sub_type: SubType,
        cursor: Cursor,
        durable: bool,
        pending_ack: Callable[[Subscription], HeldAcks],
    ) -> None:
        """``pending_ack`` builds the subscription's pending acks (their class sits in a layer above)."""
        super().__init__(topic.name, name, sub_type)
        self.topic = topic
        self.cursor = cursor
        self.durable = durable
        self.read_position = cursor.mark_delete + 1
        self.redelivery_counts: dict[int, int] = {}
        self._replay: set[int] = set()
        self._continuation = False
        self.pending_ack = pending_ack(self)
        #: Key_Shared: consumers that joined after others, with the read position at their arrival.
        self._recently_joined: dict[Consumer, int] = {}
        #: Shared and Key_Shared: entries its consumers may hold unacknowledged together (0: no limit).
        self.max_unacked = 0
        #: The policy generation the unacknowledged limits were last taken from (-1: never).
        self._limits_generation = -1
        #: Shared and Key_Shared: entries held back by delayed delivery, with the epoch milliseconds they are due at.
        self._delayed: dict[int, int] = {}
        self._delay_timer: Cancellable | None = None
        #: When the delayed-delivery timer last released entries (epoch milliseconds).
        self._last_delay_tick = 0
        #: Whether consumers were told that the terminated topic has nothing more (see _tell_end_of_topic).
        self._end_told = False
        #: Messages per entry of the entries read last (sizes reads to the consumers' permits).
        self._messages_per_entry = 1
        #: Failover: the wait after a change of active consumer, before the consumers are told and the new one gets
        #: messages (see _announce_active); None when not waiting.
        self._failover_wait: Cancellable | None = None

    # -- consumers --------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer, sub_type: SubType, sticky: bool = False) -> None:
        """Attach a consumer, or raise the error Pulsar gives for the conflict."""
        super().add_consumer(consumer, sub_type, sticky)
        if sub_type == SubType.KEY_SHARED and len(self.consumers) > 1:
            # Keys moving to the new consumer may still be unacknowledged at the others: until
            # everything before this point is acknowledged it only gets entries before it.
            self._recently_joined[consumer] = self.read_position

    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach a consumer; what it held unacknowledged goes to the others."""
        if consumer not in self.consumers:
            return
        if self.single_active:
            if consumer is self._active:
                self.read_position = self.cursor.mark_delete + 1
        else:
            self._replay.update(e for e in consumer.pending if not self.cursor.is_acked(e))
        self._detach(consumer)
        consumer.pending.clear()
        self._recently_joined.pop(consumer, None)
        if not self.consumers:
            self.redelivery_counts.clear()
        if not self.consumers and not self.durable:
            self.topic.remove_subscription(self)
        else:
            self.dispatch()

    def _active_changed(self, previous: Consumer) -> None:
        previous.pending.clear()
        self.read_position = self.cursor.mark_delete + 1

    def _announce_active(self) -> None:
        """As Pulsar (activeConsumerFailoverDelayTimeMillis): after a change of active consumer, the consumers are
        told, and the new active one gets messages, only once the delay has passed (a change during the wait is
        told when it ends). The wait lets the previous consumer's in-flight work settle; the notices also reach a
        client after the SUCCESS of the subscribe that caused the change, when it knows the consumer id."""
        delay_ms = self.topic.broker.config.active_consumer_failover_delay_ms
        if delay_ms <= 0:
            self._tell_active()
        elif self._failover_wait is None:
            self._failover_wait = self.topic.clock.call_later(delay_ms / 1000, self._failover_waited)

    def _failover_waited(self) -> None:
        self._failover_wait = None
        if self._active is not None:
            self._tell_active()
        self.dispatch()

    # -- flow, acknowledgements, redelivery -------------------------------------------------

    def flow(self, consumer: Consumer, permits: int) -> None:
        """Grant ``permits`` more messages to a consumer."""
        consumer.permits += permits
        self.dispatch()

    def acknowledge(self, consumer: Consumer | None, acks: Iterable[tuple[int, int | None]], cumulative: bool) -> None:
        """Apply acknowledgements: ``(entry_id, unacked_mask)`` pairs, the mask only for batch-index acks.

        ``consumer`` is None when a committed transaction applies them.
        """
        cursor = self.cursor
        changed = False
        if cumulative:
            for entry_id, mask in acks:
                upto = entry_id if mask is None else entry_id - 1
                before = cursor.mark_delete
                cursor.ack_cumulative(upto)
                if mask is not None:
                    cursor.ack_batch_indexes(entry_id, mask)
                changed = changed or cursor.mark_delete != before or mask is not None
            for c in self.consumers:
                c.pending = {e for e in c.pending if not cursor.is_acked(e)}
            self.redelivery_counts = {e: n for e, n in self.redelivery_counts.items() if e > cursor.mark_delete}
        else:
            for entry_id, mask in acks:
                done = cursor.ack(entry_id) if mask is None else cursor.ack_batch_indexes(entry_id, mask)
                changed = True
                # Pulsar forgets an entry's redelivery count on any individual ack of it, one batch index too.
                self.redelivery_counts.pop(entry_id, None)
                if done or cursor.is_acked(entry_id):
                    for holder in (consumer,) if consumer is not None else self.consumers:
                        holder.pending.discard(entry_id)
                    self._replay.discard(entry_id)
        if changed:
            self.topic.cursor_changed(self)
            if self._recently_joined or self.blocked_on_unacked or any(c.blocked_on_unacked for c in self.consumers):
                self.dispatch()
            if self.topic.terminated is not None:
                self._tell_end_of_topic()

    def redeliver(self, consumer: Consumer, entry_ids: list[int] | None) -> None:
        """Deliver again what a consumer holds unacknowledged (all of it, or the given entries)."""
        if self.single_active or entry_ids is None:
            chosen = set(consumer.pending)
        else:
            chosen = consumer.pending.intersection(entry_ids)
        if self.single_active:
            consumer.pending.clear()
            self.read_position = self.cursor.mark_delete + 1
        else:
            # Pulsar counts redeliveries only on Shared and Key_Shared subscriptions.
            for entry_id in chosen:
                self.redelivery_counts[entry_id] = self.redelivery_counts.get(entry_id, 0) + 1
            consumer.pending -= chosen
            self._replay.update(e for e in chosen if not self.cursor.is_acked(e))
        self.dispatch()

    def redeliver_released(self, entry_ids: list[int]) -> None:
        """Entries an aborted transaction had acknowledged become deliverable again."""
        if self.single_active:
            self.read_position = min(self.read_position, self.cursor.mark_delete + 1)
        else:
            for entry_id in entry_ids:
                if not self.cursor.is_acked(entry_id):
                    self.redelivery_counts[entry_id] = self.redelivery_counts.get(entry_id, 0) + 1
                    self._replay.add(entry_id)
        self.dispatch()

    def give_back(self, entry_ids: list[int]) -> None:
        """Entries a consumer that left held unacknowledged, given back after it left (as :meth:`remove_consumer`
        gives back what it held then): delivered again, to the consumers attached."""
        if self.single_active:
            self.read_position = min(self.read_position, self.cursor.mark_delete + 1)
        else:
            self._replay.update(e for e in entry_ids if not self.cursor.is_acked(e))
        self.dispatch()

    def reset(self, next_entry: int) -> None:
        """Seek: the next entry delivered is ``next_entry``; acknowledgements after it are forgotten."""
        self.cursor.reset(next_entry)
        self.read_position = next_entry
        self._replay.clear()
        self._delayed.clear()
        self.redelivery_counts.clear()
        for consumer in self.consumers:
            consumer.pending.clear()
        self.topic.cursor_changed(self)

    def acknowledge_upto(self, entry_id: int) -> bool:
        """Acknowledge every readable entry up to ``entry_id``, as a cumulative acknowledgement does (clearing the
        backlog, expiry, backlog quotas); True if the cursor moved."""
        upto = min(entry_id, self.topic.read_limit)
        if upto <= self.cursor.mark_delete:
            return False
        self.acknowledge(None, [(upto, None)], cumulative=True)
        return True

    def expire_before(self, cutoff_ms: int) -> bool:
        """Acknowledge every readable entry published before ``cutoff_ms`` (message TTL, expiry, backlog quotas);
        True if the cursor moved."""
        return self.acknowledge_upto(self.topic.entry_at_time(cutoff_ms) - 1)

    # -- dispatch ---------------------------------------------------------------------------

    def dispatch(self) -> None:
        """Send what the consumers have permits for, up to the topic's readable limit."""
        if not self.consumers:
            return
        more = self._dispatch_single() if self.single_active else self._dispatch_spread()
        if more and not self._continuation:
            self._continuation = True
            self.topic.clock.call_later(0, self._continue)
        elif not more and self.topic.terminated is not None:
            self._tell_end_of_topic()

    def _tell_end_of_topic(self) -> None:
        """Tell waiting consumers that their terminated topic has nothing more to deliver."""
        last = self.topic.terminated
        # As Pulsar: once every message is acknowledged, and once per subscription (the C++ client does not know
        # the command and reconnects on it: telling each re-subscribing consumer again would loop).
        if last is None or self.read_position <= last or self._replay or self.backlog() > 0 or self._end_told:
            return
        for consumer in list(self.consumers):
            if consumer.permits > 0 and not consumer.told_end_of_topic:
                consumer.told_end_of_topic = True
                consumer.sink.reached_end_of_topic(consumer)
                self._end_told = True

    def _continue(self) -> None:
        self._continuation = False
        self.dispatch()

    def _dispatch_single(self) -> bool:
        consumer = self._active
        if consumer is None or not consumer.ready() or self._failover_wait is not None:
            return False
        limit = self.topic.read_limit
        position = self.read_position
        deliveries: list[Delivery] = []
        #: Entries and bytes this pass has read: delivered, or passed over (acknowledged, hidden, held).
        read = size = 0
        while consumer.permits > 0 and position <= limit and read < DISPATCH_BUDGET and size < DISPATCH_BYTES:
            entries = self._read(position, limit, consumer.permits, DISPATCH_BYTES - size)
            if not entries:
                position = limit + 1
                break
            for entry in entries:
                entry_id = entry.entry_id
                position = entry_id + 1
                read += 1
                size += len(entry.body)
                if not self._skip(entry):
                    delivery = self._delivery(entry)
                    deliveries.append(delivery)
                    consumer.pending.add(entry_id)
                    consumer.permits -= delivery.permits
                if consumer.permits <= 0 or read >= DISPATCH_BUDGET or size >= DISPATCH_BYTES:
                    break
        self.read_position = position
        if deliveries:
            self._send(consumer, deliveries)
        return consumer.permits > 0 and position <= limit

    def take_limits(self) -> None:
        """Take up the unacknowledged-message limits in force: a topic policy may change while consumers are
        attached, and applies to them as it does in Pulsar."""
        namespaces = self.topic.broker.namespaces
        if self._limits_generation == namespaces.generation:
            return
        limits = namespaces.limits(self.topic.name)
        self._limits_generation = namespaces.generation
        self.max_unacked = limits.max_unacked_per_subscription
        for consumer in self.consumers:
            consumer.max_unacked = limits.max_unacked_per_consumer

    def _dispatch_spread(self) -> bool:
        self.take_limits()
        out: dict[Consumer, list[Delivery]] = {}
        #: Entries and bytes this pass may still read. An entry read counts when the pass is done with it (delivered,
        #: or passed over: acknowledged, hidden, held, put back for later), not when it stays where it was.
        budget, room = DISPATCH_BUDGET, DISPATCH_BYTES
        if self._replay:
            ids = sorted(self._replay)[:budget]
            for entry in self.topic.read_ids(ids, room):
                if self._skip(entry):
                    self._replay.discard(entry.entry_id)
                else:
                    target = self._select(entry)
                    if target is None:
                        continue
                    self._replay.discard(entry.entry_id)
                    self._assign(out, target, entry)
                budget -= 1
                room -= len(entry.body)
            self._replay.difference_update(e for e in ids if self.cursor.is_acked(e))
        limit = self.topic.read_limit
        position = self.read_position
        blocked = False
        while budget > 0 and room > 0 and position <= limit and not blocked and not self.blocked_on_unacked:
            ready = [c for c in self.consumers if c.ready()]
            if len(self._replay) >= MAX_REPLAY_BACKLOG or not ready:
                break
            entries = self._read(position, limit, sum(c.permits for c in ready), room)
            if not entries:
                position = limit + 1
                break
            for entry in entries:
                if not (self._skip(entry) or self._held_back(entry)):
                    target = self._select(entry)
                    if target is None:
                        if self.sub_type != SubType.KEY_SHARED:
                            blocked = True
                            break
                        self._replay.add(entry.entry_id)
                    else:
                        self._assign(out, target, entry)
                position = entry.entry_id + 1
                budget -= 1
                room -= len(entry.body)
                if budget <= 0 or room <= 0:
                    break
        self.read_position = position
        for consumer, deliveries in out.items():
            self._send(consumer, deliveries)
        return budget <= 0 or room <= 0

    def _read(self, position: int, limit: int, permits: int, max_bytes: int) -> list[Entry]:
        """The next entries for ``permits`` messages: as many as the entries read last suggest (Pulsar's
        avgMessagesPerEntry), so that a consumer of large batches does not make a whole chunk be read for one; and
        no more than ``max_bytes`` of them (Pulsar's dispatcherMaxReadSizeBytes), so that a read of large entries
        from the store does not hold up the server.

        An active consumer that reads compacted gets the compacted view up to its horizon first."""
        count = max(1, min(READ_CHUNK, permits // self._messages_per_entry))
        compaction = self.topic.compaction
        if position <= compaction.horizon and self._active is not None and self._active.read_compacted:
            entries = compaction.read(position, count)
            if entries:
                return entries
            position = compaction.horizon + 1
        entries = self.topic.read(position, min(limit, position + count - 1), max_bytes)
        if entries:
            self._messages_per_entry = max(1, sum(e.num_messages for e in entries) // len(entries))
        return entries

    def _held_back(self, entry: Entry) -> bool:
        """Delayed delivery (Shared and Key_Shared, as in Pulsar): hold an entry due after the next tick until then."""
        if self.sub_type not in (SubType.SHARED, SubType.KEY_SHARED) or not entry.deliver_at:
            return False
        if entry.deliver_at <= now_ms(self.topic.clock) + DELAYED_DELIVERY_TICK_MS:
            return False
        self._delayed[entry.entry_id] = entry.deliver_at
        self._schedule_delayed()
        return True

    def _schedule_delayed(self) -> None:
        """Time the next release: when the first held entry is due, but not within a tick of the last release."""
        if self._delay_timer is None and self._delayed:
            now = now_ms(self.topic.clock)
            due_in = max(min(self._delayed.values()) - now, self._last_delay_tick + DELAYED_DELIVERY_TICK_MS - now)
            self._delay_timer = self.topic.clock.call_later(max(due_in, 0) / 1000, self._release_delayed)

    def _release_delayed(self) -> None:
        """Move the entries due within the next tick to the replay set and dispatch them."""
        self._delay_timer = None
        self._last_delay_tick = now_ms(self.topic.clock)
        cutoff = self._last_delay_tick + DELAYED_DELIVERY_TICK_MS
        due = [entry_id for entry_id, at in self._delayed.items() if at <= cutoff]
        for entry_id in due:
            del self._delayed[entry_id]
            if not self.cursor.is_acked(entry_id):
                self._replay.add(entry_id)
        self._schedule_delayed()
        self.dispatch()

    def _assign(self, out: dict[Consumer, list[Delivery]], consumer: Consumer, entry: Entry) -> None:
        delivery = self._delivery(entry)
        out.setdefault(consumer, []).append(delivery)
        consumer.pending.add(entry.entry_id)
        consumer.permits -= delivery.permits

    def _skip(self, entry: Entry) -> bool:
        """Whether dispatch passes over an entry: acknowledged, hidden by transactions, or held."""
        if self.cursor.is_acked(entry.entry_id):
            return True
        # Transactions hide only markers and transactional entries (TransactionBuffer.hides): plain entries, most of
        # them, need not ask.
        if (entry.marker or entry.txn is not None) and self._hidden(entry):
            return True
        return self.pending_ack.holds(entry.entry_id, entry.num_messages)

    def _hidden(self, entry: Entry) -> bool:
        """Whether transactions hide an entry (a marker, or a message of an aborted transaction): if so it is
        acknowledged away, for every subscription."""
        if self.topic.txn_buffer.hides(entry):
            self.cursor.ack(entry.entry_id)
            self.topic.cursor_changed(self)
            return True
        return False

    def _delivery(self, entry: Entry) -> Delivery:
        entry_id = entry.entry_id
        mask = self.cursor.unacked_mask(entry_id)
        held = self.pending_ack.held_indexes(entry_id)
        if held:
            mask = (mask if mask is not None else (1 << entry.num_messages) - 1) & ~held
        return Delivery(entry, self.redelivery_counts.get(entry_id, 0), mask)

    def _select(self, entry: Entry) -> Consumer | None:
        if self.sub_type == SubType.KEY_SHARED:
            consumer = self._owner_of(entry.sticky_key)
            if consumer is None or not consumer.ready():
                return None
            joined_at = self._recently_joined.get(consumer)
            if joined_at is not None:
                if self.cursor.mark_delete + 1 >= joined_at:
                    del self._recently_joined[consumer]
                elif entry.entry_id >= joined_at:
                    return None
            return consumer
        return self._next_round_robin(Consumer.ready)

    # -- figures ----------------------------------------------------------------------------

    @property
    def blocked_on_unacked(self) -> bool:
        """Whether its consumers hold as many unacknowledged entries as the subscription may (Shared and Key_Shared
        only, as in Pulsar): it then dispatches nothing new until some are acknowledged."""
        return 0 < self.max_unacked <= sum(len(c.pending) for c in self.consumers) and not self.single_active

    def backlog(self) -> int:
        """Entries after the cursor that are not acknowledged."""
        last = self.topic.last_confirmed
        above = sum(1 for e in self.cursor.acked if e <= last)
        return max(0, last - self.cursor.mark_delete - above)
