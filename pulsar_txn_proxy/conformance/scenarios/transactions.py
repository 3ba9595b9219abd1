"""Every transaction scenario of the Java harness (tests/java, official Java client 4.2.4), outcomes compared.

Topics are created as 3-partition topics through the admin API first, as the harness expects. Observations are
normalised: transaction ids become ``T0``, ``T1``... in order of appearance, ``ledger:entry[:batch]`` positions
become ranks, and exceptions are compared by class only (their messages are free text).
"""

from __future__ import annotations

from typing import Any

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from pulsar_txn_proxy.conformance.harness import run_scenario
from pulsar_txn_proxy.conformance.harness_observations import normalise_observations as _normalise
from pulsar_txn_proxy.conformance.harness_observations import unordered as _unordered

PARTITIONS = 3


def _harness(run: Run, name: str, *args: Any, ordered: bool = False, timeout: float = 90) -> Any:
    """Run a harness scenario; ``ordered`` for single-partition scenarios, whose arrival order is an observation."""
    obs = _normalise(run_scenario(run.target.service_url, name, *map(str, args), timeout=timeout))
    return obs if ordered else _unordered(obs)


def _topics(run: Run, *tags: str) -> list[str]:
    return [run.partitioned_topic(tag, PARTITIONS) for tag in tags]


@scenario
def test_commit_atomic(run: Run) -> Outcome:
    """One txn writes to two partitioned topics: nothing visible before commit, all 15 after."""
    a, b = _topics(run, "a", "b")
    return _harness(run, "commit_atomic", a, b)


@scenario
def test_commit_atomic_batched(run: Run) -> Outcome:
    """As commit_atomic, with batching producers."""
    a, b = _topics(run, "a", "b")
    return _harness(run, "commit_atomic", a, b, "batched")


@scenario
def test_abort_invisible(run: Run) -> Outcome:
    """An aborted txn's messages never show; plain messages afterwards flow."""
    a, b = _topics(run, "a", "b")
    return _harness(run, "abort_invisible", a, b)


@scenario
def test_read_committed_order(run: Run) -> Outcome:
    """Plain messages behind an open txn wait for it; after commit: t1, p1, p2."""
    (t,) = _topics(run, "t")
    return _harness(run, "read_committed_order", t, ordered=True)


@scenario
def test_interleaved_txns(run: Run) -> Outcome:
    """A committed txn behind an open one waits; the open one aborts: b1, p1."""
    (t,) = _topics(run, "t")
    return _harness(run, "interleaved_txns", t, ordered=True)


@scenario
def test_consume_process_produce(run: Run) -> Outcome:
    """Consume, produce and ack in one txn (Exclusive), commit."""
    i, o = _topics(run, "in", "out")
    return _harness(run, "consume_process_produce", i, o)


@scenario
def test_consume_process_produce_abort(run: Run) -> Outcome:
    """Consume, produce and ack in one txn (Shared), abort: inputs redelivered, no output."""
    i, o = _topics(run, "in", "out")
    return _harness(run, "consume_process_produce_abort", i, o, "Shared")


@scenario
def test_txn_ack_then_abort_shared(run: Run) -> Outcome:
    """Pulsar's TransactionEndToEndTest.txnAckTest on a Shared subscription."""
    (t,) = _topics(run, "t")
    return _harness(run, "txn_ack_then_abort", t, "Shared")


@scenario
def test_txn_ack_then_abort_failover(run: Run) -> Outcome:
    """Pulsar's TransactionEndToEndTest.txnAckTest on a Failover subscription."""
    (t,) = _topics(run, "t")
    return _harness(run, "txn_ack_then_abort", t, "Failover")


@scenario
def test_commit_after_abort(run: Run) -> Outcome:
    """Commit after abort: refused by the client, unknown to the coordinator."""
    (t,) = _topics(run, "t")
    return _harness(run, "commit_after_abort", t)


@scenario
def test_ack_conflict(run: Run) -> Outcome:
    """Two txns ack one message; a txn acks a plainly acked message."""
    (t,) = _topics(run, "t")
    return _harness(run, "ack_conflict", t)


@scenario
def test_txn_timeout(run: Run) -> Outcome:
    """A txn with a 2 s timeout is aborted by the coordinator."""
    i, o = _topics(run, "in", "out")
    return _harness(run, "txn_timeout", i, o)


@scenario
def test_hanging_txn_times_out(run: Run) -> Outcome:
    """The client dies with an open txn: it times out, the partition flows, the message can be acked again."""
    (t,) = _topics(run, "t")
    before = run_scenario(run.target.service_url, "hang_prepare", t, "4")
    after = run_scenario(run.target.service_url, "hang_verify", t, before["txn_id"], timeout=120)
    return _normalise({"before": before, "after": after})


@scenario
def test_reader_with_open_txn(run: Run) -> Outcome:
    """getLastMessageId and hasMessageAvailable ignore uncommitted data and transaction markers."""
    (t,) = _topics(run, "t")
    return _harness(run, "reader_open_txn", t, ordered=True)


@scenario
def test_batch_index_ack_conflict(run: Run) -> Outcome:
    """Pending-ack conflicts on single messages of a batch."""
    (t,) = _topics(run, "t")
    return _harness(run, "batch_ack_conflict", t, ordered=True)


@scenario
def test_aborted_then_committed(run: Run) -> Outcome:
    """Committed data after an aborted txn is read by consumers and readers."""
    (t,) = _topics(run, "t")
    return _harness(run, "aborted_then_committed", t, ordered=True)


@scenario
def test_aborted_then_committed_batched(run: Run) -> Outcome:
    """As aborted_then_committed, batched."""
    (t,) = _topics(run, "t")
    return _harness(run, "aborted_then_committed", t, "batched", ordered=True)


def _crash(run: Run) -> None:
    if run.target.crash_restart is None:
        raise RuntimeError(f"cannot restart {run.target.name}")
    run.target.crash_restart()


@scenario
def test_committed_txn_survives_kill(run: Run) -> Outcome:
    """A committed txn's messages, and its end, survive kill -9."""
    (t,) = _topics(run, "t")
    raw = run_scenario(run.target.service_url, "commit_and_verify", t)
    _crash(run)
    after = run_scenario(run.target.service_url, "crash_verify", t, "post", "30", "6", raw["txn_id"])
    return _unordered(_normalise({"before": raw, "after": {"old_txn_id": raw["txn_id"], **after}}))


@scenario
def test_open_txns_abort_after_kill(run: Run) -> Outcome:
    """Open txns survive kill -9 as open, then time out: their sends vanish and their acks are undone."""
    (t,) = _topics(run, "t")
    before = run_scenario(run.target.service_url, "crash_prepare", t, "2")
    _crash(run)
    after = run_scenario(run.target.service_url, "crash_verify", t, "crash-sub", "30", "5")
    return _unordered(_normalise({"before": before, "after": after}))
