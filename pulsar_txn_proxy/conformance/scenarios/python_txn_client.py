"""The project's Python transactional client (:mod:`pulsar_txn`) against this endpoint and Apache Pulsar 4.2.4.

The official Python client has no transactions, so ``pulsar_txn.Client`` is how Python users get them (the Spark
connector ends its tasks' transactions through it too); these scenarios run it against both brokers: sends in a
transaction appear at its commit and never after its abort, acknowledgements in a transaction count at its commit and
are undone by its abort (the messages come back to a new consumer), a transaction past its timeout is aborted by the
coordinator, conflicting acknowledgements, and the broker's answers to ending a transaction twice or ending an
unknown one (asked through ``resume_transaction``, which leaves the client-side checks out). The last scenarios run
a script of the Java harness (official Java client 4.2.4) and its port to pulsar_txn side by side and record whether
both observed the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pulsar_txn import (
    Client,
    Consumer,
    ConsumerType,
    InitialPosition,
    Message,
    MessageId,
    PulsarException,
    Timeout,
    TxnId,
)
from pulsar_txn_proxy.conformance.framework import SETTLE_S, Outcome, Run, scenario
from pulsar_txn_proxy.conformance.harness import run_scenario
from pulsar_txn_proxy.conformance.harness_observations import normalise_observations as _normalise
from pulsar_txn_proxy.conformance.harness_observations import unordered as _unordered


def _client(run: Run) -> Client:
    client = Client(run.target.service_url, operation_timeout_seconds=20, **run.credentials.txn_client_kwargs())
    run._clients.append(client)  # type: ignore[arg-type]  # closed with the run's clients
    return client


def _drain(consumer: Consumer, quiet_ms: int = 700, expect: int = 0) -> list[Message]:
    """Until ``quiet_ms`` passes with nothing; the first ``expect`` (as many as Pulsar delivers there) are each waited
    for up to ``SETTLE_S``."""
    got = []
    while True:
        try:
            got.append(consumer.receive(int(SETTLE_S * 1000) if len(got) < expect else quiet_ms))
        except Timeout:
            return got


def _texts(messages: list[Message]) -> list[str]:
    return [m.data().decode() for m in messages]


def _error(step: Any) -> str:
    try:
        step()
    except Exception as exc:
        return type(exc).__name__
    return "ok"


@scenario
def test_sends_in_a_transaction_appear_at_commit_and_never_after_abort(run: Run) -> Outcome:
    """Synchronous and batched sends in two transactions; one commits, one aborts; a plain send after both."""
    client = _client(run)
    topic = run.topic("t")
    consumer = client.subscribe(topic, run.name("sub"), initial_position=InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=True)
    kept, dropped = client.new_transaction(60_000), client.new_transaction(60_000)
    sent_id = producer.send(b"kept-0", partition_key="k", properties={"p": "1"}, txn=kept)
    for i in range(3):
        producer.send_async(f"dropped-{i}".encode(), None, txn=dropped)
    producer.send_async(b"kept-1", None, txn=kept)
    producer.flush()
    before = _texts(_drain(consumer))
    kept.commit()
    dropped.abort()
    producer.send(b"plain")
    after = _drain(consumer, expect=3)
    return {
        "before_commit": before,
        "after": _texts(after),
        "first": {"key": after[0].partition_key(), "props": after[0].properties()} if after else None,
        "sent_id_is_first": bool(after)
        and (after[0].message_id().ledger_id(), after[0].message_id().entry_id())
        == (sent_id.ledger_id(), sent_id.entry_id()),
        "states": [kept.state.value, dropped.state.value],
    }


@scenario
def test_acknowledgements_in_a_transaction_count_at_commit_and_come_back_after_abort(run: Run) -> Outcome:
    """m0 acknowledged in a committed transaction, m1 in an aborted one, m2 plainly; a new consumer gets m1 only."""
    client = _client(run)
    topic, sub = run.topic("t"), run.name("sub")
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, sub, initial_position=InitialPosition.Earliest)
    for i in range(3):
        producer.send(f"m{i}".encode())
    received = [consumer.receive(int(SETTLE_S * 1000)) for _ in range(3)]
    committed, aborted = client.new_transaction(60_000), client.new_transaction(60_000)
    consumer.acknowledge(received[0], txn=committed)
    consumer.acknowledge(received[1], txn=aborted)
    consumer.acknowledge(received[2])
    conflict = _error(lambda: consumer.acknowledge(received[1], txn=client.new_transaction(60_000)))
    committed.commit()
    aborted.abort()
    consumer.close()
    again = client.subscribe(topic, sub, initial_position=InitialPosition.Earliest)
    back = _drain(again, expect=1)
    return {"received": _texts(received), "conflict": conflict, "after_abort": _texts(back)}


@scenario
def test_a_cumulative_acknowledgement_in_a_transaction(run: Run) -> Outcome:
    """A cumulative ack of m2 in an aborted transaction acknowledges nothing; in a committed one, m0..m2."""
    client = _client(run)
    topic, sub = run.topic("t"), run.name("sub")
    producer = client.create_producer(topic, batching_enabled=True)
    for i in range(5):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    outcome: dict[str, Any] = {}
    for label in ("aborted", "committed"):
        consumer = client.subscribe(topic, sub, initial_position=InitialPosition.Earliest)
        got = [consumer.receive(int(SETTLE_S * 1000)) for _ in range(3)]
        txn = client.new_transaction(60_000)
        consumer.acknowledge_cumulative(got[2], txn=txn)
        if label == "aborted":
            txn.abort()
        else:
            txn.commit()
        consumer.close()
        outcome[label] = _texts(got)
    last = client.subscribe(topic, sub, initial_position=InitialPosition.Earliest)
    outcome["left"] = _texts(_drain(last, expect=2))
    return outcome


@scenario
def test_a_transaction_past_its_timeout_is_aborted(run: Run) -> Outcome:
    """A send in a transaction of 1 s, then 4 s: the coordinator aborted it; its commit (asked of the coordinator, past
    the client-side check) fails, the send never shows.

    Its golden comes from a private standalone (``--conformance-target pulsar``): the long-lived shared one was seen
    not to time a 1 s transaction out within 20 s."""
    client = _client(run)
    topic = run.topic("t")
    consumer = client.subscribe(topic, run.name("sub"), initial_position=InitialPosition.Earliest)
    producer = client.create_producer(topic)
    txn = client.new_transaction(1000)
    producer.send(b"late", txn=txn)
    time.sleep(4)
    commit = _error(client.resume_transaction(txn.id).commit)
    producer.send(b"plain")
    return {"commit": commit, "seen": _texts(_drain(consumer, expect=1))}


@scenario
def test_ending_a_transaction_twice_or_an_unknown_one_is_refused(run: Run) -> Outcome:
    """Each of commit/abort after commit/abort, and ending a transaction id the coordinator never issued."""
    client = _client(run)
    outcome = {}
    for first in ("commit", "abort"):
        for second in ("commit", "abort"):
            txn = client.new_transaction(60_000)
            getattr(txn, first)()
            outcome[f"{first}_then_{second}"] = _error(getattr(client.resume_transaction(txn.id), second))
    unknown = client.resume_transaction(TxnId(0, 1 << 40))
    outcome["commit_unknown"] = _error(unknown.commit)
    outcome["abort_unknown"] = _error(client.resume_transaction(TxnId(0, (1 << 40) + 1)).abort)
    return outcome


# -- the same scripts through the Java client (the harness) and through pulsar_txn -------------------------------

#: The Java client's exception for each of pulsar_txn's (its simple class name, as the harness reports it).
JAVA_EXCEPTIONS = {
    "TransactionConflict": "TransactionConflictException",
    "InvalidTxnStatusError": "InvalidTxnStatusException",
    "TransactionNotFound": "TransactionNotFoundException",
    "TransactionHasOperationFailedError": "TransactionHasOperationFailedException",
    "TransactionCoordinatorNotFoundError": "CoordinatorNotFoundException",
}
#: As the harness's transaction scenarios (their 3-partition topics, their windows).
PARTITIONS = 3
QUIET_MS = 1000
EXTRA_MS = 300


def _outcome(step: Any) -> dict[str, str] | None:
    """None, or the error as the harness describes one (the Java client's class for pulsar_txn's)."""
    try:
        step()
    except PulsarException as exc:
        name = type(exc).__name__
        return {"type": JAVA_EXCEPTIONS.get(name, name), "message": str(exc)}
    return None


def _receive(consumer: Consumer, count: int, timeout_ms: int = int(SETTLE_S * 1000)) -> list[Message]:
    """As the harness's ``receive``: until ``count`` came (as many as Pulsar delivers there) or ``timeout_ms``
    passed."""
    return _until(consumer.receive, count, timeout_ms)


def _until(take: Callable[[int], Message], count: int, timeout_ms: int) -> list[Message]:
    """``take(timeout_ms)`` (a consumer's ``receive``, a reader's ``read_next``) until ``count`` messages came or
    ``timeout_ms`` passed."""
    got: list[Message] = []
    deadline = time.monotonic() + timeout_ms / 1000
    while len(got) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            got.append(take(max(1, int(left * 1000))))
        except Timeout:
            break
    return got


def _within(consumer: Consumer, window_ms: int) -> list[Message]:
    return _receive(consumer, 1 << 30, window_ms)


def _txn_id(txn: Any) -> str:
    return f"{txn.id.most}:{txn.id.least}"


def _beside_java(run: Run, java_name: str, python_script: Any, *tags: str, java_args: tuple[str, ...] = ()) -> Outcome:
    """The harness's ``java_name`` and its port to pulsar_txn, each on fresh 3-partition topics; outcomes normalised
    alike (transaction ids, exception classes, arrival order), and whether they are the same."""
    java = _unordered(
        _normalise(
            run_scenario(
                run.target.service_url,
                java_name,
                *[run.partitioned_topic(f"java-{t}", PARTITIONS) for t in tags],
                *java_args,
                timeout=90,
            )
        )
    )
    java.pop("scenario", None)
    client = _client(run)
    ours = _unordered(_normalise(python_script(client, *[run.partitioned_topic(f"py-{t}", PARTITIONS) for t in tags])))
    return {"java": java, "pulsar_txn": ours, "same": java == ours}


def _produce_then_end(client: Client, topic_a: str, topic_b: str, commit: bool) -> dict[str, Any]:
    """The harness's ``commit_atomic`` / ``abort_invisible`` (not batched), with pulsar_txn."""
    obs: dict[str, Any] = {"batched": False}
    consumer = client.subscribe(
        [topic_a, topic_b], "sub", consumer_type=ConsumerType.Exclusive, initial_position=InitialPosition.Earliest
    )
    producer_a, producer_b = client.create_producer(topic_a), client.create_producer(topic_b)
    txn = client.new_transaction(60_000)
    obs["txn_id"] = _txn_id(txn)
    for i in range(10):
        producer_a.send_async(f"a-{i}".encode(), None, txn=txn)
    for i in range(5):
        producer_b.send_async(f"b-{i}".encode(), None, txn=txn)
    producer_a.flush()
    producer_b.flush()
    obs["before_end"] = _texts(_within(consumer, QUIET_MS))
    if commit:
        obs["commit_error"] = _outcome(txn.commit)
        obs["txn_state"] = txn.state.value
        obs["after_commit"] = _texts(_receive(consumer, 15))
        obs["extra"] = _texts(_within(consumer, EXTRA_MS))
    else:
        obs["abort_error"] = _outcome(txn.abort)
        obs["txn_state"] = txn.state.value
        obs["after_abort"] = _texts(_within(consumer, 2000))
        plain_a, plain_b = client.create_producer(topic_a), client.create_producer(topic_b)
        for i in range(3):
            plain_a.send(f"plain-a-{i}".encode())
            plain_b.send(f"plain-b-{i}".encode())
        obs["plain_after_abort"] = _texts(_receive(consumer, 6))
    return obs


