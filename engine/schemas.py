"""Per-topic schema registry: versions of the schemas producers and consumers declare."""

from __future__ import annotations

import json
from collections.abc import Callable

from engine.errors import BrokerError
from engine.namespaces import incompatibility
from engine.store import Store, StoredSchema
from wire.pulsar_api_pb2 import ServerError

#: ``Schema.Type`` values that mean "no schema" (bytes).
_NO_SCHEMA = (0, -1)


class SchemaRegistry:
    """Schemas keyed by the (partitioned) topic name, as Pulsar shares them across partitions."""

    def __init__(self, store: Store, strategy_of: Callable[[str], str] | None = None) -> None:
        self._store = store
        self._cache: dict[str, list[StoredSchema]] = {}
        #: The schema compatibility strategy of a topic's namespace (``UNDEFINED``: the checks below only).
        self._strategy_of = strategy_of

    def versions(self, topic: str) -> list[StoredSchema]:
        """Every version of a topic's schema, oldest first."""
        if topic not in self._cache:
            self._cache[topic] = self._store.schemas(topic)
        return self._cache[topic]

    def get(self, topic: str, version: int | None = None) -> StoredSchema | None:
        """A given version, or the latest."""
        versions = self.versions(topic)
        if not versions:
            return None
        if version is None:
            return versions[-1]
        return next((s for s in versions if s.version == version), None)

    def register(self, topic: str, type_: int, name: str, data: bytes, properties: dict[str, str]) -> int:
        """Return the version of this schema, adding it if it is new and compatible."""
        versions = self.versions(topic)
        props = json.dumps(properties, sort_keys=True)
        for schema in versions:
            if schema.type == type_ and schema.data == data:
                return schema.version
        strategy = self._strategy_of(topic) if self._strategy_of is not None else "UNDEFINED"
        reason = incompatibility(strategy, versions, type_, data)
        if reason is not None:
            raise BrokerError(ServerError.IncompatibleSchema, f"Incompatible schema for topic {topic}: {reason}")
        if versions and versions[-1].type != type_ and type_ not in _NO_SCHEMA and strategy != "ALWAYS_COMPATIBLE":
            raise BrokerError(
                ServerError.IncompatibleSchema,
                f"Trying to register a {type_} schema on topic {topic} whose schema type is {versions[-1].type}",
            )
        schema = StoredSchema(len(versions), type_, name, data, props)
        self._store.add_schema(topic, schema)
        versions.append(schema)
        return schema.version

    def forget(self, topic: str) -> None:
        """Drop the cached versions of a topic (after deletion)."""
        self._cache.pop(topic, None)
