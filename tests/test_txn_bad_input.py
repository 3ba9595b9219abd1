"""Transaction commands that name unknown transactions or coordinators, or come in the wrong state, on raw sockets.

Each gets the error code a Pulsar broker answers with, on the response type of the request; the connection stays
open and an official-client producer and consumer connected beforehand keep working.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from pulsar_txn_proxy.conformance.raw import RawConnection, rid
from pulsar_txn_proxy.conformance.raw import add_partition as _add_partition
from pulsar_txn_proxy.conformance.raw import add_subscription as _add_subscription
from pulsar_txn_proxy.conformance.raw import end_txn as _end
from pulsar_txn_proxy.conformance.raw import new_txn as _new_txn
from pulsar_txn_proxy.conformance.raw import open_txn as _open
from pulsar_txn_proxy.conformance.raw import send_end as _send_end
from pulsar_txn_proxy.conformance.raw import tc_connect as _tc_connect
from pulsar_txn_proxy.conformance.raw import txn_fields as _txn_fields
from tests.conftest import Witness
from tests.server_process import ServerProcess
from wire.framing import encode_payload_command, make_body
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata, ServerError, TxnAction

T = BaseCommand
#: How long the delayed server holds a transaction in COMMITTING/ABORTING.
END_DELAY_MS = 1500
UNKNOWN_TC = 999
#: Timeout of the transaction in the send test, which then outlives it.
TXN_TTL_MS = 1500


@pytest.fixture
def raw(server: ServerProcess) -> Iterator[RawConnection]:
    """A protocol-20 connection that announced coordinator 0 (as clients do)."""
    conn = RawConnection(server.port)
    conn.handshake()
    _tc_connect(conn, 0)
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def delayed() -> Iterator[ServerProcess]:
    """A server that holds each ending transaction in COMMITTING/ABORTING for END_DELAY_MS."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = ServerProcess(Path(tmp) / "data", "--txn-end-delay-ms", str(END_DELAY_MS)).start()
        yield proc
        proc.stop()


def _topic() -> str:
    return f"persistent://public/default/raw-txn-{uuid.uuid4().hex[:12]}"


def _error(response: BaseCommand) -> int | None:
    return response.error if response.HasField("error") else None


# -- coordinators ---------------------------------------------------------------------------------------


def test_unknown_coordinator(witness: Witness, raw: RawConnection) -> None:
    assert _error(_tc_connect(raw, UNKNOWN_TC)) == ServerError.TransactionCoordinatorNotFound
    response = _new_txn(raw, tc_id=UNKNOWN_TC)
    assert _error(response) == ServerError.TransactionCoordinatorNotFound
    assert f"{UNKNOWN_TC}" in response.message
    assert _error(_end(raw, (UNKNOWN_TC, 1), TxnAction.COMMIT)) == ServerError.TransactionCoordinatorNotFound
    assert _error(_add_partition(raw, (UNKNOWN_TC, 1), _topic())) == ServerError.TransactionCoordinatorNotFound
    raw.assert_open()
    # The connection still works for a real coordinator.
    _open(raw)


def test_commands_before_tc_client_connect(witness: Witness, server: ServerProcess) -> None:
    """From protocol 19 on, a coordinator must be announced with TC_CLIENT_CONNECT before it is used."""
    announced = RawConnection(server.port)
    announced.handshake()
    _tc_connect(announced, 0)
    txn = _open(announced)
    conn = RawConnection(server.port)
    try:
        conn.handshake()
        assert _error(_new_txn(conn)) == ServerError.TransactionCoordinatorNotFound
        assert _error(_add_partition(conn, txn, _topic())) == ServerError.TransactionCoordinatorNotFound
        assert _error(_add_subscription(conn, txn, _topic())) == ServerError.TransactionCoordinatorNotFound
        assert _error(_end(conn, txn, TxnAction.COMMIT)) == ServerError.TransactionCoordinatorNotFound
        conn.assert_open()
        # Announcing it makes the same requests work; the txn was not touched by the refused END_TXN.
        assert _error(_tc_connect(conn, 0)) is None
        assert _error(_end(conn, txn, TxnAction.COMMIT)) is None
    finally:
        conn.close()
        announced.close()


def test_old_protocol_needs_no_tc_client_connect(witness: Witness, server: ServerProcess) -> None:
    """Clients before protocol 19 never send TC_CLIENT_CONNECT."""
    conn = RawConnection(server.port)
    try:
        conn.send(T.CONNECT, client_version="raw-test", protocol_version=18)
        conn.expect(T.CONNECTED)
        txn = _open(conn)
        assert _error(_end(conn, txn, TxnAction.ABORT)) is None
    finally:
        conn.close()


# -- unknown and ended transactions -----------------------------------------------------------------------


