"""Topic schemas: ``/admin/v2/schemas/{tenant}/{namespace}/{topic}/...``, as ``pulsar-admin schemas`` calls them.

Get the latest or a given version, list every version since the last deletion, upload (checked against the
namespace's compatibility strategy, as a producer's schema is), test compatibility, and delete. A deletion adds a
marker version, as in Pulsar: the versions before it are not found any more, the next upload starts afresh and
versions are not reused; ``?force=true`` drops every version instead. Schemas are shared by the partitions of a
partitioned topic. Checked against Pulsar 4.2.4 (tests/test_admin_java.py, tests/conformance/test_admin.py).
"""

from __future__ import annotations

import json
from typing import Any

from engine.errors import BrokerError
from engine.names import TopicName
from engine.store import StoredSchema
from proxy.admin.context import AdminContext
from proxy.admin.http import AdminError, Call, Router, absent_reply, json_reply

#: Pulsar's ``SchemaType`` names by the wire's ``Schema.Type`` numbers.
SCHEMA_TYPES = {
    -1: "BYTES",
    0: "NONE",
    1: "STRING",
    2: "JSON",
    3: "PROTOBUF",
    4: "AVRO",
    5: "BOOLEAN",
    6: "INT8",
    7: "INT16",
    8: "INT32",
    9: "INT64",
    10: "FLOAT",
    11: "DOUBLE",
    12: "DATE",
    13: "TIME",
    14: "TIMESTAMP",
    15: "KEY_VALUE",
    16: "INSTANT",
    17: "LOCAL_DATE",
    18: "LOCAL_TIME",
    19: "LOCAL_DATE_TIME",
    20: "PROTOBUF_NATIVE",
}


#: ``Schema.Type`` numbers by Pulsar's ``SchemaType`` names.
SCHEMA_TYPE_NUMBERS = {name: number for number, name in SCHEMA_TYPES.items()}


def schema_response(schema: StoredSchema, registered_ms: int) -> dict[str, Any]:
    """A version as Pulsar's ``GetSchemaResponse``, dated when it was registered."""
    return {
        "version": schema.version,
        "type": SCHEMA_TYPES.get(schema.type, str(schema.type)),
        "timestamp": registered_ms,
        "data": schema.data.decode("utf-8", "replace"),
        "properties": json.loads(schema.properties),
    }


def posted_schema(call: Call) -> tuple[int, bytes, dict[str, str]]:
    """The type, data and properties of a ``PostSchemaPayload`` body."""
    payload = call.json(required=True)
    if payload is not None and not isinstance(payload, dict):
        raise AdminError(400, "The schema payload must be a JSON object")
    type_name = None if payload is None else payload.get("type")
    if type_name is None:
        # Pulsar's resource dereferences the missing payload or type (a NullPointerException, 500).
        raise AdminError(500, "Request failed.")
    if type_name not in SCHEMA_TYPE_NUMBERS:
        raise AdminError(422, f"Invalid schema type: {type_name}")
    data = payload.get("schema") or ""
    properties = payload.get("properties") or {}
    if not isinstance(data, str) or not isinstance(properties, dict):
        raise AdminError(422, "Invalid schema data: 'schema' must be a string and 'properties' an object")
    return SCHEMA_TYPE_NUMBERS[type_name], data.encode(), {str(k): str(v) for k, v in properties.items()}


def register(router: Router, ctx: AdminContext) -> None:
    """Add the schema routes."""
    schemas = ctx.broker.schemas
    base = "/admin/v2/schemas/{tenant}/{namespace}/{topic}"

    def topic_of(call: Call) -> str:
        try:
            name = TopicName.parse(f"persistent://{call['tenant']}/{call['namespace']}/{call['topic']}")
        except BrokerError:
            raise AdminError(412, "Topic name is not valid") from None
        return name.partitioned_parent.full

    def reply(topic: str, version: int | None) -> dict[str, Any]:
        schema = schemas.get(topic, version)
        if schema is None:
            raise AdminError(404, "Schema not found")
        return schema_response(schema, schemas.registered_ms(topic, schema.version))

    @router.route("GET", base + "/schema")
    def latest_schema(call: Call) -> Any:
        return reply(topic_of(call), None)

    @router.route("GET", base + "/schema/{version}")
    def schema_version(call: Call) -> Any:
        version = call.path_integer("version")
        return reply(topic_of(call), version)

    @router.route("GET", base + "/schemas")
    def all_schemas(call: Call) -> Any:
        topic = topic_of(call)
        return {
            "getSchemaResponses": [
                schema_response(s, schemas.registered_ms(topic, s.version)) for s in schemas.live(topic)
            ]
        }

    @router.route("POST", base + "/schema")
    def upload(call: Call) -> Any:
        topic = topic_of(call)
        type_, data, properties = posted_schema(call)
        try:
            version = schemas.register(topic, type_, TopicName.parse(topic).local, data, properties)
        except BrokerError as exc:
            raise AdminError(409, exc.message) from None
        return {"version": {"version": version}}

    @router.route("POST", base + "/compatibility")
    def compatibility(call: Call) -> Any:
        topic = topic_of(call)
        type_, data, properties = posted_schema(call)
        strategy = schemas.strategy(topic)
        reason = schemas.incompatibility(topic, type_, data, properties)
        if reason is not None:
            # As Pulsar 4.2.4: its check throws instead of answering false, and the exception becomes a 500.
            raise AdminError(500, reason)
        # Pulsar's IsCompatibilityResponse names its flag isCompatibility; Jackson writes it as "compatibility".
        return json_reply({"compatibility": True, "schemaCompatibilityStrategy": strategy}, 202)

    @router.route("GET", base + "/metadata")
    def metadata(call: Call) -> Any:
        """Where the versions are kept, as Pulsar's ``SchemaMetadata``: no ledger here, so ledger -1 and the version
        as the entry."""
        live = schemas.live(topic_of(call))
        if not live:
            return absent_reply()
        index = [{"ledgerId": -1, "entryId": s.version, "version": s.version} for s in live]
        return {"info": index[-1], "index": index}

    @router.route("POST", base + "/version")
    def version_of(call: Call) -> Any:
        """The version a schema was registered as (-1 if it was not)."""
        type_, data, _ = posted_schema(call)
        found = [s.version for s in schemas.live(topic_of(call)) if s.type == type_ and s.data == data]
        return {"version": found[0] if found else -1}

    @router.route("DELETE", base + "/schema")
    def delete(call: Call) -> Any:
        return {"version": schemas.delete(topic_of(call), force=call.flag("force"))}
