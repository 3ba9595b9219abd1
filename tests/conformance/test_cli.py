"""Pulsar's own command-line tools run as a user runs them: ``pulsar-admin`` and ``pulsar-client`` (4.0.8, the newest
``pulsar-client-tools`` on Maven Central), their exit codes and what they print compared with Pulsar's."""

from __future__ import annotations

from typing import Any

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from tests.conformance.pulsar_tools import Result, Tools, cleaned


def _shown(run: Run, result: Result, listing: bool) -> dict[str, Any]:
    """Exit code, output and the first line of the error output, with this run's names and times replaced; the
    lines of a ``listing`` sorted (``topics list`` prints a set, in no fixed order)."""

    out = cleaned(result.out, run.suffix)
    shown: dict[str, Any] = {"code": result.code, "out": "\n".join(sorted(out.splitlines())) if listing else out}
    if result.err.strip():
        shown["err"] = cleaned(result.err, run.suffix).splitlines()[0]
    return shown


def _session(run: Run, *commands: tuple[str, ...]) -> dict[str, Any]:
    out = {}
    with Tools(run.target.service_url, run.target.admin_url or "") as tools:
        for number, command in enumerate(commands):
            result = tools.client(*command[1:]) if command[0] == "client" else tools.admin(*command)
            out[f"{number:02} {' '.join(command[:2])}"] = _shown(run, result, command[1] in ("list", "subscriptions"))
    return out


@scenario
def test_cli_tenants_namespaces_topics(run: Run) -> Outcome:
    """A tenant, a namespace and a partitioned topic made and read back with pulsar-admin, errors included."""
    tenant = run.name("cli")
    namespace = f"{tenant}/ns"
    topic = f"persistent://{namespace}/t"
    return _session(
        run,
        ("tenants", "create", tenant, "--allowed-clusters", "standalone"),
        ("tenants", "get", tenant),
        ("namespaces", "create", namespace),
        ("namespaces", "get-clusters", namespace),
        ("namespaces", "list", tenant),
        ("topics", "create-partitioned-topic", "-p", "2", topic),
        ("topics", "list", namespace),
        ("topics", "get-partitioned-topic-metadata", topic),
        ("topics", "create-subscription", "-s", "sub", topic),
        ("topics", "create-subscription", "-s", "sub", topic),
        ("topics", "subscriptions", topic),
        ("topics", "delete-partitioned-topic", f"persistent://{namespace}/none"),
    )


@scenario
def test_cli_namespace_policies(run: Run) -> Outcome:
    """Namespace policies set and read back with pulsar-admin."""
    namespace, _ = run.namespace("clipol")
    return _session(
        run,
        ("namespaces", "set-retention", "--size", "10M", "--time", "2h", namespace),
        ("namespaces", "get-retention", namespace),
        ("namespaces", "set-message-ttl", "--messageTTL", "600", namespace),
        ("namespaces", "get-message-ttl", namespace),
        ("namespaces", "set-max-producers-per-topic", "-p", "3", namespace),
        ("namespaces", "get-max-producers-per-topic", namespace),
        ("namespaces", "set-deduplication", "--enable", namespace),
        ("namespaces", "get-deduplication", namespace),
    )


@scenario
def test_cli_produce_consume(run: Run) -> Outcome:
    """pulsar-client produces three messages with a key and a property; a consumer from the earliest reads them."""
    topic = run.topic("clip")
    return _session(
        run,
        ("client", "produce", "-m", "a,b,c", "-k", "key-1", "-p", "colour=red", topic),
        ("client", "consume", "-s", "s1", "-n", "3", "-p", "Earliest", topic),
        ("topics", "subscriptions", topic),
    )


@scenario
def test_cli_topic_policies(run: Run) -> Outcome:
    """Topic policies set and read back with pulsar-admin (each ``get`` runs seconds after its ``set``: Pulsar
    applies topic policies through its system topic)."""
    topic = run.topic("clitp")
    return _session(
        run,
        ("topics", "create", topic),
        ("topics", "set-message-ttl", "-t", "60", topic),
        ("topics", "get-message-ttl", topic),
        ("topics", "set-max-producers", "-p", "2", topic),
        ("topics", "get-max-producers", topic),
        ("topics", "set-max-consumers", "-c", "4", topic),
        ("topics", "get-max-consumers", topic),
    )
