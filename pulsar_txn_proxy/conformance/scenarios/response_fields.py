"""Which fields each answer of the broker sets, on raw connections: clients read some of them unconditionally (the
Java client 4.0.x fails on a PRODUCER_SUCCESS without ``schema_version``, its getters throw on unset fields), so an
answer must set every field Pulsar sets. Values are not compared here (other scenarios do that), only presence.
"""

from __future__ import annotations

import time
from typing import Any

from google.protobuf.message import Message

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from pulsar_txn_proxy.conformance.raw import RawConnection, end_txn
from wire.commands import make, payload_of, type_name
from wire.framing import encode_payload_command, make_body
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata, TxnAction

T = BaseCommand


def _fields(message: Message) -> list[str]:
    """The names of the set fields, nested messages as ``name{...}``."""
    out = []
    for field, value in message.ListFields():
        if isinstance(value, Message):
            out.append(f"{field.name}{{{','.join(_fields(value))}}}")
        else:
            out.append(field.name)
    return sorted(out)


def _answer(conn: RawConnection, kind: int, **fields: Any) -> dict[str, list[str]]:
    conn.send(kind, **fields)
    command = conn.read().command
    return {type_name(command.type): _fields(payload_of(command))}


@scenario
def test_fields_of_answers(run: Run) -> Outcome:
    """CONNECT, lookups, a producer and a SEND, a consumer and its MESSAGE, consumer queries, acks, closes."""
    topic = run.topic("t")
    conn = RawConnection.to(run.target.service_url)
    try:
        out: dict[str, Any] = {}
        conn.send(T.CONNECT, client_version="fields-probe", protocol_version=20, **conn.connect_fields())
        connected = conn.expect(T.CONNECTED).connected
        out["connect_features"] = _fields(connected.feature_flags)
        connected.ClearField("feature_flags")
        out["connect"] = {type_name(T.CONNECTED): _fields(connected)}
        out["partitioned_metadata"] = _answer(conn, T.PARTITIONED_METADATA, topic=topic, request_id=1)
        # A broker with a TLS port also names its pulsar+ssl:// URL: that is its configuration, not its behaviour.
        lookup = _answer(conn, T.LOOKUP, topic=topic, request_id=2)
        out["lookup"] = {kind: [f for f in names if f != "brokerServiceUrlTls"] for kind, names in lookup.items()}
        out["producer"] = _answer(conn, T.PRODUCER, topic=topic, producer_id=1, request_id=3)
        metadata = MessageMetadata(producer_name="probe", sequence_id=0, publish_time=int(time.time() * 1000))
        conn.send_raw(
            encode_payload_command(
                make(T.SEND, producer_id=1, sequence_id=0, num_messages=1), make_body(metadata, b"m")
            )
        )
        out["send"] = {type_name(T.SEND_RECEIPT): _fields(conn.expect(T.SEND_RECEIPT).send_receipt)}
        out["subscribe"] = _answer(
            conn,
            T.SUBSCRIBE,
            topic=topic,
            subscription="s",
            subType=0,
            consumer_id=1,
            request_id=4,
            initialPosition=1,
        )
        conn.send(T.FLOW, consumer_id=1, messagePermits=10)
        out["message"] = {type_name(T.MESSAGE): _fields(conn.expect(T.MESSAGE).message)}
        out["last_message_id"] = _answer(conn, T.GET_LAST_MESSAGE_ID, consumer_id=1, request_id=5)
        out["consumer_stats"] = _answer(conn, T.CONSUMER_STATS, consumer_id=1, request_id=6)
        conn.send(T.GET_TOPICS_OF_NAMESPACE, namespace="public/default", request_id=7)
        topics = conn.expect(T.GET_TOPICS_OF_NAMESPACE_RESPONSE).getTopicsOfNamespaceResponse
        out["topics_hash"] = topics.HasField("topics_hash")
        topics.ClearField("topics_hash")
        out["topics_of_namespace"] = {type_name(T.GET_TOPICS_OF_NAMESPACE_RESPONSE): _fields(topics)}
        out["schema"] = _answer(conn, T.GET_SCHEMA, topic=topic, request_id=8)
        out["ack"] = _answer(
            conn, T.ACK, consumer_id=1, ack_type=0, message_id=[{"ledgerId": 1, "entryId": 0}], request_id=9
        )
        out["close_consumer"] = _answer(conn, T.CLOSE_CONSUMER, consumer_id=1, request_id=10)
        out["close_producer"] = _answer(conn, T.CLOSE_PRODUCER, producer_id=1, request_id=11)
        out["tc_connect"] = _answer(conn, T.TC_CLIENT_CONNECT_REQUEST, tc_id=0, request_id=12)
        conn.send(T.NEW_TXN, tc_id=0, request_id=13, txn_ttl_millis=60000)
        created = conn.read().command
        out["new_txn"] = {type_name(created.type): _fields(payload_of(created))}
        if created.type == T.NEW_TXN_RESPONSE and not created.newTxnResponse.HasField("error"):
            # Ended, not left to time out: an open transaction holds back coordinator 0's low-water mark, which
            # the scenarios of txn_coordinator observe (the conformance command runs them right after this one).
            txn = created.newTxnResponse
            end_txn(conn, (txn.txnid_most_bits, txn.txnid_least_bits), TxnAction.ABORT)
        return out
    finally:
        conn.close()


@scenario
def test_schema_names(run: Run) -> Outcome:
    """GET_SCHEMA names a schema after its topic (``tenant/namespace/topic``, a partition's after its partitioned
    topic), whatever name the producer that registered it gave it."""
    topic = run.topic("named")
    conn = RawConnection.to(run.target.service_url)
    try:
        conn.send(T.CONNECT, client_version="fields-probe", protocol_version=20, **conn.connect_fields())
        conn.expect(T.CONNECTED)
        conn.send(
            T.PRODUCER,
            topic=topic,
            producer_id=1,
            request_id=1,
            schema={"name": "a-name-of-its-own", "type": 1, "schema_data": b""},
        )
        conn.expect(T.PRODUCER_SUCCESS)
        names = {}
        for label, name in (("topic", topic), ("partition", f"{topic}-partition-0")):
            conn.send(T.GET_SCHEMA, topic=name, request_id=len(names) + 2)
            answer = conn.expect(T.GET_SCHEMA_RESPONSE).getSchemaResponse
            names[label] = answer.schema.name.replace(run.suffix, "<suffix>")
        return names
    finally:
        conn.close()
