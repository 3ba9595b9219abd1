"""A producer's initial subscription (``initial_subscription_name`` on PRODUCER), which the dead-letter producers of
the Java, Go and C++/Python clients set so that a dead-letter topic keeps its messages until someone subscribes.

Pulsar creates the named subscription at the earliest entry with the producer, on a persistent topic where it is
missing and auto subscription creation is allowed (else the producer is refused with NotAllowedError).
"""

from __future__ import annotations

from typing import Any

import pulsar

from pulsar_txn_proxy.conformance.framework import Outcome, Run, drain, scenario, texts
from pulsar_txn_proxy.conformance.harness import go_scenario, run_scenario
from pulsar_txn_proxy.conformance.raw import RawConnection
from wire.commands import payload_of, type_name
from wire.pulsar_api_pb2 import BaseCommand, ServerError

T = BaseCommand


def _java(run: Run, *flags: str) -> Outcome:
    outcome = run_scenario(
        run.target.service_url,
        "dead_letter_initial_subscription",
        run.topic("t"),
        run.topic("dlq"),
        *flags,
        timeout=120,
    )
    outcome.pop("timing_ms", None)
    return outcome


@scenario
def test_java_dead_letter_initial_subscription(run: Run) -> Outcome:
    """Java client: three messages dead-lettered after one redelivery; a later consumer of the initial
    subscription gets all three."""
    return _java(run, "initial")


@scenario
def test_java_dead_letter_without_initial_subscription(run: Run) -> Outcome:
    """Java client, no initial subscription: a later (Latest) consumer of the dead-letter topic gets nothing."""
    return _java(run)


def _subscriptions(run: Run, topic: str) -> Any:
    answer = run.admin("GET", f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/subscriptions")
    return {"status": answer.status, "body": sorted(answer.body) if isinstance(answer.body, list) else answer.body}


@scenario
def test_python_dead_letter_initial_subscription(run: Run) -> Outcome:
    """Python (C++) client: the same with its dead-letter policy; the dead-letter topic's subscriptions."""
    client = run.client()
    topic, dlq = run.topic("t"), run.topic("dlq")
    policy = pulsar.ConsumerDeadLetterPolicy(1, dlq, "dlq-sub")
    consumer = client.subscribe(
        topic,
        "s",
        consumer_type=pulsar.ConsumerType.Shared,
        dead_letter_policy=policy,
        negative_ack_redelivery_delay_ms=100,
    )
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"m{i}".encode())
    delivered = []
    while True:
        try:
            message = consumer.receive(3000)
        except pulsar.Timeout:
            break
        delivered.append(f"{message.data().decode()}@{message.redelivery_count()}")
        consumer.negative_acknowledge(message)
    subscriptions = _subscriptions(run, dlq)
    late = client.subscribe(dlq, "dlq-sub")
    return {
        "delivered": sorted(delivered),
        "dlq_subscriptions": subscriptions,
        "dead_lettered": sorted(texts(drain(late, 1000, expect=3))),
    }


def _producer(conn: RawConnection, request_id: int, topic: str, initial: str) -> dict[str, Any]:
    conn.send(T.LOOKUP, topic=topic, request_id=request_id * 100)
    conn.expect(T.LOOKUP_RESPONSE)
    conn.send(T.PRODUCER, topic=topic, producer_id=request_id, request_id=request_id, initial_subscription_name=initial)
    command = conn.read().command
    if command.type == T.ERROR:
        return {"error": ServerError.Name(payload_of(command).error)}
    return {"answer": type_name(command.type)}


@scenario
def test_raw_initial_subscription(run: Run) -> Outcome:
    """PRODUCER with an initial subscription: created at the earliest entry on a topic with messages, left alone
    where it exists, refused where the namespace forbids auto subscription creation."""
    client = run.client()
    topic = run.topic("t")
    client.create_producer(topic).send(b"before")
    namespace, status = run.namespace("no-auto-sub")
    forbid = run.admin(
        "POST", f"/admin/v2/namespaces/{namespace}/autoSubscriptionCreation", {"allowAutoSubscriptionCreation": False}
    ).status
    conn = RawConnection.to(run.target.service_url)
    try:
        conn.handshake()
        out: dict[str, Any] = {
            "created": _producer(conn, 1, topic, "init"),
            "again": _producer(conn, 2, topic, "init"),
            "subscriptions": _subscriptions(run, topic),
            "namespace": status,
            "forbid": forbid,
            "forbidden": _producer(conn, 3, f"persistent://{namespace}/t", "init"),
        }
    finally:
        conn.close()
    out["forbidden_subscriptions"] = _subscriptions(run, f"persistent://{namespace}/t")
    out["reads_from_earliest"] = texts(drain(client.subscribe(topic, "init"), 1000, expect=1))
    return out


def _go(run: Run, *flags: str) -> Outcome:
    topics = (run.topic("t"), run.topic("dlq"))
    return go_scenario(run.target.service_url, "dead_letter_initial_subscription", *topics, *flags)


@scenario
def test_go_dead_letter_initial_subscription(run: Run) -> Outcome:
    """Go client (``DLQPolicy.InitialSubscriptionName``): the same as the Java client's."""
    return _go(run, "initial")


@scenario
def test_go_dead_letter_without_initial_subscription(run: Run) -> Outcome:
    """Go client, no initial subscription: a later consumer of the dead-letter topic gets nothing."""
    return _go(run)
