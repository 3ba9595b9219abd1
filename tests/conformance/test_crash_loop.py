"""An exactly-once consume-transform-produce loop (official Java client 4.2.4) while the broker is killed (SIGKILL)
and restarted under it twice, as in issue 19 (defect 4).

The loop (``crash_loop`` of the Java harness: Failover consumer, transactional send plus transactional ack, one
commit per message, abort and redelivery on failure) runs in a background JVM; ``tests/crash_loop.py`` restarts the
target at a quarter and three quarters of its progress. Outcomes compare what must not depend on timing: every input's
output exactly once, and an empty input backlog. How many steps failed around the kills (and the conflicts of
messages redelivered after their reconnect) depends on timing and is left out. The output topic deduplicates, as
exactly-once needs with Pulsar too (``tests/crash_loop.py``). ``tests/test_crash_loop.py`` runs the same loop on
non-partitioned topics without batches against a private endpoint.
"""

from __future__ import annotations

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from tests.crash_loop import input_backlog, run_crash_loop

INPUTS = 300
KILLS = 2
#: Bound on the loop: a real Pulsar standalone takes tens of seconds to come back after each kill.
SECONDS = 300


def _loop(run: Run, *topics: str, flags: tuple[str, ...] = ()) -> Outcome:
    if run.target.crash_restart is None:
        raise RuntimeError(f"cannot restart {run.target.name}")
    input_topic, output_topic = topics
    result = run_crash_loop(
        run.target.service_url, run.target.admin_url or "", run.target.crash_restart, input_topic, output_topic,
        inputs=INPUTS, kills=KILLS, seconds=SECONDS, flags=flags,
    )
    return {
        "inputs": result["inputs"],
        "kills": len(result["committed_at_kills"]),
        "distinct_outputs": result["distinct_outputs"],
        "duplicate_outputs": result["duplicate_outputs"],
        "first_missing": result["first_missing"],
        "input_backlog": input_backlog(run.target.admin_url or "", input_topic),
    }


@scenario
def test_loop_survives_kills_batched(run: Run) -> Outcome:
    """Inputs sent in batches of 100, a receiver queue of 10: the transactional acks are acks of batch indexes, and
    the consumer comes back after each kill to a partly acknowledged batch."""
    return _loop(run, run.topic("in"), run.topic("out"), flags=("batched", "small_queue"))


@scenario
def test_loop_survives_kills_partitioned(run: Run) -> Outcome:
    """3-partition input and output topics, batched inputs: the Failover consumer is a multi-topics consumer."""
    return _loop(run, run.partitioned_topic("in", 3), run.partitioned_topic("out", 3), flags=("batched",))
