"""Schema compatibility: which second (and third) schema a producer or consumer may bring, for every compatibility
strategy set through ``/admin/v2/namespaces/{tenant}/{namespace}/schemaCompatibilityStrategy`` (UNDEFINED: the
broker's FULL), the deprecated auto-update strategy, auto-update switched off, and each kind of schema: AVRO and
JSON records (Avro's reader/writer rules), PROTOBUF, PROTOBUF_NATIVE, primitives and KEY_VALUE.

Schemas go on raw PRODUCER and SUBSCRIBE commands, so that every type and definition is exactly what the scenario
says; each attempt records the schema version it got or the error Pulsar answered. The admin API's schema upload and
compatibility test follow the same strategy.
"""

from __future__ import annotations

import base64
import json
import struct
import time
from typing import Any

from google.protobuf import descriptor_pb2

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from pulsar_txn_proxy.conformance.raw import RawConnection
from wire.commands import payload_of
from wire.pulsar_api_pb2 import BaseCommand, ServerError

T = BaseCommand
STRING, JSON, PROTOBUF, AVRO, INT32, KEY_VALUE, PROTOBUF_NATIVE = 1, 2, 3, 4, 8, 15, 20
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


def _record(*fields: dict[str, Any], name: str = "R") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "conf", "fields": list(fields)})


A = {"name": "a", "type": "int"}
B_OPTIONAL = {"name": "b", "type": ["null", "string"], "default": None}
B_REQUIRED = {"name": "b", "type": "string"}
B_DEFAULT = {"name": "b", "type": "string", "default": "x"}
C_REQUIRED = {"name": "c", "type": "int"}
C_DEFAULT = {"name": "c", "type": "int", "default": 0}
COLOR = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}

