"""Per-topic schema registry: versions of the schemas producers and consumers declare."""

from __future__ import annotations

import json
from collections.abc import Callable

from engine import schema_compat
from engine.clock import Clock, now_ms
from engine.errors import BrokerError
from engine.schema_compat import BROKER_DEFAULT, Schema, consumer_incompatibility, producer_incompatibility
from engine.store import Store, StoredSchema
from wire.pulsar_api_pb2 import ServerError

#: Store metadata kind of the times versions were registered (``<topic>#<version>``: epoch milliseconds).
_REGISTERED = "schema_time"
#: The type stored for the version a deletion adds (no ``Schema.Type`` has it; it never goes on the wire).
DELETED = -100
#: ``Schema.Type`` of a consumer that takes whatever schema the topic has (never checked, never added).
AUTO_CONSUME = 21


def _schema(stored: StoredSchema) -> Schema:
    return Schema(stored.type, stored.data, json.loads(stored.properties))


class SchemaRegistry:
    """Schemas keyed by the (partitioned) topic name, as Pulsar shares them across partitions."""

    def __init__(
        self,
        store: Store,
        strategy_of: Callable[[str], str] | None = None,
        auto_update_of: Callable[[str], bool] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        #: Dates registrations (without one, versions are dated 0).
        self._clock = clock
        self._cache: dict[str, list[StoredSchema]] = {}
        #: The schema compatibility strategy in force on a topic.
        self._strategy_of = strategy_of
        #: Whether producers may add versions to a topic's schema (``is_allow_auto_update_schema``).
        self._auto_update_of = auto_update_of

    def versions(self, topic: str) -> list[StoredSchema]:
        """Every version of a topic's schema, oldest first."""
        if topic not in self._cache:
            self._cache[topic] = self._store.schemas(topic)
        return self._cache[topic]

    def live(self, topic: str) -> list[StoredSchema]:
        """The versions since the topic's schema was last deleted, oldest first."""
        versions = self.versions(topic)
        for index in range(len(versions) - 1, -1, -1):
            if versions[index].type == DELETED:
                return versions[index + 1 :]
        return versions

    def get(self, topic: str, version: int | None = None) -> StoredSchema | None:
        """A given version, or the latest; None if there is none or a deletion came after it (as in Pulsar)."""
        live = self.live(topic)
        if version is None:
            return live[-1] if live else None
        return next((s for s in live if s.version == version), None)

    def strategy(self, topic: str) -> str:
        """The compatibility strategy in force on a topic."""
        return self._strategy_of(topic) if self._strategy_of is not None else BROKER_DEFAULT

    def incompatibility(self, topic: str, type_: int, data: bytes, properties: dict[str, str]) -> str | None:
        """Why a new schema may not follow the topic's live versions, or None if it may."""
        live = [_schema(s) for s in self.live(topic)]
        return producer_incompatibility(self.strategy(topic), live, Schema(type_, data, properties))

    def register(
        self, topic: str, type_: int, name: str, data: bytes, properties: dict[str, str], client: bool = False
    ) -> int:
        """Return the version of this schema, adding it if it is new and compatible.

        A ``client`` (a producer, GET_OR_CREATE_SCHEMA) adds versions only where the namespace allows schemas to be
        updated automatically; an upload through the admin API always may.
        """
        new = Schema(type_, data, properties)
        for schema in self.live(topic):
            if schema_compat.same(_schema(schema), new):
                return schema.version
        if client and self._auto_update_of is not None and not self._auto_update_of(topic):
            raise BrokerError(ServerError.IncompatibleSchema, "Schema not found and schema auto updating is disabled.")
        reason = self.incompatibility(topic, type_, data, properties)
        if reason is not None:
            raise BrokerError(ServerError.IncompatibleSchema, reason)
        props = json.dumps(properties, sort_keys=True)
        return self._add(topic, StoredSchema(self._next_version(topic), type_, name, data, props))

    def check_consumer(
        self, topic: str, type_: int, name: str, data: bytes, properties: dict[str, str], idle: bool
    ) -> None:
        """Let a consumer with this schema in, as Pulsar does: on an ``idle`` topic (no schema, producers, consumers
        or entries) its schema becomes the topic's; otherwise it must be compatible with the topic's schema."""
        if type_ == AUTO_CONSUME:
            return
        live = [_schema(s) for s in self.live(topic)]
        if not live and idle:
            self.register(topic, type_, name, data, properties)
            return
        strategy = self.strategy(topic)
        if not live:
            if strategy == "ALWAYS_COMPATIBLE":
                return
            raise BrokerError(
                ServerError.IncompatibleSchema,
                f"Failed to add schema to an active topic with empty(BYTES) schema: new schema type {type_}",
            )
        reason = consumer_incompatibility(strategy, live, Schema(type_, data, properties))
        if reason is not None:
            raise BrokerError(ServerError.IncompatibleSchema, reason)

    def delete(self, topic: str, force: bool = False) -> int:
        """Delete a topic's schema; the version Pulsar reports.

        As in Pulsar, a deletion adds a marker version (even where there is nothing to delete) and answers with it:
        the versions before it are not found any more, later registrations are checked against the versions after
        it only, and version numbers are never reused. ``force`` drops every version instead and answers -1.
        """
        if force:
            for schema in self.versions(topic):
                self._store.put_metadata(_REGISTERED, f"{topic}#{schema.version}", None)
            self._store.delete_schemas(topic)
            self.forget(topic)
            return -1
        return self._add(topic, StoredSchema(self._next_version(topic), DELETED, "", b"", "{}"))

    def _next_version(self, topic: str) -> int:
        versions = self.versions(topic)
        return versions[-1].version + 1 if versions else 0

    def _add(self, topic: str, schema: StoredSchema) -> int:
        self._store.add_schema(topic, schema)
        if self._clock is not None:
            self._store.put_metadata(_REGISTERED, f"{topic}#{schema.version}", str(now_ms(self._clock)))
        self.versions(topic).append(schema)
        return schema.version

    def registered_ms(self, topic: str, version: int) -> int:
        """When a version was registered (epoch milliseconds; 0 if unknown)."""
        return int(self._store.metadata(_REGISTERED).get(f"{topic}#{version}", 0))

    def forget(self, topic: str) -> None:
        """Drop the cached versions of a topic (after deletion)."""
        self._cache.pop(topic, None)
