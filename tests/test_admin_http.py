"""The admin REST API over plain HTTP (``http.client``): status codes and ``{"reason"}`` bodies as Pulsar gives
them, malformed requests, durability of tenants/namespaces/policies, the policies the engine applies (deduplication,
auto topic creation, schema compatibility, message TTL, retention), message peeking, and a Python client using the
admin port as its service URL (HTTP lookup).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, Record, String, StringSchema

from tests.conftest import make_client
from tests.helpers import drain
from tests.server_process import ServerProcess, free_port

ServerFactory = Callable[..., ServerProcess]


# -- helpers (also used by test_admin_java.py and test_metrics.py) -------------------------------------------


def wait_for_admin(url: str, timeout: float = 10.0) -> None:
    """Wait until the admin API at ``url`` answers."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/admin/v2/clusters", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def start_admin_server(server_factory: ServerFactory, *extra: str) -> tuple[ServerProcess, str]:
    """A private server with an admin port; returns it and the admin URL once the admin API answers."""
    port = free_port()
    proc = server_factory("--admin-port", str(port), *extra)
    url = f"http://127.0.0.1:{port}"
    wait_for_admin(url)
    return proc, url


def http_json(url: str) -> Any:
    """GET a JSON document (raises on an error status)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


class Http:
    """Requests to one admin endpoint; returns ``(status, headers, body)``."""

    def __init__(self, base: str) -> None:
        self.base = base
        parsed = urllib.parse.urlsplit(base)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 80

    def request(
        self, method: str, path: str, body: Any = None, raw: bytes | None = None, content_type: str = "application/json"
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
            headers = {"Content-Type": content_type} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()

    def json(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
        """Status and parsed JSON body (None when empty)."""
        status, _, data = self.request(method, path, body, raw)
        return status, (json.loads(data) if data else None)


@pytest.fixture
def admin(server_factory: ServerFactory) -> tuple[ServerProcess, Http]:
    """A private server and an HTTP client for its admin port."""
    proc, url = start_admin_server(server_factory)
    return proc, Http(url)


def _ns() -> str:
    return f"ns-{uuid.uuid4().hex[:8]}"


# -- the HTTP surface --------------------------------------------------------------------------------------


def test_errors_have_pulsar_status_codes_and_reason_bodies(admin: tuple[ServerProcess, Http]) -> None:
    _, http = admin
    status, headers, body = http.request("GET", "/admin/v2/no/such/thing")
    assert (status, json.loads(body)) == (404, {"reason": "Not Found"})
    assert headers["Content-Type"] == "application/json"
    assert http.json("DELETE", "/admin/v2/clusters") == (
        405,
        {"reason": "Method DELETE is not allowed on this resource"},
    )
    assert http.json("GET", "/admin/v2/tenants/nobody") == (404, {"reason": "Tenant does not exist"})
    status, reply = http.json("PUT", "/admin/v2/tenants/t-bad-json", raw=b'{"allowedClusters": [')
    assert status == 400 and reply["reason"].startswith("Malformed JSON body")
    assert http.json("PUT", "/admin/v2/tenants/t-empty", {"allowedClusters": []}) == (
        412,
        {"reason": "Clusters can not be empty"},
    )
    assert http.json("PUT", "/admin/v2/tenants/bad%20name", {"allowedClusters": ["standalone"]}) == (
        412,
        {"reason": "Tenant name is not valid"},
    )
    topic = "/admin/v2/persistent/public/default/" + f"t-{uuid.uuid4().hex[:8]}"
    assert http.json("PUT", topic + "/partitions", raw=b"zero")[0] == 400
    assert http.json("PUT", topic + "/partitions", 0) == (406, {"reason": "Number of partitions should be more than 0"})
    assert http.json("GET", topic + "/stats")[0] == 404
    assert http.json("GET", "/admin/v2/persistent/nowhere/ns") == (404, {"reason": "Namespace does not exist"})
    assert http.json("GET", "/admin/v3/transactions/transactionMetadata/0/12345")[0] == 404
    assert http.json("GET", "/admin/v3/transactions/coordinatorStats?coordinatorId=99")[0] == 404
    assert http.json("GET", "/admin/v3/transactions/transactionBufferStats/public/default/nope")[0] == 404
    assert http.json("POST", "/admin/v2/namespaces/public/default/messageTTL", raw=b'"soon"')[0] == 400


def test_tenants_namespaces_and_policies_are_durable(server_factory: ServerFactory) -> None:
    proc, url = start_admin_server(server_factory)
    http = Http(url)
    tenant, ns = f"t-{uuid.uuid4().hex[:6]}", _ns()
    path = f"/admin/v2/namespaces/{tenant}/{ns}"
    assert http.request("PUT", f"/admin/v2/tenants/{tenant}", {"allowedClusters": ["standalone"]})[0] == 204
    assert http.json("PUT", path, raw=b"")[0] == 204
    assert http.json("PUT", path, raw=b"") == (409, {"reason": "Namespace already exists"})
    assert http.json("POST", path + "/messageTTL", 30)[0] == 204
    assert http.json("POST", path + "/retention", {"retentionTimeInMinutes": -1, "retentionSizeInMB": 5})[0] == 204
    assert http.json("PUT", path + "/schemaCompatibilityStrategy", "FORWARD")[0] == 204
    assert http.json("POST", path + "/maxConsumersPerTopic", 9)[0] == 204
    assert http.json("GET", path + "/deduplication") == (200, None)

    proc.restart()
    wait_for_admin(url)
    assert tenant in http.json("GET", "/admin/v2/tenants")[1]
    assert http.json("GET", f"/admin/v2/namespaces/{tenant}")[1] == [f"{tenant}/{ns}"]
    assert http.json("GET", path + "/messageTTL") == (200, 30)
    assert http.json("GET", path + "/retention") == (200, {"retentionTimeInMinutes": -1, "retentionSizeInMB": 5})
    assert http.json("GET", path + "/schemaCompatibilityStrategy") == (200, "FORWARD")
    policies = http.json("GET", path)[1]
    assert (policies["max_consumers_per_topic"], policies["replication_clusters"]) == (9, ["standalone"])
    assert http.json("DELETE", path + "?force=true") == (
        405,
        {"reason": "Broker doesn't allow forced deletion of namespaces"},
    )
    assert http.json("DELETE", path + "/messageTTL")[0] == 204
    assert http.json("GET", path + "/messageTTL") == (200, None)
    assert http.json("DELETE", f"/admin/v2/tenants/{tenant}") == (
        409,
        {"reason": "The tenant still has active namespaces"},
    )
    assert http.json("DELETE", path)[0] == 204
    assert http.json("DELETE", f"/admin/v2/tenants/{tenant}")[0] == 204
    assert http.json("GET", f"/admin/v2/tenants/{tenant}")[0] == 404


def test_topics_over_http(admin: tuple[ServerProcess, Http]) -> None:
    proc, http = admin
    name = f"t-{uuid.uuid4().hex[:8]}"
    base = f"/admin/v2/persistent/public/default/{name}"
    assert http.json("GET", base + "/partitions") == (
        404,
        {"reason": f"Topic persistent://public/default/{name} not found"},
    )
    assert http.request("PUT", base + "/partitions", 2)[0] == 204
    assert http.json("PUT", base + "/partitions", 2) == (409, {"reason": "This topic already exists"})
    assert http.json("GET", base + "/partitions") == (200, {"partitions": 2, "deleted": False})
    assert http.json("GET", "/admin/v2/persistent/public/default/partitioned")[1] == [
        f"persistent://public/default/{name}"
    ]
    client = make_client(proc.url)
    try:
        producer = client.create_producer(f"persistent://public/default/{name}", batching_enabled=False)
        for i in range(6):
            producer.send(f"m{i}".encode(), partition_key=f"k{i}")
        producer.close()
    finally:
        client.close()
    status, stats = http.json("GET", base + "/partitioned-stats?perPartition=true")
    assert status == 200
    assert stats["msgInCounter"] == 6
    assert stats["metadata"] == {"partitions": 2}
    assert sum(p["msgInCounter"] for p in stats["partitions"].values()) == 6
    assert http.json("GET", base + "/stats") == (404, {"reason": f"Topic persistent://public/default/{name} not found"})
    assert http.json("GET", base + "-partition-0/stats")[0] == 200
    assert http.json("POST", base + "/partitions", 1)[0] == 422
    assert http.json("DELETE", base + "/partitions")[0] == 204
    assert http.json("GET", "/admin/v2/persistent/public/default")[1] == []
    assert http.json("GET", "/admin/v2/non-persistent/public/default") == (200, [])


def test_peek_returns_payload_and_metadata_headers(admin: tuple[ServerProcess, Http]) -> None:
    proc, http = admin
    topic = f"persistent://public/default/t-{uuid.uuid4().hex[:8]}"
    base = "/admin/v2/" + topic.replace("://", "/")
    assert http.request("PUT", base + "/subscription/peeker", {"ledgerId": -1, "entryId": -1})[0] == 204
    client = make_client(proc.url)
    try:
        plain = client.create_producer(topic, batching_enabled=False)
        plain.send(b"first", properties={"color": "red"}, partition_key="key-1")
        text = ("compressible " * 200).encode()
        codecs = ("LZ4", "ZLib", "ZSTD", "SNAPPY")
        for kind in (getattr(pulsar.CompressionType, codec) for codec in codecs):
            client.create_producer(topic, batching_enabled=False, compression_type=kind).send(text)
        batched = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=100)
        for i in range(3):
            batched.send_async(f"b{i}".encode(), None)
        batched.flush()
    finally:
        client.close()

    status, headers, body = http.request("GET", base + "/subscription/peeker/position/1")
    assert (status, body) == (200, b"first")
    assert json.loads(headers["X-Pulsar-PROPERTY"]) == {"color": "red"}
    assert headers["X-Pulsar-partition-key"] == "key-1"
    assert headers["X-Pulsar-Message-ID"].endswith(":0")
    assert headers["X-Pulsar-txn-uncommitted"] == "false"
    for position in (2, 3, 4, 5):
        status, _, body = http.request("GET", base + f"/subscription/peeker/position/{position}")
        assert (status, body) == (200, text)
    status, headers, body = http.request("GET", base + "/subscription/peeker/position/6")
    assert (status, headers["X-Pulsar-num-batch-message"]) == (200, "3")
    assert all(f"b{i}".encode() in body for i in range(3))
    assert http.json("GET", base + "/subscription/peeker/position/7") == (404, {"reason": "Message not found"})
    status, headers, body = http.request("GET", base + "/examinemessage?initialPosition=earliest&messagePosition=1")
    assert (status, body) == (200, b"first")
    ledger, _ = headers["X-Pulsar-Message-ID"].split(":")
    assert http.request("GET", base + f"/ledger/{ledger}/entry/1")[2] == text
    assert http.json("GET", base + "/messageid/0")[1]["entryId"] == 0
    last = http.json("GET", base + "/lastMessageId")[1]
    assert (last["entryId"], last["batchIndex"]) == (5, 2)


def test_python_client_with_the_admin_port_as_service_url(admin: tuple[ServerProcess, Http]) -> None:
    _, http = admin
    name = f"t-{uuid.uuid4().hex[:8]}"
    topic, partitioned = f"persistent://public/default/{name}", f"persistent://public/default/{name}-p"
    assert http.request("PUT", "/admin/v2/" + partitioned.replace("://", "/") + "/partitions", 3)[0] == 204
    status, lookup = http.json("GET", "/lookup/v2/topic/" + topic.replace("://", "/"))
    assert status == 200 and lookup["brokerUrl"].startswith("pulsar://") and lookup["httpUrl"] == http.base
    client = make_client(http.base)
    try:
        for target in (topic, partitioned):
            consumer = client.subscribe(target, "s", initial_position=pulsar.InitialPosition.Earliest)
            producer = client.create_producer(target, batching_enabled=False)
            sent = {f"{target}-{i}".encode() for i in range(6)}
            for payload in sorted(sent):
                producer.send(payload, partition_key=payload.decode())
            received = drain(consumer, 500)
            assert {m.data() for m in received} == sent
            for msg in received:
                consumer.acknowledge(msg)
        assert client.get_topic_partitions(partitioned) == [f"{partitioned}-partition-{i}" for i in range(3)]
    finally:
        client.close()


# -- the policies the engine applies ------------------------------------------------------------------------


def test_namespace_deduplication_and_auto_topic_creation_apply(admin: tuple[ServerProcess, Http]) -> None:
    proc, http = admin
    ns = f"public/{_ns()}"
    path = f"/admin/v2/namespaces/{ns}"
    assert http.request("PUT", path, raw=b"")[0] == 204
    assert http.request("POST", path + "/deduplication", True)[0] == 204
    client = make_client(proc.url)
    try:
        topic = f"persistent://{ns}/dedup"
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, producer_name="writer", batching_enabled=False)
        for seq in range(3):
            producer.send(f"m{seq}".encode(), sequence_id=seq)
        producer.close()
        again = client.create_producer(topic, producer_name="writer", batching_enabled=False)
        again.send(b"m1-resent", sequence_id=1)
        again.send(b"m3", sequence_id=3)
        assert [m.data() for m in drain(consumer, 1000)] == [b"m0", b"m1", b"m2", b"m3"]
        assert http.json("GET", "/admin/v2/" + topic.replace("://", "/") + "/stats")[1]["deduplicationStatus"] == (
            "Enabled"
        )

        override = {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 3}
        assert http.request("POST", path + "/autoTopicCreation", override)[0] == 204
        auto = f"persistent://{ns}/auto-partitioned"
        client.create_producer(auto).send(b"x")
        assert http.json("GET", "/admin/v2/" + auto.replace("://", "/") + "/partitions")[1]["partitions"] == 3
        assert http.request("POST", path + "/autoTopicCreation", {"allowAutoTopicCreation": False})[0] == 204
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(f"persistent://{ns}/never-created")
        assert http.json("GET", f"/admin/v2/persistent/{ns}")[1] == sorted(
            [f"persistent://{ns}/dedup"] + [f"{auto}-partition-{i}" for i in range(3)]
        )
    finally:
        client.close()


class _V1(Record):
    name = String()


class _V2NoDefault(Record):
    name = String()
    age = Integer(required=True)


class _V2WithDefault(Record):
    name = String()
    age = Integer(required_default=True)  # written with "default": null


def test_namespace_schema_compatibility_strategy_applies(admin: tuple[ServerProcess, Http]) -> None:
    proc, http = admin
    ns = f"public/{_ns()}"
    path = f"/admin/v2/namespaces/{ns}"
    assert http.request("PUT", path, raw=b"")[0] == 204
    assert http.request("PUT", path + "/schemaCompatibilityStrategy", "BACKWARD")[0] == 204
    topic = f"persistent://{ns}/records"
    client = make_client(proc.url)
    try:
        client.create_producer(topic, schema=AvroSchema(_V1, _V1.__name__)).close()
        with pytest.raises(pulsar.PulsarException, match="ncompatible"):
            client.create_producer(topic, schema=AvroSchema(_V2NoDefault, _V1.__name__))
        client.create_producer(topic, schema=AvroSchema(_V2WithDefault, _V1.__name__)).close()
        assert http.json("GET", f"/admin/v2/schemas/{ns}/records/schema")[1]["version"] == 1
        assert http.request("PUT", path + "/schemaCompatibilityStrategy", "ALWAYS_INCOMPATIBLE")[0] == 204
        with pytest.raises(pulsar.PulsarException, match="ncompatible"):
            client.create_producer(topic, schema=AvroSchema(_V2NoDefault, _V1.__name__))
    finally:
        client.close()


def test_schema_upload_over_http_reaches_producers(admin: tuple[ServerProcess, Http]) -> None:
    proc, http = admin
    ns = f"public/{_ns()}"
    assert http.request("PUT", f"/admin/v2/namespaces/{ns}", raw=b"")[0] == 204
    path = f"/admin/v2/schemas/{ns}/uploaded"
    assert http.json("GET", path + "/schemas") == (200, {"getSchemaResponses": []})
    # As Pulsar: deleting where there is nothing to delete still adds a deletion marker, version 0.
    assert http.json("DELETE", path + "/schema") == (200, {"version": 0})
    assert http.request("POST", path + "/schema", raw=b"{not json")[0] == 400
    assert http.request("POST", path + "/schema", {"type": "NOPE", "schema": ""})[0] == 422
    assert http.request("POST", path + "/schema", {"type": "STRING", "schema": 7})[0] == 422
    assert http.json("POST", path + "/schema", {"type": "STRING", "schema": ""}) == (200, {"version": {"version": 1}})

    # The uploaded schema is the topic's: a producer declaring another type is refused (UNDEFINED: types must match),
    # one declaring it is accepted.
    topic = f"persistent://{ns}/uploaded"
    client = make_client(proc.url)
    try:
        with pytest.raises(pulsar.PulsarException, match="ncompatible"):
            client.create_producer(topic, schema=AvroSchema(_V1, _V1.__name__))
        producer = client.create_producer(topic, schema=StringSchema())
        producer.send("typed")
        producer.close()
    finally:
        client.close()
    assert http.json("GET", path + "/schema")[1]["type"] == "STRING"


def _wait_until(check: Callable[[], bool], timeout: float = 8.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_namespace_message_ttl_and_retention_apply(server_factory: ServerFactory) -> None:
    # Ledgers of one entry: retention deletes whole closed ledgers, so here any acknowledged entry may go.
    ledgers = ("--managed-ledger-max-entries-per-ledger", "1", "--managed-ledger-min-ledger-rollover-time-minutes", "0")
    proc, url = start_admin_server(server_factory, "--policy-check-interval-seconds", "1", *ledgers)
    http = Http(url)
    ttl_ns, kept_ns = f"public/{_ns()}", f"public/{_ns()}"
    for ns in (ttl_ns, kept_ns):
        assert http.request("PUT", f"/admin/v2/namespaces/{ns}", raw=b"")[0] == 204
    assert http.request("POST", f"/admin/v2/namespaces/{ttl_ns}/messageTTL", 1)[0] == 204
    retention = {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0}
    assert http.request("POST", f"/admin/v2/namespaces/{kept_ns}/retention", retention)[0] == 204
    ttl_topic, kept_topic = f"persistent://{ttl_ns}/expiring", f"persistent://{kept_ns}/trimmed"
    client = make_client(proc.url)
    try:
        for topic in (ttl_topic, kept_topic):
            consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
            producer = client.create_producer(topic, batching_enabled=False)
            ids = [producer.send(f"m{i}".encode()) for i in range(5)]
            if topic == kept_topic:
                for _ in range(3):
                    consumer.acknowledge(consumer.receive(5000))
            consumer.close()

        def backlog(topic: str) -> int:
            return http_json(f"{url}/admin/v2/{topic.replace('://', '/')}/stats")["subscriptions"]["s"]["msgBacklog"]

        def stored(topic: str) -> int:
            return http_json(f"{url}/admin/v2/{topic.replace('://', '/')}/internalStats")["numberOfEntries"]

        # Message TTL: unacknowledged messages older than a second are acknowledged away.
        assert backlog(ttl_topic) == 5
        assert _wait_until(lambda: backlog(ttl_topic) == 0)
        # Retention 0/0: acknowledged entries go, the unacknowledged stay.
        assert _wait_until(lambda: stored(kept_topic) == 2)
        assert backlog(kept_topic) == 2
        reader = client.create_reader(kept_topic, pulsar.MessageId.earliest)
        assert [m.data() for m in drain(reader, 1000)] == [b"m3", b"m4"]
        assert ids[3].entry_id() == 3
    finally:
        client.close()
