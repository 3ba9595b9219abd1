"""Schema classes: how values become payloads and back, and the ``Schema`` a producer or consumer registers."""

from __future__ import annotations

import enum
import io
import json
from typing import Any

from wire.pulsar_api_pb2 import Schema as SchemaProto


class Schema:
    """A schema: ``encode`` a value to bytes, ``decode`` bytes to a value; ``schema_info`` is what goes on the wire
    (None: no schema, plain bytes)."""

    def __init__(self, record_cls: Any, schema_type: int, schema_definition: Any, schema_name: str) -> None:
        self._record_cls = record_cls
        self._schema_type = schema_type
        self._definition = schema_definition
        self._name = schema_name

    def encode(self, obj: Any) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        raise NotImplementedError

    def schema_info(self) -> dict[str, Any] | None:
        """The protocol's ``Schema`` fields, or None for a topic without schema."""
        data = self._definition if isinstance(self._definition, bytes) else str(self._definition or "").encode()
        return {"name": self._name, "schema_data": data, "type": self._schema_type}

    def __str__(self) -> str:
        return f"{type(self).__name__}({self._name})"


class BytesSchema(Schema):
    """Values are ``bytes`` as they are (no schema registered)."""

    def __init__(self) -> None:
        super().__init__(bytes, 0, None, "BYTES")

    def encode(self, data: bytes) -> bytes:
        if type(data) is bytes:
            return data
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"Invalid type '{type(data)}' for BytesSchema: bytes expected")
        return bytes(data)

    def decode(self, data: bytes) -> bytes:
        return data

    def schema_info(self) -> dict[str, Any] | None:
        return None


class StringSchema(Schema):
    """Values are ``str``, UTF-8 on the wire."""

    def __init__(self) -> None:
        super().__init__(str, SchemaProto.String, b"", "STRING")

    def encode(self, obj: str) -> bytes:
        if not isinstance(obj, str):
            raise TypeError(f"Invalid type '{type(obj)}' for StringSchema: str expected")
        return obj.encode("utf-8")

    def decode(self, data: bytes) -> str:
        return data.decode("utf-8")


def _definition(schema: dict[str, Any]) -> bytes:
    # The official client writes the definition with json.dumps(..., indent=True): the same text registers the same
    # schema version from either client.
    return json.dumps(schema, indent=True).encode()


class JsonSchema(Schema):
    """Values are instances of a :class:`~pulsar_txn.schema.Record` class, JSON on the wire."""

    def __init__(self, record_cls: Any) -> None:
        super().__init__(record_cls, SchemaProto.Json, _definition(record_cls.schema()), "JSON")

    @staticmethod
    def _plain(value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, bytes):
            return value.decode()
        data = dict(value.__dict__)
        for key in ("_default", "_required", "_required_default"):
            data.pop(key, None)
        return data

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, self._record_cls):
            raise TypeError(f"Invalid record obj of type {type(obj)} - expected type is {self._record_cls}")
        return json.dumps(self._plain(obj), default=self._plain, indent=True).encode()

    def decode(self, data: bytes) -> Any:
        return self._record_cls(**json.loads(data))


class AvroSchema(Schema):
    """Values are instances of a :class:`~pulsar_txn.schema.Record` class (or dicts, given ``schema_definition``
    instead), Avro binary on the wire (fastavro)."""

    def __init__(self, record_cls: Any, schema_definition: dict[str, Any] | None = None) -> None:
        try:
            import fastavro
        except ImportError:
            raise ImportError("AvroSchema needs fastavro: pip install 'pulsar-txn-proxy[avro]'") from None
        self._fastavro = fastavro
        definition = record_cls.schema() if record_cls is not None else schema_definition
        if definition is None:
            raise ValueError("AvroSchema needs a Record class or a schema definition")
        self._parsed = fastavro.parse_schema(definition)
        super().__init__(record_cls, SchemaProto.Avro, _definition(definition), "AVRO")

    def encode(self, obj: Any) -> bytes:
        if self._record_cls is None:
            data = obj
        elif isinstance(obj, self._record_cls):
            data = obj.to_dict()
        else:
            raise TypeError(f"Invalid record obj of type {type(obj)} - expected type is {self._record_cls}")
        buffer = io.BytesIO()
        self._fastavro.schemaless_writer(buffer, self._parsed, data)
        return buffer.getvalue()

    def decode(self, data: bytes) -> Any:
        value = self._fastavro.schemaless_reader(io.BytesIO(data), self._parsed)
        return value if self._record_cls is None else self._record_cls(**value)
