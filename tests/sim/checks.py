"""The checks of a run, against its history and what the audit consumer read from every partition at the end."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

#: Seconds of a running server with room on its disk after which an acknowledgement must have been stored.
STORE_SECONDS = 5.0

if TYPE_CHECKING:
    from tests.sim.client import Message
    from tests.sim.scenario import World


def check(world: World, audit: dict[str, list[tuple[int, Message]]], actors: list[Any]) -> None:
    """Record every broken promise in ``world.failures`` and count the fault events that happened."""
    from tests.sim.scenario import IN, OUT

    h = world.history
    fail = world.fail
    if any(not auditor for auditor in audit.values()) and world.history.sends:
        fail("liveness: the audit consumer got nothing")
    stored = {topic: [m for _, m in items] for topic, items in audit.items()}
    seen = {(m.txn, m.key) for messages in stored.values() for m in messages}
    in_keys = Counter(m.key for m in stored[IN])
    out_keys = Counter(m.key for m in stored[OUT])

    # Deduplication: no (producer, sequence id) is stored twice, no input message twice.
    for topic, messages in stored.items():
        for (producer, seq), n in Counter((m.producer, m.sequence_id) for m in messages).items():
            if n > 1:
                fail(f"dedup: {producer} sequence {seq} stored {n} times on {topic.rsplit('/', 1)[-1]}")
    for key, n in in_keys.items():
        if n > 1:
            fail(f"dedup: input {key} stored {n} times")

    # Durability: nothing receipted is lost.
    for rec in h.sends.values():
        if rec.txn is None and rec.state in ("ok", "dup") and rec.key not in in_keys:
            fail(f"lost: {rec.key} ({rec.producer} sequence {rec.seq}) was receipted ({rec.state}) and is gone")

    # Transactions: nothing of an aborted or never-committed one is read; committed ones whole; all or nothing.
    reported: set[tuple[Any, str, str]] = set()
    for delivery in h.deliveries:
        message = delivery.message
        if message.txn is None or (message.txn, message.key, delivery.sub) in reported:
            continue
        reported.add((message.txn, message.key, delivery.sub))
        rec = h.txns.get(message.txn)
        if rec is None:
            fail(f"isolation: {message.key} of unknown transaction {message.txn} delivered on {delivery.sub}")
        elif rec.state == "aborted":
            fail(f"isolation: {message.key} of aborted transaction {message.txn} delivered on {delivery.sub}")
        elif not any((rec.txn, key) in seen for key in rec.keys):
            fail(
                f"isolation: {message.key} of transaction {message.txn} ({rec.state}) sent to {delivery.sub} at "
                f"{message.sent_at:.3f}, and the transaction ended aborted"
            )
        elif rec.commit_sent_at is None or rec.commit_sent_at > message.sent_at:
            fail(
                f"isolation: {message.key} of transaction {message.txn} sent to {delivery.sub} at "
                f"{message.sent_at:.3f}, before its commit was asked for"
            )
    for rec in h.txns.values():
        present = [(rec.txn, key) in seen for key in rec.keys]
        if rec.state == "committed" and not all(present):
            missing = [k for k, p in zip(rec.keys, present, strict=True) if not p]
            fail(f"lost: transaction {rec.txn} committed, its {missing} are gone")
        elif any(present) and not all(present):
            fail(f"atomicity: transaction {rec.txn} ({rec.state}) is visible on some partitions only: {present}")

    # Exactly once: each input is transformed once, and every input is (liveness).
    for key, n in out_keys.items():
        if n > 1:
            fail(f"exactly-once: {key} was committed {n} times")
        if key[2:] not in in_keys:
            fail(f"exactly-once: {key} was committed for an input that is not stored")
    missing = sorted(k for k in in_keys if f"o:{k}" not in out_keys)
    if missing:
        fail(f"liveness: inputs never transformed after the faults stopped: {missing[:8]}")
    plain_got = {d.message.key for d in h.deliveries if d.sub == "plain"}
    missing = sorted(k for k in in_keys if k not in plain_got)
    if missing:
        fail(f"liveness: the plain consumer never got {missing[:8]}")

    # Acknowledged messages never come back to a new consumer. An acknowledgement's deliveries to look at: every
    # delivery of its topic if it is cumulative, else those of its entry (the others cannot match).
    by_sub: dict[tuple[str, str], list[Any]] = defaultdict(list)
    plain_by_entry: dict[tuple[str, int], list[Any]] = defaultdict(list)
    for delivery in h.deliveries:
        by_sub[(delivery.sub, delivery.topic)].append(delivery)
        if delivery.sub == "plain":
            plain_by_entry[(delivery.topic, delivery.message.entry)].append(delivery)
    for when, topic, entry, cumulative, consumer, incarnation in h.plain_acks:
        for d in by_sub[("plain", topic)] if cumulative else plain_by_entry.get((topic, entry), ()):
            if d.message.sent_at <= when or d.incarnation != incarnation or d.consumer == consumer:
                continue
            if d.message.entry == entry or (cumulative and d.message.entry <= entry):
                fail(f"acknowledged: entry {entry} of {topic.rsplit('/', 1)[-1]} acked at {when:.3f} came back")
    # ...nor, once the server had time to store them, after a restart.
    for when, topic, entry, cumulative, _, incarnation in h.plain_acks:
        if not h.had_time_to_store(when, STORE_SECONDS):
            continue
        for d in by_sub[("plain", topic)] if cumulative else plain_by_entry.get((topic, entry), ()):
            if d.incarnation > incarnation and (d.message.entry == entry or (cumulative and d.message.entry <= entry)):
                fail(
                    f"acknowledged: entry {entry} of {topic.rsplit('/', 1)[-1]} acked at {when:.3f}, with "
                    f"{STORE_SECONDS:g} s to store it, came back after a restart"
                )
                break
    ctp = [d for d in h.deliveries if d.sub == "ctp"]
    #: When each input was sent to a worker: a committed transaction's inputs need looking at only if one was sent
    #: again after its commit.
    ctp_sent: dict[str, list[float]] = defaultdict(list)
    for d in ctp:
        ctp_sent[d.message.key].append(d.message.sent_at)
    for rec in h.txns.values():
        if rec.state != "committed" or not rec.acked:
            continue
        acked = set(rec.acked)
        if not any(at > rec.committed_at for key in acked for at in ctp_sent.get(key, ())):  # type: ignore[operator]
            continue
        for d in ctp:
            if d.message.sent_at > rec.committed_at and d.message.key in acked:  # type: ignore[operator]
                fail(f"acknowledged: {d.message.key} (in committed {rec.txn}) sent again at {d.message.sent_at:.3f}")

    # What happened, counted.
    first_life: dict[tuple[str, str], int] = {}
    for d in h.deliveries:
        mark = (d.sub, d.message.key)
        life = first_life.setdefault(mark, d.incarnation)
        if d.incarnation > life and d.sub in ("ctp", "plain"):
            world.counters["redelivery after a restart"] += 1
            first_life[mark] = d.incarnation
    world.counters["messages stored"] += len(stored[IN]) + len(stored[OUT])
    world.counters["transactions committed"] += sum(1 for r in h.txns.values() if r.state == "committed")
