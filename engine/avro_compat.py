"""Avro schema definitions and whether one reads data written with another, as Avro's schema resolution decides.

Pulsar checks AVRO and JSON schemas (JSON schemas carry an Avro record definition) with Avro's schema validators,
which resolve the writer's schema against the reader's and refuse when the resolution has an error: a reader record
field that the writer's record lacks (after the reader's field aliases rename the writer's fields) and that has no
default; types that differ beyond Avro's promotions (int to long, float or double; long to float or double; float
to double; string and bytes both ways); a writer union with a branch the reader cannot read; a writer type no branch
of a reader union takes (Avro's first matching branch: the same type, for named types the same full name or, for
records, the first structurally matching one; then a promotion); enums or fixed types of other full names (unless
the reader aliases the writer's), or fixed types of other sizes. Record names are not compared, and enum symbols the
reader lacks are not an error here (only when such a value is read). Logical types and docs play no part.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
#: Writer types each reader type also reads (besides its own): Avro's promotions.
_PROMOTIONS = {
    "long": {"int"},
    "float": {"int", "long"},
    "double": {"int", "long", "float"},
    "bytes": {"string"},
    "string": {"bytes"},
}


class AvroParseError(ValueError):
    """A schema definition Avro's parser refuses."""


@dataclass(eq=False)
class AvroField:
    """A record field: its name, type, whether it has a default, and its aliases."""

    name: str
    type: AvroType
    has_default: bool
    aliases: tuple[str, ...]


@dataclass(eq=False)
class AvroType:
    """One node of a parsed schema; named types are shared by every reference to them."""

    kind: str
    name: str = ""
    full_name: str = ""
    aliases: tuple[str, ...] = ()
    fields: list[AvroField] = field(default_factory=list)
    symbols: tuple[str, ...] = ()
    enum_default: str | None = None
    size: int = 0
    items: AvroType | None = None
    branches: list[AvroType] = field(default_factory=list)


def parse(text: bytes | str) -> AvroType:
    """Parse a schema definition (JSON) as Avro's parser does; AvroParseError if it is not one."""
    try:
        spec = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AvroParseError(f"not JSON: {exc}") from None
    return _Parser().parse(spec, None)


class _Parser:
    def __init__(self) -> None:
        self.names: dict[str, AvroType] = {}

    def parse(self, spec: Any, namespace: str | None) -> AvroType:
        if isinstance(spec, str):
            return self._reference(spec, namespace)
        if isinstance(spec, list):
            branches = [self.parse(branch, namespace) for branch in spec]
            if any(branch.kind == "union" for branch in branches):
                raise AvroParseError("nested union")
            return AvroType("union", branches=branches)
        if not isinstance(spec, dict):
            raise AvroParseError(f"not a schema: {spec!r}")
        kind = spec.get("type")
        if isinstance(kind, (dict, list)):
            return self.parse(kind, namespace)
        if not isinstance(kind, str):
            raise AvroParseError(f"no type: {spec!r}")
        if kind in PRIMITIVES:
            return AvroType(kind)
        if kind == "array":
            return AvroType("array", items=self.parse(self._required(spec, "items"), namespace))
        if kind == "map":
            return AvroType("map", items=self.parse(self._required(spec, "values"), namespace))
        if kind in ("record", "error", "enum", "fixed"):
            return self._named(spec, "record" if kind == "error" else kind, namespace)
        return self._reference(kind, namespace)

    @staticmethod
    def _required(spec: dict[str, Any], key: str) -> Any:
        if key not in spec:
            raise AvroParseError(f"{spec.get('type')} has no {key}")
        return spec[key]

    def _reference(self, name: str, namespace: str | None) -> AvroType:
        if name in PRIMITIVES:
            return AvroType(name)
        for candidate in (f"{namespace}.{name}" if namespace and "." not in name else None, name):
            if candidate is not None and candidate in self.names:
                return self.names[candidate]
        raise AvroParseError(f'"{name}" is not a defined name')

    def _named(self, spec: dict[str, Any], kind: str, namespace: str | None) -> AvroType:
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise AvroParseError(f"a {kind} has no name")
        own = spec.get("namespace")
        if "." in name:
            full_name = name
            namespace, name = name.rsplit(".", 1)
        else:
            if isinstance(own, str):
                namespace = own or None
            full_name = f"{namespace}.{name}" if namespace else name
        if full_name in self.names:
            raise AvroParseError(f"can't redefine: {full_name}")
        node = AvroType(kind, name=name, full_name=full_name, aliases=self._aliases(spec, namespace))
        self.names[full_name] = node
        if kind == "record":
            fields = self._required(spec, "fields")
            if not isinstance(fields, list):
                raise AvroParseError(f"fields of {full_name} are not a list")
            for item in fields:
                if not isinstance(item, dict) or not isinstance(item.get("name"), str) or "type" not in item:
                    raise AvroParseError(f"bad field in {full_name}: {item!r}")
                aliases = tuple(a for a in item.get("aliases", []) if isinstance(a, str))
                node.fields.append(
                    AvroField(item["name"], self.parse(item["type"], namespace), "default" in item, aliases)
                )
        elif kind == "enum":
            symbols = self._required(spec, "symbols")
            if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                raise AvroParseError(f"symbols of {full_name} are not a list of names")
            node.symbols = tuple(symbols)
            default = spec.get("default")
            node.enum_default = default if isinstance(default, str) else None
        else:
            size = self._required(spec, "size")
            if not isinstance(size, int) or isinstance(size, bool):
                raise AvroParseError(f"size of {full_name} is not an integer")
            node.size = size
        return node

    @staticmethod
    def _aliases(spec: dict[str, Any], namespace: str | None) -> tuple[str, ...]:
        out = []
        for alias in spec.get("aliases", []):
            if isinstance(alias, str):
                out.append(alias if "." in alias or not namespace else f"{namespace}.{alias}")
        return tuple(out)


