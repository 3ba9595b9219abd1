"""The broker facade: namespaces, topics and partitioned metadata, and the group commit."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.clock import Clock
from engine.coordinator import COORDINATOR_ASSIGN_TOPIC, Coordinators
from engine.errors import BrokerError
from engine.names import TopicName
from engine.schemas import SchemaRegistry
from engine.store import Store
from engine.topic import Topic
from engine.txn_buffer import SnapshotPolicy
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


class Broker:
    """All topics of this endpoint, backed by one :class:`Store`."""

    def __init__(self, store: Store, clock: Clock, config: BrokerConfig | None = None) -> None:
        self.store = store
        self.clock = clock
        self.config = config or BrokerConfig()
        self.schemas = SchemaRegistry(store)
        self.namespaces: set[str] = set(BUILTIN_NAMESPACES)
        self.topics: dict[str, Topic] = {}
        self._records = store.topics()
        self._partitioned = store.partitioned_topics()
        self._boot = store.next_value("boot")
        self._producer_names = 0
        self._staged_topics: set[Topic] = set()
        self._completions: list[tuple[Callable[[Any], None], Any]] = []
        self._flush_scheduled = False
        self.coordinators = Coordinators(
            self, self.config.transaction_coordinators, self.config.txn_end_delay_ms
        )
        self.coordinators.recover()

    # -- names and metadata --------------------------------------------------------------------

    def _check_namespace(self, name: TopicName) -> None:
        if name.namespace_name not in self.namespaces:
            raise BrokerError(ServerError.TopicNotFound, f"Namespace not found: {name.namespace_name}")

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
        if name.full in self._records or self.config.default_partitions <= 0:
            return 0
        if not self.config.auto_topic_creation or name.domain != "persistent":
            return 0
        self.create_partitioned_topic(name.full, self.config.default_partitions)
        return self.config.default_partitions

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        """Record a partitioned topic (its partitions are created on first use)."""
        name = TopicName.parse(topic)
        self._partitioned[name.full] = partitions
        self.store.set_partitioned_topic(name.full, partitions)

    def topic(self, topic: str, create: bool = True) -> Topic:
        """The loaded topic partition, loading or creating it as needed."""
        name = TopicName.parse(topic)
        loaded = self.topics.get(name.full)
        if loaded is not None:
            return loaded
        self._check_namespace(name)
        if name.domain != "persistent":
            raise BrokerError(ServerError.NotAllowedError, "Non-persistent topics are not supported")
        record = self._records.get(name.full)
        if record is None:
            if name.full in self._partitioned:
                raise BrokerError(
                    ServerError.NotAllowedError, f"{name.full} is a partitioned topic; use its partitions"
                )
            parent = self._partitioned.get(name.partitioned_parent.full)
            if parent is not None and name.partition_index >= parent:
                raise BrokerError(ServerError.TopicNotFound, f"Topic {name.full} does not exist")
            if not (create and self.config.auto_topic_creation):
                raise BrokerError(ServerError.TopicNotFound, f"Topic {name.full} does not exist")
            record = self.store.create_topic(name.full)
            self._records[name.full] = record
        loaded = Topic(self, name, record)
        self.topics[name.full] = loaded
        return loaded

    def existing_topic(self, topic: str) -> Topic | None:
        """The topic partition if it exists (loading it), else None."""
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

    def generate_producer_name(self) -> str:
        """A producer name unique across restarts: ``<cluster>-<boot>-<n>``."""
        self._producer_names += 1
        return f"{self.config.cluster}-{self._boot}-{self._producer_names}"

    # -- the group commit ------------------------------------------------------------------------

    def staged(self, topic: Topic) -> None:
        """A topic staged writes; commit them soon."""
        self._staged_topics.add(topic)
        self.request_flush()

    def after_commit(self, callback: Callable[[Any], None], value: Any) -> None:
        """Run ``callback(value)`` after the next commit (or with the error if it fails)."""
        self._completions.append((callback, value))
        self.request_flush()

    def request_flush(self) -> None:
        """Commit what is staged soon (once per turn of the event loop)."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.clock.call_later(0, self.flush)

    def flush(self) -> None:
        """Commit everything staged in one transaction, then complete and dispatch."""
        self._flush_scheduled = False
        topics, self._staged_topics = self._staged_topics, set()
        completions, self._completions = self._completions, []
        for topic in topics:
            topic.stage_cursors()
        try:
            if self.store.has_staged:
                self.store.commit()
        except Exception as exc:
            log.exception("commit failed; %d writes are lost and their producers are told", len(completions))
            for topic in topics:
                topic.commit_failed()
            error = BrokerError(ServerError.PersistenceError, f"Failed to persist: {exc}")
            for callback, _ in completions:
                callback(error)
            return
        for callback, value in completions:
            callback(value)
        for topic in topics:
            topic.committed()

    def close(self) -> None:
        """Commit what is staged and close the store."""
        self.flush()
        self.store.close()
