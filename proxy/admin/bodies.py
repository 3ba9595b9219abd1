"""JSON body values read as Pulsar's Jackson does with its default coercions: an ``int`` also from a string of digits
(``"3"``) or from a number with a fraction (truncated), ``null`` as 0, a ``boolean`` also from ``"true"``/``"false"``
or an integer (0 is false). Anything else is a 400, as Jersey answers a body Jackson cannot read.
"""

from __future__ import annotations

import json
import re
from typing import Any

from proxy.admin.http import AdminError

_INTEGER = re.compile(r"^[+-]?\d+$")
_JAVA_INT = (-(2**31), 2**31 - 1)
_JAVA_LONG = (-(2**63), 2**63 - 1)


class UnreadableBodyError(AdminError):
    """A body Jackson cannot read: Jersey answers 400 before the resource looks at anything else."""


def unreadable(value: Any, kind: str) -> UnreadableBodyError:
    """The 400 of a JSON value that is not a ``kind``."""
    return UnreadableBodyError(400, f"Cannot deserialize value of type `{kind}` from {value!r}")


def as_int(value: Any, kind: str = "int") -> int:
    """A Java ``int`` (``kind="long"``: a ``long``) as Jackson reads one from a JSON value."""
    low, high = _JAVA_LONG if kind == "long" else _JAVA_INT
    if value is None:
        return 0  # a null primitive reads as its default
    if isinstance(value, bool):
        raise unreadable(value, kind)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise unreadable(value, kind)
        value = int(value)
    elif isinstance(value, str):
        if not _INTEGER.match(value):
            raise unreadable(value, kind)
        value = int(value)
    if not isinstance(value, int) or not low <= value <= high:
        raise unreadable(value, kind)
    return value


def as_bool(value: Any) -> bool:
    """A Java ``boolean`` as Jackson reads one from a JSON value (null: false)."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise unreadable(value, "boolean")


def as_float(value: Any) -> float:
    """A Java ``double`` as Jackson reads one from a JSON value."""
    if isinstance(value, bool) or value is None:
        raise unreadable(value, "double")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise unreadable(value, "double") from None


def as_object(value: Any, kind: str) -> dict[str, Any]:
    """A JSON object read as a Java bean (``kind`` names it in the error)."""
    if not isinstance(value, dict):
        raise unreadable(value, kind)
    return value


def bean(value: Any, kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A Java bean with the given fields and their defaults (what a missing field holds): each present field read as
    its default's type; a field given as null holds its type's zero (a primitive's 0 or false, else null), as Jackson
    sets it; unknown fields are ignored, as Pulsar's object mapper does, and null fields left out, as it writes
    them."""
    given = as_object(value, kind)
    out: dict[str, Any] = {}
    for name, default in fields.items():
        raw = given.get(name)
        if name not in given:
            out[name] = default
        elif raw is None:
            out[name] = _ZERO.get(type(default))
        elif isinstance(default, bool):
            out[name] = as_bool(raw)
        elif isinstance(default, int):
            out[name] = as_int(raw, "long")
        elif isinstance(default, float):
            out[name] = as_float(raw)
        elif isinstance(default, str) and not isinstance(raw, str):
            raise unreadable(raw, "String")
        else:
            out[name] = raw
    return {k: v for k, v in out.items() if v is not None}


#: What a field given as null holds, by the type of its default (a Java primitive's zero; objects stay null).
_ZERO: dict[type, Any] = {bool: False, int: 0, float: 0.0}


def as_string(value: Any) -> str | None:
    """A Java ``String`` as Jackson reads one: a string, or the text of a number or boolean; null stays null."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    raise unreadable(value, "java.lang.String")


def string_map(value: Any) -> dict[str, str | None]:
    """A ``Map<String, String>`` as Jackson reads one (numbers and booleans as their text)."""
    return {str(k): as_string(v) for k, v in as_object(value, "java.util.LinkedHashMap").items()}
