"""Schemas, as ``pulsar.schema`` names them: :class:`BytesSchema` and :class:`StringSchema`. A producer encodes
values with its schema and registers it with the topic; a consumer decodes ``msg.value()`` with its own."""

from pulsar_txn.schema.schema import BytesSchema, Schema, StringSchema

__all__ = ["BytesSchema", "Schema", "StringSchema"]
