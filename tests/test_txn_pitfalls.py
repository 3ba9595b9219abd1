"""Regression tests for what users of Pulsar transactions run into (shared/docs/transaction-pitfalls.md).

The end-to-end tests drive the official Java client (tests/java) against a private server with 3 partitions
per auto-created topic and assert what an Apache Pulsar broker gives, without the failure the pitfall describes;
recovery figures are checked on the engine in-process.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from engine.transactions import TxnAction
from tests.server_process import ServerProcess
from tests.test_engine_transactions import Harness as EngineHarness
from tests.txn_harness import Scenario, txn_harness_fixture  # noqa: F401 (the txn_harness fixture)
from wire.framing import make_body
from wire.pulsar_api_pb2 import MessageMetadata

ServerFactory = Callable[..., ServerProcess]
SERVER_ARGS = ("--default-partitions", "3")
#: Server CPU time allowed while an open transaction holds back waiting consumers (generous: a regression guard).
IDLE_CPU_SECONDS = 0.3
IDLE_WINDOW_SECONDS = 3.0


def _topic(tag: str) -> str:
    return f"persistent://public/default/pit-{tag}-{uuid.uuid4().hex[:10]}"


def _error_type(outcome: dict[str, Any] | None) -> str | None:
    return None if outcome is None else outcome["type"]


def _entry(position: str) -> str:
    """``ledger:entry`` of a recorded position (drops a batch index)."""
    return ":".join(position.split(":")[:2])


@pytest.fixture
def url(server_factory: ServerFactory) -> str:
    """A private server with partitioned auto-created topics."""
    return server_factory(*SERVER_ARGS).url


def _wait_for_log(server: ServerProcess, needle: str, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while needle not in server.log():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# -- #1, #5: a hanging transaction ----------------------------------------------------------------------


def test_hanging_txn_of_dead_client_times_out_and_topic_flows(txn_harness: Scenario, url: str) -> None:
    """The app dies before commit: its txn times out, the topic flows again, and its acked message can be re-acked."""
    topic = _topic("hang")
    before = txn_harness(url, "hang_prepare", topic, 5)
    assert before["received"] == "m"
    assert before["ack_error"] is None
    # Plain p-0, p-1 wait behind the open transaction's t-0.
    assert before["watch_while_open"] == ["m"]
    after = txn_harness(url, "hang_verify", topic, before["txn_id"])
    assert after["watch_after_timeout"] == ["p-0", "p-1"]
    assert after["watch_extra"] == []
    assert sorted(after["shared_after_timeout"]) == ["m", "p-0", "p-1"]
    # Pulsar #10306: no TransactionConflictException "in pending ack status" after the timeout.
    assert after["reack_error"] is None
    assert after["reack_commit_error"] is None
    assert after["shared_after_commit"] == []
    assert _error_type(after["old_commit_error"]) == "TransactionNotFoundException"
    assert _error_type(after["old_abort_error"]) == "TransactionNotFoundException"


def test_recovery_does_not_replay_plain_traffic_after_transactions(tmp_path: Path) -> None:
    """Pulsar #19200: plain traffic after the last transaction must move the snapshot on, or recovery replays it."""
    h = EngineHarness(tmp_path)
    txn = h.new_txn()
    h.add_partition(txn)
    h.send(b"t", txn)
    h.end(txn, TxnAction.COMMIT)
    max_changes = h.broker.config.snapshot_policy.max_changes
    meta = MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    body = make_body(meta, b"plain")
    plain = 3 * max_changes
    for i in range(plain):
        h.topic.publish(h.producer, i, -1, body, meta, h.results.append)
        if i % 100 == 99:
            h.run()
    h.run()
    h.close()
    reopened = EngineHarness(tmp_path)
    assert reopened.topic.last_confirmed == plain + 1  # t, its commit marker, the plain entries
    assert reopened.topic.txn_buffer.recovered_from_snapshot
    assert reopened.topic.txn_buffer.replayed_entries <= max_changes + 100
    assert reopened.topic.read_limit == reopened.topic.last_confirmed
    reopened.close()


# -- #2, #11: getLastMessageId and hasMessageAvailable with open transactions -----------------------------


def test_reader_last_message_id_ignores_uncommitted_data_and_markers(txn_harness: Scenario, url: str) -> None:
    obs = txn_harness(url, "reader_open_txn", _topic("last"))
    p0, p1, p2 = (_entry(obs[k]) for k in ("sent_p0", "sent_p1", "sent_p2"))
    assert obs["read_first"] == ["p0"]
    assert obs["caught_up"] == {"available": False, "last": p0}
    # Uncommitted t1, and plain p1 behind it, are not available yet.
    assert obs["open_txn"] == {"available": False, "last": p0}
    assert obs["plain_behind_open_txn"] == {"available": False, "last": p0}
    assert obs["read_while_open"] == []
    assert obs["commit_error"] is None
    # After the commit: p1, not T's commit marker after it.
    assert obs["after_commit"] == {"available": True, "last": p1}
    assert obs["read_after_commit"] == ["t1", "p1"]
    assert obs["after_reading"] == {"available": False, "last": p1}
    # An aborted txn and its abort marker leave nothing to wait for.
    assert obs["abort_error"] is None
    assert obs["after_abort"] == {"available": False, "last": p1}
    assert obs["read_after_abort"] == []
    assert obs["after_p2"] == {"available": True, "last": p2}
    assert obs["read_after_p2"] == ["p2"]
    assert obs["at_end"] == {"available": False, "last": p2}


# -- #7: pending-ack conflicts on batch indexes -------------------------------------------------------------