def _commit_after_abort(client: Client, topic: str) -> dict[str, Any]:
    """The harness's ``commit_after_abort``: the coordinator asked directly through ``resume_transaction``."""
    producer = client.create_producer(topic)
    txn = client.new_transaction(60_000)
    obs: dict[str, Any] = {"txn_id": _txn_id(txn)}
    producer.send(b"x", txn=txn)
    obs["abort_error"] = _outcome(txn.abort)
    obs["client_commit_error"] = _outcome(txn.commit)
    obs["server_commit_error"] = _outcome(client.resume_transaction(txn.id).commit)
    obs["server_abort_again_error"] = _outcome(client.resume_transaction(txn.id).abort)
    consumer = client.subscribe(topic, "sub", initial_position=InitialPosition.Earliest)
    obs["visible"] = _texts(_within(consumer, 500))
    return obs


def _ack_conflict(client: Client, topic: str) -> dict[str, Any]:
    """The harness's ``ack_conflict``. The Java script turns acknowledgement grouping off; pulsar_txn groups plain
    acknowledgements for 100 ms (as the official clients do by default), so the plain one is given that time."""
    producer = client.create_producer(topic)
    producer.send(b"m")
    producer.send(b"n")
    consumer = client.subscribe(
        topic, "sub", consumer_type=ConsumerType.Shared, initial_position=InitialPosition.Earliest
    )
    by_payload = {m.data().decode(): m for m in _receive(consumer, 2)}
    obs: dict[str, Any] = {"received": list(by_payload)}
    m, n = by_payload["m"], by_payload["n"]
    txn1, txn2, txn3 = (client.new_transaction(60_000) for _ in range(3))
    obs["txn_ids"] = [_txn_id(txn1), _txn_id(txn2), _txn_id(txn3)]
    obs["txn1_ack_error"] = _outcome(lambda: consumer.acknowledge(m, txn=txn1))
    obs["txn2_ack_error"] = _outcome(lambda: consumer.acknowledge(m, txn=txn2))
    obs["plain_ack_error"] = _outcome(lambda: consumer.acknowledge(n))
    time.sleep(0.3)
    obs["txn3_ack_error"] = _outcome(lambda: consumer.acknowledge(n, txn=txn3))
    obs["txn2_commit_error"] = _outcome(txn2.commit)
    obs["txn3_commit_error"] = _outcome(txn3.commit)
    obs["txn1_commit_error"] = _outcome(txn1.commit)
    obs["txn_states"] = [txn1.state.value, txn2.state.value, txn3.state.value]
    obs["after_commit"] = _texts(_within(consumer, QUIET_MS))
    return obs


