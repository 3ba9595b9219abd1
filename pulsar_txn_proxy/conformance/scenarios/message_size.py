"""The broker's max message size (5 MiB by default): what CONNECTED advertises, the official clients refusing,
batching and chunking by it, and the frame sizes the broker takes (the max message size plus 10 KiB, its size field
included) and refuses (the connection closes)."""

from __future__ import annotations

import time
from typing import Any

import pulsar

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from pulsar_txn_proxy.conformance.harness import run_scenario
from pulsar_txn_proxy.conformance.raw import RawConnection
from wire.commands import make
from wire.framing import DEFAULT_MAX_MESSAGE_SIZE, encode_payload_command, make_body, max_frame_size
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata

T = BaseCommand


def _send_of_total(name: str, total: int) -> bytes:
    """A SEND frame whose ``totalSize`` field is ``total``."""
    meta = MessageMetadata(producer_name=name, sequence_id=0, publish_time=int(time.time() * 1000))
    command = make(T.SEND, producer_id=1, sequence_id=0, num_messages=1)
    empty = encode_payload_command(command, make_body(meta, b""))
    return encode_payload_command(command, make_body(meta, b"x" * (total + 4 - len(empty))))


def _raw_send(run: Run, topic: str, total: int) -> dict[str, Any]:
    """CONNECT, LOOKUP and PRODUCER on a raw connection, then a SEND frame of ``total`` bytes (only its first 64
    bytes when it is too large: the broker closes as soon as it reads the size); what came back."""
    conn = RawConnection.to(run.target.service_url, timeout=30)
    try:
        advertised = conn.handshake().connected.max_message_size
        conn.send(T.LOOKUP, topic=topic, request_id=1)
        conn.expect(T.LOOKUP_RESPONSE)
        conn.send(T.PRODUCER, topic=topic, producer_id=1, request_id=2)
        name = conn.expect(T.PRODUCER_SUCCESS).producer_success.producer_name
        data = _send_of_total(name, total)
        too_large = total > max_frame_size(advertised)
        conn.send_raw(data[:64] if too_large else data)
        if too_large:
            conn.sock.settimeout(10)
            return {"advertised": advertised, "closed": conn.sock.recv(65536) == b""}
        return {"advertised": advertised, "answer": T.Type.Name(conn.read().command.type)}
    finally:
        conn.close()


@scenario
def test_frame_size_limit(run: Run) -> Outcome:
    """A frame a little under the limit gets its receipt; one byte over the limit closes the connection."""
    largest = max_frame_size(DEFAULT_MAX_MESSAGE_SIZE)
    # Not the largest itself: the bookie of Pulsar's standalone refuses an entry that large (its own frame limit of
    # 5253120 bytes with the entry's headers), and the broker retries the write forever.
    return {
        "under": _raw_send(run, run.topic("under"), largest - 1024),
        "over": _raw_send(run, run.topic("over"), largest + 1),
    }


@scenario
def test_python_client_by_max_message_size(run: Run) -> Outcome:
    """The Python client refuses a message over the max message size without chunking, and chunks it with."""
    client = run.client()
    topic = run.topic("t")
    consumer = client.subscribe(topic, "sub")
    plain = client.create_producer(topic, batching_enabled=False)
    chunked = client.create_producer(topic, batching_enabled=False, chunking_enabled=True)
    big = bytes(range(251)) * (DEFAULT_MAX_MESSAGE_SIZE * 5 // 2 // 251)
    out: Outcome = {
        "too_big": run.attempt(lambda: plain.send(b"x" * (DEFAULT_MAX_MESSAGE_SIZE + 1)) and None),
        "chunked": run.attempt(lambda: chunked.send(big) and None),
    }
    try:
        out["chunk_received_whole"] = consumer.receive(20_000).data() == big
    except pulsar.Timeout:
        out["chunk_received_whole"] = "timeout"
    return out


@scenario
def test_java_client_by_max_message_size(run: Run) -> Outcome:
    """The Java client (batches bounded by the max message size alone) fills batches up to it, refuses a message
    over it and chunks one of two and a half times it."""
    obs = run_scenario(run.target.service_url, "max_size_batches", run.topic("t"), "300000", "20", timeout=120)
    obs.pop("timing_ms")
    obs["too_big"] = obs["too_big"]["type"]  # its message names the producer, whose name differs
    return obs


@scenario
def test_topic_max_message_size_policy(run: Run) -> Outcome:
    """A topic's maxMessageSize policy: the values accepted, and SENDs under and over it on a raw connection (not an
    official client: the Python client resends a refused message forever, reconnecting each time, on Pulsar too)."""
    topic = run.topic("t")
    path = "/admin/v2/" + topic.replace("persistent://", "persistent/") + "/maxMessageSize"
    run.admin("PUT", "/admin/v2/" + topic.replace("persistent://", "persistent/"))
    out: dict[str, Any] = {
        "set_negative": run.admin("POST", path, -1).status,
        "set_over_broker": run.admin("POST", path, DEFAULT_MAX_MESSAGE_SIZE + 1).status,
        "set_broker": run.admin("POST", path, DEFAULT_MAX_MESSAGE_SIZE).status,
        "set_1000": run.admin("POST", path, 1000).status,
        "get": run.admin("GET", path).summary(),
    }
    conn = RawConnection.to(run.target.service_url, timeout=30)
    try:
        conn.handshake()
        conn.send(T.LOOKUP, topic=topic, request_id=1)
        conn.expect(T.LOOKUP_RESPONSE)
        conn.send(T.PRODUCER, topic=topic, producer_id=1, request_id=2)
        name = conn.expect(T.PRODUCER_SUCCESS).producer_success.producer_name
        answers = []
        for total in (900, 2000):
            conn.send_raw(_send_of_total(name, total))
            command = conn.read().command
            answers.append(
                {
                    "type": T.Type.Name(command.type),
                    "error": command.send_error.error,
                    "message": command.send_error.message,
                }
                if command.type == T.SEND_ERROR
                else {"type": T.Type.Name(command.type)}
            )
        out["sends"] = answers
        conn.assert_open()
        out["open_after"] = True
    finally:
        conn.close()
    return out