def test_batch_index_ack_conflicts(txn_harness: Scenario, url: str) -> None:
    obs = txn_harness(url, "batch_ack_conflict", _topic("batch"))
    assert obs["received"] == ["m-0", "m-1", "m-2", "m-3"]
    # One batch: the same entry, batch indexes 0..3.
    assert {_entry(p) for p in obs["positions"]} == {_entry(obs["positions"][0])}
    assert [p.split(":")[2] for p in obs["positions"]] == ["0", "1", "2", "3"]
    assert obs["txn1_ack_m0"] is None
    assert _error_type(obs["txn2_ack_m0"]) == "TransactionConflictException"
    assert obs["txn3_ack_m1"] is None
    assert _error_type(obs["txn4_ack_m1"]) == "TransactionConflictException"
    failed = {"type": "TransactionHasOperationFailedException"}
    assert [c if c == "ok" else {"type": c["type"]} for c in obs["commit_errors"]] == ["ok", failed, "ok", failed]
    assert obs["left_after_commits"] == ["m-2", "m-3"]
    assert obs["left_extra"] == []
    assert obs["txn5_ack_errors"] == [None, None]
    # Two acks of one batch in one transaction both count.
    assert _error_type(obs["txn6_ack_first"]) == "TransactionConflictException"
    assert obs["while_txn5_holds_rest"] == []
    assert obs["txn5_commit_error"] is None
    assert _error_type(obs["txn6_commit_error"]) == "TransactionHasOperationFailedException"
    assert obs["left_at_end"] == []


# -- #10: readers and consumers behind aborted data ---------------------------------------------------------


@pytest.mark.parametrize("batched", [False, True], ids=["unbatched", "batched"])
def test_committed_data_after_aborted_txn_is_read(txn_harness: Scenario, url: str, batched: bool) -> None:
    args = [_topic("after-abort")] + (["batched"] if batched else [])
    obs = txn_harness(url, "aborted_then_committed", *args)
    expected = ["c-0", "c-1", "p-0"]
    assert obs["abort_error"] is None
    assert obs["commit_error"] is None
    assert obs["consumer"] == expected
    assert obs["consumer_extra"] == []
    assert obs["tail_reader"] == expected
    assert obs["tail_reader_available"] is False
    assert obs["late_reader"] == expected
    assert obs["late_reader_available"] is False
    assert obs["late_reader_extra"] == []


# -- #6: durability of the coordinator log (a txn committed before a kill stays ended: tests/test_transactions.py)


@pytest.mark.parametrize("action", ["commit", "abort"])
def test_kill_while_ending_finishes_after_restart(
    txn_harness: Scenario, server_factory: ServerFactory, action: str
) -> None:
    """A kill -9 between the COMMITTING/ABORTING record and the markers: recovery finishes the end, all or nothing."""
    server = server_factory(*SERVER_ARGS, "--txn-end-delay-ms", "10000")
    topic = _topic("ending")
    began = time.monotonic()
    before = txn_harness(server.url, "end_then_die", topic, action)
    server.kill()
    ended_in = time.monotonic() - began
    assert sorted(before["received"]) == [f"in-{i}" for i in range(3)]
    assert before["ack_errors"] == [None] * 3
    assert sorted(before["visible_while_ending"]) == [f"in-{i}" for i in range(3)]
    assert before["end_completed"] is False, f"the end finished before the kill ({ended_in:.1f} s)"
    server.start()
    status = "COMMITTING" if action == "commit" else "ABORTING"
    assert _wait_for_log(server, f"finishing {status} transaction"), server.log()
    after = txn_harness(server.url, "end_verify", topic, action, before["txn_id"])
    inputs = [f"in-{i}" for i in range(3)]
    produced = [f"K-{i}" for i in range(6)]
    if action == "commit":
        assert sorted(after["after"]) == sorted(inputs + produced)
        assert sorted(after["pre"]) == produced
    else:
        assert sorted(after["after"]) == inputs
        assert sorted(after["pre"]) == inputs
    assert after["after_extra"] == []
    assert after["pre_extra"] == []
    assert _error_type(after["old_commit_error"]) == "TransactionNotFoundException"
    assert _error_type(after["old_abort_error"]) == "TransactionNotFoundException"


# -- #9, #13: no spinning while a transaction holds consumers back -------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_open_txn_with_waiting_consumers_does_not_spin(
    txn_harness: Scenario, server_factory: ServerFactory, tmp_path: Path
) -> None:
    server = server_factory(*SERVER_ARGS)
    assert server.process is not None
    ready, release = tmp_path / "ready", tmp_path / "release"
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(txn_harness, server.url, "spin_hold", _topic("spin"), str(ready), str(release))
        try:
            deadline = time.monotonic() + 60
            while not ready.exists() and not future.done() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert ready.exists(), future.result() if future.done() else "the scenario never got ready"
            time.sleep(0.3)  # the last receipts and dispatch settle
            cpu_before = _cpu_seconds(server.process.pid)
            time.sleep(IDLE_WINDOW_SECONDS)
            used = _cpu_seconds(server.process.pid) - cpu_before
        finally:
            release.touch()
        obs = future.result()
    assert used < IDLE_CPU_SECONDS, f"server used {used:.2f} s of CPU in {IDLE_WINDOW_SECONDS} s while idle"
    assert obs["received"] == ["m", "m"]
    assert obs["ack_error"] is None
    assert obs["released"] is True
    assert obs["exclusive_while_open"] == []
    assert obs["shared_while_open"] == []
    assert obs["commit_error"] is None
    expected = ["t-0"] + [f"p-{i}" for i in range(10)]
    assert obs["exclusive_after_commit"] == expected
    assert obs["shared_after_commit"] == expected
    assert obs["extra"] == []
