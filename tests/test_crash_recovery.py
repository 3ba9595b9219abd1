"""What a crash (SIGKILL: staged writes lost) leaves of a transaction, and what the client can still do with it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from engine.clock import ManualClock
from engine.transactions import TxnAction
from proxy.transactions import check_transactional_send
from tests.test_engine_transactions import Harness


def test_send_after_a_crash_lost_the_partition_registration(tmp_path: Path) -> None:
    """ADD_PARTITION_TO_TXN is answered before it is durable; a crash then loses it while the transaction itself
    survives. The client goes on sending in the transaction: the send is accepted and the commit applies to the
    partition, as with Pulsar, whose coordinator persisted the registration (issue 19, defect 4: the loop's sends
    after a restart were refused with NotAllowed)."""
    h = Harness(tmp_path)
    txn = h.new_txn()  # its id block is durable, and with it the open record
    h.broker.flush()
    h.add_partition(txn)  # answered, staged only
    h.close()  # SIGKILL: nothing staged reaches the store

    again = Harness(tmp_path, ManualClock(h.clock.now()))
    assert again.broker.coordinators.meta(txn).partitions == []
    consumer = again.subscribe()
    check_transactional_send(SimpleNamespace(broker=again.broker), again.producer, txn)  # type: ignore[arg-type]
    again.send(b"after-crash", txn)
    again.end(txn, TxnAction.COMMIT)
    assert again.results[-1] is None
    assert again.sink.payloads() == [b"after-crash"]
    assert consumer.subscription is not None and consumer.subscription.backlog() == 1
