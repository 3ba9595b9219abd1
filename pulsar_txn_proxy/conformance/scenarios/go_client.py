"""Scenarios of the Go harness (tests/go, the official Go client github.com/apache/pulsar-client-go), compared.

Each scenario runs one Go process on a fresh non-partitioned topic and returns its observations (payloads in arrival
order, message ids, redelivery counts, errors by type), normalised as the Java harness's are
(:mod:`pulsar_txn_proxy.conformance.harness_observations`).

The Go client acknowledges in a transaction only one message at a time: it has no transactional cumulative
acknowledgement, so issue 19's defect 2 is approached through transactional batch-index acknowledgements.
"""

from __future__ import annotations

from typing import Any

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from pulsar_txn_proxy.conformance.harness import go_scenario as run_scenario
from pulsar_txn_proxy.conformance.harness_observations import normalise_observations


def _go(run: Run, name: str, *args: str) -> Any:
    """Run a Go scenario on a fresh topic tagged ``t``."""
    return normalise_observations(run_scenario(run.target.service_url, name, run.topic("t"), *args))


@scenario
def test_produce_consume(run: Run) -> Outcome:
    """10 messages, each acknowledged by an Exclusive consumer; nothing after resubscribing."""
    return _go(run, "produce_consume")


@scenario
def test_produce_consume_batched(run: Run) -> Outcome:
    """As produce_consume, the 10 messages in one batch."""
    return _go(run, "produce_consume", "batched")


@scenario
def test_cumulative_ack_first_of_batch(run: Run) -> Outcome:
    """Issue 19, defect 1: cumulative ack of m-0 of a batch (the client acks up to entry -1), close, resubscribe:
    all 10 come back."""
    return _go(run, "cumulative_ack", "0")


@scenario
def test_cumulative_ack_middle_of_batch(run: Run) -> Outcome:
    """Issue 19, defect 1: cumulative ack of m-4 of a batch, close, resubscribe: all 10 come back."""
    return _go(run, "cumulative_ack", "4")


@scenario
def test_cumulative_ack_middle_of_batch_index_ack(run: Run) -> Outcome:
    """Cumulative ack of m-4 of a batch with batch-index acknowledgement: m-5..m-9 come back."""
    return _go(run, "cumulative_ack", "4", "batch_index_ack")


@scenario
def test_batch_index_acks(run: Run) -> Outcome:
    """m-0, m-2, m-5 of a batch acknowledged one by one (batch-index acks): the other 7 come back."""
    return _go(run, "batch_index_acks")


@scenario
def test_txn_produce_commit(run: Run) -> Outcome:
    """A committed transaction's 5 messages: invisible before the commit, all after."""
    return _go(run, "txn_produce", "commit")


@scenario
def test_txn_produce_commit_batched(run: Run) -> Outcome:
    """As txn_produce_commit, from a batching producer."""
    return _go(run, "txn_produce", "commit", "batched")


@scenario
def test_txn_produce_abort(run: Run) -> Outcome:
    """An aborted transaction's 5 messages (see KNOWN_DIFFERENCES: Pulsar delivers them to this client)."""
    return _go(run, "txn_produce", "abort")


@scenario
def test_txn_produce_abort_batched(run: Run) -> Outcome:
    """As txn_produce_abort, from a batching producer."""
    return _go(run, "txn_produce", "abort", "batched")


@scenario
def test_batch_after_txn(run: Run) -> Outcome:
    """A batching producer's plain batch after its transaction committed carries that transaction's id: Pulsar
    accepts the send."""
    return _go(run, "batch_after_txn", "commit")


@scenario
def test_txn_ack_abort_shared(run: Run) -> Outcome:
    """Pulsar's txnAckTest on a Shared subscription: the abort redelivers the 10 acknowledged messages."""
    return _go(run, "txn_ack_abort", "Shared")


@scenario
def test_txn_ack_abort_failover(run: Run) -> Outcome:
    """Pulsar's txnAckTest on a Failover subscription."""
    return _go(run, "txn_ack_abort", "Failover")


@scenario
def test_txn_batch_ack_commit(run: Run) -> Outcome:
    """Issue 19, defect 2 (individual acks): a transaction acknowledges m-0..m-4 of a batch one by one (each ack set
    includes the indexes acked before), commits: m-5..m-9 are left."""
    return _go(run, "txn_batch_ack", "commit")


