"""What the admin routes of issue 23 keep across a restart, and what leaves with a topic: topic properties, creation
times, schema registration times, dynamic broker settings, failure domains and the names a transaction's partitions
were added under. Their answers are compared with Pulsar in tests/conformance/test_routes.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pulsar_txn_proxy.conformance.framework import Run, Target
from pulsar_txn_proxy.conformance.scenarios.txn_coordinator import Raw, Txns
from tests.server_process import ServerProcess
from tests.test_admin_http import Http, start_admin_server, wait_for_admin
from wire.pulsar_api_pb2 import TxnAction

ServerFactory = Callable[..., ServerProcess]


def test_topic_properties_dates_and_settings_survive_a_restart(server_factory: ServerFactory) -> None:
    proc, url = start_admin_server(server_factory)
    http = Http(url)
    name = f"t-{uuid.uuid4().hex[:8]}"
    base = f"/admin/v2/persistent/public/default/{name}"
    schemas = f"/admin/v2/schemas/public/default/{name}"
    domain = "/admin/v2/clusters/standalone/failureDomains/d1"
    assert http.request("PUT", base)[0] == 204
    assert http.request("PUT", base + "/properties", {"a": "1"})[0] == 204
    assert http.request("POST", schemas + "/schema", {"type": "STRING", "schema": "", "properties": {}})[0] == 200
    assert http.request("POST", "/admin/v2/brokers/configuration/loadBalancerSheddingGracePeriodMinutes/7")[0] == 200
    assert http.request("POST", domain, {"brokers": ["b1"]})[0] == 204
    created = http.json("GET", base + "/stats")[1]["topicCreationTimeStamp"]
    registered = http.json("GET", schemas + "/schema")[1]["timestamp"]
    assert created > 0 and registered >= created

    proc.restart()
    wait_for_admin(url)
    assert http.json("GET", base + "/properties") == (200, {"a": "1"})
    assert http.json("GET", base + "/stats")[1]["topicCreationTimeStamp"] == created
    assert http.json("GET", schemas + "/schema")[1]["timestamp"] == registered
    values = http.json("GET", "/admin/v2/brokers/configuration/values")
    assert values == (200, {"loadBalancerSheddingGracePeriodMinutes": "7"})
    assert http.json("GET", "/admin/v2/clusters/standalone/failureDomains") == (200, {"d1": {"brokers": ["b1"]}})

    assert http.request("DELETE", base)[0] == 204
    assert http.request("PUT", base)[0] == 204
    assert http.json("GET", base + "/properties") == (200, {})
    assert http.json("GET", base + "/stats")[1]["topicCreationTimeStamp"] >= created


def test_transaction_topic_names_survive_a_restart(server_factory: ServerFactory) -> None:
    proc, url = start_admin_server(server_factory)
    http = Http(url)
    run = Run(Target("endpoint", proc.url, url))
    topic = run.topic("t")
    short = topic.rsplit("/", 1)[1]
    raw = Raw(run, Txns())
    try:
        raw.producer(topic, 1)
        raw.subscribe(topic, "sub", 1)
        txn, _ = raw.new_txn(600_000)
        raw.add_partition(txn, short)
        raw.add_subscription(txn, short, "sub")
    finally:
        raw.close()
    path = f"/admin/v3/transactions/transactionMetadata/{txn[0]}/{txn[1]}"
    meta = http.json("GET", path)[1]
    assert (list(meta["producedPartitions"]), list(meta["ackedPartitions"])) == ([short], [short])

    proc.restart()
    wait_for_admin(url)
    meta = http.json("GET", path)[1]
    assert (list(meta["producedPartitions"]), list(meta["ackedPartitions"])) == ([short], [short])
    raw = Raw(run, Txns())
    try:
        assert raw.end(txn, TxnAction.ABORT) == {"ok": True}
    finally:
        raw.close()
