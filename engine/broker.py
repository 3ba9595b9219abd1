"""The broker facade: namespaces, topics and partitioned metadata, and the group commit."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.authorization import Authorization
from engine.clock import Clock, now_ms
from engine.compaction import Compaction
from engine.coordinator import COORDINATOR_ASSIGN_TOPIC, Coordinators
from engine.entry_cache import CacheBudget
from engine.errors import BrokerError
from engine.ledgers import LedgerRollover
from engine.names import TopicName
from engine.namespaces import Namespaces
from engine.non_persistent import NonPersistentTopic
from engine.pending_ack import PendingAck
from engine.schemas import SchemaRegistry
from engine.stats import BrokerStats
from engine.store import TOPIC_CREATED, StagedWrites, Store, StoreFullError, TopicRecord
from engine.subscription import Subscription
from engine.topic import Topic, TopicParts
from engine.topic_list import TopicListWatches
from engine.txn_buffer import SnapshotPolicy, TransactionBuffer
from wire.framing import DEFAULT_MAX_MESSAGE_SIZE
from wire.pulsar_api_pb2 import ServerError

log = logging.getLogger(__name__)

#: Namespaces that exist from the start.
BUILTIN_NAMESPACES = ("public/default", "pulsar/system")


@dataclass
class BrokerConfig:
    """Behaviour switches of the engine."""

    cluster: str = "standalone"
    #: Partitions of auto-created topics; 0 creates non-partitioned topics (Pulsar's default).
    default_partitions: int = 0
    #: Drop messages whose producer name and sequence id were already stored.
    deduplication: bool = False
    #: Create topics on first use.
    auto_topic_creation: bool = True
    #: Transaction coordinators (partitions of the coordinator-assign system topic).
    transaction_coordinators: int = 16
    #: When transaction buffers snapshot their state.
    snapshot_policy: SnapshotPolicy = field(default_factory=SnapshotPolicy)
    #: Testing aid: milliseconds between a transaction's COMMITTING/ABORTING record and its markers.
    txn_end_delay_ms: int = 0
    #: Bytes of entries all topics keep in memory together for dispatch (Pulsar's managedLedgerCacheSizeMB).
    entry_cache_bytes: int = 128 * 1024 * 1024
    #: The largest message taken (Pulsar's ``maxMessageSize``): also bounds what a payload may decompress to.
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    #: Check roles' permissions (Pulsar's authorizationEnabled), and the roles that may do anything.
    authorization_enabled: bool = False
    super_user_roles: tuple[str, ...] = ()
    #: Failover: milliseconds from a change of active consumer to the notices and the new one's first messages
    #: (Pulsar's activeConsumerFailoverDelayTimeMillis); 0: at once.
    active_consumer_failover_delay_ms: int = 0
    #: When a topic's ledgers roll over (and so when retention may delete acknowledged data).
    ledger_rollover: LedgerRollover = field(default_factory=LedgerRollover)
    #: ``(minutes, megabytes)`` of retention of a topic without a policy (Pulsar's defaultRetentionTimeInMinutes and
    #: defaultRetentionSizeInMB, both 0: acknowledged data goes once its ledger is closed; -1: no limit).
    default_retention: tuple[int, int] = (0, 0)


#: The parts a topic owns, built by the classes of the layers above the topic: subscriptions (each with its pending
#: acks), the transaction buffer and the compacted view.
TOPIC_PARTS = TopicParts(
    subscription=functools.partial(Subscription, pending_ack=PendingAck),
    txn_buffer=TransactionBuffer,
    compaction=Compaction,
)
#: A commit that replies wait for and that holds at most this many entries and bytes counts as small (see
#: :class:`CommitRunner`): a few transactions' sends and markers, or a lone message.
SMALL_COMMIT_ENTRIES = 32
SMALL_COMMIT_BYTES = 256 * 1024
#: Seconds before acknowledgements a failed commit lost are written again (a full disk, until space comes back).
COMMIT_RETRY_SECONDS = 1.0


class CommitRunner(Protocol):
    """Runs group commits: ``work`` (the store write), then ``done(error or None)`` on the engine's thread.

    ``small`` marks a commit that is little work and that replies wait for: a runner with a thread of its own
    may run it on the engine's thread instead, where it costs no hand-over to the thread and back.
    """

    def run(self, work: Callable[[], None], done: Callable[[BaseException | None], None], small: bool) -> None: ...

    def drain(self) -> None:
        """Wait for the commit in flight, if any."""
        ...


class InlineCommits:
    """Commits on the calling thread: simple and deterministic (tests, tools)."""

    def run(self, work: Callable[[], None], done: Callable[[BaseException | None], None], small: bool) -> None:
        try:
            work()
        except Exception as exc:
            done(exc)
            return
        done(None)

    def drain(self) -> None:
        pass


class Broker:
    """All topics of this endpoint, backed by one :class:`Store`."""

    def __init__(
        self, store: Store, clock: Clock, config: BrokerConfig | None = None, commits: CommitRunner | None = None
    ) -> None:
        self.store = store
        self.clock = clock
        self.commits = commits or InlineCommits()
        self._commit_in_flight = False
        self.config = config or BrokerConfig()
        self.namespaces = Namespaces(store, self.config.cluster, BUILTIN_NAMESPACES)
        self.authorization = Authorization(
            self.namespaces, self.config.authorization_enabled, self.config.super_user_roles
        )
        self.schemas = SchemaRegistry(
            store,
            lambda topic: self.namespaces.schema_strategy(TopicName.parse(topic)),
            lambda topic: self.namespaces.allow_auto_update_schema(TopicName.parse(topic).namespace_name),
            clock,
        )
        self.stats = BrokerStats(store, clock)
        self.topics: dict[str, Topic] = {}
        #: Called with each topic partition as it is loaded (or created), before anyone uses it.
        self.topic_loaded: list[Callable[[Topic], None]] = []
        self.entry_cache = CacheBudget(self.config.entry_cache_bytes)
        #: Non-persistent topic partitions, in memory only (a restart forgets them).
        self.non_persistent: dict[str, NonPersistentTopic] = {}
        self._records = store.topics()
        self._creation_times = {name: int(ms) for name, ms in store.metadata(TOPIC_CREATED).items()}
        self._partitioned = store.partitioned_topics()
        #: Watches of namespaces' topic lists (pattern consumers), told of every topic that comes or goes.
        self.topic_watches = TopicListWatches(self.topics_of_namespace)
        #: Terminated topic partitions and their last entry.
        self.terminated = {name: int(last) for name, last in store.metadata("terminated").items()}
        try:
            self._boot = store.next_value("boot")
        except StoreFullError as exc:
            # Start all the same: what is stored can be read and consumed; writes fail until space comes back.
            log.error("%s: serving reads; writes fail until space comes back", exc)
            self._boot = now_ms(clock)
        #: Commits that failed since the last one that succeeded (a full disk), logged when the streak begins and ends.
        self._failed_commits = 0
        self._producer_names = 0
        self._staged_topics: dict[Topic, None] = {}
        self._completions: list[tuple[Callable[[Any], None], Any]] = []
        self._flush_scheduled = False
        self._flush_after_commit = False
        self.coordinators = Coordinators(self, self.config.transaction_coordinators, self.config.txn_end_delay_ms)
        self.stats.recover_start_ms = self.stats.started_ms
        self.coordinators.recover()
        self.stats.recover_end_ms = now_ms(clock)

    # -- names and metadata --------------------------------------------------------------------

    def _check_namespace(self, name: TopicName) -> None:
        if name.namespace_name not in self.namespaces:
            raise BrokerError(ServerError.TopicNotFound, "Namespace not found")

    def partitioned_metadata(self, topic: str) -> int:
        """Partition count of a topic (0: non-partitioned), creating its metadata if auto-creation says so."""
        name = TopicName.parse(topic)
        self._check_namespace(name)
        if name.full == COORDINATOR_ASSIGN_TOPIC:
            return len(self.coordinators)
        if name.partition_index >= 0:
            return 0
        partitions = self._partitioned.get(name.full)
        if partitions is not None:
            return partitions
        if name.full in self._records or name.full in self.non_persistent:
            return 0
        allowed, partitions = self.auto_creation(name)
        if not allowed or partitions <= 0:
            return 0
        self.create_partitioned_topic(name.full, partitions)
        return partitions

    def auto_creation(self, name: TopicName) -> tuple[bool, int]:
        """Whether a missing topic is created on first use, and its partitions (0: non-partitioned).

        The namespace's ``autoTopicCreationOverride`` policy wins over the broker's settings.
        """
        override = self.namespaces.auto_topic_creation(name.namespace_name)
        if override is not None:
            return override
        return self.config.auto_topic_creation, self.config.default_partitions

    def deduplication(self, name: TopicName) -> bool:
        """Whether a topic drops re-sent messages: its own or its namespace's policy, else the broker's setting."""
        enabled = self.namespaces.deduplication(name)
        return self.config.deduplication if enabled is None else enabled

    def partitions_of(self, topic: str) -> int | None:
        """The partition count of a partitioned topic, None for any other name."""
        return self._partitioned.get(topic)

    def exists(self, topic: str) -> bool:
        """Whether a topic partition (or non-partitioned topic) has a log."""
        return topic in self._records

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        """Record a partitioned topic (its partitions are created on first use)."""
        name = TopicName.parse(topic)
        self._partitioned[name.full] = partitions
        self.store.set_partitioned_topic(name.full, partitions)
        self.topic_watches.changed(name.namespace_name)

    def topic(self, topic: str, create: bool = True) -> Topic:
        """The loaded topic partition, loading or creating it as needed."""
        name = TopicName.parse(topic)
        loaded = self.topics.get(name.full)
        if loaded is not None:
            return loaded
        self._check_namespace(name)
        if not name.persistent:
            # Only client_topic() serves them: callers of this one want a log.
            raise BrokerError(ServerError.NotAllowedError, f"{name.full} is a non-persistent topic")
        record = self._records.get(name.full)
        if record is None:
            self._check_new(name, create)
            record = self._create(name)
        loaded = Topic(self, name, record, TOPIC_PARTS)
        self.topics[name.full] = loaded
        for listener in self.topic_loaded:
            listener(loaded)
        return loaded

    def unload(self, topic: Topic) -> None:
        """Unload a topic partition as Pulsar does, which loads it again on its next use: its clients are
        disconnected and its open ledger closes (the would-be ledgers of :mod:`engine.ledgers`)."""
        topic.close()
        topic.ledgers.reopen(topic.next_entry_id - 1, now_ms(self.clock))
        for listener in self.topic_loaded:
            listener(topic)

    def _check_new(self, name: TopicName, create: bool) -> None:
        """Raise unless a topic partition that does not exist yet may come into being now."""
        if name.full in self._partitioned:
            raise BrokerError(ServerError.NotAllowedError, f"{name.full} is a partitioned topic; use its partitions")
        parent = self._partitioned.get(name.partitioned_parent.full)
        if parent is not None and name.partition_index >= parent:
            raise BrokerError(ServerError.TopicNotFound, f"Topic {name.full} does not exist")
        # Partitions of a partitioned topic exist once it does (Pulsar creates them with it).
        if parent is None and not (create and self.auto_creation(name)[0]):
            raise BrokerError(ServerError.TopicNotFound, f"Topic {name.full} does not exist")

    def client_topic(self, topic: str, create: bool = True) -> Topic | NonPersistentTopic:
        """The topic partition a producer or consumer attaches to, of either domain."""
        name = TopicName.parse(topic)
        if name.persistent:
            return self.topic(name.full, create)
        loaded = self.non_persistent.get(name.full)
        if loaded is None:
            self._check_namespace(name)
            self._check_new(name, create)
            loaded = NonPersistentTopic(self, name)
            self.non_persistent[name.full] = loaded
        return loaded

    def existing_topic(self, topic: str) -> Topic | None:
        """The topic partition if it exists (loading it), else None."""
        loaded = self.topics.get(topic)  # a full name, loaded: every end of a transaction asks for its partitions
        if loaded is not None:
            return loaded
        try:
            return self.topic(topic, create=False)
        except BrokerError:
            return None

    def topics_of_namespace(self, namespace: str) -> list[str]:
        """Persistent topic partitions of a namespace, partitions of partitioned topics included."""
        prefix = f"persistent://{namespace}/"
        names = {n for n in self._records if n.startswith(prefix)}
        for parent, partitions in self._partitioned.items():
            if parent.startswith(prefix):
                names.update(f"{parent}-partition-{i}" for i in range(partitions))
        return sorted(names)

    def non_persistent_topics(self, namespace: str) -> list[str]:
        """Non-persistent topic partitions of a namespace that are loaded (they exist while in memory), sorted."""
        prefix = f"non-persistent://{namespace}/"
        return sorted(n for n in self.non_persistent if n.startswith(prefix))

    def partitioned_topics(self, namespace: str) -> list[str]:
        """Partitioned topics of a namespace (of both domains), sorted."""
        return sorted(n for n in self._partitioned if TopicName.parse(n).namespace_name == namespace)

    def create_topic(self, topic: str) -> Topic:
        """Create a topic partition or non-partitioned topic whatever the auto-creation policy (admin)."""
        name = TopicName.parse(topic)
        self._check_namespace(name)
        if name.full not in self._records:
            self._create(name)
        return self.topic(name.full)

    def _create(self, name: TopicName) -> TopicRecord:
        """Create a topic partition's log (one store transaction), and tell the watches."""
        created = now_ms(self.clock)
        record = self._records[name.full] = self.store.create_topic(name.full, created)
        self._creation_times[name.full] = created
        self.topic_watches.changed(name.namespace_name)
        # The creation is staged: the next group commit makes it durable, on the commit runner (a reply that must
        # wait for it, as the admin API's, waits for that commit).
        self.request_flush()
        return record

    def created_ms(self, topic: str) -> int:
        """When a topic partition was created (epoch milliseconds; 0 if before creation times were kept)."""
        return self._creation_times.get(topic, 0)

    def delete_topic(self, topic: str) -> None:
        """Delete a topic partition: disconnect its clients, then drop its log, cursors and state."""
        name = TopicName.parse(topic)
        record = self._records.get(name.full)
        if record is None:
            return
        self.flush()
        loaded = self.topics.pop(name.full, None)
        if loaded is not None:
            loaded.close()
            self._staged_topics.pop(loaded, None)
        del self._records[name.full]
        self.store.delete_topic(name.full, record.topic_id)
        self.stats.storage.forget(record.topic_id)
        if self.terminated.pop(name.full, None) is not None:
            self.store.put_metadata("terminated", name.full, None)
        self.authorization.permissions.forget_topic(name)
        if name.partition_index < 0:
            self.namespaces.delete_topic_policies(name.full)
        self.topic_watches.changed(name.namespace_name)
        self.namespaces.set_topic_properties(name.full, None)
        self._creation_times.pop(name.full, None)
        self.store.put_metadata(TOPIC_CREATED, name.full, None)
        self.request_flush()  # the store staged the deletion again, after any commit on its way (Store.delete_topic)

    def delete_partitioned_topic(self, topic: str) -> None:
        """Delete every partition of a partitioned topic, then its metadata."""
        partitions = self._partitioned.get(topic, 0)
        for index in range(partitions):
            partition = TopicName.parse(topic).partition(index)
            self.delete_topic(partition.full)
            self.authorization.permissions.forget_topic(partition)
        self._partitioned.pop(topic, None)
        self.store.set_partitioned_topic(topic, None)
        self.namespaces.set_topic_properties(topic, None)
        self.namespaces.delete_topic_policies(topic)
        self.topic_watches.changed(TopicName.parse(topic).namespace_name)
        self.authorization.permissions.forget_topic(TopicName.parse(topic))

    def delete_schema(self, topic: str) -> None:
        """Drop every schema version of a (partitioned) topic."""
        self.schemas.delete(topic, force=True)

    def terminate(self, topic: Topic) -> int:
        """Seal a topic partition: no more publishes; returns its last entry (-1 if empty)."""
        if topic.terminated is None:
            topic.terminated = topic.next_entry_id - 1
            self.terminated[topic.name.full] = topic.terminated
            self.store.put_metadata("terminated", topic.name.full, str(topic.terminated))
            # As Pulsar: producers are disconnected (reconnecting fails), caught-up consumers are told.
            for producer in list(topic.producers) + list(topic.waiting_producers):
                topic.remove_producer(producer)
                producer.sink.close_producer(producer)
            for subscription in list(topic.subscriptions.values()):
                subscription.dispatch()
        return topic.terminated

    def generate_producer_name(self) -> str:
        """A producer name unique across restarts: ``<cluster>-<boot>-<n>``."""
        self._producer_names += 1
        return f"{self.config.cluster}-{self._boot}-{self._producer_names}"

    # -- the group commit ------------------------------------------------------------------------

    def staged(self, topic: Topic) -> None:
        """A topic staged writes; commit them soon."""
        self._staged_topics[topic] = None
        self.request_flush()

    def after_commit(self, callback: Callable[[Any], None], value: Any) -> None:
        """Run ``callback(value)`` after the next commit (or with the error if it fails)."""
        self._completions.append((callback, value))
        if not self._flush_scheduled:
            self.request_flush()

    def request_flush(self) -> None:
        """Commit what is staged soon (once per turn of the event loop)."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.stats.flush_requested()
            self.clock.call_later(0, self.flush)

    def flush(self) -> None:
        """Commit everything staged in one store transaction, then complete and dispatch.

        One commit is in flight at a time; what is staged meanwhile goes into the next one.
        """
        self._flush_scheduled = False
        if self._commit_in_flight:
            self._flush_after_commit = True
            return
        topics, self._staged_topics = self._staged_topics, {}
        completions, self._completions = self._completions, []
        for topic in topics:
            topic.stage_cursors()
        marks = {topic: topic.next_entry_id - 1 for topic in topics}
        staged = self.store.take_staged()
        if staged is None:
            self._committed(topics, marks, completions, None)
            return
        self._commit_in_flight = True
        self.commits.run(
            lambda: self.store.write(staged),
            lambda error: self._committed(topics, marks, completions, error, staged),
            # While a transaction is open no commit is small: its client has requests on the way that need no
            # commit (NEW_TXN, ADD_PARTITION_TO_TXN...), which a commit on this thread would hold up for an fsync
            # (pulsar-perf's transactions: about 40% less server CPU per transaction, 2-4x the transactions per
            # second, with those commits on the writer thread; bench/TXN_PATH.md).
            # A commit creating topics is not small either: creations come in bursts (a client's partitions, a
            # pattern of topics), and the engine's thread keeps answering meanwhile (tests/test_topic_creation.py).
            small=bool(completions) and not self.coordinators.active() and not staged.topics and _is_small(staged),
        )

    def _committed(
        self,
        topics: dict[Topic, None],
        marks: dict[Topic, int],
        completions: list[tuple[Callable[[Any], None], Any]],
        error: BaseException | None,
        staged: StagedWrites | None = None,
    ) -> None:
        self._commit_in_flight = False
        if error is not None:
            self._commit_failed(topics, completions, error, staged)
            return
        if self._failed_commits:
            log.warning("the store is writable again after %d failed commits", self._failed_commits)
            self._failed_commits = 0
        # A run of SENDs (engine.topic.Topic.publish_run) completes with a list: one publish per item.
        self.stats.flushed(sum(len(value) if type(value) is list else 1 for _, value in completions))
        for callback, value in completions:
            callback(value)
        for topic in topics:
            topic.committed(marks[topic])
        if self._flush_after_commit or self._staged_topics or self._completions:
            self._flush_after_commit = False
            self.request_flush()

    def _commit_failed(
        self,
        topics: dict[Topic, None],
        completions: list[tuple[Callable[[Any], None], Any]],
        error: BaseException,
        staged: StagedWrites | None,
    ) -> None:
        """Tell the clients whose writes were lost; write the lost acknowledgements and the lost records of open
        transactions again (the acknowledgements after a pause)."""
        # What was staged after this commit builds on it: it is lost too.
        later = self.store.take_staged()
        lost_records = [*(staged.txn_records if staged else ()), *(later.txn_records if later else ())]
        self.coordinators.records_lost(lost_records)
        # The topics those commits created exist here already: their creation is written again, until it lands.
        lost_creations = [*(staged.topics if staged else ()), *(later.topics if later else ())]
        if lost_creations:
            self.store.stage_topics(lost_creations)
            self.clock.call_later(COMMIT_RETRY_SECONDS, self.request_flush)
        lost = topics | self._staged_topics
        completions += self._completions
        self._staged_topics, self._completions = {}, []
        self._failed_commits += 1
        if self._failed_commits == 1:
            log.error("commit failed (%s); its writes are lost and their clients are told, until one succeeds", error)
        retry = {topic: None for topic in lost if topic.commit_failed()}
        if retry:
            self._staged_topics |= retry
            self.clock.call_later(COMMIT_RETRY_SECONDS, self.request_flush)
        failure = BrokerError(ServerError.PersistenceError, f"Failed to persist: {error}")
        for callback, _ in completions:
            callback(failure)
        for topic in lost:
            if topic.lost_entries:
                topic.disconnect_producers()

    def close(self) -> None:
        """Wait for the commit in flight, commit what is staged, and close the store."""
        self.commits.drain()
        for topic in self._staged_topics:
            topic.stage_cursors()
        self.store.commit()
        self.store.close()


def _is_small(staged: StagedWrites) -> bool:
    """Whether a commit holds at most :data:`SMALL_COMMIT_ENTRIES` entries of :data:`SMALL_COMMIT_BYTES` together."""
    count = size = 0
    for rows in staged.entries.values():
        count += len(rows)
        if count > SMALL_COMMIT_ENTRIES:
            return False
        size += sum(len(body) for _, _, body in rows)
    return size <= SMALL_COMMIT_BYTES