@scenario
def test_a_commit_is_atomic_beside_the_java_client(run: Run) -> Outcome:
    """One transaction sends 10 messages to A and 5 to B (3 partitions each) and commits: a consumer of both sees
    nothing before, all 15 after; by the Java client and by pulsar_txn."""
    return _beside_java(run, "commit_atomic", lambda c, a, b: _produce_then_end(c, a, b, True), "a", "b")


@scenario
def test_an_abort_is_invisible_beside_the_java_client(run: Run) -> Outcome:
    """The same sends, aborted: nothing shows, plain messages after it do; by the Java client and by pulsar_txn."""
    return _beside_java(run, "abort_invisible", lambda c, a, b: _produce_then_end(c, a, b, False), "a", "b")


@scenario
def test_commit_after_abort_beside_the_java_client(run: Run) -> Outcome:
    """An aborted transaction's commit is refused by the client, and by the coordinator (asked directly)."""
    return _beside_java(run, "commit_after_abort", _commit_after_abort, "t")


@scenario
def test_conflicting_acknowledgements_beside_the_java_client(run: Run) -> Outcome:
    """Two transactions acknowledge one message; a transaction acknowledges a plainly acknowledged one; the
    commits that follow; by the Java client and by pulsar_txn."""
    return _beside_java(run, "ack_conflict", _ack_conflict, "t")


