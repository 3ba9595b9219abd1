"""Checks a transaction-workload history (tests/conformance/workload) for anomalies, in the Jepsen style.

The history is what the clients saw: every transaction with its messages and how it ended (committed, aborted,
abandoned to time out, or unknown when the end call failed), plain sends, what live consumers read and when, and a
final read of every partition from the start to a sentinel sent after everything else. Anomalies:

- ``aborted_read``: a message of an aborted or abandoned transaction was read (live or in the final read).
- ``lost_write``: a message of a committed transaction, or an acknowledged plain send, is missing at the end.
- ``duplicate``: a message appears more than once in the final read.
- ``uncommitted_read``: a live consumer read a transactional message before its transaction's commit was requested.
- ``partial_txn``: some but not all messages of one transaction are visible (across partitions and topics).
- ``order``: within a partition, message ids do not increase, or one producer's messages are out of send order.
  Messages of one transaction on one partition may come in either order: the Java client holds a transaction's
  sends to a partition until the partition's registration with the coordinator is answered, and then sends them in
  no fixed order (``TransactionImpl.registerProducedTopic`` chains one future per send, and a completed
  ``CompletableFuture`` runs its dependents last-registered first), against Pulsar as against this endpoint.
- ``double_processing``: one input was acknowledged by two committed consume-process-produce transactions.
- ``redelivered_after_commit``: an input was read again after a transaction that acknowledged it committed, and the
  broker accepted a new acknowledgement of it. A read alone proves nothing: after a broker restart the client may hold
  a copy the broker sent before the commit (its receiver queue keeps it), and the broker then refuses the second ack
  with TransactionConflict, as Pulsar does.
- ``stuck_partition``: the final read did not reach a partition's sentinel (something blocks it).

Unknown outcomes may have gone either way, but atomically. ``python -m tests.conformance.checker HISTORY`` prints
the table and exits 1 on any anomaly.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ANOMALIES = (
    "aborted_read", "lost_write", "duplicate", "uncommitted_read", "partial_txn", "order", "double_processing",
    "redelivered_after_commit", "stuck_partition",
)
_WRITER_SEQ = re.compile(r"^(w\d+)-(\d+)$")
_CPP_OUT = re.compile(r"^o:.*:(c\d+)-t(\d+)$")


@dataclass
class CheckResult:
    """Anomalies found (kind -> descriptions) and figures about the history."""

    anomalies: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in ANOMALIES})
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())

    def add(self, kind: str, description: str) -> None:
        self.anomalies[kind].append(description)


def load(path: Path) -> list[dict[str, Any]]:
    """The events of a history file (one JSON object per line)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _mid_key(mid: str) -> tuple[int, int, int]:
    """(ledger, entry, batch index) of a Java client message id ``ledger:entry:partition[:batch]``."""
    parts = [int(p) for p in mid.split(":")]
    return parts[0], parts[1], parts[3] if len(parts) > 3 else -1


def _writer_seq(value: str) -> tuple[str, int] | None:
    for pattern in (_WRITER_SEQ, _CPP_OUT):
        match = pattern.match(value)
        if match:
            return match.group(1), int(match.group(2))
    return None


