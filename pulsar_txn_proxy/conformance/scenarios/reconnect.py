"""A consumer that comes back to a partly acknowledged batch gets its tail and everything after it (issue 19,
defect 4: the stall of the crash loop after a restart).

``partial_batch_permits`` of the Java harness (official Java client 4.2.4, ``PermitScenarios``): a batch of 100
messages and 20 single ones; a Failover (or Shared) consumer acknowledges the first 95 (batch-index acks, plainly or
in a committed transaction) and closes; a consumer with a receiver queue of 10 subscribes again and receives until
quiet. The client skips the acknowledged indexes without returning their permits, so the broker must not count them.
"""

from __future__ import annotations

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from pulsar_txn_proxy.conformance.harness import run_scenario


def _run(run: Run, *args: str) -> Outcome:
    outcome = run_scenario(run.target.service_url, "partial_batch_permits", run.topic("t"), *args, timeout=120)
    outcome.pop("timing_ms", None)
    return outcome


@scenario
def test_partial_batch_permits(run: Run) -> Outcome:
    """Batch-index acks outside transactions."""
    return _run(run)


@scenario
def test_partial_batch_permits_txn(run: Run) -> Outcome:
    """The same acks in a transaction that commits."""
    return _run(run, "txn")


@scenario
def test_partial_batch_permits_shared(run: Run) -> Outcome:
    """The same on a Shared subscription."""
    return _run(run, "Shared")
