"""``normalise``: what legitimately differs between brokers (random names, ledger ids) becomes stable placeholders."""

from __future__ import annotations

from pulsar_txn_proxy.conformance.framework import normalise


def test_names_are_replaced_in_keys_as_in_values() -> None:
    """A map keyed by topic (admin_bodies.unserved_route_bodies) must compare equal across runs and brokers."""
    names = {"unserved-0123456789": "<unserved>"}
    outcome = {"routes": [{"persistent://unserved-0123456789/ns/t": True}], "topic": "unserved-0123456789/ns"}
    assert normalise(outcome, names) == {"routes": [{"persistent://<unserved>/ns/t": True}], "topic": "<unserved>/ns"}


def test_message_ids_become_ranks_per_topic() -> None:
    outcome = [{"$mid": [7, 3, -1, -1], "topic": "t"}, {"$mid": [7, 1, -1, 2], "topic": "t"}]
    assert normalise(outcome, {}) == ["1", "0.2"]
