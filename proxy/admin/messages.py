"""Stored entries as the admin API returns them (peek, examine, get by id): headers plus the raw payload.

As Pulsar's ``generateResponseWithEntry``: the message metadata goes into ``X-Pulsar-*`` headers and the body is
the payload, decompressed (a batch stays a batch: the client splits it with ``X-Pulsar-num-batch-message``).
"""

from __future__ import annotations

import base64
import json

from twisted.web import http_headers

from engine.entry import Entry
from engine.topic import Topic
from proxy.admin.http import AdminError, Reply
from proxy.stats_json import pulsar_time
from wire.compression import CompressionError, decompress
from wire.framing import split_body
from wire.message_id import signed64
from wire.pulsar_api_pb2 import MessageMetadata
from wire.validate import normalize_strings

#: Header names whose case Pulsar clients rely on (the Java admin client finds ``X-Pulsar-PROPERTY`` by an exact
#: comparison), written as Pulsar writes them.
HEADERS = (
    "X-Pulsar-Message-ID",
    "X-Pulsar-PROPERTY",
    "X-Pulsar-publish-time",
    "X-Pulsar-event-time",
    "X-Pulsar-deliver-at-time",
    "X-Pulsar-num-batch-message",
    "X-Pulsar-batch-size",
    "X-Pulsar-null-value",
    "X-Pulsar-Is-Encrypted",
    "X-Pulsar-producer-name",
    "X-Pulsar-sequence-id",
    "X-Pulsar-partition-key",
    "X-Pulsar-Base64-ordering-key",
    "X-Pulsar-Base64-schema-version-b64encoded",
    "X-Pulsar-marker-type",
    "X-Pulsar-highest-sequence-id",
    "X-Pulsar-uuid",
    "X-Pulsar-txnid-least-bits",
    "X-Pulsar-txnid-most-bits",
    "X-Pulsar-txn-aborted",
    "X-Pulsar-txn-uncommitted",
)


def _keep_header_case(names: tuple[str, ...]) -> None:
    """Twisted writes header names in Header-Case; make it keep these as they are."""
    mappings = getattr(getattr(http_headers, "_NameEncoder", None), "_caseMappings", None)
    if isinstance(mappings, dict):
        for name in names:
            mappings[b"-".join(w.capitalize() for w in name.encode().split(b"-"))] = name.encode()


_keep_header_case(HEADERS)


def uncompressed(meta: MessageMetadata, payload: bytes, max_message_size: int) -> bytes:
    """The payload without its compression (which may not exceed ``max_message_size`` bytes)."""
    try:
        return decompress(meta.compression, payload, meta.uncompressed_size, max_message_size)
    except CompressionError as exc:
        raise AdminError(500, f"Failed to decompress the message: {exc}") from None


def entry_reply(topic: Topic, entry: Entry) -> Reply:
    """An entry as the admin API returns a message."""
    meta, payload = split_body(entry.body)
    normalize_strings(meta)
    headers = [("X-Pulsar-Message-ID", f"{topic.ledger_id}:{entry.entry_id}")]
    if meta.properties:
        headers.append(("X-Pulsar-PROPERTY", json.dumps({kv.key: kv.value for kv in meta.properties})))
    headers.append(("X-Pulsar-publish-time", pulsar_time(signed64(meta.publish_time))))
    if meta.event_time:
        headers.append(("X-Pulsar-event-time", pulsar_time(signed64(meta.event_time))))
    if meta.HasField("deliver_at_time"):
        # An int64 field: already a Java long, negative ones included.
        headers.append(("X-Pulsar-deliver-at-time", pulsar_time(meta.deliver_at_time)))
    data = uncompressed(meta, payload, topic.broker.config.max_message_size)
    if meta.HasField("num_messages_in_batch"):
        headers.append(("X-Pulsar-num-batch-message", str(meta.num_messages_in_batch)))
        headers.append(("X-Pulsar-batch-size", str(len(data))))
    if meta.HasField("null_value"):
        headers.append(("X-Pulsar-null-value", str(meta.null_value).lower()))
    headers.append(("X-Pulsar-Is-Encrypted", str(len(meta.encryption_keys) > 0).lower()))
    headers.append(("X-Pulsar-producer-name", meta.producer_name))
    headers.append(("X-Pulsar-sequence-id", str(meta.sequence_id)))
    if meta.HasField("partition_key"):
        headers.append(("X-Pulsar-partition-key", meta.partition_key))
    if meta.HasField("ordering_key"):
        headers.append(("X-Pulsar-Base64-ordering-key", base64.b64encode(meta.ordering_key).decode()))
    if meta.HasField("schema_version"):
        headers.append(("X-Pulsar-Base64-schema-version-b64encoded", base64.b64encode(meta.schema_version).decode()))
    if meta.HasField("marker_type"):
        headers.append(("X-Pulsar-marker-type", str(meta.marker_type)))
    if meta.HasField("highest_sequence_id"):
        headers.append(("X-Pulsar-highest-sequence-id", str(meta.highest_sequence_id)))
    if meta.HasField("uuid"):
        headers.append(("X-Pulsar-uuid", meta.uuid))
    if meta.HasField("txnid_most_bits") and meta.HasField("txnid_least_bits"):
        headers.append(("X-Pulsar-txnid-least-bits", str(meta.txnid_least_bits)))
        headers.append(("X-Pulsar-txnid-most-bits", str(meta.txnid_most_bits)))
        aborted = topic.txn_buffer.is_aborted((meta.txnid_most_bits, meta.txnid_least_bits))
        headers.append(("X-Pulsar-txn-aborted", str(aborted).lower()))
    headers.append(("X-Pulsar-txn-uncommitted", str(entry.entry_id > topic.read_limit).lower()))
    return Reply(200, data, "application/octet-stream", headers)
