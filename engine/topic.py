"""A topic partition: its log, producers, subscriptions and deduplication state."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Mapping, Sized
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from engine.clock import Clock, now_ms
from engine.cursor import Cursor
from engine.entry import NONE_KEY, Entry
from engine.entry_cache import CacheBudget, EntryCache
from engine.errors import BrokerError
from engine.ledgers import Ledgers
from engine.limits import TopicLimits
from engine.names import TopicName
from engine.store import TopicRecord, up_to_bytes
from engine.subscription_types import SUBSCRIPTION_TYPES, SubType
from engine.transactions import TxnId
from wire.framing import MessageBody, make_body, stored_payload
from wire.message_id import INT64_MAX
from wire.pulsar_api_pb2 import MessageMetadata, ServerError

if TYPE_CHECKING:
    from engine.store import Store

#: Receipt id of a message dropped as a duplicate (Pulsar answers -1:-1).
DUPLICATE = -1
#: Added to a Java long's bits read as unsigned to get the long back.
_U64 = 1 << 64


class AccessMode(IntEnum):
    """Producer access modes, numbered as ``ProducerAccessMode``."""

    SHARED = 0
    EXCLUSIVE = 1
    WAIT_FOR_EXCLUSIVE = 2
    EXCLUSIVE_WITH_FENCING = 3


class TopicPolicies(Protocol):
    """What a topic and its parts ask of the namespace and topic policies (``engine.namespaces.Namespaces``)."""

    #: Changes whenever a policy does (a topic caches what it read until then).
    generation: int

    def limits(self, name: TopicName) -> TopicLimits: ...

    def check_new_producer(self, topic: Topic, now_ms: int) -> None: ...


class TopicConfig(Protocol):
    """The engine settings a topic and its parts read (``engine.broker.BrokerConfig``)."""

    #: Handed to the transaction buffer.
    snapshot_policy: object
    max_message_size: int


class LiveTxn(Protocol):
    """A transaction its coordinator still knows (``engine.coordinator.TxnMeta``), as a topic's parts read it."""

    #: The full names of the partitions it was added to.
    partitions: Collection[str]


class TxnRegistry(Protocol):
    """The coordinators (``engine.coordinator.Coordinators``), as a topic's transaction buffer and its
    subscriptions' pending acks ask them."""

    def live(self, txn: TxnId) -> LiveTxn | None: ...

    def enlist_subscription(self, txn: TxnId, topic: str, subscription: str) -> None: ...


class TopicHost(Protocol):
    """What a topic and its parts need of the broker that holds it, passed down at construction
    (``engine.broker.Broker`` satisfies it): time, the store, the entry cache budget, the policies, the
    coordinators and the group commit."""

    clock: Clock
    store: Store
    config: TopicConfig
    entry_cache: CacheBudget
    #: Full topic name -> last entry, of the terminated topics.
    terminated: dict[str, int]
    namespaces: TopicPolicies
    coordinators: TxnRegistry

    def after_commit(self, callback: Callable[[Any], None], value: Any) -> None: ...

    def staged(self, topic: Topic) -> None: ...

    def request_flush(self) -> None: ...

    def deduplication(self, name: TopicName) -> bool: ...


class Subscriber(Protocol):
    """A consumer subscribing (``engine.subscription.Consumer``), as the topic checks and sets it up."""

    read_compacted: bool
    max_unacked: int


class ConsumerCount(Protocol):
    """A subscription of either domain, as the consumer limits count its consumers."""

    @property
    def consumers(self) -> Sized: ...


class RecoveredAcks(Protocol):
    """A subscription's pending acks (``engine.pending_ack.PendingAck``), as the topic rebuilds them."""

    def recover(self, records: list[tuple[TxnId, str]]) -> None: ...


class TopicSubscription(ConsumerCount, Protocol):
    """A subscription the topic owns (``engine.subscription.Subscription``), as the topic uses it."""

    name: str
    durable: bool
    cursor: Cursor
    sub_type: SubType
    pending_ack: RecoveredAcks

    def add_consumer(self, consumer: Any, sub_type: SubType, sticky: bool) -> None: ...

    def take_limits(self) -> None: ...

    def dispatch(self) -> None: ...

    def close_consumers(self) -> None: ...


class TopicTxnBuffer(Protocol):
    """The topic's transaction buffer (``engine.txn_buffer.TransactionBuffer``), as the topic and dispatch use it."""

    @property
    def max_read_position(self) -> int: ...

    def hides(self, entry: Entry) -> bool: ...

    def appended(self, entry: Entry) -> None: ...

    def plain_appended(self) -> None: ...

    def rolled_back(self, last_confirmed: int) -> None: ...

    def recover(self) -> None: ...


