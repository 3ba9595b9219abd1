"""Transactional acknowledgements inside batches and after aborts (Java harness, AckScenarios), outcomes compared.

Every scenario runs on one partition with a batch-index-acknowledging consumer; its observations are ordered
(payloads in arrival order, positions as ``entry-rank.batch-index``, redelivery counts). Issue 19, defects 2 and 3
and their neighbours: a cumulative ack at the first, a middle and the last index of a batch, committed or aborted;
individual acks of batch indexes, committed or aborted, on every subscription type; two aborted acks on every
subscription type; redelivery on request and on reconnect, and a second transaction over the same messages.
"""

from __future__ import annotations

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from pulsar_txn_proxy.conformance.harness import run_scenario
from pulsar_txn_proxy.conformance.scenarios.transactions import _harness, _normalise, _topics

#: Message numbers of b-0..b-12 (batches b-0..4, b-5..9, b-10..12): first, middle and last index of the second batch.
_CUMULATIVE_AT = {"first": 5, "middle": 7, "last": 9}


def _cumulative(run: Run, where: str, end: str) -> Outcome:
    (t,) = _topics(run, "t")
    return _harness(run, "ack_batch_cumulative", t, _CUMULATIVE_AT[where], end, ordered=True)


@scenario
def test_batch_cumulative_first_commit(run: Run) -> Outcome:
    """Exclusive: cumulative txn ack of the first message of a batch, commit; the rest of the batch stays."""
    return _cumulative(run, "first", "commit")


@scenario
def test_batch_cumulative_middle_commit(run: Run) -> Outcome:
    """Exclusive: cumulative txn ack inside a batch, commit: the messages after it stay (issue 19, defect 2)."""
    return _cumulative(run, "middle", "commit")


@scenario
def test_batch_cumulative_last_commit(run: Run) -> Outcome:
    """Exclusive: cumulative txn ack of the last message of a batch, commit."""
    return _cumulative(run, "last", "commit")


@scenario
def test_batch_cumulative_middle_abort(run: Run) -> Outcome:
    """Exclusive: cumulative txn ack inside a batch, abort: nothing redelivered until the consumer asks (issue 19,
    defect 2); a second transaction over the same message commits."""
    return _cumulative(run, "middle", "abort")


@scenario
def test_batch_cumulative_last_abort(run: Run) -> Outcome:
    """Exclusive: cumulative txn ack of the last message of a batch, abort."""
    return _cumulative(run, "last", "abort")


def _admin_view_of_cumulative(run: Run, where: str) -> Outcome:
    """A cumulative txn ack of b-<n> left open; the admin API's transaction metadata (its cumulativeAckPosition) and
    positionStatsInPendingAck of an entry before the batch, and of indexes of the batch before and after b-<n>."""
    (t,) = _topics(run, "t")
    raw = run_scenario(run.target.service_url, "ack_cumulative_open", t, str(_CUMULATIVE_AT[where]))
    most, least = raw["txn_id"].split(":")
    partition = f"{t}-partition-0"
    path = partition.removeprefix("persistent://")
    ledger, first_entry = raw["received"][0]["at"].split(":")[:2]
    batch_entry = raw["received"][5]["at"].split(":")[1]
    meta = run.admin("GET", f"/admin/v3/transactions/transactionMetadata/{most}/{least}")
    acked = meta.body.get("ackedPartitions", {}) if meta.status == 200 else {}
    position = acked.get(partition, {}).get("sub", {}).get("cumulativeAckPosition")
    states = {}
    for label, entry, index in (
        ("before_batch", first_entry, None),
        ("batch", batch_entry, None),
        ("batch_index_0", batch_entry, 0),
        ("batch_index_4", batch_entry, 4),
    ):
        query = "" if index is None else f"?batchIndex={index}"
        answer = run.admin(
            "GET", f"/admin/v3/transactions/positionStatsInPendingAck/{path}/sub/{ledger}/{entry}{query}"
        )
        states[label] = answer.body if answer.status == 200 else {"status": answer.status}
    abort = run.admin("POST", f"/admin/v3/transactions/abortTransaction/{most}/{least}")
    outcome = {
        "harness": raw,
        "metadata_status": meta.status,
        "cumulative_ack_position": position,
        "position_states": states,
        "abort_status": abort.status,
    }
    return _normalise(outcome)


