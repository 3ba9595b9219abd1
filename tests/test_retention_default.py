"""Without a retention policy, acknowledged data goes as in Pulsar (its broker default of 0 minutes / 0 MB): a whole
closed ledger at a time, once every subscription has acknowledged it, and the store's file gives the space back.

What a client sees was first measured on Apache Pulsar 4.2.4 with ``bench/retention_probe.py`` (ledgers of 5
entries, 20 messages per topic; recorded in :data:`PULSAR_ROLLOVER` and :data:`PULSAR_RESTART`); the same probe runs
here against this endpoint.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pulsar

from bench import retention_probe
from tests.conftest import make_client
from tests.server_process import ServerProcess
from tests.test_admin_http import http_json, start_admin_server, wait_for_admin

ServerFactory = Callable[..., ServerProcess]

#: ``python bench/retention_probe.py --target pulsar --phase rollover`` on Pulsar 4.2.4 (ledgers of 5 entries, no
#: minimum rollover time): the fully acknowledged topic and the topic without subscriptions keep nothing; the topic
#: with 12 of 20 acknowledged keeps the ledger holding entry 12 and those after it (entries 10 to 19).
PULSAR_ROLLOVER = {
    "all_acked": {"entries_stored": 0, "first_received": -1, "new_subscription_receives": 0},
    "no_subscription": {"entries_stored": 0, "first_received": -1, "new_subscription_receives": 0},
    "partly_acked": {"entries_stored": 10, "first_received": 10, "new_subscription_receives": 10},
}

#: ``python bench/retention_probe.py --target pulsar --phase restart`` on Pulsar 4.2.4 (default ledger sizes): nothing
#: goes while the ledger is open; a clean restart closes it, and then what every subscription acknowledged goes (all
#: of a topic without subscriptions), while a ledger acknowledged in part stays whole. This endpoint does the same
#: (engine/ledgers.py; the conformance scenarios retention.* compare it with Pulsar through unloads).
PULSAR_RESTART = {
    "all_acked": {"entries_stored": 20, "first_received": 0, "new_subscription_receives": 20},
    "all_acked_after_restart": {"entries_stored": 0, "first_received": -1, "new_subscription_receives": 0},
    "no_subscription": {"entries_stored": 20, "first_received": 0, "new_subscription_receives": 20},
    "no_subscription_after_restart": {"entries_stored": 0, "first_received": -1, "new_subscription_receives": 0},
    "partly_acked": {"entries_stored": 20, "first_received": 0, "new_subscription_receives": 20},
    "partly_acked_after_restart": {"entries_stored": 20, "first_received": 0, "new_subscription_receives": 20},
}

ROLLOVER = ("--managed-ledger-max-entries-per-ledger", "5", "--managed-ledger-min-ledger-rollover-time-minutes", "0")
#: Pulsar's default retention (the endpoint's default too: said here, as these tests are about it).
PULSAR_DEFAULT = ("--default-retention-time-in-minutes", "0", "--default-retention-size-in-mb", "0")


def _wait_for(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def _store_bytes(data_dir: Path) -> int:
    return sum(f.stat().st_size for f in data_dir.glob("store.sqlite*"))


def test_acknowledged_ledgers_go_as_in_pulsar(server_factory: ServerFactory) -> None:
    proc, url = start_admin_server(server_factory, "--policy-check-interval-seconds", "1", *ROLLOVER, *PULSAR_DEFAULT)
    client = make_client(proc.url)
    try:
        topics = {case: f"persistent://public/default/rd-{case}-{uuid.uuid4().hex[:6]}" for case in PULSAR_ROLLOVER}
        for case, acked in retention_probe.CASES.items():
            retention_probe.write(client, topics[case], acked)
        time.sleep(4)  # a few policy checks
        seen = {case: retention_probe.observe(client, url, topics[case]) for case in PULSAR_ROLLOVER}
    finally:
        client.close()
    assert seen == PULSAR_ROLLOVER


def test_the_open_ledger_stays_and_a_restart_closes_it(server_factory: ServerFactory) -> None:
    """With Pulsar's default ledger sizes nothing a short run acknowledges goes while the ledger is open, as in
    Pulsar; a restart closes it (policy checks every second), and then what was acknowledged in full goes, all of
    a topic without subscriptions too, while a ledger acknowledged in part stays whole: as after a clean restart of
    Pulsar 4.2.4."""
    proc, url = start_admin_server(server_factory, "--policy-check-interval-seconds", "1", *PULSAR_DEFAULT)
    topics = {case: f"persistent://public/default/rd-{case}-{uuid.uuid4().hex[:6]}" for case in retention_probe.CASES}
    seen = {}
    client = make_client(proc.url)
    try:
        for case, acked in retention_probe.CASES.items():
            retention_probe.write(client, topics[case], acked)
        for case in retention_probe.CASES:
            seen[case] = retention_probe.observe(client, url, topics[case])
    finally:
        client.close()
    proc.restart()
    wait_for_admin(url)
    # The topics load (a topic whose subscription acknowledged all goes at once), then a policy check or two runs:
    # the topic without subscriptions goes there, before the probe's late subscription could hold it.
    for topic in topics.values():
        http_json(url + "/admin/v2/" + topic.replace("://", "/") + "/internalStats")
    time.sleep(3)
    client = make_client(proc.url)
    try:
        for case in retention_probe.CASES:
            seen[f"{case}_after_restart"] = retention_probe.observe(client, url, topics[case])
    finally:
        client.close()
    assert seen == PULSAR_RESTART


def test_store_gives_disk_back_after_acknowledged_data_goes(server_factory: ServerFactory) -> None:
    """20 MiB written, read and acknowledged through the official client: once the ledgers go, the store's files
    (database and WAL) shrink back near what they were before."""
    proc, url = start_admin_server(
        server_factory,
        "--policy-check-interval-seconds",
        "1",
        "--managed-ledger-max-entries-per-ledger",
        "50",
        "--managed-ledger-min-ledger-rollover-time-minutes",
        "0",
        *PULSAR_DEFAULT,
    )
    topic = f"persistent://public/default/rd-disk-{uuid.uuid4().hex[:6]}"
    client = make_client(proc.url)
    try:
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        before = _store_bytes(proc.data_dir)
        producer = client.create_producer(topic, batching_enabled=False)
        payload = bytes(range(256)) * 256  # 64 KiB
        for _ in range(320):
            producer.send_async(payload, None)
        producer.flush()
        written = _store_bytes(proc.data_dir)
        assert written - before > 18 << 20
        for _ in range(320):
            consumer.acknowledge(consumer.receive(10_000))
        path = "/admin/v2/" + topic.replace("://", "/")
        # 320 entries are ledgers of 50: the last 20 are in the open ledger and stay.
        _wait_for(lambda: http_json(url + path + "/internalStats")["numberOfEntries"] == 20)
        _wait_for(lambda: _store_bytes(proc.data_dir) < before + (4 << 20) + 20 * len(payload))
    finally:
        client.close()
