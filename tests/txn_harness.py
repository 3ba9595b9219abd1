"""The Java transaction harness (tests/java): the official Java client against the server.

The Python client has no transaction API, so transaction tests run scenarios in a JVM:
``java -cp 'target/classes:target/lib/*' dev.pulsartxnproxy.Harness <serviceUrl> <scenario> [args]``
prints one JSON line of observations. Java 17+ and Maven are required: missing tools fail, never skip.

The harness is the conformance command's (``pulsar_txn_proxy/conformance/harness_sources/java`` is this directory):
built once per version of its sources in the per-user cache, and run by the same functions, re-exported here. It is
compiled against the pom's client (4.2.4); ``client_version`` runs the same classes on another client line's jars,
as a user of that line would run them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pulsar_txn_proxy.conformance.harness import (
    JVM_OPTIONS,
    MAIN_CLASS,
    class_data_sharing,
    client_line_classpath,
    observations,
    run_scenario,
)
from pulsar_txn_proxy.conformance.harness import java_classpath as build_harness

__all__ = [
    "JVM_OPTIONS",
    "MAIN_CLASS",
    "Scenario",
    "build_harness",
    "class_data_sharing",
    "client_line_classpath",
    "observations",
    "run_scenario",
    "txn_harness_fixture",
]

Scenario = Callable[..., dict[str, Any]]


@pytest.fixture(scope="session", name="txn_harness")
def txn_harness_fixture() -> Scenario:
    """``txn_harness``: builds the harness once per session; call it as ``txn_harness(url, name, *args)``."""
    build_harness()
    return run_scenario
