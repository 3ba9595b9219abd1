"""Record classes, declared as with ``pulsar.schema``::

    class User(Record):
        name = String(required=True)
        age = Integer()
        tags = Array(String())

``User.schema()`` is the Avro schema (a dict) that :class:`~pulsar_txn.schema.JsonSchema` and
:class:`~pulsar_txn.schema.AvroSchema` register; it is written the way the official client writes it (fields in
declaration order, optional ones as ``["null", type]``), so both clients register the same schema for a class.
"""

from __future__ import annotations

import copy
from enum import Enum, EnumMeta
from typing import Any, ClassVar

_RESERVED = ("_default", "_required", "_required_default")


class Field:
    """A record field: ``default``, ``required`` (not nullable) and ``required_default`` (the default is written
    into the schema)."""

    avro_type = "null"
    python: Any = type(None)

    def __init__(self, default: Any = None, required: bool = False, required_default: bool = False) -> None:
        if default is not None:
            default = self.validate_type("default", default)
        self._default = default
        self._required = required
        self._required_default = required_default

    def type(self) -> str:
        return self.avro_type

    def python_type(self) -> Any:
        return self.python

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return None
        if not isinstance(val, self.python_type()):
            raise TypeError(f"Invalid type '{type(val)}' for field '{name}'. Expected: {self.python_type()}")
        return val

    def schema(self) -> Any:
        return self.type()

    def schema_info(self, defined_names: set[str]) -> Any:
        return self.type()

    def default(self) -> Any:
        return self._default

    def required_default(self) -> bool:
        return self._required_default

    def to_data(self, value: Any) -> Any:
        """The value as fastavro / JSON take it."""
        return value


class Null(Field):
    pass


class Boolean(Field):
    avro_type, python = "boolean", bool


class Integer(Field):
    avro_type, python = "int", int


class Long(Field):
    avro_type, python = "long", int


class Float(Field):
    avro_type, python = "float", (float, int)


class Double(Field):
    avro_type, python = "double", (float, int)


class Bytes(Field):
    avro_type, python = "bytes", bytes


class String(Field):
    avro_type, python = "string", str


class CustomEnum(Field):
    """A field holding a member of a Python ``Enum`` (an Avro enum of its member names)."""

    avro_type = "enum"

    def __init__(self, enum_type: type[Enum], default: Any = None, required: bool = False, **kwargs: Any) -> None:
        self.enum_type = enum_type
        super().__init__(default, required, **kwargs)

    def python_type(self) -> Any:
        return self.enum_type

    def validate_type(self, name: str, val: Any) -> Any:
        if val is None and not self._required:
            return None
        if isinstance(val, str) and val in self.enum_type.__members__:
            return self.enum_type[val]
        if isinstance(val, int) and not isinstance(val, self.enum_type):
            return self.enum_type(val)
        return super().validate_type(name, val)

    def schema_info(self, defined_names: set[str]) -> Any:
        name = self.enum_type.__name__
        if name in defined_names:
            return name
        defined_names.add(name)
        return {"type": "enum", "name": name, "symbols": [m.name for m in self.enum_type]}

    def default(self) -> Any:
        return self._default.name if isinstance(self._default, Enum) else self._default

    def to_data(self, value: Any) -> Any:
        return value.name if isinstance(value, Enum) else value


class Array(Field):
    avro_type, python = "array", list

    def __init__(self, array_type: Any, default: Any = None, required: bool = False, **kwargs: Any) -> None:
        self.array_type = _as_field(array_type)
        super().__init__(default, required, **kwargs)

    def schema_info(self, defined_names: set[str]) -> Any:
        return {"type": "array", "items": _item_schema(self.array_type, defined_names)}

    def to_data(self, value: Any) -> Any:
        return None if value is None else [_to_data(self.array_type, v) for v in value]


class Map(Field):
    avro_type, python = "map", dict

    def __init__(self, value_type: Any, default: Any = None, required: bool = False, **kwargs: Any) -> None:
        self.value_type = _as_field(value_type)
        super().__init__(default, required, **kwargs)

    def schema_info(self, defined_names: set[str]) -> Any:
        return {"type": "map", "values": _item_schema(self.value_type, defined_names)}

    def to_data(self, value: Any) -> Any:
        return None if value is None else {k: _to_data(self.value_type, v) for k, v in value.items()}


