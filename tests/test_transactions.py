"""Pulsar transactions, driven by the official Java client (tests/java) since the Python client has none.

Every test starts a private server with 3 partitions per auto-created topic and runs one harness scenario; the
expected outcomes are what an Apache Pulsar broker gives for the same client calls.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.server_process import ServerProcess
from tests.txn_harness import Scenario, txn_harness_fixture  # noqa: F401 (the txn_harness fixture)

ServerFactory = Callable[..., ServerProcess]
SERVER_ARGS = ("--default-partitions", "3")


def _topic(tag: str) -> str:
    return f"persistent://public/default/txn-{tag}-{uuid.uuid4().hex[:10]}"


def _payloads(deliveries: list[dict[str, Any]]) -> list[str]:
    return [d["payload"] for d in deliveries]


def _error_type(outcome: dict[str, Any] | None) -> str | None:
    return None if outcome is None else outcome["type"]


@pytest.fixture
def url(server_factory: ServerFactory) -> str:
    """A private server with partitioned auto-created topics."""
    return server_factory(*SERVER_ARGS).url


@pytest.mark.parametrize("batched", [False, True], ids=["unbatched", "batched"])
def test_commit_is_atomic_across_topics(txn_harness: Scenario, url: str, batched: bool) -> None:
    args = [_topic("a"), _topic("b")] + (["batched"] if batched else [])
    obs = txn_harness(url, "commit_atomic", *args)
    assert obs["before_end"] == []
    assert obs["commit_error"] is None
    assert obs["txn_state"] == "COMMITTED"
    expected = [f"a-{i}" for i in range(10)] + [f"b-{i}" for i in range(5)]
    assert sorted(obs["after_commit"]) == sorted(expected)
    assert obs["extra"] == []


def test_abort_hides_messages_and_topic_keeps_flowing(txn_harness: Scenario, url: str) -> None:
    obs = txn_harness(url, "abort_invisible", _topic("a"), _topic("b"))
    assert obs["before_end"] == []
    assert obs["abort_error"] is None
    assert obs["txn_state"] == "ABORTED"
    assert obs["after_abort"] == []
    expected = [f"plain-{t}-{i}" for t in "ab" for i in range(3)]
    assert sorted(obs["plain_after_abort"]) == sorted(expected)


def test_open_txn_holds_back_later_plain_messages(txn_harness: Scenario, url: str) -> None:
    obs = txn_harness(url, "read_committed_order", _topic("order"))
    assert obs["before_commit"] == []
    assert obs["commit_error"] is None
    assert obs["after_commit"] == ["t1", "p1", "p2"]
    assert obs["extra"] == []


def test_committed_txn_waits_for_earlier_open_txn(txn_harness: Scenario, url: str) -> None:
    obs = txn_harness(url, "interleaved_txns", _topic("interleaved"))
    assert obs["t2_commit_error"] is None
    assert obs["after_t2_commit"] == []
    assert obs["t1_abort_error"] is None
    assert obs["after_t1_abort"] == ["b1", "p1"]
    assert obs["extra"] == []


def test_consume_process_produce_commit(txn_harness: Scenario, url: str) -> None:
    obs = txn_harness(url, "consume_process_produce", _topic("in"), _topic("out"))
    inputs = [f"m-{i}" for i in range(5)]
    assert sorted(obs["consumed"]) == inputs
    assert obs["ack_errors"] == [None] * 5
    assert obs["commit_error"] is None
    assert sorted(obs["output"]) == [f"processed-{m}" for m in inputs]
    assert obs["extra"] == []
    assert obs["input_after_commit"] == []


def test_consume_process_produce_abort(txn_harness: Scenario, url: str) -> None:
    obs = txn_harness(url, "consume_process_produce_abort", _topic("in"), _topic("out"), "Shared")
    inputs = [f"m-{i}" for i in range(5)]
    assert sorted(obs["consumed"]) == inputs
    assert obs["ack_errors"] == [None] * 5
    assert obs["abort_error"] is None
    assert obs["output"] == []
    assert sorted(_payloads(obs["redelivered"])) == inputs
    # A Shared dispatcher counts the replay of aborted pending acks as a redelivery.
    assert [d["redelivery_count"] for d in obs["redelivered"]] == [1] * 5


@pytest.mark.parametrize("sub_type", ["Shared", "Failover"])
def test_txn_ack_abort_redelivers_then_commit_acks(txn_harness: Scenario, url: str, sub_type: str) -> None:
    """Pulsar's TransactionEndToEndTest.txnAckTest."""
    obs = txn_harness(url, "txn_ack_then_abort", _topic("ack"), sub_type)
    messages = [f"m-{i}" for i in range(10)]
    assert sorted(obs["first_received"]) == messages
    assert obs["txn1_ack_errors"] == [None] * 10
    assert obs["before_abort"] == []
    assert obs["abort_error"] is None
    assert sorted(_payloads(obs["after_abort"])) == messages
    if sub_type == "Shared":
        assert [d["redelivery_count"] for d in obs["after_abort"]] == [1] * 10
    assert obs["txn2_ack_errors"] == [None] * 10
    assert obs["commit_error"] is None
    assert obs["after_commit"] == []
    assert _error_type(obs["recommit_error"]) == "TransactionNotFoundException"