def _deliveries(messages: list[Message]) -> list[dict[str, Any]]:
    return [{"payload": m.data().decode(), "redelivery_count": m.redelivery_count()} for m in messages]


def _txn_ack_then_abort(client: Client, topic: str, kind: ConsumerType) -> dict[str, Any]:
    """The harness's ``txn_ack_then_abort``: 10 messages acknowledged in a transaction that aborts come back (once,
    redelivery count 1), are acknowledged in a second one that commits, and nothing comes back."""
    obs: dict[str, Any] = {"subscription_type": kind.name}
    consumer = client.subscribe(topic, "test", consumer_type=kind, initial_position=InitialPosition.Earliest)
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(f"m-{i}".encode())
    txn1 = client.new_transaction(60_000)
    first = _receive(consumer, 10)
    obs["first_received"] = _texts(first)
    obs["txn1_ack_errors"] = [_outcome(lambda m=m: consumer.acknowledge(m, txn=txn1)) for m in first]
    obs["before_abort"] = _texts(_within(consumer, QUIET_MS))
    obs["abort_error"] = _outcome(txn1.abort)
    txn2 = client.new_transaction(60_000)
    obs["txn_ids"] = [_txn_id(txn1), _txn_id(txn2)]
    again = _receive(consumer, 10)
    obs["after_abort"] = _deliveries(again)
    obs["txn2_ack_errors"] = [_outcome(lambda m=m: consumer.acknowledge(m, txn=txn2)) for m in again]
    obs["commit_error"] = _outcome(txn2.commit)
    obs["after_commit"] = _texts(_within(consumer, QUIET_MS))
    obs["recommit_error"] = _outcome(client.resume_transaction(txn2.id).commit)
    return obs


