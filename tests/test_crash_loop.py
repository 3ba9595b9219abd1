"""An exactly-once consume-transform-produce loop (official Java client) survives SIGKILLs of the server.

The loop (``LoopScenarios.crash_loop`` in the Java harness) runs in a background JVM while the server is killed
and restarted on the same store and port. Every input must come out exactly once, as with Pulsar 4.2.4.
``CRASH_LOOP_INPUTS`` and ``CRASH_LOOP_KILLS`` in the environment make a larger run (issue 19 used 2,000 and 2).
"""

from __future__ import annotations

import json
import os
import urllib.request
import uuid
from collections.abc import Callable

import pytest

from tests.crash_loop import run_crash_loop
from tests.server_process import ServerProcess

Factory = Callable[..., ServerProcess]

INPUTS = int(os.environ.get("CRASH_LOOP_INPUTS", "300"))
KILLS = int(os.environ.get("CRASH_LOOP_KILLS", "2"))


def _subscription_stats(admin_url: str, topic: str, subscription: str) -> dict[str, object]:
    path = topic.removeprefix("persistent://")
    with urllib.request.urlopen(f"{admin_url}/admin/v2/persistent/{path}/stats", timeout=10) as response:
        return json.load(response)["subscriptions"][subscription]


@pytest.mark.parametrize(
    "flags",
    [(), ("batched", "small_queue")],
    ids=["single-messages", "batches-small-queue"],
)
def test_loop_survives_kills(server_factory: Factory, flags: tuple[str, ...]) -> None:
    """Each input's output arrives once, none is missing, and the input subscription's backlog is empty.

    With inputs in batches of 100 and a receiver queue of 10, the consumer comes back after each kill to a batch
    partly acknowledged: before deliveries took only the permits of the messages the client gets, it never received
    again (the stall of issue 19)."""
    server = server_factory()
    suffix = uuid.uuid4().hex[:10]
    input_topic = f"persistent://public/default/loop-in-{suffix}"
    output_topic = f"persistent://public/default/loop-out-{suffix}"

    def crash_restart() -> None:
        server.kill()
        server.start()

    result = run_crash_loop(
        server.url, server.admin_url, crash_restart, input_topic, output_topic,
        inputs=INPUTS, kills=KILLS, seconds=40 + INPUTS // 20, flags=flags,
    )
    print(
        f"committed {result['committed']} of {INPUTS} (per phase {result['phases']}), {result['deliveries']} "
        f"deliveries, failures {result['failures']}, abort failures {result['abort_failures']}, "
        f"stalls {result['stalls']}, loop {result['loop_ms']} ms"
    )
    summary = {k: result[k] for k in ("committed", "stalls", "failures", "abort_failures", "phases")}
    assert result["distinct_outputs"] == INPUTS, summary | {"first_missing": result["first_missing"]}
    assert result["duplicate_outputs"] == 0, summary | {"first_duplicates": result["first_duplicates"]}
    assert len(result["committed_at_kills"]) == KILLS, summary
    assert _subscription_stats(server.admin_url, input_topic, "loop")["msgBacklog"] == 0