class TopicCompaction(Protocol):
    """The topic's compacted view (``engine.compaction.Compaction``), as dispatch reads it."""

    horizon: int

    def read(self, start: int, count: int) -> list[Entry]: ...


class TopicParts(NamedTuple):
    """How a topic builds the parts it owns, whose classes sit in the layers above it: the broker passes the real
    ones down (``engine.broker.TOPIC_PARTS``)."""

    #: ``(topic, name, sub_type, cursor, durable)``.
    subscription: Callable[..., TopicSubscription]
    #: ``(topic, snapshot_policy)``.
    txn_buffer: Callable[[Topic, Any], TopicTxnBuffer]
    compaction: Callable[[Topic], TopicCompaction]


class ProducerSink(Protocol):
    """Where a producer's server-initiated traffic goes."""

    def close_producer(self, producer: Producer) -> None: ...

    def producer_ready(self, producer: Producer) -> None: ...


@dataclass(eq=False)
class Producer:
    """A producer attached to a topic partition."""

    producer_id: int
    name: str
    access_mode: AccessMode
    epoch: int
    sink: ProducerSink
    #: The topic it is attached to (a ``Topic`` or a ``NonPersistentTopic``), else None.
    topic: ProducerHost | None = None
    #: The schema version the producer declared, if any.
    schema_version: int | None = None
    #: The properties the client gave the producer (reported in topic stats).
    metadata: dict[str, str] = field(default_factory=dict)
    #: Messages and bytes this producer published.
    messages_in: int = 0
    bytes_in: int = 0
    #: The transaction of this producer's last accepted transactional send: its next sends in the same open
    #: transaction need no lookup (a transaction's partitions only grow while it is open).
    #: (The coordinator's ``TxnMeta``, opaque to the topic.)
    accepted_txn: object | None = None


#: Completion of a publish: the entry id (or ``DUPLICATE``), or the error.
PublishCallback = Callable[[int | BrokerError], None]


def check_consumer_limits(
    name: TopicName,
    limits: TopicLimits,
    subscriptions: Mapping[str, ConsumerCount],
    sub_type: SubType,
    subscription: ConsumerCount | None,
    check_types: bool = True,
) -> None:
    """Refuse a consumer a topic's policies do not allow (``subscription``: the one it joins, None for a new one),
    with Pulsar's errors; ``check_types``: whether the subscription types enabled apply (Pulsar's non-persistent
    topics take any)."""
    type_name = SUBSCRIPTION_TYPES[sub_type]
    if check_types and limits.subscription_types and type_name not in limits.subscription_types:
        raise BrokerError(ServerError.NotAllowedError, f"Topic[{name}] doesn't support {type_name} sub type!")
    if subscription is None and 0 < limits.max_subscriptions <= len(subscriptions):
        reason = f"Exceed the maximum number of subscriptions of the topic: {name}"
        raise BrokerError(ServerError.NotAllowedError, reason)
    if 0 < limits.max_consumers <= sum(len(s.consumers) for s in subscriptions.values()):
        raise BrokerError(ServerError.ConsumerBusy, "Topic reached max consumers limit")
    if subscription is not None and 0 < limits.max_consumers_per_subscription <= len(subscription.consumers):
        raise BrokerError(ServerError.ConsumerBusy, "Subscription reached max consumers limit")


