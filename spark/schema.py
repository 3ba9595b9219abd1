"""The row schema of the ``pulsar`` source, and decoding message values by the topic's Pulsar schema.

As in Pulsar's Spark connector: a topic without a schema (or with BYTES) gives a binary ``value``;
primitive schemas give a typed ``value``; JSON and AVRO record schemas give the record's fields as
top-level columns. The metadata columns follow: ``__key``, ``__topic``, ``__messageId``,
``__publishTime``, ``__eventTime`` and ``__messageProperties``.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from wire.pulsar_api_pb2 import Schema

TIMESTAMP = pa.timestamp("us", tz="UTC")
#: The metadata columns, after the value column(s).
META_FIELDS: list[tuple[str, pa.DataType, str]] = [
    ("__key", pa.binary(), "binary"),
    ("__topic", pa.string(), "string"),
    ("__messageId", pa.binary(), "binary"),
    ("__publishTime", TIMESTAMP, "timestamp"),
    ("__eventTime", TIMESTAMP, "timestamp"),
    ("__messageProperties", pa.map_(pa.string(), pa.string()), "map<string,string>"),
]
META_NAMES = frozenset(name for name, _, _ in META_FIELDS)

Convert = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


@dataclass
class Column:
    """A value column: its name, Arrow and Spark (DDL) types, and how a decoded value becomes a cell."""

    name: str
    arrow: pa.DataType
    ddl: str
    convert: Convert = _same


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


# -- Avro (and Pulsar JSON schema) types to Spark ----------------------------------------------------


def _avro_type(avro: Any, named: dict[str, Any]) -> tuple[pa.DataType, str, Convert]:
    """Arrow type, Spark DDL type and converter of an Avro type (nullable unions become their branch)."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) == 1:
            return _avro_type(branches[0], named)
        return pa.string(), "string", lambda v: None if v is None else json.dumps(v, default=str)
    if isinstance(avro, str):
        if avro in named:
            return _avro_type(named[avro], named)
        avro = {"type": avro}
    kind = avro.get("type")
    logical = avro.get("logicalType")
    if isinstance(kind, (dict, list)):
        return _avro_type(kind, named)
    if kind in ("record", "enum", "fixed") and "name" in avro:
        named[avro["name"]] = avro
        if "namespace" in avro:
            named[f"{avro['namespace']}.{avro['name']}"] = avro
    if kind == "long" and logical in ("timestamp-millis", "local-timestamp-millis"):
        return TIMESTAMP, "timestamp", _timestamp_millis
    if kind == "long" and logical in ("timestamp-micros", "local-timestamp-micros"):
        return TIMESTAMP, "timestamp", _same
    if kind == "int" and logical == "date":
        return pa.date32(), "date", _same
    simple = {
        "boolean": (pa.bool_(), "boolean"),
        "int": (pa.int32(), "int"),
        "long": (pa.int64(), "bigint"),
        "float": (pa.float32(), "float"),
        "double": (pa.float64(), "double"),
        "string": (pa.string(), "string"),
        "enum": (pa.string(), "string"),
        "bytes": (pa.binary(), "binary"),
        "fixed": (pa.binary(), "binary"),
    }
    if kind in simple:
        arrow, ddl = simple[kind]
        if kind in ("bytes", "fixed"):
            return arrow, ddl, _bytes
        return arrow, ddl, _same
    if kind == "array":
        arrow, ddl, item = _avro_type(avro["items"], named)
        return pa.list_(arrow), f"array<{ddl}>", lambda v: None if v is None else [item(x) for x in v]
    if kind == "map":
        arrow, ddl, item = _avro_type(avro["values"], named)
        return (
            pa.map_(pa.string(), arrow),
            f"map<string,{ddl}>",
            lambda v: None if v is None else [(k, item(x)) for k, x in v.items()],
        )
    if kind == "record":
        fields = [(f["name"], *_avro_type(f["type"], named)) for f in avro.get("fields", [])]
        arrow = pa.struct([(name, t) for name, t, _, _ in fields])
        ddl = "struct<" + ",".join(f"{_quote(name)}:{d}" for name, _, d, _ in fields) + ">"

        def record(v: Any) -> Any:
            if v is None:
                return None
            return {name: conv(v.get(name)) for name, _, _, conv in fields}

        return arrow, ddl, record
    return pa.string(), "string", lambda v: None if v is None else json.dumps(v, default=str)


def _timestamp_millis(v: Any) -> Any:
    return None if v is None else (v * 1000 if isinstance(v, int) else v)


def _bytes(v: Any) -> Any:
    if isinstance(v, str):
        return v.encode("latin-1")
    return v


# -- decoders ----------------------------------------------------------------------------------------

