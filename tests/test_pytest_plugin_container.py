"""The testcontainers class users import (pulsar_txn_proxy.testcontainers): the image started through it serves the
official client at ``get_service_url()`` (lookups included) and the admin API at ``get_http_url()``, and is
removed on exit. Needs a container engine (``make test-containers``)."""

from __future__ import annotations

import json
import urllib.request
import uuid

import pulsar
import pytest

from tests.container_endpoint import endpoint_image, require_engine

pytestmark = pytest.mark.container


def _engine_answers() -> None:
    """Fail with the reason and the way to get one unless a container engine answers (its first answer after the
    API service starts can take several seconds on a loaded machine: wait up to a minute)."""
    import docker

    try:
        docker.from_env(timeout=60).close()
    except docker.errors.DockerException:
        require_engine()


def test_container_class_serves_clients_and_admin() -> None:
    _engine_answers()
    import docker

    from pulsar_txn_proxy.testcontainers import PulsarTxnProxyContainer

    container = PulsarTxnProxyContainer(endpoint_image()).with_server_args("--default-partitions", "2")
    with container:
        assert container.get_service_url() == f"pulsar://{container.get_container_host_ip()}:{container.port}"
        topic = f"persistent://public/default/tc-{uuid.uuid4().hex[:8]}"
        client = pulsar.Client(container.get_service_url(), operation_timeout_seconds=10)
        try:
            consumer = client.subscribe(topic, "sub")
            producer = client.create_producer(topic, batching_enabled=False)
            sent = {producer.send(f"m{i}".encode(), partition_key=str(i)).partition() for i in range(20)}
            assert sent == {0, 1}  # both partitions, each looked up at the published port
            got = sorted(consumer.receive(5000).data() for _ in range(20))
            assert got == sorted(f"m{i}".encode() for i in range(20))
        finally:
            client.close()
        with urllib.request.urlopen(f"{container.get_http_url()}/admin/v2/persistent/public/default/partitioned") as r:
            assert topic in json.load(r)
        container_id = container.get_wrapped_container().id
    engine = docker.from_env()
    try:
        with pytest.raises(docker.errors.NotFound):
            engine.containers.get(container_id)
    finally:
        engine.close()
