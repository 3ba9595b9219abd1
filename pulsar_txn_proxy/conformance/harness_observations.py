"""Normalisation of the observations a client harness prints (tests/java, tests/go), so that two brokers compare.

Transaction ids (``most:least`` under a key naming ``txn``) become ``T0``, ``T1``... in order of appearance,
``ledger:entry[:batch]`` positions become ranks (``<rank>[.<batch>]``), exceptions (``{type, message, ...}``)
become ``{"error": type}``, and timings are dropped.
"""

from __future__ import annotations

import re
from typing import Any

_TXN_ID = re.compile(r"^-?\d+:\d+$")
_POSITION = re.compile(r"^(-?\d+):(-?\d+)(?::(-?\d+))?$")


def normalise_observations(obs: Any) -> Any:
    """Txn ids to ``T<n>``, positions to ranks, exceptions to their class; timings dropped."""
    txn_ids: dict[str, str] = {}
    positions: set[tuple[int, int]] = set()

    def collect(value: Any, in_txn: bool) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                collect(v, in_txn or "txn" in k)
        elif isinstance(value, list):
            for v in value:
                collect(v, in_txn)
        elif isinstance(value, str):
            if in_txn and _TXN_ID.match(value):
                txn_ids.setdefault(value, f"T{len(txn_ids)}")
            elif (match := _POSITION.match(value)) and not in_txn:
                positions.add((int(match.group(1)), int(match.group(2))))

    collect(obs, False)
    ranks = {p: i for i, p in enumerate(sorted(positions))}

    def replace(value: Any, in_txn: bool) -> Any:
        if isinstance(value, dict):
            if set(value) >= {"type", "message"}:
                return {"error": value["type"]}
            return {
                k: replace(v, in_txn or "txn" in k)
                for k, v in value.items()
                if k not in ("timing_ms", "waited_ms", "watch_waited_ms")
            }
        if isinstance(value, list):
            return [replace(v, in_txn) for v in value]
        if isinstance(value, str):
            if in_txn and value in txn_ids:
                return txn_ids[value]
            if (match := _POSITION.match(value)) and not in_txn:
                rank = str(ranks[(int(match.group(1)), int(match.group(2)))])
                return rank + (f".{match.group(3)}" if match.group(3) is not None else "")
        return value

    return replace(obs, False)


def unordered(obs: Any) -> Any:
    """For scenarios on partitioned topics: round-robin routing starts at a random partition and a consumer merges
    partitions as they come, so arrival order and partition are not observations; lists become sorted."""
    if isinstance(obs, dict):
        return {k: unordered(v) for k, v in obs.items()}
    if isinstance(obs, list):
        items = [unordered(v) for v in obs]
        if all(isinstance(v, str) for v in items):
            return sorted(items)
        if all(isinstance(v, dict) and "payload" in v for v in items):
            return sorted(({k: v for k, v in d.items() if k != "topic"} for d in items), key=lambda d: d["payload"])
        return items
    return obs