_PRIMITIVES: dict[int, tuple[pa.DataType, str, Callable[[bytes], Any]]] = {
    Schema.String: (pa.string(), "string", lambda b: b.decode("utf-8")),
    Schema.Bool: (pa.bool_(), "boolean", lambda b: b[0] != 0),
    Schema.Int8: (pa.int8(), "tinyint", lambda b: struct.unpack(">b", b)[0]),
    Schema.Int16: (pa.int16(), "smallint", lambda b: struct.unpack(">h", b)[0]),
    Schema.Int32: (pa.int32(), "int", lambda b: struct.unpack(">i", b)[0]),
    Schema.Int64: (pa.int64(), "bigint", lambda b: struct.unpack(">q", b)[0]),
    Schema.Float: (pa.float32(), "float", lambda b: struct.unpack(">f", b)[0]),
    Schema.Double: (pa.float64(), "double", lambda b: struct.unpack(">d", b)[0]),
    Schema.Timestamp: (TIMESTAMP, "timestamp", lambda b: struct.unpack(">q", b)[0] * 1000),
}


@dataclass
class ValueSchema:
    """How the values of a set of topics become columns.

    ``kind`` is the Pulsar schema type (``Schema.None`` for raw bytes); ``definition`` the schema data of
    a JSON or AVRO schema. It is plain data, so Spark can ship it to executors.
    """

    kind: int = 0  # Schema.None
    definition: str = ""

    @classmethod
    def of(cls, schema: Schema | None) -> ValueSchema:
        """From the schema a broker returned (None: the topic has none, read bytes)."""
        if schema is None:
            return cls()
        if schema.type in (Schema.Json, Schema.Avro):
            return cls(schema.type, schema.schema_data.decode())
        if schema.type in _PRIMITIVES:
            return cls(schema.type)
        return cls()

    @property
    def is_bytes(self) -> bool:
        """True when values are raw bytes (no schema, BYTES, or a type read as bytes)."""
        return self.kind not in _PRIMITIVES and not self.is_record

    @property
    def is_record(self) -> bool:
        return self.kind in (Schema.Json, Schema.Avro)

    def columns(self) -> list[Column]:
        """The value columns."""
        if self.kind in _PRIMITIVES:
            arrow, ddl, _ = _PRIMITIVES[self.kind]
            return [Column("value", arrow, ddl)]
        if self.is_record:
            definition = json.loads(self.definition)
            if isinstance(definition, dict) and definition.get("type") == "record":
                named: dict[str, Any] = {}
                columns = []
                for field in definition.get("fields", []):
                    if field["name"] in META_NAMES:
                        raise ValueError(f"schema field {field['name']!r} collides with a metadata column")
                    arrow, ddl, convert = _avro_type(field["type"], named)
                    columns.append(Column(field["name"], arrow, ddl, convert))
                return columns
            arrow, ddl, convert = _avro_type(definition, {})
            return [Column("value", arrow, ddl, convert)]
        return [Column("value", pa.binary(), "binary")]

    def ddl(self) -> str:
        """The Spark schema of a row, as DDL."""
        fields = [(c.name, c.ddl) for c in self.columns()] + [(n, d) for n, _, d in META_FIELDS]
        return ", ".join(f"{_quote(name)} {ddl}" for name, ddl in fields)

    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of a row."""
        return pa.schema([(c.name, c.arrow) for c in self.columns()] + [(n, t) for n, t, _ in META_FIELDS])

    def decoder(self, writer_schema: Callable[[bytes], str | None]) -> Callable[[bytes | None, bytes], tuple]:
        """``decode(payload, schema_version) -> value cells``.

        ``writer_schema(version)`` returns the AVRO definition a message was written with (None: the
        topic's current one), so evolved records are read by field name.
        """
        columns = self.columns()
        if self.kind in _PRIMITIVES:
            parse = _PRIMITIVES[self.kind][2]
            return lambda payload, version: (None if payload is None else parse(payload),)
        if not self.is_record:
            return lambda payload, version: (payload,)
        definition = json.loads(self.definition)
        flat = isinstance(definition, dict) and definition.get("type") == "record"
        names = [c.name for c in columns]
        converts = [c.convert for c in columns]

        def cells(record: Any) -> tuple:
            if record is None:
                return (None,) * len(columns)
            if not flat:
                return (converts[0](record),)
            return tuple(conv(record.get(name)) for name, conv in zip(names, converts, strict=True))

        if self.kind == Schema.Json:
            return lambda payload, version: cells(None if payload is None else json.loads(payload))
        import fastavro

        reader = fastavro.parse_schema(definition)
        parsed: dict[bytes, Any] = {}

        def avro(payload: bytes | None, version: bytes) -> tuple:
            if payload is None:
                return cells(None)
            writer = parsed.get(version)
            if writer is None:
                text = writer_schema(version) if version else None
                writer = parsed[version] = fastavro.parse_schema(json.loads(text)) if text else reader
            return cells(fastavro.schemaless_reader(io.BytesIO(payload), writer, reader))

        return avro