def _as_field(value: Any) -> Any:
    if isinstance(value, EnumMeta):
        return CustomEnum(value)
    if isinstance(value, RecordMeta):
        return value()
    return value


def _item_schema(field: Any, defined_names: set[str]) -> Any:
    return field.schema_info(defined_names) if isinstance(field, Array | Map | Record | CustomEnum) else field.type()


def _to_data(field: Any, value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_dict()
    return field.to_data(value) if isinstance(field, Field) else value


class RecordMeta(type):
    """Collects a record class's fields, in declaration order."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> RecordMeta:
        if name != "Record":
            fields = {}
            for key, value in namespace.items():
                value = _as_field(value)
                if isinstance(value, Field | Record):
                    fields[key] = value
            namespace["_fields"] = fields
        return super().__new__(mcs, name, bases, namespace)


class Record(metaclass=RecordMeta):
    """A record type: subclass it with fields as class attributes; instances take the fields as keyword arguments
    (nested records as records or dicts)."""

    _fields: ClassVar[dict[str, Any]] = {}
    #: The Avro namespace of the record's schema (None: none).
    _avro_namespace: str | None = None
    #: Write the fields into the schema sorted by name.
    _sorted_fields = False

    def __init__(
        self, default: Any = None, required_default: bool = False, required: bool = False, **kwargs: Any
    ) -> None:
        object.__setattr__(self, "_default", default)
        object.__setattr__(self, "_required_default", required_default)
        object.__setattr__(self, "_required", required)
        for name, field in self._fields.items():
            if name in kwargs:
                setattr(self, name, kwargs[name])
            elif isinstance(field, Record):
                object.__setattr__(self, name, copy.copy(field))
            else:
                object.__setattr__(self, name, field.default())

    def __setattr__(self, key: str, value: Any) -> None:
        field = self._fields.get(key)
        if field is None:
            raise AttributeError(f"Cannot set undeclared field {key!r} on record")
        if isinstance(field, Record):
            if isinstance(value, dict):
                value = type(field)(**value)
            elif value is not None and not isinstance(value, type(field)):
                raise TypeError(f"Invalid type '{type(value)}' for field '{key}'. Expected: {type(field)}")
        elif isinstance(field, Array) and isinstance(field.array_type, Record) and value:
            value = [type(field.array_type)(**v) if isinstance(v, dict) else v for v in value]
        elif isinstance(field, Map) and isinstance(field.value_type, Record) and value:
            value = {k: type(field.value_type)(**v) if isinstance(v, dict) else v for k, v in value.items()}
        else:
            value = field.validate_type(key, value)
        object.__setattr__(self, key, value)

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The Avro schema of this record class."""
        return cls.schema_info(set())

    @classmethod
    def schema_info(cls, defined_names: set[str]) -> Any:
        full_name = f"{cls._avro_namespace}.{cls.__name__}" if cls._avro_namespace else cls.__name__
        if full_name in defined_names:
            return full_name
        defined_names.add(full_name)
        schema: dict[str, Any] = {"type": "record", "name": cls.__name__}
        if cls._avro_namespace is not None:
            schema["namespace"] = cls._avro_namespace
        schema["fields"] = []
        names = sorted(cls._fields) if cls._sorted_fields else list(cls._fields)
        for name in names:
            field = cls._fields[name]
            field_type = field.schema_info(defined_names)
            if not field._required:
                field_type = ["null", field_type]
            if field.required_default():
                schema["fields"].append({"name": name, "default": field.default(), "type": field_type})
            else:
                schema["fields"].append({"name": name, "type": field_type})
        return schema

    # A record used as a field of another record.
    def type(self) -> str:
        return "record"

    def python_type(self) -> type:
        return type(self)

    def default(self) -> Any:
        return self._default

    def required_default(self) -> bool:
        return self._required_default

    def validate_type(self, name: str, val: Any) -> Any:
        if val is not None and not isinstance(val, type(self)):
            raise TypeError(f"Invalid type '{type(val)}' for field '{name}'. Expected: {type(self)}")
        return val

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data (nested records as dicts, enums as names)."""
        return {name: _to_data(field, getattr(self, name)) for name, field in self._fields.items()}

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and all(getattr(self, name) == getattr(other, name) for name in self._fields)

    def __hash__(self) -> int:
        return hash(tuple(str(getattr(self, name)) for name in self._fields))

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({values})"
