"""Schemas, as ``pulsar.schema`` names them: :class:`BytesSchema`, :class:`StringSchema`, :class:`JsonSchema` and
:class:`AvroSchema` of :class:`Record` classes. A producer encodes values with its schema and registers it with the
topic; a consumer decodes ``msg.value()`` with its own."""

from pulsar_txn.schema.definition import (
    Array,
    Boolean,
    Bytes,
    CustomEnum,
    Double,
    Field,
    Float,
    Integer,
    Long,
    Map,
    Null,
    Record,
    String,
)
from pulsar_txn.schema.schema import AvroSchema, BytesSchema, JsonSchema, Schema, StringSchema

__all__ = [
    "Array",
    "AvroSchema",
    "Boolean",
    "Bytes",
    "BytesSchema",
    "CustomEnum",
    "Double",
    "Field",
    "Float",
    "Integer",
    "JsonSchema",
    "Long",
    "Map",
    "Null",
    "Record",
    "Schema",
    "String",
    "StringSchema",
]