def test_commit_after_abort_fails(txn_harness: Scenario, url: str) -> None:
    obs = txn_harness(url, "commit_after_abort", _topic("ended"))
    assert obs["abort_error"] is None
    assert _error_type(obs["client_commit_error"]) == "InvalidTxnStatusException"
    assert _error_type(obs["server_commit_error"]) == "TransactionNotFoundException"
    assert _error_type(obs["server_abort_again_error"]) == "TransactionNotFoundException"
    assert obs["visible"] == []


def test_ack_conflict(txn_harness: Scenario, url: str) -> None:
    obs = txn_harness(url, "ack_conflict", _topic("conflict"))
    assert sorted(obs["received"]) == ["m", "n"]
    assert obs["txn1_ack_error"] is None
    assert _error_type(obs["txn2_ack_error"]) == "TransactionConflictException"
    assert obs["plain_ack_error"] is None
    assert _error_type(obs["txn3_ack_error"]) == "TransactionConflictException"
    # A transaction with a failed operation is aborted by the client when asked to commit.
    assert _error_type(obs["txn2_commit_error"]) == "TransactionHasOperationFailedException"
    assert _error_type(obs["txn3_commit_error"]) == "TransactionHasOperationFailedException"
    assert obs["txn1_commit_error"] is None
    assert obs["txn_states"] == ["COMMITTED", "ABORTED", "ABORTED"]
    assert obs["after_commit"] == []


def test_txn_timeout_aborts(txn_harness: Scenario, url: str) -> None:
    obs = txn_harness(url, "txn_timeout", _topic("in"), _topic("out"))
    assert obs["consumed"] == "in-0"
    assert obs["ack_error"] is None
    assert obs["output"] == []
    assert _payloads(obs["redelivered"]) == ["in-0"]
    assert [d["redelivery_count"] for d in obs["redelivered"]] == [1]
    assert obs["client_state"] == "TIME_OUT"
    assert _error_type(obs["client_commit_error"]) == "InvalidTxnStatusException"
    assert _error_type(obs["server_commit_error"]) == "TransactionNotFoundException"
    assert sorted(obs["plain_after_timeout"]) == [f"plain-{i}" for i in range(3)]


def test_committed_txn_survives_kill(txn_harness: Scenario, server_factory: ServerFactory) -> None:
    """Its messages stay visible, and it does not come back OPEN (Pulsar #20150): ending it again is not found."""
    server = server_factory(*SERVER_ARGS)
    topic = _topic("durable")
    before = txn_harness(server.url, "commit_and_verify", topic)
    assert before["commit_error"] is None
    assert sorted(before["visible_before_crash"]) == [f"K-{i}" for i in range(3)]
    server.kill()
    server.restart()
    after = txn_harness(server.url, "crash_verify", topic, "post", 10, 6, before["txn_id"])
    expected = [f"K-{i}" for i in range(3)] + [f"plain-after-{i}" for i in range(3)]
    assert sorted(_payloads(after["received"])) == sorted(expected)
    assert after["extra"] == []
    assert after["new_txn_id"] != before["txn_id"]
    assert after["new_txn_commit_error"] is None
    assert _error_type(after["old_commit_error"]) == "TransactionNotFoundException"
    assert _error_type(after["old_abort_error"]) == "TransactionNotFoundException"


def test_open_txns_abort_after_kill(txn_harness: Scenario, server_factory: ServerFactory) -> None:
    """Open txns survive a kill -9 as open, then time out: their sends vanish and their acks are undone."""
    server = server_factory(*SERVER_ARGS)
    topic = _topic("crash")
    before = txn_harness(server.url, "crash_prepare", topic, 2)
    assert sorted(before["received_before"]) == [f"plain-before-{i}" for i in range(3)]
    server.kill()
    server.restart()
    after = txn_harness(server.url, "crash_verify", topic, "crash-sub", 20, 5)
    # plain-before-0 was acked plainly; plain-before-1 only in the (never committed) txn C.
    expected = ["plain-before-1", "plain-before-2"] + [f"plain-after-{i}" for i in range(3)]
    assert sorted(_payloads(after["received"])) == sorted(expected)
    assert after["extra"] == []
    assert after["new_txn_id"] not in before["txn_ids"].values()
    assert after["new_txn_commit_error"] is None