def check(events: list[dict[str, Any]]) -> CheckResult:
    """Find every anomaly in a history."""
    result = CheckResult()
    txns = [e for e in events if e["type"] == "txn" and e.get("outcome") != "not_opened"]
    plains = [e for e in events if e["type"] == "plain"]
    reads = [e for e in events if e["type"] == "read"]
    finals = [e for e in events if e["type"] == "final"]
    errors = [e for e in events if e["type"] == "error"]
    start = next((e for e in events if e["type"] == "start"), {})
    checked_topics = {f["topic"] for f in finals}

    txn_of: dict[str, dict[str, Any]] = {}
    for txn in txns:
        for msg in txn.get("msgs", []):
            txn_of[msg["v"]] = txn
    final_count: Counter[str] = Counter(v for f in finals for v in f["values"])
    live_reads: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for read in reads:
        live_reads[read["v"]].append(read)

    # Per transaction: visibility, aborted reads, lost writes, partial visibility, dirty reads.
    visible_unknown = invisible_unknown = 0
    for txn in txns:
        msgs = txn.get("msgs", [])
        label = f"{txn['id']} ({txn.get('txnid')}, {txn['outcome']})"
        visible = [m["v"] for m in msgs if final_count[m["v"]]]
        if txn["outcome"] in ("aborted", "abandoned"):
            for value in visible:
                result.add("aborted_read", f"{value} of {label} is in the final read")
            for msg in msgs:
                if live_reads.get(msg["v"]):
                    result.add("aborted_read", f"{msg['v']} of {label} was read live")
        elif txn["outcome"] == "committed":
            for msg in msgs:
                if not final_count[msg["v"]] and msg["topic"] in checked_topics:
                    result.add("lost_write", f"{msg['v']} of {label} is missing")
        elif visible:
            visible_unknown += 1
        else:
            invisible_unknown += 1
        if visible and len(visible) < len(msgs):
            missing = sorted({m["v"] for m in msgs} - set(visible))
            result.add("partial_txn", f"{label}: {len(visible)} of {len(msgs)} visible, missing {missing}")
        requested = txn.get("t_end_req")
        for msg in msgs:
            for read in live_reads.get(msg["v"], []):
                if requested is None or read["t"] < requested:
                    result.add("uncommitted_read", f"{msg['v']} of {label} read before its commit was requested")

    # Plain sends that were acknowledged must be there.
    for plain in plains:
        if plain.get("ok") and plain["topic"] in checked_topics and not final_count[plain["v"]]:
            result.add("lost_write", f"plain {plain['v']} (acknowledged) is missing")

    for value, count in final_count.items():
        if count > 1:
            result.add("duplicate", f"{value} appears {count} times")

    # Order within each partition.
    for final in finals:
        where = f"{final['topic']}-partition-{final['partition']}"
        keys = [_mid_key(m) for m in final["mids"]]
        for i in range(1, len(keys)):
            if keys[i] <= keys[i - 1]:
                result.add("order", f"{where}: id {final['mids'][i]} after {final['mids'][i - 1]}")
        last_seq: dict[str, tuple[int, str]] = {}
        for value in final["values"]:
            parsed = _writer_seq(value)
            if parsed is None:
                continue
            writer, seq = parsed
            if writer in last_seq and seq <= last_seq[writer][0]:
                before = last_seq[writer][1]
                if value in txn_of and txn_of[value] is txn_of.get(before):
                    continue
                result.add("order", f"{where}: {value} after {before}")
            last_seq[writer] = (seq, value)
        if not final["complete"]:
            result.add("stuck_partition", f"{where}: the sentinel never arrived ({len(final['values'])} read)")

    # Consume-process-produce: each input acknowledged by at most one committed transaction, never redelivered after.
    committed_acks: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for txn in txns:
        if txn["kind"] == "cpp" and txn["outcome"] == "committed":
            for ack in txn.get("acks", []):
                committed_acks[ack["v"]].append(txn)
    for value, owners in committed_acks.items():
        if len(owners) > 1:
            result.add("double_processing", f"{value} acknowledged by committed {[t['id'] for t in owners]}")
    for txn in txns:
        for ack in txn.get("acks", []):
            for owner in committed_acks.get(ack["v"], []):
                if owner is not txn and ack["t_read"] > owner["t_end"] and ack.get("error") is None:
                    result.add("redelivered_after_commit",
                               f"{ack['v']} delivered to {txn['id']} after {owner['id']} committed its ack")

    outcomes = Counter((t["kind"], t["outcome"]) for t in txns)
    inputs = [p for p in plains if p["v"].startswith("in-")]
    result.stats = {
        "seed": start.get("seed"),
        "transactions": len(txns),
        **{f"{kind} {outcome}": n for (kind, outcome), n in sorted(outcomes.items())},
        "transactional messages": sum(len(t.get("msgs", [])) for t in txns),
        "plain messages": len(plains),
        "live reads": len(reads),
        "final reads (messages)": sum(len(f["values"]) for f in finals),
        "partitions read to the end": f"{sum(f['complete'] for f in finals)}/{len(finals)}",
        "unknown outcomes resolved visible/invisible": f"{visible_unknown}/{invisible_unknown}",
        "inputs processed by committed txns": f"{len(committed_acks)}/{len(inputs)}",
        "client errors": len(errors),
    }
    if errors:
        result.stats["first client error"] = f"{errors[0].get('phase')}: {errors[0].get('error')}"
    return result


def table(result: CheckResult, title: str = "transaction workload") -> str:
    """The summary: one row per anomaly kind (with up to 3 examples), then the figures."""
    lines = [f"{title}: {'no anomalies' if result.ok else 'ANOMALIES FOUND'}", ""]
    width = max(len(k) for k in ANOMALIES)
    lines.append(f"{'anomaly':<{width}}  count  examples")
    lines.append(f"{'-' * width}  -----  --------")
    for kind in ANOMALIES:
        found = result.anomalies[kind]
        examples = "; ".join(found[:3])
        lines.append(f"{kind:<{width}}  {len(found):>5}  {examples}")
    lines.append("")
    stat_width = max((len(k) for k in result.stats), default=0)
    lines.extend(f"{k:<{stat_width}}  {v}" for k, v in result.stats.items())
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.conformance.checker HISTORY.jsonl")
    result = check(load(Path(sys.argv[1])))
    print(table(result))
    sys.exit(0 if result.ok else 1)


if __name__ == "__main__":
    main()
