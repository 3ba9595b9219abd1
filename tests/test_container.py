"""The endpoint's container image, started through testcontainers: official clients on the published port.

Every test here is marked ``container``: its endpoint runs in a container and it fails when no container engine
answers. ``make test`` deselects them; ``make test-containers`` sets up the engine and runs them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pulsar
import pytest

from tests.conftest import make_client
from tests.container_endpoint import DATA_DIR, ContainerServer
from tests.txn_harness import Scenario, txn_harness_fixture  # noqa: F401 (the txn_harness fixture)

pytestmark = pytest.mark.container

Factory = Callable[..., ContainerServer]
TXN_ARGS = ("--default-partitions", "3")


def _topic(tag: str) -> str:
    return f"persistent://public/default/ct-{tag}-{uuid.uuid4().hex[:10]}"


def _inspect(server: ContainerServer) -> dict[str, Any]:
    wrapped = server.container.get_wrapped_container()
    wrapped.reload()
    return wrapped.attrs


def test_official_client_produces_and_consumes(server: ContainerServer, client: pulsar.Client, topic: str) -> None:
    assert isinstance(server, ContainerServer)
    attrs = _inspect(server)
    assert attrs["State"]["Running"] is True
    assert attrs["Config"]["Image"] == server.image
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    sent = [producer.send(f"m-{i}".encode(), properties={"i": str(i)}, partition_key=f"k{i % 2}") for i in range(20)]
    received = []
    for _ in range(20):
        msg = consumer.receive(5000)
        received.append((msg.message_id(), msg.data(), msg.properties(), msg.partition_key()))
        consumer.acknowledge(msg)
    assert [r[0] for r in received] == sent
    assert [r[1] for r in received] == [f"m-{i}".encode() for i in range(20)]
    assert [r[2] for r in received] == [{"i": str(i)} for i in range(20)]
    assert [r[3] for r in received] == [f"k{i % 2}" for i in range(20)]
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert [reader.read_next(5000).data() for _ in range(20)] == [r[1] for r in received]


def test_batched_and_partitioned_topics(server_factory: Factory) -> None:
    """Lookups of partitions name the published address: the client reaches every partition's broker."""
    server = server_factory("--default-partitions", "3")
    client = make_client(server.url)
    try:
        topic = _topic("parts")
        consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10)
        for i in range(30):
            producer.send_async(f"b-{i}".encode(), None, partition_key=f"key-{i}")
        producer.flush()
        got = set()
        for _ in range(30):
            msg = consumer.receive(5000)
            got.add(msg.data().decode())
            consumer.acknowledge(msg)
        assert got == {f"b-{i}" for i in range(30)}
        assert len(client.get_topic_partitions(topic)) == 3
    finally:
        client.close()


def test_data_survives_container_restarts_on_its_volume(server_factory: Factory) -> None:
    """A clean stop, then a kill -9: each time a new container on the same volume has every message and ack."""
    server = server_factory()
    topic = _topic("durable")
    client = make_client(server.url)
    producer = client.create_producer(topic, batching_enabled=False)
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    for i in range(10):
        producer.send(f"d-{i}".encode())
    for _ in range(4):
        consumer.acknowledge(consumer.receive(5000))
    client.close()
    first_id = server.container.get_container_id()

    assert server.stop() == 0
    assert "shutting down" in server.log()
    server.start()
    assert server.container.get_container_id() != first_id
    mounts = _inspect(server)["Mounts"]
    assert [(m["Type"], m["Name"], m["Destination"]) for m in mounts] == [("volume", server.volume, DATA_DIR)]
    client = make_client(server.url)
    consumer = client.subscribe(topic, "sub")
    got = [consumer.receive(5000) for _ in range(6)]
    assert [m.data() for m in got] == [f"d-{i}".encode() for i in range(4, 10)]
    consumer.acknowledge(got[0])
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"after-restart")
    client.close()

    server.kill()
    server.start()
    client = make_client(server.url)
    try:
        consumer = client.subscribe(topic, "sub")
        got = [consumer.receive(5000).data() for _ in range(6)]
        assert got == [f"d-{i}".encode() for i in range(5, 10)] + [b"after-restart"]
    finally:
        client.close()


def test_image_health_check_passes_and_runs_unprivileged(server: ContainerServer) -> None:
    """The image's own HEALTHCHECK command succeeds in a running endpoint; the server is not root."""
    health = _inspect(server)["Config"]["Healthcheck"]["Test"]
    wrapped = server.container.get_wrapped_container()
    assert health[0] == "CMD"
    result = wrapped.exec_run(health[1:])
    assert result.exit_code == 0, result.output
    assert wrapped.exec_run(["id", "-u"]).output.strip() == b"10001"


# -- Java transaction scenarios (the official Java client) against the containerised endpoint ----------------------


def test_txn_commit_is_atomic_across_topics(txn_harness: Scenario, server_factory: Factory) -> None:
    obs = txn_harness(server_factory(*TXN_ARGS).url, "commit_atomic", _topic("a"), _topic("b"), "batched")
    assert obs["before_end"] == []
    assert obs["commit_error"] is None
    assert obs["txn_state"] == "COMMITTED"
    assert sorted(obs["after_commit"]) == sorted([f"a-{i}" for i in range(10)] + [f"b-{i}" for i in range(5)])
    assert obs["extra"] == []


def test_txn_consume_process_produce_abort(txn_harness: Scenario, server_factory: Factory) -> None:
    url = server_factory(*TXN_ARGS).url
    obs = txn_harness(url, "consume_process_produce_abort", _topic("in"), _topic("out"), "Shared")
    inputs = [f"m-{i}" for i in range(5)]
    assert sorted(obs["consumed"]) == inputs
    assert obs["abort_error"] is None
    assert obs["output"] == []
    assert sorted(d["payload"] for d in obs["redelivered"]) == inputs


def test_committed_txn_survives_container_kill(txn_harness: Scenario, server_factory: Factory) -> None:
    server = server_factory(*TXN_ARGS)
    topic = _topic("durable")
    before = txn_harness(server.url, "commit_and_verify", topic)
    assert before["commit_error"] is None
    assert sorted(before["visible_before_crash"]) == [f"K-{i}" for i in range(3)]
    server.kill()
    server.start()
    after = txn_harness(server.url, "crash_verify", topic, "post", 10, 6)
    expected = [f"K-{i}" for i in range(3)] + [f"plain-after-{i}" for i in range(3)]
    assert sorted(d["payload"] for d in after["received"]) == sorted(expected)
    assert after["extra"] == []
    assert after["new_txn_id"] != before["txn_id"]
    assert after["new_txn_commit_error"] is None
