"""What a client sees of consumed data once a broker may delete it, with no retention policy: the probe behind the
default trimming of this endpoint, run on this endpoint and on a Pulsar 4.2.4 standalone with the same settings.

Each case writes 20 messages (one entry each) to a topic of its own, acknowledges some of them, waits for the
broker's retention checks, then counts what a new subscription at Earliest receives and what the topic's internal
stats say it stores. ``--phase rollover`` runs with ledgers of 5 entries (``managedLedgerMaxEntriesPerLedger=5``,
no minimum rollover time); ``--phase restart`` with the default ledger sizes, before and after a restart.

Run: ``python bench/retention_probe.py --target pulsar|endpoint --phase rollover|restart`` (prints JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pulsar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.conformance.pulsar_standalone import PulsarStandalone  # noqa: E402
from tests.server_process import ServerProcess  # noqa: E402

MESSAGES = 20
#: The broker settings of each phase, as broker.conf names (this endpoint takes them in kebab-case).
PHASES = {
    "rollover": {"managedLedgerMaxEntriesPerLedger": 5, "managedLedgerMinLedgerRolloverTimeMinutes": 0},
    "restart": {},
}
CHECK_SECONDS = 2
#: Acknowledged messages per case.
CASES = {"all_acked": MESSAGES, "partly_acked": 12, "no_subscription": None}


def kebab(name: str) -> str:
    return "".join("-" + c.lower() if c.isupper() else c for c in name)


def write(client: pulsar.Client, topic: str, acked: int | None) -> None:
    consumer = None
    if acked is not None:
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(MESSAGES):
        producer.send(f"m{i}".encode())
    producer.close()
    if consumer is not None:
        for i in range(MESSAGES):
            message = consumer.receive(10_000)
            if i < (acked or 0):
                consumer.acknowledge(message)
        time.sleep(1)  # the acknowledgements sent (grouped by the client)
        consumer.close()


def observe(client: pulsar.Client, admin_url: str, topic: str) -> dict[str, int]:
    path = topic.replace("://", "/")
    with urllib.request.urlopen(f"{admin_url}/admin/v2/{path}/internalStats", timeout=30) as answer:
        internal = json.loads(answer.read())
    consumer = client.subscribe(topic, f"late-{uuid.uuid4().hex[:6]}", initial_position=pulsar.InitialPosition.Earliest)
    received = []
    try:
        while True:
            received.append(consumer.receive(3000).data().decode())
    except pulsar.Timeout:
        pass
    consumer.unsubscribe()
    return {"entries_stored": internal["numberOfEntries"], "new_subscription_receives": len(received),
            "first_received": int(received[0][1:]) if received else -1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("pulsar", "endpoint"), required=True)
    parser.add_argument("--phase", choices=tuple(PHASES), required=True)
    args = parser.parse_args()
    settings = PHASES[args.phase]
    with tempfile.TemporaryDirectory(prefix="retention-probe-") as tmp:
        if args.target == "pulsar":
            conf = {**settings, "retentionCheckIntervalInSeconds": CHECK_SECONDS}
            server = PulsarStandalone(Path(tmp), extra_conf=conf)
            server.start()
            restart = server.restart
        else:
            extra = [a for k, v in settings.items() for a in (f"--{kebab(k)}", str(v))]
            server = ServerProcess(Path(tmp), "--policy-check-interval-seconds", str(CHECK_SECONDS), *extra).start()
            restart = lambda: (server.stop(), server.start())  # noqa: E731
        outcome: dict[str, dict[str, int]] = {}
        try:
            client = pulsar.Client(server.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
            topics = {case: f"persistent://public/default/probe-{case}-{uuid.uuid4().hex[:6]}" for case in CASES}
            for case, acked in CASES.items():
                write(client, topics[case], acked)
            time.sleep(3 * CHECK_SECONDS + 2)
            for case in CASES:
                outcome[f"{case}"] = observe(client, server.admin_url, topics[case])
            client.close()
            if args.phase == "restart":
                restart()
                time.sleep(3 * CHECK_SECONDS + 5)
                client = pulsar.Client(server.url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
                for case in CASES:
                    outcome[f"{case}_after_restart"] = observe(client, server.admin_url, topics[case])
                client.close()
        finally:
            server.stop()
    print(json.dumps(outcome, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