def test_end_unknown_txn(witness: Witness, raw: RawConnection) -> None:
    for action in (TxnAction.COMMIT, TxnAction.ABORT):
        response = _end(raw, (0, 987_654_321), action)
        assert _error(response) == ServerError.TransactionNotFound
        assert (response.txnid_most_bits, response.txnid_least_bits) == (0, 987_654_321)
    assert _error(_add_partition(raw, (0, 987_654_321), _topic())) == ServerError.TransactionNotFound
    assert _error(_add_subscription(raw, (0, 987_654_321), _topic())) == ServerError.TransactionNotFound
    raw.assert_open()


@pytest.mark.parametrize("action", [TxnAction.COMMIT, TxnAction.ABORT], ids=["committed", "aborted"])
def test_requests_for_ended_txn(witness: Witness, raw: RawConnection, action: int) -> None:
    txn = _open(raw)
    topic = _topic()
    assert _error(_add_partition(raw, txn, topic)) is None
    assert _error(_end(raw, txn, action)) is None
    assert _error(_add_partition(raw, txn, topic)) == ServerError.TransactionNotFound
    assert _error(_add_subscription(raw, txn, topic)) == ServerError.TransactionNotFound
    assert _error(_end(raw, txn, TxnAction.COMMIT)) == ServerError.TransactionNotFound
    assert _error(_end(raw, txn, TxnAction.ABORT)) == ServerError.TransactionNotFound
    raw.assert_open()


def test_new_txn_ids_are_unique(raw: RawConnection) -> None:
    ids = {_open(raw) for _ in range(20)}
    assert len(ids) == 20
    assert {most for most, _ in ids} == {0}


def test_expired_txn_is_gone(witness: Witness, raw: RawConnection) -> None:
    txn = _open(raw, ttl_ms=200)
    time.sleep(0.6)
    assert _error(_add_partition(raw, txn, _topic())) == ServerError.TransactionNotFound
    assert _error(_end(raw, txn, TxnAction.COMMIT)) == ServerError.TransactionNotFound
    raw.assert_open()


# -- wrong states: a transaction held in COMMITTING / ABORTING ----------------------------------------------


@pytest.mark.parametrize("action", [TxnAction.COMMIT, TxnAction.ABORT], ids=["committing", "aborting"])
def test_requests_while_ending(delayed: ServerProcess, action: int) -> None:
    conn = RawConnection(delayed.port)
    try:
        conn.handshake()
        _tc_connect(conn, 0)
        txn = _open(conn)
        topic = _topic()
        assert _error(_add_partition(conn, txn, topic)) is None
        began = time.monotonic()
        ending = _send_end(conn, txn, action)
        other = TxnAction.ABORT if action == TxnAction.COMMIT else TxnAction.COMMIT
        # The opposite end is refused at once; adding to the transaction too.
        response = _end(conn, txn, other)
        assert _error(response) == ServerError.InvalidTxnStatus
        assert time.monotonic() - began < END_DELAY_MS / 1000
        assert _error(_add_partition(conn, txn, _topic())) == ServerError.InvalidTxnStatus
        assert _error(_add_subscription(conn, txn, topic)) == ServerError.InvalidTxnStatus
        # The same end again waits with the first; both succeed once the end is done.
        again = _send_end(conn, txn, action)
        answers = [conn.expect(T.END_TXN_RESPONSE).endTxnResponse for _ in range(2)]
        assert sorted(a.request_id for a in answers) == sorted([ending, again])
        assert [_error(a) for a in answers] == [None, None]
        assert time.monotonic() - began >= END_DELAY_MS / 1000 * 0.9
        assert _error(_end(conn, txn, other)) == ServerError.TransactionNotFound
        conn.assert_open()
    finally:
        conn.close()
    assert delayed.process is not None and delayed.process.poll() is None


# -- transactional sends --------------------------------------------------------------------------------


def _txn_send(conn: RawConnection, name: str, sequence_id: int, payload: bytes, txn: tuple[int, int]) -> None:
    metadata = MessageMetadata(
        producer_name=name, sequence_id=sequence_id, publish_time=int(time.time() * 1000), **_txn_fields(txn)
    )
    command = BaseCommand(
        type=T.SEND,
        send={"producer_id": 1, "sequence_id": sequence_id, "num_messages": 1, **_txn_fields(txn)},
    )
    conn.send_raw(encode_payload_command(command, make_body(metadata, payload)))


def _plain_send(conn: RawConnection, name: str, sequence_id: int, payload: bytes) -> None:
    metadata = MessageMetadata(producer_name=name, sequence_id=sequence_id, publish_time=int(time.time() * 1000))
    command = BaseCommand(type=T.SEND, send={"producer_id": 1, "sequence_id": sequence_id, "num_messages": 1})
    conn.send_raw(encode_payload_command(command, make_body(metadata, payload)))


def _received(witness: Witness, topic: str) -> list[bytes]:
    consumer = witness.client.subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
    received = []
    while True:
        try:
            received.append(consumer.receive(500).data())
        except pulsar.Timeout:
            break
    consumer.close()
    return received


