"""The workload checker finds each kind of anomaly in small hand-made histories (and none in a clean one)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.conformance.checker import check

Events = list[dict[str, Any]]


def _history() -> Events:
    """A clean history: a committed txn over two partitions, an aborted one, an abandoned one, a plain send, one
    consume-process-produce txn, live reads after the commit, and final reads of both partitions."""
    return [
        {"t": 0, "type": "start", "seed": 1},
        {"t": 10, "type": "txn", "kind": "produce", "id": "w0-t0", "txnid": "0:1", "outcome": "committed",
         "t_end_req": 100, "t_end": 110,
         "msgs": [{"v": "w0-0", "topic": "a", "ok": True}, {"v": "w0-1", "topic": "a", "ok": True}]},
        {"t": 20, "type": "txn", "kind": "produce", "id": "w0-t1", "txnid": "0:2", "outcome": "aborted",
         "t_end_req": 120, "t_end": 130, "msgs": [{"v": "w0-2", "topic": "a", "ok": True}]},
        {"t": 30, "type": "txn", "kind": "produce", "id": "w0-t2", "txnid": "0:3", "outcome": "abandoned",
         "t_end_req": 140, "t_end": 140, "msgs": [{"v": "w0-3", "topic": "a", "ok": True}]},
        {"t": 40, "type": "plain", "v": "w0-4", "topic": "a", "ok": True},
        {"t": 50, "type": "plain", "v": "in-0", "topic": "in", "ok": True},
        {"t": 60, "type": "txn", "kind": "cpp", "id": "c0-t0", "txnid": "0:4", "outcome": "committed",
         "t_end_req": 150, "t_end": 160, "acks": [{"v": "in-0", "t_read": 55}],
         "msgs": [{"v": "o:in-0:c0-t0", "topic": "a", "ok": True}]},
        {"t": 200, "type": "read", "v": "w0-0", "topic": "a-partition-0"},
        {"t": 210, "type": "read", "v": "w0-1", "topic": "a-partition-1"},
        {"t": 300, "type": "final", "topic": "a", "partition": 0, "complete": True,
         "values": ["w0-0", "w0-4", "sentinel:a:0"], "mids": ["1:0:0", "1:3:0", "1:9:0"]},
        {"t": 310, "type": "final", "topic": "a", "partition": 1, "complete": True,
         "values": ["w0-1", "o:in-0:c0-t0", "sentinel:a:1"], "mids": ["2:0:1", "2:2:1", "2:5:1"]},
    ]


def _final(events: Events, partition: int) -> dict[str, Any]:
    return next(e for e in events if e["type"] == "final" and e["partition"] == partition)


def _txn(events: Events, label: str) -> dict[str, Any]:
    return next(e for e in events if e.get("id") == label)


def test_clean_history_has_no_anomalies() -> None:
    result = check(_history())
    assert result.ok, result.anomalies
    assert result.stats["transactions"] == 4


def _aborted_visible(h: Events) -> None:
    _final(h, 0)["values"].insert(1, "w0-2")
    _final(h, 0)["mids"].insert(1, "1:1:0")


def _abandoned_read_live(h: Events) -> None:
    h.append({"t": 220, "type": "read", "v": "w0-3", "topic": "a-partition-0"})


def _committed_missing(h: Events) -> None:
    _final(h, 1)["values"].pop(0)
    _final(h, 1)["mids"].pop(0)


def _duplicate(h: Events) -> None:
    _final(h, 0)["values"].insert(2, "w0-4")
    _final(h, 0)["mids"].insert(2, "1:4:0")


def _dirty_read(h: Events) -> None:
    h.append({"t": 90, "type": "read", "v": "w0-0", "topic": "a-partition-0"})


def _partial_unknown(h: Events) -> None:
    _txn(h, "w0-t0")["outcome"] = "unknown"
    _committed_missing(h)


def _out_of_order(h: Events) -> None:
    final = _final(h, 0)
    final["values"][0], final["values"][1] = final["values"][1], final["values"][0]


def _ids_backwards(h: Events) -> None:
    _final(h, 0)["mids"][1] = "1:0:0"


def _double_processing(h: Events) -> None:
    second = copy.deepcopy(_txn(h, "c0-t0"))
    second.update(id="c1-t0", txnid="0:5", t_end_req=170, t_end=180)
    second["acks"] = [{"v": "in-0", "t_read": 165}]
    second["msgs"] = []
    h.append(second)


def _stale_copy_refused(h: Events) -> None:
    """A copy read after the commit (held by the client since a restart) whose ack the broker refused."""
    _redelivered(h)
    _txn(h, "c1-t0")["acks"][0]["error"] = "TransactionConflictException: position has been acked"


def _redelivered(h: Events) -> None:
    """in-0 read after c0-t0 committed its ack, and its ack accepted again, in a transaction that aborted."""
    second = copy.deepcopy(_txn(h, "c0-t0"))
    second.update(id="c1-t0", txnid="0:5", outcome="aborted", t_end_req=170, t_end=180)
    second["acks"] = [{"v": "in-0", "t_read": 165, "error": None}]
    second["msgs"] = []
    h.append(second)


def _stuck(h: Events) -> None:
    _final(h, 1)["complete"] = False


@pytest.mark.parametrize(
    ("mutate", "kind"),
    [
        (_aborted_visible, "aborted_read"),
        (_abandoned_read_live, "aborted_read"),
        (_committed_missing, "lost_write"),
        (_duplicate, "duplicate"),
        (_dirty_read, "uncommitted_read"),
        (_partial_unknown, "partial_txn"),
        (_out_of_order, "order"),
        (_ids_backwards, "order"),
        (_double_processing, "double_processing"),
        (_double_processing, "redelivered_after_commit"),
        (_redelivered, "redelivered_after_commit"),
        (_stuck, "stuck_partition"),
    ],
)
def test_each_anomaly_is_found(mutate: Callable[[Events], None], kind: str) -> None:
    history = _history()
    mutate(history)
    result = check(history)
    assert result.anomalies[kind], (kind, result.anomalies)


def test_one_transactions_messages_on_a_partition_may_come_in_either_order() -> None:
    """The Java client may send a transaction's messages to a partition in another order than they were given; a
    later message of another transaction (or a plain send) still has to come after them."""
    history = _history()
    _committed_missing(history)  # w0-1 moves from partition 1 to partition 0, before w0-0
    final = _final(history, 0)
    final["values"] = ["w0-1", "w0-0", "w0-4", "sentinel:a:0"]
    final["mids"] = ["1:0:0", "1:1:0", "1:3:0", "1:9:0"]
    result = check(history)
    assert result.ok, result.anomalies
    final["values"] = ["w0-1", "w0-4", "w0-0", "sentinel:a:0"]
    assert check(history).anomalies["order"]


def test_a_refused_ack_of_a_stale_copy_is_not_an_anomaly() -> None:
    history = _history()
    _stale_copy_refused(history)
    result = check(history)
    assert result.ok, result.anomalies
