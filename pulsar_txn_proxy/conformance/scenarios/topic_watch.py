"""Topic-list watchers (PIP-145) and GET_TOPICS_OF_NAMESPACE's pattern, hash and ``changed``, on raw connections and
through the Java client's pattern consumer. Hashes are compared with the hash of the list answered (names differ
between runs, so the values themselves do)."""

from __future__ import annotations

from typing import Any

from engine.topic_list import topics_hash
from pulsar_txn_proxy.conformance.framework import Outcome, Run, scenario
from pulsar_txn_proxy.conformance.harness import run_scenario
from pulsar_txn_proxy.conformance.raw import RawConnection
from wire.commands import payload_of, type_name
from wire.pulsar_api_pb2 import BaseCommand

T = BaseCommand
NAMESPACE = "public/default"


def _connect(run: Run) -> RawConnection:
    conn = RawConnection.to(run.target.service_url, timeout=15)
    conn.handshake()
    return conn


def _answer(command: BaseCommand) -> dict[str, Any]:
    """An answer with its topic lists and whether its hash is the hash of the list the receiver holds."""
    payload = payload_of(command)
    out: dict[str, Any] = {"type": type_name(command.type)}
    for field, value in payload.ListFields():
        if field.name not in ("request_id", "topics_hash", "message"):
            out[field.name] = list(value) if field.is_repeated else value
    return out


@scenario
def test_watch_updates(run: Run) -> Outcome:
    """A watch of ``<w>-.*``: its first list, a topic created, a partitioned topic created, a topic deleted, a second
    watch that knows the list, closes; each hash checked against the list the watcher then holds."""
    base = run.topic("w")
    short = base.removeprefix("persistent://")
    path = short.removeprefix(NAMESPACE + "/")
    run.admin("PUT", f"/admin/v2/persistent/{NAMESPACE}/{path}-a")
    conn = _connect(run)
    out: dict[str, Any] = {}
    try:
        held: set[str] = set()

        def read() -> dict[str, Any]:
            command = conn.read().command
            payload = payload_of(command)
            if command.type == T.WATCH_TOPIC_LIST_SUCCESS:
                held.update(payload.topic)
            elif command.type == T.WATCH_TOPIC_UPDATE:
                held.update(payload.new_topics)
                held.difference_update(payload.deleted_topics)
            answer = _answer(command)
            if "topics_hash" in payload.DESCRIPTOR.fields_by_name:
                answer["hash_of_list"] = payload.topics_hash == topics_hash(sorted(held))
            return answer

        conn.send(T.WATCH_TOPIC_LIST, request_id=1, watcher_id=1, namespace=NAMESPACE, topics_pattern=f"{short}-.*")
        out["success"] = read()
        out["create_b"] = run.admin("PUT", f"/admin/v2/persistent/{NAMESPACE}/{path}-b").status
        out["update_b"] = read()
        out["create_c"] = run.admin("PUT", f"/admin/v2/persistent/{NAMESPACE}/{path}-c/partitions", 2).status
        out["update_c"] = [read(), read()]
        out["delete_a"] = run.admin("DELETE", f"/admin/v2/persistent/{NAMESPACE}/{path}-a").status
        out["update_a"] = read()
        conn.send(
            T.WATCH_TOPIC_LIST,
            request_id=2,
            watcher_id=2,
            namespace=NAMESPACE,
            topics_pattern=f"persistent://{short}-.*",
            topics_hash=topics_hash(sorted(held)),
        )
        out["known_list"] = read()
        conn.send(T.WATCH_TOPIC_LIST, request_id=3, watcher_id=1, namespace=NAMESPACE, topics_pattern=f"{short}-.*")
        out["same_watcher_id"] = read()
        conn.send(T.WATCH_TOPIC_LIST_CLOSE, request_id=4, watcher_id=1)
        out["close"] = read()
        conn.send(T.WATCH_TOPIC_LIST_CLOSE, request_id=5, watcher_id=99)
        out["close_unknown"] = read()
        conn.send(
            T.WATCH_TOPIC_LIST, request_id=6, watcher_id=3, namespace="no-such/ns", topics_pattern="no-such/ns/.*"
        )
        out["missing_namespace"] = _answer(conn.read().command)
        for tag, pattern in [
            ("too_long", f"persistent://{NAMESPACE}/" + "a" * 36),
            ("longest", f"persistent://{NAMESPACE}/" + "a" * 35),
            ("bad_regex", f"{NAMESPACE}/("),
            ("other_domain", f"non-persistent://{short}-.*"),
        ]:
            conn.send(T.WATCH_TOPIC_LIST, request_id=7, watcher_id=10, namespace=NAMESPACE, topics_pattern=pattern)
            out[tag] = _answer(conn.read().command)
            conn.send(T.WATCH_TOPIC_LIST_CLOSE, request_id=8, watcher_id=10)
            conn.expect(T.SUCCESS)
    finally:
        conn.close()
    return out


@scenario
def test_topics_of_namespace_pattern_and_hash(run: Run) -> Outcome:
    """GET_TOPICS_OF_NAMESPACE with a pattern, again with the hash it answered, with a pattern too long to evaluate
    and with one that does not compile."""
    base = run.topic("g")
    short = base.removeprefix("persistent://")
    run.admin("PUT", f"/admin/v2/persistent/{short}-a")
    conn = _connect(run)
    out: dict[str, Any] = {}
    try:
        conn.send(T.GET_TOPICS_OF_NAMESPACE, request_id=1, namespace=NAMESPACE, topics_pattern=f"{short}-.*")
        first = conn.expect(T.GET_TOPICS_OF_NAMESPACE_RESPONSE).getTopicsOfNamespaceResponse
        out["filtered"] = _answer(
            BaseCommand(type=T.GET_TOPICS_OF_NAMESPACE_RESPONSE, getTopicsOfNamespaceResponse=first)
        )
        out["filtered_hash_of_list"] = first.topics_hash == topics_hash(list(first.topics))
        conn.send(
            T.GET_TOPICS_OF_NAMESPACE,
            request_id=2,
            namespace=NAMESPACE,
            topics_pattern=f"{short}-.*",
            topics_hash=first.topics_hash,
        )
        out["known"] = _answer(conn.read().command)
        conn.send(T.GET_TOPICS_OF_NAMESPACE, request_id=3, namespace=NAMESPACE, topics_pattern="a" * 51)
        whole = conn.expect(T.GET_TOPICS_OF_NAMESPACE_RESPONSE).getTopicsOfNamespaceResponse
        out["too_long"] = {"filtered": whole.filtered, "has_topic": f"{base}-a" in whole.topics}
        conn.send(T.GET_TOPICS_OF_NAMESPACE, request_id=4, namespace=NAMESPACE, topics_pattern=f"{NAMESPACE}/(")
        out["bad_regex"] = _answer(conn.read().command)
    finally:
        conn.close()
    return out


@scenario
def test_java_pattern_consumer(run: Run) -> Outcome:
    """The Java client's pattern consumer (re-check every ten minutes) follows new and deleted topics at once."""
    base = run.topic("pw")
    obs = run_scenario(run.target.service_url, "pattern_watch", base, run.target.admin_url or "", timeout=120)
    obs.pop("timing_ms")
    return obs