def _txn_timeout(client: Client, source: str, sink: str) -> dict[str, Any]:
    """The harness's ``txn_timeout``: a 2 s transaction sends 3 messages and acknowledges an input, then 4 s pass."""
    client.create_producer(source).send(b"in-0")
    inputs = client.subscribe(
        source, "sub", consumer_type=ConsumerType.Shared, initial_position=InitialPosition.Earliest
    )
    outputs = client.subscribe(sink, "out-sub", initial_position=InitialPosition.Earliest)
    producer = client.create_producer(sink)
    consumed = _receive(inputs, 1)
    obs: dict[str, Any] = {"consumed": consumed[0].data().decode() if consumed else None}
    if not consumed:
        return obs
    txn = client.new_transaction(2000)
    obs["txn_id"] = _txn_id(txn)
    for i in range(3):
        producer.send(f"t-{i}".encode(), txn=txn)
    obs["ack_error"] = _outcome(lambda: inputs.acknowledge(consumed[0], txn=txn))
    time.sleep(4)
    obs["output"] = _texts(_within(outputs, EXTRA_MS))
    obs["redelivered"] = _deliveries(_receive(inputs, 1))
    obs["client_state"] = txn.state.value
    obs["client_commit_error"] = _outcome(txn.commit)
    obs["server_commit_error"] = _outcome(client.resume_transaction(txn.id).commit)
    for i in range(3):
        producer.send(f"plain-{i}".encode())
    obs["plain_after_timeout"] = _texts(_receive(outputs, 3))
    return obs


@scenario
def test_an_abort_gives_acknowledged_messages_back_shared_beside_the_java_client(run: Run) -> Outcome:
    """Acknowledged in an aborted transaction, 10 messages come back once to a Shared consumer, then are
    acknowledged for good; by the Java client and by pulsar_txn."""
    return _beside_java(
        run, "txn_ack_then_abort", lambda c, t: _txn_ack_then_abort(c, t, ConsumerType.Shared), "t",
        java_args=("Shared",),
    )  # fmt: skip


