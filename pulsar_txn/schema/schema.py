"""Schema classes: how values become payloads and back, and the ``Schema`` a producer or consumer registers."""

from __future__ import annotations

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
        super().__init__(str, SchemaProto.String, None, "STRING")

    def encode(self, obj: str) -> bytes:
        if not isinstance(obj, str):
            raise TypeError(f"Invalid type '{type(obj)}' for StringSchema: str expected")
        return obj.encode("utf-8")

    def decode(self, data: bytes) -> str:
        return data.decode("utf-8")