@scenario
def test_admin_cumulative_inside_batch(run: Run) -> Outcome:
    """Admin view of a pending cumulative txn ack inside a batch: its position names the batch index; positions
    under it are not in pending ack (Pulsar tracks only individual acks there)."""
    return _admin_view_of_cumulative(run, "middle")


@scenario
def test_admin_cumulative_last_of_batch(run: Run) -> Outcome:
    """Admin view of a pending cumulative txn ack of the last message of a batch (no batch index)."""
    return _admin_view_of_cumulative(run, "last")


def _individual(run: Run, sub_type: str, end: str) -> Outcome:
    (t,) = _topics(run, "t")
    return _harness(run, "ack_batch_individual", t, sub_type, end, ordered=True)


@scenario
def test_batch_individual_exclusive_commit(run: Run) -> Outcome:
    """Exclusive: txn acks of batch indexes of two batches, commit."""
    return _individual(run, "Exclusive", "commit")


@scenario
def test_batch_individual_exclusive_abort(run: Run) -> Outcome:
    """Exclusive: txn acks of batch indexes of two batches, abort."""
    return _individual(run, "Exclusive", "abort")


@scenario
def test_batch_individual_failover_abort(run: Run) -> Outcome:
    """Failover: txn acks of batch indexes of two batches, abort: a rewind redelivers the unacknowledged indexes."""
    return _individual(run, "Failover", "abort")


@scenario
def test_batch_individual_shared_commit(run: Run) -> Outcome:
    """Shared: txn acks of batch indexes of two batches, commit."""
    return _individual(run, "Shared", "commit")


@scenario
def test_batch_individual_shared_abort(run: Run) -> Outcome:
    """Shared: txn acks of batch indexes of two batches, abort: each entry redelivered once, counted once."""
    return _individual(run, "Shared", "abort")


@scenario
def test_batch_individual_key_shared_abort(run: Run) -> Outcome:
    """Key_Shared: txn acks of batch indexes of two batches, abort: each entry redelivered once, counted once."""
    return _individual(run, "Key_Shared", "abort")


def _two_aborts(run: Run, sub_type: str, *flags: str) -> Outcome:
    (t,) = _topics(run, "t")
    return _harness(run, "ack_two_aborts", t, sub_type, *flags, ordered=True)


@scenario
def test_two_aborts_exclusive(run: Run) -> Outcome:
    """Exclusive: two aborted txn acks, then redelivery: each message exactly once."""
    return _two_aborts(run, "Exclusive")


@scenario
def test_two_aborts_failover(run: Run) -> Outcome:
    """Failover: two aborted txn acks, then redelivery: each message exactly once (issue 19, defect 3)."""
    return _two_aborts(run, "Failover")


@scenario
def test_two_aborts_shared(run: Run) -> Outcome:
    """Shared: two aborted txn acks: each released message redelivered once, with redelivery count 1."""
    return _two_aborts(run, "Shared")


@scenario
def test_two_aborts_key_shared(run: Run) -> Outcome:
    """Key_Shared: two aborted txn acks: each released message redelivered once, with redelivery count 1."""
    return _two_aborts(run, "Key_Shared")


@scenario
def test_two_cumulative_aborts_exclusive(run: Run) -> Outcome:
    """Exclusive: two cumulative txn acks, each aborted: nothing redelivered until the consumer asks, then each
    message once."""
    return _two_aborts(run, "Exclusive", "cumulative")


@scenario
def test_two_cumulative_aborts_failover(run: Run) -> Outcome:
    """Failover: two cumulative txn acks, each aborted: nothing redelivered until the consumer asks, then each
    message once (issue 19, defect 3)."""
    return _two_aborts(run, "Failover", "cumulative")