@scenario
def test_an_abort_gives_acknowledged_messages_back_failover_beside_the_java_client(run: Run) -> Outcome:
    """The same on a Failover subscription."""
    return _beside_java(
        run, "txn_ack_then_abort", lambda c, t: _txn_ack_then_abort(c, t, ConsumerType.Failover), "t",
        java_args=("Failover",),
    )  # fmt: skip


@scenario
def test_a_timed_out_transaction_beside_the_java_client(run: Run) -> Outcome:
    """A 2 s transaction left alone for 4 s: its sends never show, its acknowledged input comes back, its commit
    fails in the client and at the coordinator; by the Java client and by pulsar_txn."""
    return _beside_java(run, "txn_timeout", _txn_timeout, "in", "out")


def _consume_process_produce(
    client: Client, source: str, sink: str, commit: bool, kind: ConsumerType
) -> dict[str, Any]:
    """The harness's ``consume_process_produce[_abort]``: one transaction receives 5 inputs, sends
    ``processed-<input>`` for each and acknowledges the input; it commits (the outputs show, the inputs do not come
    back to a new consumer) or aborts (no output, the inputs come back)."""
    obs: dict[str, Any] = {"subscription_type": kind.name}
    source_producer = client.create_producer(source)
    for i in range(5):
        source_producer.send(f"m-{i}".encode())
    outputs = client.subscribe(sink, "out-sub", initial_position=InitialPosition.Earliest)
    inputs = client.subscribe(source, "cpp-sub", consumer_type=kind, initial_position=InitialPosition.Earliest)
    producer = client.create_producer(sink)
    txn = client.new_transaction(60_000)
    obs["txn_id"] = _txn_id(txn)
    consumed, ack_errors = [], []
    for _ in range(5):
        got = _receive(inputs, 1)
        if not got:
            break
        consumed.append(got[0].data().decode())
        producer.send(f"processed-{got[0].data().decode()}".encode(), txn=txn)
        ack_errors.append(_outcome(lambda m=got[0]: inputs.acknowledge(m, txn=txn)))
    obs["consumed"] = consumed
    obs["ack_errors"] = ack_errors
    if commit:
        obs["commit_error"] = _outcome(txn.commit)
        obs["output"] = _texts(_receive(outputs, 5))
        obs["extra"] = _texts(_within(outputs, EXTRA_MS))
        inputs.close()
        again = client.subscribe(source, "cpp-sub", consumer_type=kind, initial_position=InitialPosition.Earliest)
        obs["input_after_commit"] = _texts(_within(again, QUIET_MS))
    else:
        obs["abort_error"] = _outcome(txn.abort)
        obs["output"] = _texts(_within(outputs, QUIET_MS))
        obs["redelivered"] = _deliveries(_receive(inputs, 5))
    return obs


def _interleaved(client: Client, topic: str) -> dict[str, Any]:
    """The harness's ``interleaved_txns``: on one partition, t1 sends a1, t2 sends b1, p1 is sent plainly; t2
    commits (b1 and p1 stay behind a1's open transaction), then t1 aborts (they show)."""
    partition = f"{topic}-partition-0"
    obs: dict[str, Any] = {}
    consumer = client.subscribe(partition, "sub", initial_position=InitialPosition.Earliest)
    producer = client.create_producer(partition)
    t1, t2 = client.new_transaction(60_000), client.new_transaction(60_000)
    obs["txn_ids"] = [_txn_id(t1), _txn_id(t2)]
    producer.send(b"a1", txn=t1)
    producer.send(b"b1", txn=t2)
    producer.send(b"p1")
    obs["t2_commit_error"] = _outcome(t2.commit)
    obs["after_t2_commit"] = _texts(_within(consumer, QUIET_MS))
    obs["t1_abort_error"] = _outcome(t1.abort)
    obs["after_t1_abort"] = _texts(_receive(consumer, 2))
    obs["extra"] = _texts(_within(consumer, EXTRA_MS))
    return obs


