"""Lookups naming an advertised listener, on a broker that advertises none (the targets' configuration): every name
is refused (``internal`` too), an empty one is no name. ``tests/test_advertised_listeners.py`` checks a broker with
listeners against the answers of a Pulsar standalone configured with them."""

from __future__ import annotations

from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from pulsar_txn_proxy.conformance.harness import run_scenario
from pulsar_txn_proxy.conformance.raw import RawConnection
from wire.commands import payload_of
from wire.pulsar_api_pb2 import BaseCommand

T = BaseCommand


@scenario
def test_lookup_by_listener_name(run: Run) -> Outcome:
    """LOOKUP without a listener name, with an empty one, with ``internal`` and with an unknown one; then a Python
    client configured with the unknown name creating a producer."""
    topic = run.topic("t")
    conn = RawConnection.to(run.target.service_url)
    out: Outcome = {}
    try:
        conn.handshake()
        for request_id, name in enumerate([None, "", "internal", "nope"]):
            fields = {} if name is None else {"advertised_listener_name": name}
            conn.send(T.LOOKUP, topic=topic, request_id=request_id, **fields)
            answer = payload_of(conn.expect(T.LOOKUP_RESPONSE))
            out[repr(name)] = {
                "response": answer.response,
                "error": answer.error if answer.HasField("error") else None,
                "message": answer.message or None,
                "has_url": answer.HasField("brokerServiceUrl"),
            }
    finally:
        conn.close()
    client = run.client(listener_name="nope", operation_timeout_seconds=3)
    out["client_with_unknown_listener"] = run.attempt(lambda: client.create_producer(topic) and None)
    return out


@scenario
def test_java_client_with_unknown_listener(run: Run) -> Outcome:
    """A Java client whose ``listenerName`` the broker does not advertise cannot create a producer."""
    obs = run_scenario(run.target.service_url, "listener_produce", run.topic("t"), "nope", timeout=120)
    return {"produce": obs["produce"]}