class ProducerHost:
    """What topics of both domains share: a name and the producers attached to it, with their access modes."""

    def __init__(self, broker: TopicHost, name: TopicName) -> None:
        self.broker = broker
        self.clock = broker.clock
        self.name = name
        self.producers: list[Producer] = []
        self.waiting_producers: deque[Producer] = deque()
        self.messages_in = 0
        self.bytes_in = 0

    def _check_producer(self) -> None:
        """Raise if this topic takes no producer at all."""

    def add_producer(self, producer: Producer) -> bool:
        """Attach a producer. Returns False if it must wait for exclusive access (WaitForExclusive)."""
        self._check_producer()
        for existing in self.producers:
            if existing.name == producer.name:
                if producer.epoch > existing.epoch:
                    self.remove_producer(existing)
                    existing.sink.close_producer(existing)
                    break
                raise BrokerError(
                    ServerError.ProducerBusy,
                    f"Producer with name '{producer.name}' is already connected to topic '{self.name}'",
                )
        max_producers = self.broker.namespaces.limits(self.name).max_producers
        if 0 < max_producers <= len(self.producers):
            raise BrokerError(ServerError.ProducerBusy, f"Topic '{self.name}' reached max producers limit")
        mode = producer.access_mode
        if mode == AccessMode.EXCLUSIVE_WITH_FENCING:
            for existing in list(self.producers):
                self.remove_producer(existing)
                existing.sink.close_producer(existing)
        elif self.producers:
            exclusive = [p for p in self.producers if p.access_mode != AccessMode.SHARED]
            if mode == AccessMode.WAIT_FOR_EXCLUSIVE:
                producer.topic = self  # type: ignore[assignment]
                self.waiting_producers.append(producer)
                return False
            if exclusive:
                code = ServerError.ProducerBusy if mode == AccessMode.SHARED else ServerError.ProducerFenced
                raise BrokerError(code, f"Topic has an existing exclusive producer: {exclusive[0].name}")
            if mode == AccessMode.EXCLUSIVE:
                raise BrokerError(ServerError.ProducerFenced, "Topic has existing shared producers")
        producer.topic = self  # type: ignore[assignment]
        self.producers.append(producer)
        return True

    def remove_producer(self, producer: Producer) -> None:
        """Detach a producer; a producer waiting for exclusive access may then take over."""
        if producer in self.waiting_producers:
            self.waiting_producers.remove(producer)
        if producer not in self.producers:
            return
        self.producers.remove(producer)
        if not self.producers and self.waiting_producers:
            waiting = self.waiting_producers.popleft()
            self.producers.append(waiting)
            waiting.sink.producer_ready(waiting)