def test_transactional_sends_in_unknown_or_committed_txns(witness: Witness, raw: RawConnection) -> None:
    """Pulsar's broker does not ask its coordinator about a transactional send: one in a transaction it never opened
    is appended, and never delivered; one in an open transaction to a partition not added to it is appended too.
    Unlike Pulsar, a committed transaction takes no more messages (Pulsar appends it, then aborts it: its committed
    messages would be hidden too)."""
    topic = _topic()
    raw.send(T.PRODUCER, topic=topic, producer_id=1, request_id=rid())
    name = raw.expect(T.PRODUCER_SUCCESS).producer_success.producer_name
    txn = _open(raw, ttl_ms=TXN_TTL_MS)
    # Not added to the transaction: Pulsar 4.2.4 accepts it too (its coordinator then never ends the transaction on
    # the partition, whose data stays pending). Here the partition is enlisted, so that a registration a crash lost
    # (answered before it was durable) cannot strand the transaction's messages: they commit with it.
    _txn_send(raw, name, 0, b"not-added", txn)
    assert raw.expect(T.SEND_RECEIPT).send_receipt.sequence_id == 0
    # A transaction the coordinator does not know.
    _txn_send(raw, name, 1, b"unknown-txn", (0, 987_654_321))
    assert raw.expect(T.SEND_RECEIPT).send_receipt.sequence_id == 1
    assert _error(_add_partition(raw, txn, topic)) is None
    _txn_send(raw, name, 2, b"added", txn)
    assert raw.expect(T.SEND_RECEIPT).send_receipt.sequence_id == 2
    assert _error(_end(raw, txn, TxnAction.COMMIT)) is None
    _txn_send(raw, name, 3, b"after-commit", txn)
    error = raw.expect(T.SEND_ERROR).send_error
    assert (error.sequence_id, error.error) == (3, ServerError.NotAllowedError)
    _plain_send(raw, name, 4, b"plain")
    assert raw.expect(T.SEND_RECEIPT).send_receipt.sequence_id == 4
    raw.assert_open()
    # Its timeout passing later changes nothing (Pulsar #14166: a timeout timer left running after commit).
    time.sleep(TXN_TTL_MS / 1000 + 0.3)
    assert _received(witness, topic) == [b"not-added", b"added", b"plain"]


@pytest.mark.parametrize("ending", ["aborted", "timed-out"])
def test_send_in_an_ended_txn_is_stored_as_aborted(witness: Witness, raw: RawConnection, ending: str) -> None:
    """As in Pulsar, a send in a transaction that ended is appended but never delivered, and holds nothing back;
    once an end of a later transaction of its coordinator named a low-water mark past it, it is refused."""
    topic = _topic()
    raw.send(T.PRODUCER, topic=topic, producer_id=1, request_id=rid())
    name = raw.expect(T.PRODUCER_SUCCESS).producer_success.producer_name
    # A coordinator of its own: no other test's open transaction holds its low-water mark back.
    tc_id = 3 if ending == "aborted" else 4
    assert _error(_tc_connect(raw, tc_id)) is None
    response = _new_txn(raw, tc_id, TXN_TTL_MS)
    txn = (response.txnid_most_bits, response.txnid_least_bits)
    assert _error(_add_partition(raw, txn, topic)) is None
    for sequence_id in (0, 1):
        _txn_send(raw, name, sequence_id, b"in-txn", txn)
        assert raw.expect(T.SEND_RECEIPT).send_receipt.sequence_id == sequence_id
    if ending == "aborted":
        assert _error(_end(raw, txn, TxnAction.ABORT)) is None
    else:
        time.sleep(TXN_TTL_MS / 1000 + 0.3)
    _txn_send(raw, name, 2, b"after-end", txn)
    assert raw.expect(T.SEND_RECEIPT).send_receipt.sequence_id == 2
    _plain_send(raw, name, 3, b"plain")
    assert raw.expect(T.SEND_RECEIPT).send_receipt.sequence_id == 3
    response = _new_txn(raw, tc_id)
    later = (response.txnid_most_bits, response.txnid_least_bits)
    assert _error(_add_partition(raw, later, topic)) is None
    _txn_send(raw, name, 4, b"later", later)
    assert raw.expect(T.SEND_RECEIPT).send_receipt.sequence_id == 4
    assert _error(_end(raw, later, TxnAction.COMMIT)) is None
    _txn_send(raw, name, 5, b"below-low-water-mark", txn)
    error = raw.expect(T.SEND_ERROR).send_error
    assert (error.sequence_id, error.error) == (5, ServerError.NotAllowedError)
    ended = f"Transaction [({txn[0]},{txn[1]})] has been ended. Please use a new transaction to send message."
    assert error.message == ended
    raw.assert_open()
    assert _received(witness, topic) == [b"plain", b"later"]
