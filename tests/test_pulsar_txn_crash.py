"""A consume-transform-produce loop on pulsar_txn through a broker SIGKILL: every output exactly once, no
TransactionConflict, an abort every 20th transaction. Small here (``make test``); ``make txn-client-crash-loop`` runs
the 10,000-message version, and ``ARGS=--against-pulsar`` runs it on Apache Pulsar 4.2.4 (the standalone's JVM is
SIGKILLed and started again on the same data directory)."""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter

import pytest

import pulsar_txn
from tests.conftest import make_client

#: Messages of the loop (PULSAR_TXN_CRASH_MESSAGES overrides, for the long run).
MESSAGES = int(os.environ.get("PULSAR_TXN_CRASH_MESSAGES", "200"))


def run_loop(server, messages: int, kill_at: int) -> tuple[Counter[bytes], list[str], int]:
    """Run the loop until every input is committed; SIGKILL and restart ``server`` once ``kill_at`` are. Returns the
    outputs read back (payload -> count), the errors the loop saw (class names) and the transactions run."""
    source = f"persistent://public/default/crash-in-{uuid.uuid4().hex[:8]}"
    sink = f"persistent://public/default/crash-out-{uuid.uuid4().hex[:8]}"
    official = make_client(server.url)
    producer = official.create_producer(
        source, batching_enabled=True, batching_max_publish_delay_ms=20, block_if_queue_full=True
    )
    for i in range(messages):
        producer.send_async(f"m{i:05d}".encode(), None)
    producer.flush()
    observer = official.subscribe(sink, "observer")

    client = pulsar_txn.Client(server.url, operation_timeout_seconds=10)
    consumer = client.subscribe(source, "loop", initial_position=pulsar_txn.InitialPosition.Earliest)
    out = client.create_producer(sink)
    errors: list[str] = []
    committed: set[bytes] = set()
    in_doubt: set[bytes] = set()  # a commit that raised: committed or not, the broker knows
    transactions = 0
    killed = False
    last_progress = time.monotonic()
    while len(committed) < messages:
        try:
            msg = consumer.receive(1000)
        except pulsar_txn.Timeout:
            idle = time.monotonic() - last_progress
            # In-doubt inputs that were aborted come back after the transaction timeout (5 s); a broker restart on a
            # busy machine can take longer than that.
            if (len(committed | in_doubt) == messages and idle > 15) or idle > 120:
                break
            continue
        last_progress = time.monotonic()
        transactions += 1
        txn = None
        try:
            txn = client.new_transaction(timeout_ms=5000)
            out.send(msg.data().upper(), txn=txn)
            consumer.acknowledge(msg, txn=txn)
            if transactions % 20 == 0:
                txn.abort()
                continue
        except pulsar_txn.PulsarException as exc:
            errors.append(type(exc).__name__)
            if txn is not None and txn.state in (pulsar_txn.TxnState.OPEN, pulsar_txn.TxnState.TIME_OUT):
                try:
                    txn.abort()
                except pulsar_txn.PulsarException as again:
                    errors.append(type(again).__name__)
            continue
        try:
            txn.commit()
            committed.add(msg.data())
            in_doubt.discard(msg.data())
        except pulsar_txn.PulsarException as exc:
            errors.append(type(exc).__name__)
            in_doubt.add(msg.data())
        if len(committed) >= kill_at and not killed:
            killed = True
            server.kill()
            server.start(timeout=240)
    print(
        f"{messages} messages: {transactions} transactions, {len(committed)} committed, {len(in_doubt)} in doubt, "
        f"killed: {killed}, errors: {Counter(errors)}"
    )
    client.close()
    outputs: Counter[bytes] = Counter()
    while True:
        try:
            outputs[observer.receive(2000).data()] += 1
        except Exception:
            break
    official.close()
    return outputs, errors, transactions


def test_loop_survives_a_broker_sigkill(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("against_pulsar"):
        server = request.getfixturevalue("pulsar_server")
    else:
        server = request.getfixturevalue("server_factory")()
    began = time.monotonic()
    outputs, errors, transactions = run_loop(server, MESSAGES, kill_at=MESSAGES // 2)
    assert "TransactionConflict" not in errors, errors
    expected = {f"M{i:05d}".encode() for i in range(MESSAGES)}
    duplicates = {k: v for k, v in outputs.items() if v > 1}
    assert duplicates == {}
    assert set(outputs) == expected, sorted(expected - set(outputs))[:10]
    assert transactions >= MESSAGES
    print(f"loop and read-back: {time.monotonic() - began:.1f} s")