class Topic(ProducerHost):
    """One topic partition (or non-partitioned topic)."""

    def __init__(self, broker: TopicHost, name: TopicName, record: TopicRecord, parts: TopicParts) -> None:
        super().__init__(broker, name)
        self.parts = parts
        self.store = broker.store
        self.topic_id = record.topic_id
        self.ledger_id = record.ledger_id
        self.last_confirmed = self.store.last_entry_id(self.topic_id)
        self.next_entry_id = self.last_confirmed + 1
        #: When an entry last became durable since the topic was loaded (epoch ms; 0: none yet), as a ledger's
        #: last add time.
        self.last_add_ms = 0
        #: The ledgers the entries would lie in (retention deletes whole closed ones); what is stored is in a closed
        #: one, as loading a topic in Pulsar opens a new ledger.
        self.ledgers = Ledgers(self.last_confirmed, now_ms(self.clock))
        #: The last entry of a terminated topic (no more publishes), else None.
        self.terminated: int | None = broker.terminated.get(name.full)
        self._cache = EntryCache(broker.entry_cache)
        self._cache.confirmed = self.last_confirmed
        self.subscriptions: dict[str, TopicSubscription] = {}
        self._sequences = self.store.producer_sequences(self.topic_id)
        self._persisted_sequences = dict(self._sequences)
        #: Sequence ids staged since the last commit was made, and those of the commit in flight: only a commit that
        #: succeeds makes its own durable (a later commit may still fail).
        self._sequences_staged: dict[str, int] = {}
        self._sequences_in_flight: dict[str, int] = {}
        #: ``(namespace policy generation, deduplication on)``, so that a publish need not look the policy up.
        self._deduplication = (-1, False)
        self._dirty_cursors: dict[TopicSubscription, None] = {}
        #: A failed commit lost entries of this topic (its producers are disconnected once they are told).
        self.lost_entries = False
        #: Cursors staged for the commit in flight: written again if it fails.
        self._cursors_in_flight: dict[TopicSubscription, None] = {}
        #: Durable subscriptions created here whose cursor no commit has stored yet.
        self._unstored: dict[TopicSubscription, None] = {}
        for sub_name, state in self.store.cursors(self.topic_id).items():
            loaded = Cursor.loads(state)
            self.subscriptions[sub_name] = parts.subscription(self, sub_name, SubType.EXCLUSIVE, loaded, durable=True)
        self.txn_buffer = parts.txn_buffer(self, broker.config.snapshot_policy)
        self.txn_buffer.recover()
        self.compaction = parts.compaction(self)
        held: dict[str, list[tuple[TxnId, str]]] = {}
        for sub_name, most, least, record in self.store.pending_acks(self.topic_id):
            held.setdefault(sub_name, []).append((TxnId(most, least), record))
        for sub_name, records in held.items():
            if sub_name in self.subscriptions:
                self.subscriptions[sub_name].pending_ack.recover(records)

    # -- reading -----------------------------------------------------------------------------

    @property
    def read_limit(self) -> int:
        """The last entry consumers may read: the transaction buffer's max read position."""
        return self.txn_buffer.max_read_position

    def read(self, start: int, end: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries ``start..end`` (inclusive) of the confirmed log; with ``max_bytes``, only the first of them, up to
        the one whose body reaches that many bytes (at least one), so that a read of large entries stays small."""
        end = min(end, self.last_confirmed)
        if start > end:
            return []
        first = self._cache.first
        if first is None:
            first = self.next_entry_id
        entries: list[Entry] = []
        if start < first:
            rows = self.store.read(self.topic_id, start, min(end, first - 1), max_bytes)
            entries = [Entry.from_body(entry_id, body) for entry_id, body in rows]
            if max_bytes is not None:
                max_bytes -= sum(len(entry.body) for entry in entries)
                if max_bytes <= 0:
                    return entries
            start = first
        if end >= start:
            cached = self._cache.span(start, end)
            entries += cached if max_bytes is None else up_to_bytes(cached, max_bytes, _body_size)
        return entries

    def read_ids(self, entry_ids: list[int], max_bytes: int | None = None) -> list[Entry]:
        """The given confirmed entries, in order; ``max_bytes`` as in :meth:`read`."""
        found: list[Entry] = []
        missing: list[int] = []
        for entry_id in entry_ids:
            if entry_id > self.last_confirmed:
                continue
            entry = self._cache.get(entry_id)
            if entry is None:
                missing.append(entry_id)
            else:
                found.append(entry)
        if missing:
            rows = self.store.read_ids(self.topic_id, missing, max_bytes)
            found.extend(Entry.from_body(e, b) for e, b in rows)
            if max_bytes is not None and sum(len(body) for _, body in rows) >= max_bytes:
                # The read may have stopped at its bytes: what follows the last entry it read waits for the next call.
                found = [entry for entry in found if entry.entry_id <= rows[-1][0]]
            found.sort(key=lambda entry: entry.entry_id)
        return found if max_bytes is None else up_to_bytes(found, max_bytes, _body_size)

    def last_publish_ms(self) -> int:
        """Pulsar's ``lastPublishTimeStamp``: when an entry last became durable since the topic was loaded, else the
        publish time of the last entry (0 if there is none)."""
        if self.last_add_ms:
            return self.last_add_ms
        if self.last_confirmed < 0:
            return 0
        last = self.read(self.last_confirmed, self.last_confirmed)
        return last[0].publish_time if last else 0

    def last_entry(self) -> Entry | None:
        """The last entry a consumer can be given: markers and aborted messages do not count."""
        end, window = self.read_limit, 1
        while end >= 0:
            # The last entry alone first: it is the answer unless transactions ended after it, and an entry read
            # from the store may be large.
            start = max(0, end - window + 1)
            for entry in reversed(self.read(start, end)):
                if not self.txn_buffer.hides(entry):
                    return entry
            end, window = start - 1, min(window * 10, 100)
        return None

    def entry_at_time(self, publish_time_ms: int) -> int:
        """The first entry published at or after the time (the end of the log if none)."""
        found = self.store.entry_at_time(self.topic_id, publish_time_ms)
        return self.last_confirmed + 1 if found is None else found

    def first_entry_id(self) -> int:
        """The first entry still stored; if none is, the first one after the committed log (entries staged for the
        commit in flight count: a subscription created at the earliest position must not start after them; entries
        retention deletes do not count from the moment it decides to)."""
        first = self.store.first_entry_id(self.topic_id)
        return self.last_confirmed + 1 if first < 0 else max(first, self.ledgers.first_kept)

    # -- producers -----------------------------------------------------------------------------

    def _check_producer(self) -> None:
        if self.terminated is not None:
            raise BrokerError(ServerError.TopicTerminatedError, f"Topic {self.name} was already terminated")
        self.broker.namespaces.check_new_producer(self, now_ms(self.broker.clock))

    def last_sequence_id(self, producer_name: str) -> int:
        """The highest stored sequence id of a producer name (-1 if none or deduplication is off)."""
        if not self._deduplicating():
            return -1
        return self._persisted_sequences.get(producer_name, -1)

    # -- publishing --------------------------------------------------------------------------

    def publish(
        self,
        producer: Producer,
        sequence_id: int,
        highest_sequence_id: int,
        body: bytes,
        metadata: MessageMetadata,
        done: PublishCallback,
        txn: TxnId | None = None,
    ) -> None:
        """Append an entry; ``done`` runs once it is durable (or dropped as a duplicate).

        A transactional entry (``txn``) stays invisible until its transaction commits.
        """
        if self.terminated is not None:
            self.broker.after_commit(done, self._terminated_error())
            return
        self.broker.after_commit(
            done, self._stage(producer, [(sequence_id, highest_sequence_id, body, metadata)], txn)[0]
        )

    def publish_run(
        self,
        producer: Producer,
        sends: list[tuple[int, int, MessageBody]],
        done: Callable[[list[int | BrokerError] | BrokerError], None],
    ) -> None:
        """Append the plain (non-transactional) messages ``(sequence id, highest sequence id, body)`` that one producer
        sent in a row, each as :meth:`publish` does; ``done`` runs once they are durable, with the result of each in
        order (an entry id, ``DUPLICATE`` or the error of that message), or with the error of the commit.

        The sequence ids are as the SENDs carried them (unsigned 64-bit; deduplication compares them as Java longs,
        so a SEND without a highest sequence id gives 2**64 - 1, which compares as -1). One call and one completion
        serve the whole run, and the policies are read once for it.
        """
        if self.terminated is not None:
            self.broker.after_commit(done, [self._terminated_error()] * len(sends))
            return
        self.broker.after_commit(done, self._stage_run(producer, sends))

    def publish_txn_run(
        self,
        producer: Producer,
        txn: TxnId,
        sends: list[tuple[int, int, MessageBody]],
        done: Callable[[list[int | BrokerError] | BrokerError], None],
    ) -> None:
        """Append messages ``(sequence id, highest sequence id, body)`` that one producer sent in a row in ``txn``
        (each already accepted in it), each as :meth:`publish` does; ``done`` runs once with the results, as
        :meth:`publish_run`'s. The sequence ids are as the SENDs carried them (unsigned 64-bit)."""
        if self.terminated is not None:
            self.broker.after_commit(done, [self._terminated_error()] * len(sends))
            return
        self.broker.after_commit(done, self._stage_txn_run(producer, txn, sends))

    def _terminated_error(self) -> BrokerError:
        return BrokerError(ServerError.TopicTerminatedError, f"Topic {self.name} was already terminated")

    def _stage(
        self, producer: Producer, sends: list[tuple[int, int, bytes, MessageMetadata]], txn: TxnId | None
    ) -> list[int | BrokerError]:
        """Stage each message (in ``txn``, if given) unless it is refused or a duplicate; what each sender is
        answered once the commit is made: its entry id, ``DUPLICATE`` or the error."""
        max_size = self.broker.namespaces.limits(self.name).max_message_size
        deduplicating = self._deduplicating()
        sequences, sequences_staged = self._sequences, self._sequences_staged
        name = producer.name
        cache, store, topic_id, txn_buffer = self._cache, self.store, self.topic_id, self.txn_buffer
        staged = False
        messages = size = 0
        results: list[int | BrokerError] = []
        for sequence_id, highest_sequence_id, body, metadata in sends:
            if max_size is not None and len(body) > max_size:
                results.append(BrokerError(ServerError.NotAllowedError, "Exceed maximum message size"))
                continue
            if deduplicating:
                highest = max(sequence_id, highest_sequence_id)
                if sequence_id <= sequences.get(name, -1):
                    results.append(DUPLICATE)
                    continue
                sequences[name] = sequences_staged[name] = highest
                store.stage_sequence(topic_id, name, highest)
            if txn is not None and (metadata.txnid_most_bits, metadata.txnid_least_bits) != txn:
                # Recovery finds transactions through the stored metadata, so it must name the transaction.
                metadata.txnid_most_bits, metadata.txnid_least_bits = txn
                body = make_body(metadata, stored_payload(body))
            elif txn is None and (metadata.HasField("txnid_most_bits") or metadata.HasField("txnid_least_bits")):
                # A plain SEND whose metadata names a transaction is a plain message, as Pulsar publishes it. Left
                # in, the transaction buffer (now, and at recovery) would wait for a transaction nobody ends.
                metadata.ClearField("txnid_most_bits")
                metadata.ClearField("txnid_least_bits")
                body = make_body(metadata, stored_payload(body))
            # The id is taken once the entry is described: a message that cannot be must not leave a hole in the log.
            entry = Entry.from_metadata(self.next_entry_id, body, metadata)
            self.next_entry_id += 1
            cache.append(entry)
            store.stage_entry(topic_id, entry.entry_id, entry.publish_time, body)
            if not staged:
                self.broker.staged(self)
                staged = True
            messages += entry.num_messages
            size += len(body)
            if entry.txn is not None:
                txn_buffer.appended(entry)
            else:
                txn_buffer.plain_appended()
            results.append(entry.entry_id)
        self.messages_in += messages
        self.bytes_in += size
        producer.messages_in += messages
        producer.bytes_in += size
        return results

    def _stage_run(self, producer: Producer, sends: list[tuple[int, int, MessageBody]]) -> list[int | BrokerError]:
        """What :meth:`_stage` does for plain messages, for a run: an entry whose metadata was only scanned (see
        :func:`wire.framing.scan_plain_metadata`) is described without a protobuf object, and the run's entries go
        into the cache and the staging area together."""
        max_size = self.broker.namespaces.limits(self.name).max_message_size
        deduplicating = self._deduplicating()
        sequences, sequences_staged = self._sequences, self._sequences_staged
        name = producer.name
        store, topic_id, txn_buffer = self.store, self.topic_id, self.txn_buffer
        from_plain = Entry.from_plain
        staged = False
        messages = size = 0
        entry_id = self.next_entry_id
        entries: list[Entry] = []
        rows: list[tuple[int, int, bytes]] = []
        results: list[int | BrokerError] = []
        try:
            for sequence_id, highest_sequence_id, message in sends:
                body = message.body
                if max_size is not None and len(body) > max_size:
                    results.append(BrokerError(ServerError.NotAllowedError, "Exceed maximum message size"))
                    continue
                if deduplicating:
                    if sequence_id > INT64_MAX:
                        sequence_id -= _U64
                    if highest_sequence_id > INT64_MAX:
                        highest_sequence_id -= _U64
                    highest = max(sequence_id, highest_sequence_id)
                    if sequence_id <= sequences.get(name, -1):
                        results.append(DUPLICATE)
                        continue
                    sequences[name] = sequences_staged[name] = highest
                    store.stage_sequence(topic_id, name, highest)
                plain = message.plain
                if plain is not None:
                    publish_time, batch = plain
                    if batch is None:  # a single message, as Entry.from_plain describes it
                        entry = Entry(entry_id, body, 1, False, publish_time, NONE_KEY)
                        messages += 1
                    else:
                        entry = from_plain(entry_id, body, publish_time, batch)
                        messages += entry.num_messages
                    rows.append((entry_id, publish_time, body))
                else:
                    metadata = message.metadata
                    if metadata.HasField("txnid_most_bits") or metadata.HasField("txnid_least_bits"):
                        # A plain SEND whose metadata names a transaction is a plain message (see _stage).
                        metadata.ClearField("txnid_most_bits")
                        metadata.ClearField("txnid_least_bits")
                        body = make_body(metadata, stored_payload(body))
                    # The id is taken once the entry is described: a message that cannot be must not leave a hole.
                    entry = Entry.from_metadata(entry_id, body, metadata)
                    messages += entry.num_messages
                    rows.append((entry_id, entry.publish_time, body))
                entries.append(entry)
                results.append(entry_id)
                entry_id += 1
                if not staged:
                    self.broker.staged(self)
                    staged = True
                size += len(body)
                txn_buffer.plain_appended()
        finally:
            self.next_entry_id = entry_id
            if entries:
                self._cache.extend(entries, size)
                store.stage_entries(topic_id, rows)
        self.messages_in += messages
        self.bytes_in += size
        producer.messages_in += messages
        producer.bytes_in += size
        return results

    def _stage_txn_run(
        self, producer: Producer, txn: TxnId, sends: list[tuple[int, int, MessageBody]]
    ) -> list[int | BrokerError]:
        """What :meth:`_stage` does for messages in ``txn``, for a run, with the run's entries going into the cache and
        the staging area together (as in :meth:`_stage_run`).

        The transaction buffer hears of an entry only when its transaction is not among those open here
        (:meth:`TransactionBuffer.appended` does nothing for the others): that may append an abort marker after the
        entry, so the entries before it, and it, are put in place first."""
        max_size = self.broker.namespaces.limits(self.name).max_message_size
        deduplicating = self._deduplicating()
        sequences, sequences_staged = self._sequences, self._sequences_staged
        name = producer.name
        store, topic_id, txn_buffer, cache = self.store, self.topic_id, self.txn_buffer, self._cache
        ongoing = txn_buffer.ongoing
        from_metadata, from_plain = Entry.from_metadata, Entry.from_plain
        staged = False
        messages = size = pending_size = 0
        entries: list[Entry] = []
        rows: list[tuple[int, int, bytes]] = []
        results: list[int | BrokerError] = []
        try:
            for sequence_id, highest_sequence_id, message in sends:
                body = message.body
                if max_size is not None and len(body) > max_size:
                    results.append(BrokerError(ServerError.NotAllowedError, "Exceed maximum message size"))
                    continue
                if deduplicating:
                    if sequence_id > INT64_MAX:
                        sequence_id -= _U64
                    if highest_sequence_id > INT64_MAX:
                        highest_sequence_id -= _U64
                    highest = max(sequence_id, highest_sequence_id)
                    if sequence_id <= sequences.get(name, -1):
                        results.append(DUPLICATE)
                        continue
                    sequences[name] = sequences_staged[name] = highest
                    store.stage_sequence(topic_id, name, highest)
                scanned = message.txn
                if scanned is not None and scanned[2] == txn[0] and scanned[3] == txn[1]:
                    # Metadata only scanned (wire.framing.scan_txn_metadata) that names this transaction: described
                    # as Entry.from_metadata describes it.
                    publish_time, batch, most, least = scanned
                    entry = from_plain(self.next_entry_id, body, publish_time, batch, (most, least))
                else:
                    metadata = message.metadata
                    if (metadata.txnid_most_bits, metadata.txnid_least_bits) != txn:
                        # Recovery finds transactions through the stored metadata, so it must name the transaction.
                        metadata.txnid_most_bits, metadata.txnid_least_bits = txn
                        body = make_body(metadata, stored_payload(body))
                    # The id is taken once the entry is described: a message that cannot be must not leave a hole.
                    entry = from_metadata(self.next_entry_id, body, metadata)
                self.next_entry_id += 1
                entries.append(entry)
                rows.append((entry.entry_id, entry.publish_time, body))
                if not staged:
                    self.broker.staged(self)
                    staged = True
                messages += entry.num_messages
                size += len(body)
                pending_size += len(body)
                results.append(entry.entry_id)
                if entry.txn is None:
                    txn_buffer.plain_appended()
                elif entry.txn not in ongoing:  # a TxnId equals and hashes as its (most, least) tuple
                    cache.extend(entries, pending_size)
                    store.stage_entries(topic_id, rows)
                    entries, rows, pending_size = [], [], 0
                    txn_buffer.appended(entry)
        finally:
            if entries:
                cache.extend(entries, pending_size)
                store.stage_entries(topic_id, rows)
        self.messages_in += messages
        self.bytes_in += size
        producer.messages_in += messages
        producer.bytes_in += size
        return results

    def _deduplicating(self) -> bool:
        generation = self.broker.namespaces.generation
        if self._deduplication[0] != generation:
            self._deduplication = (generation, self.broker.deduplication(self.name))
        return self._deduplication[1]

    def append_marker(self, body: bytes, metadata: MessageMetadata) -> int:
        """Append a server-written marker entry; returns its id."""
        return self._append(body, metadata).entry_id

    def _append(self, body: bytes, metadata: MessageMetadata) -> Entry:
        # The id is taken once the entry is described: a message that cannot be must not leave a hole in the log.
        entry = Entry.from_metadata(self.next_entry_id, body, metadata)
        self.next_entry_id += 1
        self._cache.append(entry)
        self.store.stage_entry(self.topic_id, entry.entry_id, entry.publish_time, body)
        self.broker.staged(self)
        return entry

    def committed(self, upto: int) -> None:
        """Staged entries up to ``upto`` became durable: make them readable and dispatch."""
        if upto > self.last_confirmed:
            self.last_add_ms = now_ms(self.broker.clock)
            self.last_confirmed = upto
        last_confirmed = self.last_confirmed
        self.txn_buffer.confirmed(last_confirmed)
        # Most commits carry no cursor and no sequence id of this topic: the empty ones are kept as they are.
        if self._cursors_in_flight:
            unstored = self._unstored
            for subscription in self._cursors_in_flight:
                unstored.pop(subscription, None)
            self._cursors_in_flight = {}
        if self._sequences_in_flight:
            self._persisted_sequences.update(self._sequences_in_flight)
            self._sequences_in_flight = {}
        self._cache.confirm(last_confirmed)
        for subscription in list(self.subscriptions.values()):
            subscription.dispatch()

    def commit_failed(self) -> bool:
        """Staged entries were lost: forget them (their producers are told). Cursors staged with them are changed
        again, to be written by a later commit; True if there are any."""
        self.lost_entries = self.next_entry_id > self.last_confirmed + 1
        self._cache.drop_unconfirmed()
        self.next_entry_id = self.last_confirmed + 1
        self._sequences = dict(self._persisted_sequences)
        self._sequences_staged, self._sequences_in_flight = {}, {}
        self.txn_buffer.rolled_back(self.last_confirmed)
        self._dirty_cursors |= {s: None for s in self._cursors_in_flight if self.subscriptions.get(s.name) is s}
        self._cursors_in_flight = {}
        return bool(self._dirty_cursors)

    def disconnect_producers(self) -> None:
        """Close every producer (after entries were lost), as Pulsar fences a topic whose write failed and disconnects
        its producers: their clients create them again and resend what was not receipted, in order. A send already on
        its way from a closed producer is not taken, so it cannot be stored ahead of the lost ones (and make
        deduplication drop their resends)."""
        self.lost_entries = False
        for producer in list(self.producers):
            self.remove_producer(producer)
            producer.sink.close_producer(producer)

    # -- subscriptions -----------------------------------------------------------------------

    def subscribe(
        self,
        sub_name: str,
        sub_type: SubType,
        consumer: Subscriber,
        *,
        durable: bool,
        earliest: bool,
        start_entry: int | None,
        sticky: bool,
    ) -> TopicSubscription:
        """Attach a consumer, creating the subscription if needed.

        A new subscription starts at the first entry (``earliest``), after the last (latest), or, for a
        non-durable one, at ``start_entry`` when given.
        """
        if consumer.read_compacted and sub_type not in (SubType.EXCLUSIVE, SubType.FAILOVER):
            raise BrokerError(
                ServerError.NotAllowedError, "readCompacted only allowed on failover or exclusive subscriptions"
            )
        subscription = self.subscriptions.get(sub_name)
        created = subscription is None
        limits = self.broker.namespaces.limits(self.name)
        check_consumer_limits(self.name, limits, self.subscriptions, sub_type, subscription)
        if subscription is None:
            if start_entry is not None:
                first = start_entry
            elif earliest:
                first = self.first_entry_id()
            else:
                first = self.read_limit + 1
            if consumer.read_compacted and 0 <= first <= self.first_entry_id() and self.compaction.horizon >= 0:
                # Retention may have deleted entries the compacted view still holds (it deletes what the compaction
                # cursor consumed): a reader from the start reads the whole view, as Pulsar's compacted ledger.
                first = 0
            subscription = self.parts.subscription(self, sub_name, sub_type, Cursor(first - 1), durable)
        elif not subscription.consumers:
            subscription.sub_type = sub_type
        subscription.add_consumer(consumer, sub_type, sticky)
        subscription.take_limits()
        consumer.max_unacked = limits.max_unacked_per_consumer
        if created:
            self.subscriptions[sub_name] = subscription
            if durable:
                self._unstored[subscription] = None
                self.cursor_changed(subscription)
        return subscription

    def when_stored(self, subscription: TopicSubscription, callback: Callable[[BrokerError | None], None]) -> None:
        """Call ``callback(None)`` once ``subscription`` is stored (at once if it is, or is not durable), or
        ``callback(error)`` if the commit that was to store it fails: Pulsar answers a SUBSCRIBE that creates a
        durable subscription once its cursor is stored, so a subscription its client was told of survives a crash."""
        if subscription not in self._unstored:
            callback(None)
            return
        self.cursor_changed(subscription)  # in the next commit, whatever became of an earlier one
        self.broker.after_commit(callback, None)

    def create_subscription(self, sub_name: str, next_entry: int) -> TopicSubscription:
        """Create a durable subscription with no consumer whose next entry is ``next_entry`` (admin)."""
        subscription = self.parts.subscription(self, sub_name, SubType.EXCLUSIVE, Cursor(next_entry - 1), durable=True)
        self.subscriptions[sub_name] = subscription
        self.cursor_changed(subscription)
        return subscription

    def remove_subscription(self, subscription: TopicSubscription) -> None:
        """Delete a subscription and its durable cursor."""
        if self.subscriptions.get(subscription.name) is subscription:
            del self.subscriptions[subscription.name]
            self._dirty_cursors.pop(subscription, None)
            self._unstored.pop(subscription, None)
            if subscription.durable:
                self.store.stage_cursor(self.topic_id, subscription.name, None)
                self.broker.staged(self)

    def cursor_changed(self, subscription: TopicSubscription) -> None:
        """Stage a durable cursor for the next commit."""
        if subscription.durable and self.subscriptions.get(subscription.name) is subscription:
            self._dirty_cursors[subscription] = None
            self.broker.staged(self)

    def stage_cursors(self) -> None:
        """Write every changed cursor (and a transaction-buffer snapshot taken) into the store's staging area, as a
        commit is made; the sequence ids staged so far are this commit's."""
        self.txn_buffer.stage_snapshot_write()
        self._sequences_in_flight, self._sequences_staged = self._sequences_staged, {}
        for subscription in self._dirty_cursors:
            self.store.stage_cursor(self.topic_id, subscription.name, subscription.cursor.dumps())
        self._cursors_in_flight, self._dirty_cursors = self._dirty_cursors, {}

    def close(self) -> None:
        """Disconnect every producer and consumer (topic unload or deletion)."""
        for producer in list(self.producers) + list(self.waiting_producers):
            self.remove_producer(producer)
            producer.sink.close_producer(producer)
        for subscription in self.subscriptions.values():
            subscription.close_consumers()
        self.broker.entry_cache.forget(self._cache)


def _body_size(entry: Entry) -> int:
    return len(entry.body)
