"""Backlog quotas enforced by the periodic policy check (every second here): producers disconnected, backlogs evicted.

What a new producer is told while a quota is exceeded is compared with Pulsar in
tests/conformance/test_backlog_quota.py.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pulsar
import pytest

from tests.conftest import make_client
from tests.server_process import ServerProcess
from tests.test_admin_http import Http, http_json, start_admin_server

ServerFactory = Callable[..., ServerProcess]
PAYLOAD = b"x" * 200


def _setup(server_factory: ServerFactory, quota: dict[str, Any], kind: str) -> tuple[ServerProcess, str, str]:
    """A server checking policies every second, and a topic in a new namespace with one quota."""
    proc, admin_url = start_admin_server(server_factory, "--policy-check-interval-seconds", "1")
    namespace = f"public/bq-{uuid.uuid4().hex[:8]}"
    http = Http(admin_url)
    assert http.request("PUT", f"/admin/v2/namespaces/{namespace}")[0] == 204
    path = f"/admin/v2/namespaces/{namespace}/backlogQuota?backlogQuotaType={kind}"
    assert http.request("POST", path, quota)[0] == 204
    return proc, admin_url, f"persistent://{namespace}/t"


def _stats(admin_url: str, topic: str) -> dict[str, Any]:
    return http_json(admin_url + "/admin/v2/" + topic.replace("://", "/") + "/stats")


def _wait_for(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def test_producer_exception_disconnects_connected_producers(server_factory: ServerFactory) -> None:
    proc, admin_url, topic = _setup(
        server_factory, {"limitSize": 2048, "policy": "producer_exception"}, "destination_storage"
    )
    client = make_client(proc.url)
    client.subscribe(topic, "slow")
    producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=3000)
    for _ in range(20):
        producer.send(PAYLOAD)
    stats = _stats(admin_url, topic)
    assert (stats["backlogQuotaLimitSize"], stats["backlogQuotaLimitTime"]) == (2048, -1)
    # The check closes the producer; coming back, it is refused, and so are its sends.
    _wait_for(lambda: not _stats(admin_url, topic)["publishers"])
    with pytest.raises(pulsar.PulsarException):
        producer.send(PAYLOAD)
    assert _stats(admin_url, topic)["subscriptions"]["slow"]["msgBacklog"] == 20
    client.close()


def test_consumer_backlog_eviction_drops_the_oldest_messages(server_factory: ServerFactory) -> None:
    proc, admin_url, topic = _setup(
        server_factory, {"limitSize": 4096, "policy": "consumer_backlog_eviction"}, "destination_storage"
    )
    client = make_client(proc.url)
    consumer = client.subscribe(topic, "slow", receiver_queue_size=1)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(40):
        producer.send(b"%03d" % i + PAYLOAD)
    _wait_for(lambda: _stats(admin_url, topic)["subscriptions"]["slow"]["msgBacklog"] < 40)
    # The producer is not refused, and the subscription keeps the newest messages: 90% of the limit at most.
    assert _stats(admin_url, topic)["publishers"]
    backlog = _stats(admin_url, topic)["subscriptions"]["slow"]["msgBacklog"]
    assert 0 < backlog * len(PAYLOAD) <= 4096 * 0.9
    received = []
    while True:
        try:
            message = consumer.receive(1000)
        except pulsar.Timeout:
            break
        received.append(int(message.data()[:3]))
        consumer.acknowledge(message)
    # The receiver queue held at most the first message before the eviction (then redelivered or not: at most one).
    assert received[-backlog:] == list(range(40 - backlog, 40))
    assert len(received) <= backlog + 2
    client.close()


def test_message_age_eviction_expires_old_messages(server_factory: ServerFactory) -> None:
    proc, admin_url, topic = _setup(
        server_factory, {"limitTime": 1, "policy": "consumer_backlog_eviction"}, "message_age"
    )
    client = make_client(proc.url)
    client.subscribe(topic, "slow")
    producer = client.create_producer(topic, batching_enabled=False)
    for _ in range(5):
        producer.send(PAYLOAD)
    assert _stats(admin_url, topic)["subscriptions"]["slow"]["msgBacklog"] == 5
    _wait_for(lambda: _stats(admin_url, topic)["subscriptions"]["slow"]["msgBacklog"] == 0)
    # A message published now is young: it stays.
    producer.send(PAYLOAD)
    time.sleep(0.5)
    assert _stats(admin_url, topic)["subscriptions"]["slow"]["msgBacklog"] == 1
    client.close()
