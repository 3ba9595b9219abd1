"""The subscription types: their numbers on the wire and their names in policies."""

from __future__ import annotations

from enum import IntEnum


class SubType(IntEnum):
    """Subscription types, numbered as ``CommandSubscribe.SubType``."""

    EXCLUSIVE = 0
    SHARED = 1
    FAILOVER = 2
    KEY_SHARED = 3


#: Every subscription type, by the names policies use (indexed by :class:`SubType`).
SUBSCRIPTION_TYPES = ("Exclusive", "Shared", "Failover", "Key_Shared")
