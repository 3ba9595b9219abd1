"""Which schema may follow a topic's schema versions, as Pulsar 4.2.4's schema registry decides.

A producer's (or an uploaded) schema that equals a live version gets that version. Otherwise it is checked against
the latest live version (against every live version for the ``_TRANSITIVE`` strategies) before it is added:
``ALWAYS_COMPATIBLE`` accepts anything, a different schema type is refused, and a schema of the same type goes to
its type's check. AVRO schemas follow Avro's reader/writer rules (:mod:`engine.avro_compat`): BACKWARD means the
new schema reads data written with the old ones, FORWARD the reverse, FULL both, and ALWAYS_INCOMPATIBLE refuses
every change. JSON schemas are checked the same way when both definitions are Avro records (a definition in the
old Jackson JSON-schema format is accepted next to an Avro one). KEY_VALUE schemas need the same key and value
types and check each side with its type's rules. PROTOBUF_NATIVE schemas must keep their root message. Other types
(PROTOBUF, STRING and the other primitives) only refuse changes under ALWAYS_INCOMPATIBLE.

A consumer's schema is only checked, never added (unless the topic is idle): under BACKWARD, FORWARD,
FORWARD_TRANSITIVE and FULL it must read the latest version (BACKWARD); under the other strategies it is checked
against every live version with the strategy itself.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import NamedTuple

from engine import avro_compat

STRATEGIES = (
    "UNDEFINED",
    "ALWAYS_INCOMPATIBLE",
    "ALWAYS_COMPATIBLE",
    "BACKWARD",
    "FORWARD",
    "FULL",
    "BACKWARD_TRANSITIVE",
    "FORWARD_TRANSITIVE",
    "FULL_TRANSITIVE",
)
#: The strategy of a topic whose namespace and topic set none (broker.conf's ``schemaCompatibilityStrategy``).
BROKER_DEFAULT = "FULL"
#: The strategy the deprecated namespace policy ``schema_auto_update_compatibility_strategy`` stands for.
AUTO_UPDATE_STRATEGIES = {
    "Backward": "BACKWARD",
    "Forward": "FORWARD",
    "Full": "FULL",
    "AlwaysCompatible": "ALWAYS_COMPATIBLE",
    "ForwardTransitive": "FORWARD_TRANSITIVE",
    "BackwardTransitive": "BACKWARD_TRANSITIVE",
    "FullTransitive": "FULL_TRANSITIVE",
    "AutoUpdateDisabled": "ALWAYS_INCOMPATIBLE",
}
_TRANSITIVE = ("BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE")
#: ``Schema.Type`` numbers this module tells apart.
JSON, PROTOBUF, AVRO, KEY_VALUE, PROTOBUF_NATIVE = 2, 3, 4, 15, 20
#: Types whose definitions Pulsar compares as parsed Avro schemas when it looks for an existing version.
_AVRO_PARSED = (JSON, PROTOBUF, AVRO)
#: Pulsar's ``SchemaType`` names by ``Schema.Type`` number (KEY_VALUE properties name the halves' types this way).
_TYPE_NUMBERS = {
    "NONE": 0, "BYTES": -1, "STRING": 1, "JSON": 2, "PROTOBUF": 3, "AVRO": 4, "BOOLEAN": 5, "INT8": 6, "INT16": 7,
    "INT32": 8, "INT64": 9, "FLOAT": 10, "DOUBLE": 11, "DATE": 12, "TIME": 13, "TIMESTAMP": 14, "KEY_VALUE": 15,
    "INSTANT": 16, "LOCAL_DATE": 17, "LOCAL_TIME": 18, "LOCAL_DATE_TIME": 19, "PROTOBUF_NATIVE": 20,
}  # fmt: skip


class Schema(NamedTuple):
    """A schema's type, definition and properties."""

    type: int
    data: bytes
    properties: dict[str, str]


def same(existing: Schema, new: Schema) -> bool:
    """Whether ``new`` is ``existing`` again (definitions of Avro-based types compared as parsed schemas)."""
    if existing.type != new.type:
        return False
    if existing.data == new.data:
        return True
    if new.type not in _AVRO_PARSED:
        return False
    try:
        return _without_docs(json.loads(existing.data)) == _without_docs(json.loads(new.data))
    except ValueError:
        return False


def _without_docs(spec: object) -> object:
    if isinstance(spec, dict):
        return {k: _without_docs(v) for k, v in spec.items() if k != "doc"}
    if isinstance(spec, list):
        return [_without_docs(v) for v in spec]
    return spec


def producer_incompatibility(strategy: str, live: Sequence[Schema], new: Schema) -> str | None:
    """Why ``new`` may not be added after the ``live`` versions (oldest first), or None if it may."""
    if not live or strategy == "ALWAYS_COMPATIBLE":
        return None
    if strategy in _TRANSITIVE:
        return _against_all(strategy, live, new)
    return _against_latest(strategy, live[-1], new)


def consumer_incompatibility(strategy: str, live: Sequence[Schema], new: Schema) -> str | None:
    """Why a consumer with schema ``new`` may not read a topic whose schema has the ``live`` versions (non-empty)."""
    if strategy == "ALWAYS_COMPATIBLE":
        return None
    if strategy in ("BACKWARD", "FORWARD", "FORWARD_TRANSITIVE", "FULL"):
        return _against_latest("BACKWARD", live[-1], new)
    return _against_all(strategy, live, new)


def _against_latest(strategy: str, latest: Schema, new: Schema) -> str | None:
    if latest.type != new.type:
        return f"Incompatible schema: exists schema type {_name(latest.type)}, new schema type {_name(new.type)}"
    if latest.data == new.data:
        return None
    if new.type == JSON:
        return _json(strategy, latest, new)
    return _check(strategy, [latest], new)


