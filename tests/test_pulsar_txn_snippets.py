"""The official client's own examples run on pulsar_txn after ``import pulsar_txn as pulsar``.

The examples are read at test time from the docstrings of the installed ``pulsar-client`` (``pulsar.Producer`` and
``pulsar.Consumer``: produce ten messages; receive, print and acknowledge forever); the only edits are the import
and the service URL. Each runs as its own process, with the official client too, and both must print the same.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time

import pulsar
import pytest

from pulsar_txn_proxy.conformance.framework import admin_call


def _example(cls: type) -> str:
    """The first ``.. code-block:: python`` of a class docstring."""
    doc = cls.__doc__ or ""
    block = doc.split(".. code-block:: python", 1)[1]
    lines = []
    for line in block.splitlines()[1:]:
        if line.strip() and not line.startswith("        "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines)).strip() + "\n"


def _adapted(code: str, module: str, url: str) -> str:
    code = code.replace("pulsar://localhost:6650", url)
    if module == "pulsar_txn":
        code = re.sub(r"^import pulsar$", "import pulsar_txn as pulsar", code, flags=re.M)
    return code


@pytest.mark.parametrize("module", ["pulsar", "pulsar_txn"])
def test_producer_and_consumer_examples(server, module) -> None:
    producer_code, consumer_code = _example(pulsar.Producer), _example(pulsar.Consumer)
    assert "import pulsar" in producer_code and "consumer.receive()" in consumer_code
    assert "'my-topic'" in producer_code and "'my-topic'" in consumer_code
    topic = f"snippet-{module}-{time.monotonic_ns()}"
    producer_code = producer_code.replace("'my-topic'", repr(topic))
    consumer_code = consumer_code.replace("'my-topic'", repr(topic))
    consumer = subprocess.Popen(
        [sys.executable, "-c", _adapted(consumer_code, module, server.url)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        stats = f"/admin/v2/persistent/public/default/{topic}/stats"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the example subscribes at the latest message: wait for it first
            answer = admin_call(server.admin_url, "GET", stats)
            if answer.status == 200 and answer.body.get("subscriptions", {}).get("my-subscription"):
                break
            time.sleep(0.2)
        produced = subprocess.run(
            [sys.executable, "-c", _adapted(producer_code, module, server.url)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert produced.returncode == 0, produced.stderr
        lines = []
        assert consumer.stdout is not None
        while len(lines) < 10:
            line = consumer.stdout.readline()
            if not line:
                break
            if line.startswith("Received message"):  # the official client also logs to stdout
                lines.append(line)
    finally:
        consumer.kill()
        consumer.wait()
    received = [re.sub(r"id='[^']*'", "id", line.strip()) for line in lines]
    assert received == [f"Received message 'b'Hello-{i}'' id" for i in range(10)]
