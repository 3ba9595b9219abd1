"""Transactions whose timeout passed while the server was down: after a restart the server answers at once and aborts
them in the background, a slice per turn of the event loop, the aborts of a slice sharing one group commit (issue 32:
10,000 of them used to be aborted before the first CONNECT was answered, 12.8 s)."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pulsar
import pytest

from bench.scale import RawClient
from engine.clock import ManualClock, _ManualCall
from engine.coordinator import RECOVERY_ABORT_SLICE
from engine.errors import BrokerError
from engine.transactions import TxnAction, TxnId
from tests.conftest import make_client
from tests.server_process import ServerProcess
from tests.test_engine_transactions import Harness
from wire.commands import frame
from wire.framing import FrameDecoder
from wire.pulsar_api_pb2 import BaseCommand, ServerError
from wire.pulsar_api_pb2 import TxnAction as WireTxnAction

EXPIRED = 2 * RECOVERY_ABORT_SLICE + 100


class CountingClock(ManualClock):
    """A manual clock that tells, for each deferred call it runs, what ``probe()`` read before and after it."""

    def __init__(self, start: float, probe: Callable[[], int]) -> None:
        super().__init__(start)
        self.probe = probe
        self.deltas: list[int] = []

    def call_later(self, delay: float, fn: Callable[[], object]) -> _ManualCall:
        def counted() -> None:
            before = self.probe()
            fn()
            self.deltas.append(self.probe() - before)

        return super().call_later(delay, counted)


def test_expired_transactions_are_aborted_in_slices_while_requests_are_answered(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.subscribe()
    txns = []
    for i in range(EXPIRED):
        txn = h.new_txn(timeout_ms=5000)
        h.add_partition(txn)
        h.send(b"expired-%d" % i, txn)
        txns.append(txn)
    h.close()
    entries_before = h.topic.next_entry_id

    loaded: list[Harness] = []
    clock = CountingClock(h.clock.now() + 10, lambda: loaded[0].topic.next_entry_id if loaded else 0)
    again = Harness(tmp_path, clock)
    loaded.append(again)
    coordinators = again.broker.coordinators
    commits = []
    write = again.broker.store.write
    again.broker.store.write = lambda staged: (commits.append(1), write(staged))[1]  # type: ignore[method-assign]
    # Recovery answered nothing yet and wrote nothing; the expired transactions can no longer be committed.
    assert again.topic.next_entry_id == entries_before
    with pytest.raises(BrokerError) as err:
        coordinators.end(txns[-1], TxnAction.COMMIT, again.results.append)
    assert err.value.code == ServerError.InvalidTxnStatus
    # A client's request that arrives as the server starts is answered before most of the aborts ran.
    answered: list[tuple[TxnId, int]] = []

    def request() -> None:
        coordinators.new_txn(0, 60_000, lambda txn: answered.append((txn, again.topic.next_entry_id - entries_before)))

    clock.call_later(0, request)
    clock.advance(0)
    assert answered and answered[0][1] <= RECOVERY_ABORT_SLICE
    # No turn aborted more than a slice (one abort marker per transaction on the topic), and the aborts of a slice
    # shared a commit.
    assert max(clock.deltas) <= RECOVERY_ABORT_SLICE
    assert again.topic.next_entry_id - entries_before == EXPIRED
    assert len(commits) <= 2 * (EXPIRED // RECOVERY_ABORT_SLICE + 1) + 2
    stats = coordinators.coordinators[0].stats
    assert (stats.timed_out, stats.aborted) == (EXPIRED, EXPIRED)
    assert coordinators.active() == 1  # the request's transaction
    assert coordinators.ended(txns[0]) and coordinators.ended(txns[-1])
    again.subscribe()
    again.send(b"after")
    assert again.sink.payloads() == [b"after"]


def test_a_normal_timeout_still_aborts_on_its_deadline(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    txn = h.new_txn(timeout_ms=2000)
    h.clock.advance(1.9)
    assert h.broker.coordinators.live(txn) is not None
    h.clock.advance(0.2)
    assert h.broker.coordinators.ended(txn)
    assert h.broker.coordinators.coordinators[0].stats.timed_out == 1


# -- through a real server process ----------------------------------------------------------------------------------

#: Transactions and their timeout for the server-process test: opened in about a second, expired after a short wait.
SERVER_EXPIRED = 1500
SERVER_TIMEOUT_MS = 2500


def _end_txn_answers(url: str, txns: list[tuple[int, int]]) -> list[int]:
    """END_TXN(COMMIT) of each transaction over the binary protocol; the error code of each answer (0: none)."""
    host, port = url.removeprefix("pulsar://").split(":")
    decoder = FrameDecoder()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(frame(BaseCommand.CONNECT, client_version="recovery-test", protocol_version=20))
        sock.sendall(frame(BaseCommand.TC_CLIENT_CONNECT_REQUEST, request_id=1, tc_id=0))
        sock.sendall(
            b"".join(
                frame(
                    BaseCommand.END_TXN,
                    request_id=10 + i,
                    txnid_most_bits=most,
                    txnid_least_bits=least,
                    txn_action=WireTxnAction.COMMIT,
                )
                for i, (most, least) in enumerate(txns)
            )
        )
        codes: list[int] = []
        while len(codes) < len(txns):
            data = sock.recv(1 << 20)
            assert data, "the server closed the connection"
            for item in decoder.feed(data):
                if item.command.type == BaseCommand.END_TXN_RESPONSE:
                    response = item.command.endTxnResponse
                    codes.append(response.error if response.HasField("error") else 0)
    return codes


def test_server_restarted_after_timeouts_serves_and_aborts_them(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "--log-level", "WARNING")
    topic = f"persistent://public/default/expired-{uuid.uuid4().hex[:8]}"
    try:
        server.start(timeout=60)
        client = make_client(server.url)
        client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest).close()
        client.close()
        with RawClient(server.url) as raw:
            raw.open_transactions(SERVER_EXPIRED, topic, timeout_ms=SERVER_TIMEOUT_MS)
        opened = time.time()
        server.stop(timeout=60)
        # Every timeout passes while the server is down (the first one opened has the earliest deadline).
        time.sleep(max(0.0, opened + SERVER_TIMEOUT_MS / 1000 + 0.2 - time.time()))

        server.start(timeout=60)
        client = make_client(server.url)
        consumer = client.subscribe(topic, "sub")
        producer = client.create_producer(topic)
        producer.send(b"after the restart")
        # None of the expired transactions' messages is delivered: the plain message comes first, once every one of
        # them is aborted (until then they hold the topic's readable position back), and nothing follows it.
        assert consumer.receive(30_000).data() == b"after the restart"
        with pytest.raises(pulsar.Timeout):
            consumer.receive(500)
        # Committing any of them now fails as in Pulsar for a transaction that ended.
        codes = _end_txn_answers(server.url, [(0, least) for least in range(1, SERVER_EXPIRED + 1)])
        assert set(codes) == {ServerError.TransactionNotFound}
        client.close()
    finally:
        server.stop(timeout=60)
