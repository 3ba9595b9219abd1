"""Schema compatibility: Avro's resolution rules on their own, and the official Python client's producers and
consumers meeting a topic's schema (the full strategy matrix is compared with Pulsar in
tests/conformance/test_schema_compat.py)."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pulsar
import pytest
from pulsar.schema import AvroSchema

from engine.avro_compat import AvroParseError, parse, unreadable
from engine.names import TopicName
from tests.conftest import Server, make_client
from tests.test_engine_transactions import TOPIC, Harness


def _record(*fields: Any, name: str = "R", **extra: Any) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields), **extra})


def _reads(reader: str, writer: str) -> bool:
    return unreadable(parse(reader), parse(writer)) is None


def test_a_reader_union_takes_the_writer_type_and_a_writer_union_needs_every_branch() -> None:
    optional = _record({"name": "b", "type": ["null", "string"], "default": None})
    required = _record({"name": "b", "type": "string"})
    assert _reads(optional, required)  # the FORWARD case: old (optional) reads new (required)
    assert not _reads(required, optional)  # the null branch has no reader
    assert _reads(_record({"name": "b", "type": ["null", "long"]}), _record({"name": "b", "type": "int"}))


def test_named_types_records_are_not_compared_by_name_enums_and_fixed_are() -> None:
    field = {"name": "a", "type": "int"}
    assert _reads(_record(field, name="R"), _record(field, name="S"))
    enum = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    assert _reads(_record({"name": "e", "type": enum}), _record({"name": "e", "type": {**enum, "symbols": ["C"]}}))
    assert not _reads(_record({"name": "e", "type": enum}), _record({"name": "e", "type": {**enum, "name": "F"}}))
    aliased = {**enum, "name": "F", "aliases": ["E"]}
    assert _reads(_record({"name": "e", "type": aliased}), _record({"name": "e", "type": enum}))
    fixed = {"type": "fixed", "name": "X", "size": 4}
    assert not _reads(_record({"name": "f", "type": fixed}), _record({"name": "f", "type": {**fixed, "size": 8}}))


def test_recursive_records_resolve() -> None:
    link = {"name": "next", "type": ["null", "Node"], "default": None}
    node = _record({"name": "v", "type": "int"}, link, name="Node")
    longer = _record({"name": "v", "type": "long"}, link, name="Node")
    assert _reads(longer, node)
    assert not _reads(node, longer)


def test_undefined_names_and_bad_json_do_not_parse() -> None:
    for text in ('{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Missing"}]}', "{not json", "42"):
        with pytest.raises(AvroParseError):
            parse(text)


def _avro(definition: str) -> AvroSchema:
    return AvroSchema(None, schema_definition=json.loads(definition))


def _set_strategy(server: Server, namespace: str, strategy: str) -> None:
    base = f"{server.admin_url}/admin/v2/namespaces/{namespace}"
    urllib.request.urlopen(urllib.request.Request(base, method="PUT"))
    request = urllib.request.Request(
        f"{base}/schemaCompatibilityStrategy",
        data=json.dumps(strategy).encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request)


def test_forward_accepts_a_producer_that_makes_an_optional_field_required(server: Server) -> None:
    namespace = f"public/fwd-{uuid.uuid4().hex[:8]}"
    _set_strategy(server, namespace, "FORWARD")
    topic = f"persistent://{namespace}/t"
    client = make_client(server.url)
    try:
        client.create_producer(topic, schema=_avro(_record({"name": "b", "type": ["null", "string"], "default": None})))
        client.create_producer(topic, schema=_avro(_record({"name": "b", "type": "string"})))
        with pytest.raises(pulsar.IncompatibleSchema):
            client.create_producer(topic, schema=_avro(_record({"name": "b", "type": "int"})))
    finally:
        client.close()


def test_a_refused_consumer_leaves_the_exclusive_subscription_free(client: pulsar.Client, topic: str) -> None:
    """Issue 23, defect 5: under the default strategy (FULL: a consumer must read the topic's schema), a consumer
    whose schema cannot is refused, and the next one with the topic's own schema gets the subscription."""
    schema = _record({"name": "a", "type": "string"})
    producer = client.create_producer(topic, schema=_avro(schema))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.subscribe(topic, "s", schema=_avro(_record({"name": "a", "type": "int"})))
    consumer = client.subscribe(topic, "s", schema=_avro(schema))
    producer.send({"a": "x"})
    assert consumer.receive(5000).value() == {"a": "x"}


def test_the_strategy_in_force_topic_then_namespace_then_auto_update_then_broker(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    namespaces, name = h.broker.namespaces, TopicName.parse(TOPIC)
    assert namespaces.schema_strategy(name) == "FULL"  # UNDEFINED everywhere: the broker's
    namespaces.set_policy(name.namespace_name, "schema_auto_update_compatibility_strategy", "Forward")
    assert namespaces.schema_strategy(name) == "FORWARD"
    namespaces.set_policy(name.namespace_name, "schema_compatibility_strategy", "BACKWARD")
    assert namespaces.schema_strategy(name) == "BACKWARD"
    namespaces.set_topic_policy(name.full, "schemaCompatibilityStrategy", "UNDEFINED")
    assert namespaces.schema_strategy(name) == "BACKWARD"
    namespaces.set_topic_policy(name.full, "schemaCompatibilityStrategy", "ALWAYS_COMPATIBLE")
    assert namespaces.schema_strategy(name) == "ALWAYS_COMPATIBLE"
    h.close()