def _against_all(strategy: str, live: Sequence[Schema], new: Schema) -> str | None:
    other = next((s for s in live if s.type != new.type), None)
    if other is not None:
        return f"Incompatible schema: exists schema type {_name(other.type)}, new schema type {_name(new.type)}"
    return _check(strategy, live, new)


def _check(strategy: str, existing: Sequence[Schema], new: Schema) -> str | None:
    """The check of ``new``'s type against ``existing`` (all of the same type as ``new``), under any strategy but
    ALWAYS_COMPATIBLE (which accepts before any check)."""
    if new.type in (AVRO, JSON):
        return _avro(strategy, existing, new)
    if new.type == KEY_VALUE:
        return _key_value(strategy, existing, new)
    if new.type == PROTOBUF_NATIVE:
        return _protobuf_native(strategy, existing, new)
    if strategy == "ALWAYS_INCOMPATIBLE":
        return "Schema compatibility strategy is ALWAYS_INCOMPATIBLE"
    return None


def _avro(strategy: str, existing: Sequence[Schema], new: Schema) -> str | None:
    try:
        olds = [avro_compat.parse(s.data) for s in existing]
        candidate = avro_compat.parse(new.data)
    except avro_compat.AvroParseError as exc:
        return f"Error during schema parsing: {exc}"
    base = strategy.removesuffix("_TRANSITIVE")
    if base not in ("BACKWARD", "FORWARD", "FULL"):
        return f"Error during schema compatibility check with strategy {strategy}: not supported"
    against = olds if strategy in _TRANSITIVE else olds[-1:]
    for old in reversed(against):
        pairs = {"BACKWARD": [(candidate, old)], "FORWARD": [(old, candidate)]}
        pairs["FULL"] = pairs["BACKWARD"] + pairs["FORWARD"]
        for reader, writer in pairs[base]:
            reason = avro_compat.unreadable(reader, writer)
            if reason is not None:
                return f"Error during schema compatibility check with strategy {strategy}: {reason}"
    return None


def _json(strategy: str, latest: Schema, new: Schema) -> str | None:
    """JSON against the latest version: Avro rules when both are Avro records; the old format is let through."""
    old_avro, new_avro = _is_avro(latest.data), _is_avro(new.data)
    if old_avro and new_avro:
        return _avro(strategy, [latest], new)
    if old_avro or _is_json_object(latest.data):
        if new_avro or _is_json_object(new.data):
            if not old_avro and not new_avro and _json_id(latest.data) != _json_id(new.data):
                return "Incompatible JSON schemas: their ids differ"
            return None
        return "Unknown schema format"
    return None


def _is_avro(data: bytes) -> bool:
    try:
        avro_compat.parse(data)
    except avro_compat.AvroParseError:
        return False
    return True


def _is_json_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:
        return False


def _json_id(data: bytes) -> object:
    return json.loads(data).get("id")


def _key_value(strategy: str, existing: Sequence[Schema], new: Schema) -> str | None:
    try:
        new_key, new_value = split_key_value(new)
        halves = [split_key_value(s) for s in existing]
    except ValueError as exc:
        return f"Invalid KEY_VALUE schema: {exc}"
    for key, value in halves:
        if key.type != new_key.type or value.type != new_value.type:
            return (
                "Key schemas or Value schemas are different schema type, from key schema type is "
                f"{_name(key.type)} and to key schema is {_name(new_key.type)}, from value schema is "
                f"{_name(value.type)} and to value schema is {_name(new_value.type)}"
            )
    return _check(strategy, [k for k, _ in halves], new_key) or _check(strategy, [v for _, v in halves], new_value)


def split_key_value(schema: Schema) -> tuple[Schema, Schema]:
    """The key and value schemas of a KEY_VALUE schema (lengths and definitions in the data, types in properties)."""
    data = schema.data
    halves = []
    offset = 0
    for side in ("key", "value"):
        if len(data) < offset + 4:
            raise ValueError(f"no {side} schema length")
        (length,) = struct.unpack_from(">i", data, offset)
        offset += 4
        if length < 0 or len(data) < offset + length:
            raise ValueError(f"bad {side} schema length {length}")
        definition = data[offset : offset + length]
        offset += length
        type_name = schema.properties.get(f"{side}.schema.type") or "BYTES"
        if type_name not in _TYPE_NUMBERS:
            raise ValueError(f"unknown {side} schema type {type_name}")
        try:
            properties = json.loads(schema.properties.get(f"{side}.schema.properties") or "{}")
        except ValueError:
            properties = {}
        halves.append(Schema(_TYPE_NUMBERS[type_name], definition, properties))
    return halves[0], halves[1]


def _protobuf_native(strategy: str, existing: Sequence[Schema], new: Schema) -> str | None:
    root = _root_message(new.data)
    for old in existing:
        old_root = _root_message(old.data)
        if root is None or old_root is None:
            return "Invalid PROTOBUF_NATIVE schema: no root message type"
        if strategy == "ALWAYS_INCOMPATIBLE":
            return "Unknown SchemaCompatibilityStrategy."
        if old_root != root:
            return "Protobuf root message isn't allow change!"
    return None


def _root_message(data: bytes) -> str | None:
    try:
        spec = json.loads(data)
    except ValueError:
        return None
    root = spec.get("rootMessageTypeName") if isinstance(spec, dict) else None
    return root if isinstance(root, str) and root else None


def _name(type_: int) -> str:
    return next((name for name, number in _TYPE_NUMBERS.items() if number == type_), str(type_))
