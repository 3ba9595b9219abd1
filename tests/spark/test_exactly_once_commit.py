"""The driver-side commit protocol of the exactly-once sink, driven directly (no Spark needed).

Task commit messages are made with the tasks' own code (``write_task``); crashes are simulated by
stopping half-way through what ``commit`` does, then calling ``commit`` again as Spark's replay would.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest
from spark_helpers import name, read_committed, values

import pulsar_txn
from spark.commit_log import CommitLog
from spark.sink import ExactlyOnceCommitter, SinkOptions, TaskCommit, write_task


def _options(url: str, sink: str, sink_id: str, timeout_ms: int = 60_000) -> SinkOptions:
    return SinkOptions.parse(
        {"service.url": url, "topic": sink, "sinkId": sink_id, "transactionTimeoutMs": str(timeout_ms)},
        streaming=True,
    )


def _task(options: SinkOptions, rows: list[str], partition: int) -> TaskCommit:
    batch = pa.RecordBatch.from_pydict({"value": rows})
    return dataclasses.replace(write_task(options, iter([batch])), partition=partition)


@pytest.fixture
def sink_id() -> str:
    return uuid.uuid4().hex[:12]


def _state(url: str, options: SinkOptions) -> Any:
    with pulsar_txn.Client(url) as client:
        return CommitLog(client, options.commit_log_topic, options.sink_id).state()


def test_a_replayed_batch_that_was_done_is_discarded(server: Any, sink_id: str) -> None:
    sink = name("eo-sink")
    options = _options(server.url, sink, sink_id)
    ExactlyOnceCommitter(options).commit([_task(options, ["a0", "a1"], 0)], 0)
    replay = _task(options, ["a0", "a1"], 0)
    ExactlyOnceCommitter(options).commit([replay], 0)
    assert values(read_committed(server.url, sink, 800)) == ["a0", "a1"]
    with pulsar_txn.Client(server.url) as client, pytest.raises(pulsar_txn.TransactionNotFound):
        client.resume_transaction(replay.txn).commit()  # it was aborted
    assert _state(server.url, options).last_done == 0


def test_a_commit_interrupted_after_its_decision_is_rolled_forward(server: Any, sink_id: str) -> None:
    sink = name("eo-sink")
    options = _options(server.url, sink, sink_id)
    ExactlyOnceCommitter(options).commit([_task(options, ["a0"], 0)], 0)
    first, second = _task(options, ["b0", "b1"], 0), _task(options, ["b2", "b3"], 1)
    # The driver records the decision, commits one transaction, and dies.
    crashed = ExactlyOnceCommitter(options)
    crashed.log.write_intent(1, crashed.mark(1, [first, second]))
    crashed.client.resume_transaction(first.txn).commit()
    assert _state(server.url, options).intent_batch == 1

    replay = [_task(options, ["b0", "b1"], 0), _task(options, ["b2", "b3"], 1)]
    ExactlyOnceCommitter(options).commit(replay, 1)
    assert sorted(values(read_committed(server.url, sink, 800))) == ["a0", "b0", "b1", "b2", "b3"]
    state = _state(server.url, options)
    assert (state.last_done, state.intent_batch) == (1, None)


def test_a_decided_transaction_that_timed_out_is_replaced_by_the_replay(server: Any, sink_id: str) -> None:
    sink = name("eo-sink")
    options = _options(server.url, sink, sink_id)
    short = _options(server.url, sink, sink_id, timeout_ms=400)
    kept, expired = _task(options, ["c0"], 0), _task(short, ["c1"], 1)
    crashed = ExactlyOnceCommitter(options)
    crashed.log.write_intent(0, crashed.mark(0, [kept, expired]))
    crashed.client.resume_transaction(kept.txn).commit()
    time.sleep(1.2)  # the coordinator aborts the second transaction meanwhile

    ExactlyOnceCommitter(options).commit([_task(options, ["c0"], 0), _task(options, ["c1"], 1)], 0)
    assert sorted(values(read_committed(server.url, sink, 800))) == ["c0", "c1"]
    assert _state(server.url, options).last_done == 0


def test_abort_after_a_decided_commit_completes_it(server: Any, sink_id: str) -> None:
    sink = name("eo-sink")
    options = _options(server.url, sink, sink_id)
    task = _task(options, ["d0", "d1"], 0)
    decided = ExactlyOnceCommitter(options)
    decided.log.write_intent(0, decided.mark(0, [task]))
    ExactlyOnceCommitter(options).abort([task], 0)
    assert values(read_committed(server.url, sink, 800)) == ["d0", "d1"]
    assert _state(server.url, options).last_done == 0


def test_abort_without_a_decision_aborts_every_transaction(server: Any, sink_id: str) -> None:
    sink = name("eo-sink")
    options = _options(server.url, sink, sink_id)
    tasks = [_task(options, ["e0"], 0), None, _task(options, ["e1"], 1)]
    ExactlyOnceCommitter(options).abort(tasks, 0)
    assert read_committed(server.url, sink, 500) == []
    assert _state(server.url, options).last_done == -1
