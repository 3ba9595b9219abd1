"""Frames a fuzzer sends that official clients do not, answered as Pulsar answers them (raw protocol).

SENDs whose ``MessageMetadata`` lacks required fields (``producer_name``, ``sequence_id``, ``publish_time``), plain
and in a transaction, with and without the transaction named in the metadata: Pulsar 4.2.4 stores each and answers
a receipt (it reads the producer and sequence id from the SEND command), and the connection stays open. A SEND
without ``highest_sequence_id`` gets a receipt with -1 (as a uint64) plain, and 0 in a transaction.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from pulsar_txn_proxy.conformance.scenarios.txn_coordinator import Raw, Txns, _fields
from wire.framing import encode_payload_command, make_body
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata, ServerError, TxnAction

T = BaseCommand

#: Metadata fields of each case (the required ones a client always sets, some left out).
_CASES: dict[str, dict[str, Any]] = {
    "complete": {"producer_name": "p", "sequence_id": 0, "publish_time": 1},
    "no_producer_name": {"sequence_id": 0, "publish_time": 1},
    "no_sequence_id": {"producer_name": "p", "publish_time": 1},
    "no_publish_time": {"producer_name": "p", "sequence_id": 0},
    "none": {},
}


def _send(raw: Raw, sequence_id: int, metadata: MessageMetadata, txn: tuple[int, int] | None) -> Any:
    ids = _fields(txn) if txn is not None else {}
    command = BaseCommand(type=T.SEND, send={"producer_id": 1, "sequence_id": sequence_id, "num_messages": 1, **ids})
    raw.conn.send_raw(encode_payload_command(command, make_body(metadata.SerializePartialToString(), b"x")))
    try:
        reply = raw.reply()
    except AssertionError:
        return "connection closed"
    if reply.type == T.SEND_RECEIPT:
        receipt = reply.send_receipt
        return {"receipt_sequence_id": receipt.sequence_id, "highest_sequence_id": receipt.highest_sequence_id}
    if reply.type == T.SEND_ERROR:
        return {"error": ServerError.Name(reply.send_error.error)}
    return T.Type.Name(reply.type)


@scenario
def test_send_metadata_without_required_fields(run: Run) -> Outcome:
    """Each case plain, plain with a transaction named in the metadata only, in a transaction named in the metadata
    too, and in a transaction the metadata does not name; the transactions committed; the connection still open."""
    txns = Txns()
    raw = Raw(run, txns)
    topic = run.topic("hostile-meta")
    raw.producer(topic, 1)
    sequence = itertools.count()
    out: dict[str, Any] = {}
    try:
        for case, fields in _CASES.items():
            plain = MessageMetadata(**fields)
            out[f"{case} plain"] = _send(raw, next(sequence), plain, None)
            named = MessageMetadata(**fields, txnid_most_bits=7, txnid_least_bits=7)
            out[f"{case} plain naming a transaction"] = _send(raw, next(sequence), named, None)
            txn, _ = raw.new_txn(60_000)
            raw.add_partition(txn, topic)
            in_txn = MessageMetadata(**fields, **_fields(txn))
            out[f"{case} in a transaction"] = _send(raw, next(sequence), in_txn, txn)
            out[f"{case} in a transaction the metadata does not name"] = _send(raw, next(sequence), plain, txn)
            out[f"{case} commit"] = raw.end(txn, TxnAction.COMMIT)
        raw.conn.send(T.PING)
        out["still_open"] = T.Type.Name(raw.reply().type)
    finally:
        raw.close()
    time.sleep(0.2)
    stats = run.admin("GET", f"/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/stats").body or {}
    out["messages_in"] = stats.get("msgInCounter")
    return out
