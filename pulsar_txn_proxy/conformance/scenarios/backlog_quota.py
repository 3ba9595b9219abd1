"""Backlog quotas of a namespace: what a new producer is told while a subscription's backlog exceeds one.

The periodic enforcement (disconnecting producers, evicting the backlog) runs on Pulsar's 60 s check, which these
scenarios do not wait for; tests/test_backlog_quota.py covers it on this endpoint with a short check interval.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import pulsar

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario, until

PAYLOAD = b"x" * 200


def _namespace(
    run: Run, quota: dict[str, Any], kind: str = "destination_storage", tag: str = "bq"
) -> tuple[str, dict[str, Any]]:
    """A fresh namespace with one backlog quota; its name and what setting it answered."""
    namespace, created = run.namespace(tag)
    path = f"/admin/v2/namespaces/{namespace}"
    outcome = {
        "create": created,
        "set_quota": run.admin("POST", f"{path}/backlogQuota?backlogQuotaType={kind}", quota).status,
        "quota_map": run.admin("GET", f"{path}/backlogQuotaMap").body,
    }
    return namespace, outcome


def new_producer(client: pulsar.Client, topic: str) -> str:
    """Whether a new producer is created on the topic, or the name of the error it gets."""
    try:
        client.create_producer(topic, batching_enabled=False).close()
    except pulsar.PulsarException as exc:
        return type(exc).__name__
    return "created"


def _size_quota(run: Run, policy: str) -> Outcome:
    namespace, outcome = _namespace(run, {"limitSize": 2048, "policy": policy})
    topic = f"persistent://{namespace}/t"
    client = run.client()
    consumer = client.subscribe(topic, run.name("slow"))
    producer = client.create_producer(topic, batching_enabled=False)
    outcome["under_quota"] = new_producer(client, topic)
    for _ in range(20):
        producer.send(PAYLOAD)
    outcome["over_quota"] = new_producer(client, topic)
    # The connected producer still sends until the periodic check runs.
    outcome["connected_producer_sends"] = producer.send(PAYLOAD) is not None
    last = None
    for _ in range(21):
        last = consumer.receive(5000)
    consumer.acknowledge_cumulative(last)
    # The broker moves the cursor (and the backlog) after the acknowledgement: the refusals end some time later.
    outcome["after_acks"] = until(partial(new_producer, client, topic), lambda answer: answer == "created")
    return outcome


@scenario
def test_size_quota_with_producer_exception(run: Run) -> Outcome:
    """A backlog over ``limitSize`` refuses new producers with ProducerBlockedQuotaExceededException, until it is
    acknowledged."""
    return _size_quota(run, "producer_exception")


@scenario
def test_size_quota_with_producer_request_hold(run: Run) -> Outcome:
    """The same with ``producer_request_hold``: ProducerBlockedQuotaExceededError."""
    return _size_quota(run, "producer_request_hold")


@scenario
def test_size_quota_without_subscriptions_or_with_eviction(run: Run) -> Outcome:
    """Without a subscription there is no backlog; with ``consumer_backlog_eviction`` producers are not refused."""
    outcome: dict[str, Any] = {}
    for policy in ("producer_exception", "consumer_backlog_eviction"):
        namespace, outcome[policy] = _namespace(run, {"limitSize": 1024, "policy": policy}, tag=policy)
        topic = f"persistent://{namespace}/t"
        client = run.client()
        if policy == "consumer_backlog_eviction":
            client.subscribe(topic, run.name("slow"))
        producer = client.create_producer(topic, batching_enabled=False)
        for _ in range(20):
            producer.send(PAYLOAD)
        outcome[policy]["new_producer"] = new_producer(client, topic)
    return outcome


@scenario
def test_message_age_quota(run: Run) -> Outcome:
    """A ``message_age`` quota: new producers are refused once the oldest unacknowledged message is older."""
    namespace, outcome = _namespace(run, {"limitTime": 1, "policy": "producer_exception"}, kind="message_age")
    topic = f"persistent://{namespace}/t"
    client = run.client()
    client.subscribe(topic, run.name("slow"))
    client.create_producer(topic, batching_enabled=False).send(PAYLOAD)
    outcome["young"] = new_producer(client, topic)
    time.sleep(1)  # the quota's limit: before it, no broker may refuse
    outcome["old"] = until(partial(new_producer, client, topic), lambda answer: answer != "created")
    return outcome