@scenario
def test_txn_batch_ack_abort(run: Run) -> Outcome:
    """As txn_batch_ack_commit, the transaction aborts: Pulsar redelivers m-5..m-9 at once, and m-0..m-4 do not come
    back, not even after resubscribing."""
    return _go(run, "txn_batch_ack", "abort")


@scenario
def test_txn_batch_ack_abort_shared(run: Run) -> Outcome:
    """As txn_batch_ack_abort, on a Shared subscription (the abort redelivers with a redelivery count)."""
    return _go(run, "txn_batch_ack", "abort", "Shared")


@scenario
def test_failover_txn_acks(run: Run) -> Outcome:
    """Issue 19, defect 3: Failover; txn1 acks f-0 and aborts, txn2 acks f-1 and aborts; what each abort redelivers,
    then a negative ack of everything received, then resubscribe."""
    return _go(run, "failover_txn_acks")


@scenario
def test_txn_chunk_ack(run: Run) -> Outcome:
    """The Go client's TestTxn_AckChunkMessage: a message larger than the broker's max message size (6 MiB here, over
    the default 5 MiB; that suite's broker has 1 MiB and sends 1 MiB) sent with chunking in a transaction gives a
    chunked message id; acknowledged in an aborted transaction it comes back after resubscribing, and acknowledged in
    a committed one it does not."""
    return _go(run, "txn_chunk_ack", str(6 * 1024 * 1024))


@scenario
def test_key_shared_spread(run: Run) -> Outcome:
    """The Go client's TestConsumerKeyShared (two Key_Shared consumers, 100 messages on three keys) with names given,
    since the client names its consumers at random: which consumer gets which keys follows Pulsar's hash ring (points
    named after the consumer and its index among consumers of that name), two of the same name included."""
    return {
        names: normalise_observations(
            run_scenario(run.target.service_url, "key_shared_spread", run.topic(f"ks-{names}"), names)
        )
        for names in ("alpha", "beta", "gamma", "same-x", "same-delta")
    }


@scenario
def test_admin_create_partitioned(run: Run) -> Outcome:
    """The Go admin client creating partitioned topics: its body is a PartitionedTopicMetadata sent with its content
    type, ``{"properties": null, "partitions": 4}`` without properties (a 400 here once); partitions and properties
    read back through the same client."""
    return normalise_observations(
        run_scenario(
            run.target.service_url,
            "admin_create_partitioned",
            run.target.admin_url,
            run.topic("plain"),
            run.topic("with-properties"),
        )
    )


@scenario
def test_seek_id(run: Run) -> Outcome:
    """Consumer seek to m-3's id after everything was acknowledged."""
    return _go(run, "seek", "id")


@scenario
def test_seek_id_in_batch(run: Run) -> Outcome:
    """Consumer seek to m-3's id inside a batch."""
    return _go(run, "seek", "id", "batched")


@scenario
def test_seek_earliest(run: Run) -> Outcome:
    """Consumer seek to the earliest position (ledger and entry -1 on the wire)."""
    return _go(run, "seek", "earliest")


@scenario
def test_seek_latest(run: Run) -> Outcome:
    """Consumer seek to the latest position (ledger and entry 2^63-1)."""
    return _go(run, "seek", "latest")


@scenario
def test_reader_after_id(run: Run) -> Outcome:
    """A reader starting after m-3's id."""
    return _go(run, "reader_start", "3")


@scenario
def test_reader_from_id_inclusive(run: Run) -> Outcome:
    """A reader starting at m-3's id, inclusive."""
    return _go(run, "reader_start", "3", "inclusive")


@scenario
def test_reader_after_id_in_batch(run: Run) -> Outcome:
    """A reader starting after m-3's id inside a batch."""
    return _go(run, "reader_start", "3", "exclusive", "batched")


@scenario
def test_reader_from_id_in_batch_inclusive(run: Run) -> Outcome:
    """A reader starting at m-3's id inside a batch, inclusive."""
    return _go(run, "reader_start", "3", "inclusive", "batched")


@scenario
def test_reader_latest_inclusive(run: Run) -> Outcome:
    """A reader starting at the latest message, inclusive: it reads the last one."""
    return _go(run, "reader_start", "latest", "inclusive")
