"""Per-topic schema registry: versions of the schemas producers and consumers declare."""

from __future__ import annotations

import json
from collections.abc import Callable

from engine.clock import Clock, now_ms
from engine.errors import BrokerError
from engine.namespaces import incompatibility
from engine.store import Store, StoredSchema
from wire.pulsar_api_pb2 import ServerError

#: ``Schema.Type`` values that mean "no schema" (bytes).
_NO_SCHEMA = (0, -1)
#: Store metadata kind of the times versions were registered (``<topic>#<version>``: epoch milliseconds).
_REGISTERED = "schema_time"
#: The type stored for the version a deletion adds (no ``Schema.Type`` has it; it never goes on the wire).
DELETED = -100


class SchemaRegistry:
    """Schemas keyed by the (partitioned) topic name, as Pulsar shares them across partitions."""

    def __init__(
        self, store: Store, strategy_of: Callable[[str], str] | None = None, clock: Clock | None = None
    ) -> None:
        self._store = store
        #: Dates registrations (without one, versions are dated 0).
        self._clock = clock
        self._cache: dict[str, list[StoredSchema]] = {}
        #: The schema compatibility strategy of a topic's namespace (``UNDEFINED``: the checks below only).
        self._strategy_of = strategy_of

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
        """The compatibility strategy that applies to a topic (``UNDEFINED``: the type checks only)."""
        return self._strategy_of(topic) if self._strategy_of is not None else "UNDEFINED"

    def incompatibility(self, topic: str, type_: int, data: bytes) -> str | None:
        """Why a new schema may not follow the topic's live versions, or None if it may."""
        live = self.live(topic)
        strategy = self.strategy(topic)
        reason = incompatibility(strategy, live, type_, data)
        if reason is not None:
            return reason
        if live and live[-1].type != type_ and type_ not in _NO_SCHEMA and strategy != "ALWAYS_COMPATIBLE":
            return f"Trying to register a {type_} schema on topic {topic} whose schema type is {live[-1].type}"
        return None

    def register(self, topic: str, type_: int, name: str, data: bytes, properties: dict[str, str]) -> int:
        """Return the version of this schema, adding it if it is new and compatible."""
        for schema in self.live(topic):
            if schema.type == type_ and schema.data == data:
                return schema.version
        reason = self.incompatibility(topic, type_, data)
        if reason is not None:
            raise BrokerError(ServerError.IncompatibleSchema, f"Incompatible schema for topic {topic}: {reason}")
        props = json.dumps(properties, sort_keys=True)
        return self._add(topic, StoredSchema(self._next_version(topic), type_, name, data, props))

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
