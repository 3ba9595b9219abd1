"""Admin request bodies read as Pulsar's Jackson reads them (``proxy.admin.bodies``, ``proxy.admin.tenants``): the
rules the differential scenarios of ``tests/conformance/test_admin_bodies.py`` found on Pulsar 4.2.4."""

from __future__ import annotations

import pytest

from proxy.admin.bodies import UnreadableBodyError, as_bool, as_int, bean, string_map
from proxy.admin.http import AdminError
from proxy.admin.tenants import STRATEGY_ORDER, check_persistence, enum_value

RATE = {"publishThrottlingRateInMsg": -1, "publishThrottlingRateInByte": -1}


def test_a_missing_field_holds_its_default_a_null_one_its_zero() -> None:
    assert bean({}, "PublishRate", RATE) == {"publishThrottlingRateInMsg": -1, "publishThrottlingRateInByte": -1}
    nulls = {"publishThrottlingRateInMsg": None, "publishThrottlingRateInByte": None}
    assert bean(nulls, "PublishRate", RATE) == {"publishThrottlingRateInMsg": 0, "publishThrottlingRateInByte": 0}


def test_strings_are_converted_and_unknown_fields_dropped() -> None:
    given = {"publishThrottlingRateInMsg": "10", "publishThrottlingRateInByte": 5.9, "other": 1}
    assert bean(given, "PublishRate", RATE) == {"publishThrottlingRateInMsg": 10, "publishThrottlingRateInByte": 5}


@pytest.mark.parametrize("body", [[1], 5, "x"])
def test_a_bean_from_anything_but_an_object_is_unreadable(body: object) -> None:
    with pytest.raises(UnreadableBodyError):
        bean(body, "PublishRate", RATE)


def test_primitives_from_null_read_as_zero() -> None:
    assert (as_int(None), as_bool(None)) == (0, False)
    with pytest.raises(UnreadableBodyError):
        as_int({"value": 3})


def test_enums_by_name_or_ordinal_and_unknown_names_as_null() -> None:
    read = enum_value(STRATEGY_ORDER, "SchemaCompatibilityStrategy")
    assert (read("FULL"), read(1), read("full"), read("NOPE"), read(None)) == (
        "FULL", "ALWAYS_INCOMPATIBLE", None, None, None
    )
    with pytest.raises(UnreadableBodyError):
        read({"value": "FULL"})


def test_string_maps_take_numbers_and_booleans_as_text() -> None:
    assert string_map({"a": 1, "b": True, "c": None}) == {"a": "1", "b": "true", "c": None}
    with pytest.raises(UnreadableBodyError):
        string_map({"a": {"b": "c"}})


def test_persistence_with_null_quorums_is_refused() -> None:
    with pytest.raises(AdminError) as refused:
        check_persistence({"bookkeeperEnsemble": None, "bookkeeperWriteQuorum": None, "bookkeeperAckQuorum": None})
    assert refused.value.status == 400
    assert check_persistence({})["bookkeeperEnsemble"] == 2
