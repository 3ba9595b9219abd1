"""Other lines of the official Java client: the harness's scenarios run on the jars of Pulsar's long-term-support
line (4.0.x) and of the 3.x line, outcomes compared with Pulsar's as for the 4.2.4 client (test_transactions.py).

Each line reads the broker's answers in its own way: the 4.0.x client, for one, refuses a PRODUCER_SUCCESS without
``schema_version`` (which Pulsar always sets), so no producer could be created with it. The 3.x line runs as 3.3.9:
the 3.0.x releases cannot be assembled from Maven Central (their parent pom and ``pulsar-client-api`` jars are not
published there), and 3.3.9 is the newest 3.x release that is.
"""

from __future__ import annotations

from typing import Any

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from pulsar_txn_proxy.conformance.harness import run_scenario
from pulsar_txn_proxy.conformance.harness_observations import normalise_observations, unordered

#: The newest release of Pulsar's long-term-support line.
LTS_CLIENT = "4.0.13"
#: The newest release of the 3.x line on Maven Central.
V3_CLIENT = "3.3.9"
PARTITIONS = 3


def _on_line(version: str, run: Run, name: str, *tags: str, extra: tuple[str, ...] = ()) -> Any:
    topics = [run.partitioned_topic(tag, PARTITIONS) for tag in tags]
    observations = run_scenario(run.target.service_url, name, *topics, *extra, timeout=90, client_version=version)
    return unordered(normalise_observations(observations))


def _lts(run: Run, name: str, *tags: str, extra: tuple[str, ...] = ()) -> Any:
    return _on_line(LTS_CLIENT, run, name, *tags, extra=extra)


def _v3(run: Run, name: str, *tags: str, extra: tuple[str, ...] = ()) -> Any:
    return _on_line(V3_CLIENT, run, name, *tags, extra=extra)


@scenario
def test_lts_commit_atomic(run: Run) -> Outcome:
    """A transaction writes to two partitioned topics; nothing is visible before the commit, all 15 after."""
    return _lts(run, "commit_atomic", "a", "b")


@scenario
def test_lts_abort_invisible_batched(run: Run) -> Outcome:
    """A batched transaction aborted: nothing of it is ever visible."""
    return _lts(run, "abort_invisible", "a", "b", extra=("batched",))


@scenario
def test_lts_consume_process_produce(run: Run) -> Outcome:
    """Consume, produce and acknowledge in one transaction, then commit."""
    return _lts(run, "consume_process_produce", "in", "out")


@scenario
def test_v3_commit_atomic(run: Run) -> Outcome:
    """The 3.x client: a transaction over two partitioned topics, all or nothing."""
    return _v3(run, "commit_atomic", "a", "b")


@scenario
def test_v3_abort_invisible_batched(run: Run) -> Outcome:
    """The 3.x client: a batched transaction aborted is never visible."""
    return _v3(run, "abort_invisible", "a", "b", extra=("batched",))


@scenario
def test_v3_consume_process_produce(run: Run) -> Outcome:
    """The 3.x client: consume, produce and acknowledge in one transaction, then commit."""
    return _v3(run, "consume_process_produce", "in", "out")
