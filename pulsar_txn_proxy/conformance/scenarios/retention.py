"""Retention: what a broker keeps of acknowledged data, as the admin API and a late subscriber see it.

Each scenario writes 20 messages (one entry each) to three topics of a fresh namespace: one whose subscription
acknowledges all of them, one whose subscription acknowledges 12, one without subscriptions. It then watches the
topics' stats (entries, ledgers, storage size, backlog) through an admin ``trim`` (which deletes consumed closed
ledgers at once), an ``unload`` (the topic closes and loads again, as after a clean restart) and a second trim, and
finally what a new subscription at Earliest receives. Pulsar's periodic retention check (every 120 s by default) is
not waited for: the trims stand for it. What is asynchronous in Pulsar (an acknowledgement reaching the cursor, the
trim a topic runs when it loads again) is waited for as a state, up to ``SETTLE_S``, never for a fixed time.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pulsar

from pulsar_txn_proxy.conformance.framework import Outcome, Run, drain, scenario, until

MESSAGES = 20
#: Acknowledged messages per topic (None: no subscription).
CASES: dict[str, int | None] = {"all_acked": MESSAGES, "partly_acked": 12, "no_subscription": None}


def _write(run: Run, client: pulsar.Client, topic: str, acked: int | None) -> None:
    consumer = None
    if acked is not None:
        consumer = client.subscribe(topic, run.name("sub"), initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(MESSAGES):
        producer.send(f"m{i}".encode())
    producer.close()
    if consumer is not None:
        for i in range(MESSAGES):
            message = consumer.receive(10_000)
            if i < acked:
                consumer.acknowledge(message)
        consumer.close()  # closing flushes the client's grouped acknowledgements


def _path(topic: str) -> str:
    return "/admin/v2/" + topic.replace("://", "/")


def _stats(run: Run, topic: str) -> dict[str, Any]:
    """What the admin API says the topic stores; sizes in bytes differ between brokers, so only whether any (the
    statuses instead when the topic does not answer, as while it loads again)."""
    internal = run.admin("GET", _path(topic) + "/internalStats")
    answer = run.admin("GET", _path(topic) + "/stats")
    if internal.status != 200 or answer.status != 200:
        return {"internal_stats_status": internal.status, "stats_status": answer.status}
    internal, stats = internal.body, answer.body
    return {
        "entries": internal["numberOfEntries"],
        "ledgers": len(internal["ledgers"]),
        "current_ledger_entries": internal["currentLedgerEntries"],
        "stores_bytes": internal["totalSize"] > 0,
        "storage_size_positive": stats["storageSize"] > 0,
        "backlog": {name: sub["msgBacklog"] for name, sub in sorted(stats["subscriptions"].items())},
    }


def _acknowledged(acked: int | None, stats: dict[str, Any]) -> bool:
    """Whether the subscription's backlog shows the acknowledgements ``_write`` made (closing the consumer sends them;
    the broker moves its cursor after the answer)."""
    return "backlog" in stats and (acked is None or list(stats["backlog"].values()) == [MESSAGES - acked])


def _trimmed_on_load(retained: bool, stats: dict[str, Any]) -> bool:
    """Whether a topic that has loaded again is done with the trim it starts then: without a retention policy
    (``retained``) the closed ledgers every subscription has acknowledged in full go, in the background after the
    load (a topic without subscriptions keeps its ledgers until a trim is asked). Nothing is written after the load,
    so once they have gone such a topic stores nothing."""
    if "backlog" not in stats:
        return False
    backlogs = stats["backlog"].values()
    return retained or not backlogs or any(backlogs) or stats["entries"] == 0


def _late_subscriber(run: Run, client: pulsar.Client, topic: str, expect: int) -> list[str]:
    consumer = client.subscribe(topic, run.name("late"), initial_position=pulsar.InitialPosition.Earliest)
    received = [m.data().decode() for m in drain(consumer, first_ms=3000, expect=expect)]
    consumer.unsubscribe()
    return received


def _retention(run: Run, policy: dict[str, int] | None) -> Outcome:
    namespace, created = run.namespace("ret")
    outcome: dict[str, Any] = {"create": created}
    if policy is not None:
        outcome["set_retention"] = run.admin("POST", f"/admin/v2/namespaces/{namespace}/retention", policy).status
    topics = {case: f"persistent://{namespace}/{case}" for case in CASES}
    client = run.client()
    for case, acked in CASES.items():
        _write(run, client, topics[case], acked)
    for case, topic in topics.items():
        stats = partial(_stats, run, topic)
        seen: dict[str, Any] = {"written": until(stats, partial(_acknowledged, CASES[case]))}
        seen["trim_status"] = run.admin("POST", _path(topic) + "/trim").status
        seen["trimmed"] = _stats(run, topic)
        seen["unload_status"] = run.admin("PUT", _path(topic) + "/unload").status
        seen["reloaded"] = until(stats, partial(_trimmed_on_load, policy is not None))
        run.admin("POST", _path(topic) + "/trim")
        seen["reloaded_trimmed"] = _stats(run, topic)
        # As many as Pulsar keeps: all 20 while a ledger is kept, none once trimmed.
        kept = MESSAGES if seen["reloaded_trimmed"].get("entries") else 0
        seen["late_subscriber"] = _late_subscriber(run, client, topic, kept)
        outcome[case] = seen
    return outcome


@scenario
def test_default_retention(run: Run) -> Outcome:
    """No retention policy (the broker default, 0 minutes and 0 MB): acknowledged data stays while its ledger is open,
    and goes once the ledger has closed (unload) and a trim runs; a ledger acknowledged in part stays whole."""
    return _retention(run, None)


@scenario
def test_namespace_retention(run: Run) -> Outcome:
    """A namespace retention of 10 minutes and 10 MB keeps acknowledged data through unload and trims."""
    return _retention(run, {"retentionTimeInMinutes": 10, "retentionSizeInMB": 10})