#: ``change: (first definition, second definition)`` of AVRO (and JSON) records.
RECORD_CHANGES: dict[str, tuple[str, str]] = {
    "add_optional_field": (_record(A), _record(A, B_OPTIONAL)),
    "add_required_field": (_record(A), _record(A, B_REQUIRED)),
    "remove_field_with_default": (_record(A, B_DEFAULT), _record(A)),
    "remove_required_field": (_record(A, B_REQUIRED), _record(A)),
    "optional_to_required": (_record(A, B_OPTIONAL), _record(A, B_REQUIRED)),
    "required_to_optional": (_record(A, B_REQUIRED), _record(A, B_OPTIONAL)),
    "int_to_long": (_record(A), _record({"name": "a", "type": "long"})),
    "long_to_int": (_record({"name": "a", "type": "long"}), _record(A)),
    "int_to_string": (_record(A), _record({"name": "a", "type": "string"})),
    "rename_record": (_record(A), _record(A, name="S")),
    "rename_field_with_alias": (_record(A), _record({"name": "z", "type": "int", "aliases": ["a"]})),
    "enum_add_symbol": (
        _record({"name": "e", "type": COLOR}),
        _record({"name": "e", "type": {**COLOR, "symbols": ["RED", "GREEN", "BLUE"]}}),
    ),
    "same_reformatted": (_record(A), json.dumps(json.loads(_record(A)), indent=2)),
    "enum_renamed": (
        _record({"name": "e", "type": COLOR}),
        _record({"name": "e", "type": {**COLOR, "name": "Colour"}}),
    ),
    "enum_renamed_with_alias": (
        _record({"name": "e", "type": COLOR}),
        _record({"name": "e", "type": {**COLOR, "name": "Colour", "aliases": ["conf.Color"]}}),
    ),
    "fixed_resized": (
        _record({"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}}),
        _record({"name": "f", "type": {"type": "fixed", "name": "F", "size": 8}}),
    ),
    "nested_record_renamed_in_union": (
        _record({"name": "n", "type": ["null", {"type": "record", "name": "N1", "fields": [A]}], "default": None}),
        _record({"name": "n", "type": ["null", {"type": "record", "name": "N2", "fields": [A]}], "default": None}),
    ),
    "int_to_float_in_union": (_record(A), _record({"name": "a", "type": ["null", "float"], "default": None})),
    "array_items_promoted": (
        _record({"name": "l", "type": {"type": "array", "items": "int"}}),
        _record({"name": "l", "type": {"type": "array", "items": "long"}}),
    ),
    "map_values_changed": (
        _record({"name": "m", "type": {"type": "map", "values": "int"}}),
        _record({"name": "m", "type": {"type": "map", "values": "string"}}),
    ),
    "namespace_changed": (_record(A), json.dumps({**json.loads(_record(A)), "namespace": "other"})),
}
#: ``change: three definitions``: the third breaks only against the first.
TRANSITIVE_CHANGES: dict[str, tuple[str, str, str]] = {
    "backward_breaks_first_only": (_record(A), _record(A, B_DEFAULT), _record(A, B_REQUIRED)),
    "forward_breaks_first_only": (_record(A, C_REQUIRED), _record(A, C_DEFAULT), _record(A)),
}


def _protobuf_native(message: str, *fields: str) -> str:
    """A PROTOBUF_NATIVE definition: a file with one message of int32 fields."""
    proto = descriptor_pb2.FileDescriptorProto(name="conf.proto", package="conf", syntax="proto3")
    described = proto.message_type.add(name=message)
    for number, field_name in enumerate(fields, start=1):
        described.field.add(name=field_name, number=number, type=5, label=1)  # TYPE_INT32, LABEL_OPTIONAL
    files = descriptor_pb2.FileDescriptorSet(file=[proto])
    return json.dumps(
        {
            "fileDescriptorSet": base64.b64encode(files.SerializeToString()).decode(),
            "rootMessageTypeName": f"conf.{message}",
            "rootFileDescriptorName": "conf.proto",
        }
    )


def _key_value(key: tuple[str, str], value: tuple[str, str]) -> dict[str, Any]:
    """A KEY_VALUE schema of ``(type name, definition)`` halves, encoded as the clients encode it."""
    data = b""
    properties = {"kv.encoding.type": "INLINE"}
    for side, (type_name, definition) in (("key", key), ("value", value)):
        encoded = definition.encode()
        data += struct.pack(">i", len(encoded)) + encoded
        properties[f"{side}.schema.type"] = type_name
        properties[f"{side}.schema.name"] = side
        properties[f"{side}.schema.properties"] = "{}"
    return {"type": KEY_VALUE, "data": data, "properties": properties}


def _schema(type_: int, definition: str = "") -> dict[str, Any]:
    return {"type": type_, "data": definition.encode(), "properties": {}}


#: ``case: schemas in order``: other schema types and type changes.
TYPED_CHANGES: dict[str, list[dict[str, Any]]] = {
    "avro_to_json": [_schema(AVRO, _record(A)), _schema(JSON, _record(A))],
    "protobuf_changed": [_schema(PROTOBUF, _record(A)), _schema(PROTOBUF, _record(A, B_REQUIRED))],
    "protobuf_native_field_added": [
        _schema(PROTOBUF_NATIVE, _protobuf_native("M", "a")),
        _schema(PROTOBUF_NATIVE, _protobuf_native("M", "a", "b")),
    ],
    "protobuf_native_root_renamed": [
        _schema(PROTOBUF_NATIVE, _protobuf_native("M", "a")),
        _schema(PROTOBUF_NATIVE, _protobuf_native("N", "a")),
    ],
    "string_again": [_schema(STRING), _schema(STRING)],
    "string_to_int32": [_schema(STRING), _schema(INT32)],
    "kv_value_adds_required_field": [
        _key_value(("STRING", ""), ("AVRO", _record(A))),
        _key_value(("STRING", ""), ("AVRO", _record(A, B_REQUIRED))),
    ],
    "kv_value_adds_optional_field": [
        _key_value(("STRING", ""), ("AVRO", _record(A))),
        _key_value(("STRING", ""), ("AVRO", _record(A, B_OPTIONAL))),
    ],
    "kv_key_type_changed": [
        _key_value(("STRING", ""), ("AVRO", _record(A))),
        _key_value(("INT32", ""), ("AVRO", _record(A))),
    ],
}


class _Raw:
    """One raw connection that creates producers and consumers with exact schemas."""

    def __init__(self, run: Run) -> None:
        self.conn = RawConnection.to(run.target.service_url, timeout=20.0)
        self.conn.handshake()
        self.next_id = 0
        self.looked_up: set[str] = set()

    def close(self) -> None:
        self.conn.close()

    def _answer(self, request_id: int) -> BaseCommand:
        while True:
            command = self.conn.read().command
            answers = (T.ERROR, T.PRODUCER_SUCCESS, T.SUCCESS, T.LOOKUP_RESPONSE)
            if command.type in answers and payload_of(command).request_id == request_id:
                return command

    def _lookup(self, topic: str) -> None:
        """Look the topic up first, as clients do: a broker serves a topic once its namespace bundle is loaded."""
        if topic not in self.looked_up:
            self.next_id += 1
            self.conn.send(T.LOOKUP, topic=topic, request_id=self.next_id)
            self._answer(self.next_id)
            self.looked_up.add(topic)

    def produce(self, topic: str, schema: dict[str, Any] | None) -> dict[str, Any]:
        """A producer with ``schema``: the schema version it got, or the error."""
        self._lookup(topic)
        self.next_id += 1
        fields: dict[str, Any] = {"topic": topic, "producer_id": self.next_id, "request_id": self.next_id}
        if schema is not None:
            fields["schema"] = _wire_schema(schema)
        self.conn.send(T.PRODUCER, **fields)
        command = self._answer(self.next_id)
        if command.type == T.ERROR:
            return {"error": ServerError.Name(command.error.error)}
        version = command.producer_success.schema_version
        return {"version": struct.unpack(">q", version)[0] if len(version) == 8 else None}

    def consume(self, topic: str, subscription: str, schema: dict[str, Any]) -> dict[str, Any]:
        """An exclusive consumer with ``schema``: ``ok`` or the error."""
        self._lookup(topic)
        self.next_id += 1
        self.conn.send(
            T.SUBSCRIBE,
            topic=topic,
            subscription=subscription,
            subType=0,
            consumer_id=self.next_id,
            request_id=self.next_id,
            schema=_wire_schema(schema),
        )
        command = self._answer(self.next_id)
        return {"error": ServerError.Name(command.error.error)} if command.type == T.ERROR else {"ok": True}


def _wire_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "s",
        "schema_data": schema["data"],
        "type": schema["type"],
        "properties": [{"key": k, "value": v} for k, v in schema["properties"].items()],
    }


def _strategy_namespace(run: Run, strategy: str, tag: str = "") -> str:
    """A fresh namespace with ``strategy`` set (UNDEFINED: left as it is)."""
    namespace, status = run.namespace((tag + strategy).lower().replace("_", "-"))
    if status >= 300:
        raise RuntimeError(f"creating namespace {namespace} failed: {status}")
    if strategy != "UNDEFINED":
        _set_policy(run, namespace, "schemaCompatibilityStrategy", "PUT", strategy)
    return namespace


def _set_policy(run: Run, namespace: str, endpoint: str, method: str, value: Any) -> None:
    path = f"/admin/v2/namespaces/{namespace}/{endpoint}"
    answer = run.admin(method, path, value)
    if answer.status >= 300:
        raise RuntimeError(f"setting {endpoint} on {namespace} failed: {answer}")
    deadline = time.monotonic() + 10
    while run.admin("GET", path).body != value and time.monotonic() < deadline:
        time.sleep(0.1)


def _sequence(raw: _Raw, topic: str, schemas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [raw.produce(topic, schema) for schema in schemas]


def _producer_matrix(run: Run, namespace: str, tag: str, raw: _Raw) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, type_ in (("avro", AVRO), ("json", JSON)):
        for change, (first, second) in RECORD_CHANGES.items():
            topic = f"persistent://{namespace}/{tag}-{kind}-{change}"
            out[f"{kind}:{change}"] = _sequence(raw, topic, [_schema(type_, first), _schema(type_, second)])
    for change, definitions in TRANSITIVE_CHANGES.items():
        topic = f"persistent://{namespace}/{tag}-avro-{change}"
        out[f"avro:{change}"] = _sequence(raw, topic, [_schema(AVRO, d) for d in definitions])
    for case, schemas in TYPED_CHANGES.items():
        out[case] = _sequence(raw, f"persistent://{namespace}/{tag}-{case}", schemas)
    return out


@scenario
def test_producer_schema_changes(run: Run) -> Outcome:
    """A first and a second producer (a third for the transitive cases) on one topic, for every strategy and
    change; the first schema always registers as version 0."""
    raw = _Raw(run)
    try:
        return {
            strategy: _producer_matrix(run, _strategy_namespace(run, strategy), "p", raw) for strategy in STRATEGIES
        }
    finally:
        raw.close()


@scenario
def test_deprecated_and_disabled_auto_update(run: Run) -> Outcome:
    """The deprecated ``schemaAutoUpdateCompatibilityStrategy`` applies where the strategy is UNDEFINED; with
    ``isAllowAutoUpdateSchema`` false a producer may only use a schema the topic already has."""
    raw = _Raw(run)
    try:
        out: dict[str, Any] = {}
        for auto_update in ("Forward", "AlwaysCompatible", "AutoUpdateDisabled"):
            namespace = _strategy_namespace(run, "UNDEFINED", f"auto-{auto_update}-")
            _set_policy(run, namespace, "schemaAutoUpdateCompatibilityStrategy", "PUT", auto_update)
            changes = {c: RECORD_CHANGES[c] for c in ("optional_to_required", "add_optional_field", "int_to_string")}
            out[auto_update] = {
                change: _sequence(raw, f"persistent://{namespace}/a-{change}", [_schema(AVRO, f), _schema(AVRO, s)])
                for change, (f, s) in changes.items()
            }
        namespace = _strategy_namespace(run, "UNDEFINED", "no-auto-update-")
        upload = f"/admin/v2/schemas/{namespace}/uploaded/schema"
        out["upload"] = run.admin("POST", upload, {"type": "AVRO", "schema": _record(A)}).status
        _set_policy(run, namespace, "isAllowAutoUpdateSchema", "POST", False)
        out["disabled"] = {
            "new_topic": raw.produce(f"persistent://{namespace}/fresh", _schema(AVRO, _record(A))),
            "uploaded_same": raw.produce(f"persistent://{namespace}/uploaded", _schema(AVRO, _record(A))),
            "uploaded_compatible": raw.produce(
                f"persistent://{namespace}/uploaded", _schema(AVRO, _record(A, B_OPTIONAL))
            ),
            "upload_compatible": run.admin("POST", upload, {"type": "AVRO", "schema": _record(A, B_OPTIONAL)}).status,
        }
        return out
    finally:
        raw.close()


#: ``case: consumer schema`` against a topic whose producer registered ``_record(A, B_REQUIRED)``.
CONSUMER_SCHEMAS = {
    "same": _record(A, B_REQUIRED),
    "drops_field": _record(A),
    "adds_required_field": _record(A, B_REQUIRED, C_REQUIRED),
    "adds_field_with_default": _record(A, B_REQUIRED, C_DEFAULT),
    "changes_type": _record({"name": "a", "type": "string"}, B_REQUIRED),
}


@scenario
def test_consumer_schemas(run: Run) -> Outcome:
    """Consumers with schemas on a topic with an AVRO schema and a producer: which each strategy lets in (a
    consumer's schema is checked, not added); a refused consumer leaves nothing behind (the next one on the same
    exclusive subscription is accepted); a consumer's schema becomes an idle topic's schema, and is refused on an
    active topic without one."""
    raw = _Raw(run)
    try:
        out: dict[str, Any] = {}
        for strategy in ("UNDEFINED", "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "FORWARD", "FULL_TRANSITIVE"):
            namespace = _strategy_namespace(run, strategy, "c-")
            topic = f"persistent://{namespace}/c"
            results: dict[str, Any] = {"producer": raw.produce(topic, _schema(AVRO, _record(A, B_REQUIRED)))}
            for case, definition in CONSUMER_SCHEMAS.items():
                results[case] = raw.consume(topic, f"sub-{case}", _schema(AVRO, definition))
            results["after_refusal"] = raw.consume(topic, "sub-changes_type", _schema(AVRO, _record(A, B_REQUIRED)))
            results["versions"] = raw.produce(topic, _schema(AVRO, _record(A, B_REQUIRED)))
            out[strategy] = results
        namespace = _strategy_namespace(run, "UNDEFINED", "c-idle-")
        idle = f"persistent://{namespace}/idle"
        out["idle_topic"] = raw.consume(idle, "s", _schema(AVRO, _record(A)))
        out["idle_topic_schema"] = run.admin("GET", f"/admin/v2/schemas/{namespace}/idle/schema").body.get("data")
        active = f"persistent://{namespace}/active"
        run.client().create_producer(active).send(b"m")
        out["active_topic_without_schema"] = raw.consume(active, "s", _schema(AVRO, _record(A)))
        out["active_topic_schema"] = run.admin("GET", f"/admin/v2/schemas/{namespace}/active/schema").status
        return out
    finally:
        raw.close()


@scenario
def test_admin_upload_and_compatibility(run: Run) -> Outcome:
    """``pulsar-admin schemas upload`` and ``compatibility`` follow the namespace's strategy as producers do: the
    status of each call and the strategy a compatible answer names."""
    out: dict[str, Any] = {}
    for strategy in ("UNDEFINED", "FORWARD", "ALWAYS_INCOMPATIBLE"):
        namespace = _strategy_namespace(run, strategy, "admin-")
        base = f"/admin/v2/schemas/{namespace}/t"
        first, required = RECORD_CHANGES["optional_to_required"]
        results: dict[str, Any] = {
            "upload": run.admin("POST", f"{base}/schema", {"type": "AVRO", "schema": first}).status
        }
        for change, definition in (("optional_to_required", required), ("same", first)):
            answer = run.admin("POST", f"{base}/compatibility", {"type": "AVRO", "schema": definition})
            results[change] = {"status": answer.status, "body": answer.body if answer.status < 300 else None}
        results["upload_required"] = run.admin("POST", f"{base}/schema", {"type": "AVRO", "schema": required}).status
        out[strategy] = results
    return out


@scenario
def test_explicit_none_schema(run: Run) -> Outcome:
    """A schema of type NONE on the wire (the official clients send none for bytes) is a schema type like any
    other: it does not follow an AVRO schema, a consumer with it is checked, and an AVRO one does not follow it."""
    raw = _Raw(run)
    try:
        namespace = _strategy_namespace(run, "UNDEFINED", "none-")
        avro_first, none_first = f"persistent://{namespace}/avro-first", f"persistent://{namespace}/none-first"
        return {
            "avro": raw.produce(avro_first, _schema(AVRO, _record(A))),
            "then_none": raw.produce(avro_first, _schema(0)),
            "then_no_schema": raw.produce(avro_first, None),
            "consumer_none": raw.consume(avro_first, "s", _schema(0)),
            "none": raw.produce(none_first, _schema(0)),
            "then_avro": raw.produce(none_first, _schema(AVRO, _record(A))),
            "none_again": raw.produce(none_first, _schema(0)),
        }
    finally:
        raw.close()
