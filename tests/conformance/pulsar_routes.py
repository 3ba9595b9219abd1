"""The admin REST routes Apache Pulsar 4.2.4 serves for tenants, namespaces, topics (subscriptions and topic policies
included), schemas, transactions, brokers, clusters and lookup, read from the JAX-RS annotations of its broker's
resource classes (``routes/PulsarRoutes.java``) and kept in ``routes/pulsar-4.2.4.txt``, one ``METHOD /path`` a line.

``python -m tests.conformance.pulsar_routes`` writes that file again (it needs Java and the broker's classpath, which
``pulsar_standalone.build`` resolves with Maven).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conformance.pulsar_standalone import build

ROUTES_DIR = Path(__file__).resolve().parent / "routes"
ROUTES_FILE = ROUTES_DIR / "pulsar-4.2.4.txt"
_BROKER = "org.apache.pulsar.broker"
#: ``mount prefix=resource class`` of every group the inventory covers.
RESOURCES = [
    *(
        f"/admin/v2={_BROKER}.admin.v2.{name}"
        for name in ("Tenants", "Namespaces", "PersistentTopics", "NonPersistentTopics", "SchemasResource")
    ),
    *(f"/admin/v2={_BROKER}.admin.v2.{name}" for name in ("Clusters", "Brokers")),
    f"/admin/v3={_BROKER}.admin.v3.Transactions",
    f"/lookup={_BROKER}.lookup.v2.TopicLookup",
]


def pulsar_routes() -> list[tuple[str, str]]:
    """``(method, path pattern)`` of every route in the inventory file."""
    lines = ROUTES_FILE.read_text().splitlines()
    return [(verb, path) for verb, path in (line.split(" ", 1) for line in lines if line.strip())]


def main() -> None:
    lib = build()
    classpath = os.pathsep.join(str(jar) for jar in sorted(lib.glob("*.jar")))
    source = ROUTES_DIR / "PulsarRoutes.java"
    result = subprocess.run(
        ["java", "-cp", classpath, str(source), *RESOURCES], capture_output=True, text=True, check=True, timeout=300
    )
    ROUTES_FILE.write_text(result.stdout)
    print(f"{len(result.stdout.splitlines())} routes written to {ROUTES_FILE}")


if __name__ == "__main__":
    main()