def _read(reader: Any, count: int, timeout_ms: int) -> list[Message]:
    return _until(reader.read_next, count, timeout_ms)


def _aborted_then_committed(client: Client, topic: str) -> dict[str, Any]:
    """The harness's ``aborted_then_committed`` (not batched): an aborted transaction's 3 sends, a committed one's 2,
    a plain one; what a consumer, a reader opened before and a reader opened after see, and whether the readers
    think more is available."""
    partition = f"{topic}-partition-0"
    obs: dict[str, Any] = {"batched": False}
    consumer = client.subscribe(partition, "sub", initial_position=InitialPosition.Earliest)
    tail = client.create_reader(partition, MessageId.earliest)
    producer = client.create_producer(partition)
    aborted = client.new_transaction(60_000)
    for text in ("a-0", "a-1", "a-2"):
        producer.send_async(text.encode(), None, txn=aborted)
    producer.flush()
    obs["abort_error"] = _outcome(aborted.abort)
    committed = client.new_transaction(60_000)
    for text in ("c-0", "c-1"):
        producer.send_async(text.encode(), None, txn=committed)
    producer.flush()
    obs["commit_error"] = _outcome(committed.commit)
    producer.send(b"p-0")
    obs["consumer"] = _texts(_receive(consumer, 3))
    obs["consumer_extra"] = _texts(_within(consumer, EXTRA_MS))
    obs["tail_reader"] = _texts(_read(tail, 3, 10_000))
    obs["tail_reader_available"] = tail.has_message_available()
    late = client.create_reader(partition, MessageId.earliest)
    obs["late_reader"] = _texts(_read(late, 3, 10_000))
    obs["late_reader_available"] = late.has_message_available()
    obs["late_reader_extra"] = _texts(_read(late, 1 << 30, EXTRA_MS))
    return obs


@scenario
def test_consume_process_produce_committed_beside_the_java_client(run: Run) -> Outcome:
    """One transaction consumes 5 inputs (Exclusive), sends their outputs, acknowledges them and commits: 5 outputs,
    nothing left for a new consumer of the inputs; by the Java client and by pulsar_txn."""
    return _beside_java(
        run, "consume_process_produce",
        lambda c, s, o: _consume_process_produce(c, s, o, True, ConsumerType.Exclusive), "in", "out",
        java_args=("Exclusive",),
    )  # fmt: skip


@scenario
def test_consume_process_produce_aborted_beside_the_java_client(run: Run) -> Outcome:
    """The same loop on a Shared subscription, aborted: no output, the 5 inputs come back (redelivery count 1); by
    the Java client and by pulsar_txn."""
    return _beside_java(
        run, "consume_process_produce_abort",
        lambda c, s, o: _consume_process_produce(c, s, o, False, ConsumerType.Shared), "in", "out",
        java_args=("Shared",),
    )  # fmt: skip


@scenario
def test_interleaved_transactions_beside_the_java_client(run: Run) -> Outcome:
    """A committed transaction and plain sends wait behind an open one on the same partition until it aborts; by the
    Java client and by pulsar_txn."""
    outcome = _beside_java(run, "interleaved_txns", _interleaved, "t")
    outcome["java"].pop("topic", None)  # the partition's name (its tag differs from pulsar_txn's topic's)
    return {**outcome, "same": outcome["java"] == outcome["pulsar_txn"]}


@scenario
def test_aborted_then_committed_readers_beside_the_java_client(run: Run) -> Outcome:
    """An aborted and a committed transaction then a plain send: a consumer and two readers see the 3 committed
    messages only, and have nothing more available; by the Java client and by pulsar_txn."""
    return _beside_java(run, "aborted_then_committed", _aborted_then_committed, "t")