def unreadable(reader: AvroType, writer: AvroType) -> str | None:
    """Why ``reader`` cannot read data written with ``writer``, or None if it can."""
    return _Resolver().resolve(writer, reader)


class _Resolver:
    """Resolves a writer schema against a reader schema, as Avro's ``Resolver`` (which its schema validators use)."""

    def __init__(self) -> None:
        #: Results by (writer, reader) node pair; a pair being resolved (recursive types) counts as resolvable.
        self.memo: dict[tuple[int, int], str | None] = {}
        self.busy: set[tuple[int, int]] = set()

    def resolve(self, writer: AvroType, reader: AvroType) -> str | None:
        pair = (id(writer), id(reader))
        if pair in self.busy:
            return None
        if pair not in self.memo:
            self.busy.add(pair)
            self.memo[pair] = self._resolve(writer, reader)
            self.busy.discard(pair)
        return self.memo[pair]

    def _resolve(self, writer: AvroType, reader: AvroType) -> str | None:
        if writer.kind == "union":
            return next((r for r in (self.resolve(b, reader) for b in writer.branches) if r is not None), None)
        if writer.kind == reader.kind:
            return self._same_kind(writer, reader)
        if reader.kind == "union":
            branch = self._branch(writer, reader)
            if branch is None:
                return f"Found {_label(writer)}, expecting {_label(reader)}: no union branch matches"
            return self.resolve(writer, branch)
        if writer.kind in _PROMOTIONS.get(reader.kind, ()):
            return None
        return f"Found {_label(writer)}, expecting {_label(reader)}"

    def _same_kind(self, writer: AvroType, reader: AvroType) -> str | None:
        kind = writer.kind
        if kind in ("array", "map"):
            assert writer.items is not None and reader.items is not None
            return self.resolve(writer.items, reader.items)
        if kind == "record":
            return self._record(writer, reader)
        if kind in ("enum", "fixed") and not _same_name(writer, reader):
            return f"Found {writer.full_name}, expecting {reader.full_name}"
        if kind == "fixed" and writer.size != reader.size:
            return f"Found {writer.full_name} of size {writer.size}, expecting size {reader.size}"
        # Enum symbols the reader lacks fail only when such a value is read, not in the validation.
        return None

    def _record(self, writer: AvroType, reader: AvroType) -> str | None:
        written: dict[str, AvroField] = {}
        for writer_field in writer.fields:
            # The reader's field aliases rename the writer's fields (Avro's Schema.applyAliases).
            reader_field = next((f for f in reader.fields if writer_field.name in (f.name, *f.aliases)), None)
            written[reader_field.name if reader_field else writer_field.name] = writer_field
        for reader_field in reader.fields:
            source = written.get(reader_field.name)
            if source is None:
                if reader_field.has_default:
                    continue
                return f"Found {writer.full_name}, expecting {reader.full_name}, missing field {reader_field.name}"
            reason = self.resolve(source.type, reader_field.type)
            if reason is not None:
                return reason
        return None

    def _branch(self, writer: AvroType, reader: AvroType) -> AvroType | None:
        """The reader union's branch a writer type resolves to (Avro's first matching branch), or None."""
        structure_match = None
        for branch in reader.branches:
            if branch.kind != writer.kind:
                continue
            if writer.kind not in ("record", "enum", "fixed"):
                return branch
            if writer.full_name == branch.full_name:
                return branch
            matches = writer.kind == "record" and self.resolve(writer, branch) is None
            if matches and (structure_match is None or writer.name == branch.name):
                structure_match = branch
        if structure_match is not None:
            return structure_match
        for branch in reader.branches:
            if writer.kind in _PROMOTIONS.get(branch.kind, ()):
                return branch
        return None


def _same_name(writer: AvroType, reader: AvroType) -> bool:
    return writer.full_name == reader.full_name or writer.full_name in reader.aliases


def _label(node: AvroType) -> str:
    return node.full_name or node.kind
