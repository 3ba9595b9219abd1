"""Topic-list watchers (PIP-145) and GET_TOPICS_OF_NAMESPACE's hash and filter, on raw connections and through the
Java client's pattern consumer, which uses a watch when CONNECTED announces ``supports_topic_watchers``."""

from __future__ import annotations

import urllib.request
import uuid
from collections.abc import Iterator

import pytest

from engine.topic_list import TopicListWatches, TopicsPattern, topics_hash, without_domain
from tests.server_process import ServerProcess
from tests.test_bad_input import RawConnection
from tests.txn_harness import Scenario, txn_harness_fixture  # noqa: F401 (the txn_harness fixture)
from wire.pulsar_api_pb2 import BaseCommand, ServerError

T = BaseCommand


def test_hash_is_pulsars() -> None:
    """Values a Pulsar 4.2.4 broker answered for these lists."""
    assert topics_hash([]) == "00000000"
    assert topics_hash(["persistent://public/default/wt899bf6-a"]) == "5e8dcc2d"
    pair = ["persistent://public/default/wt899bf6-b", "persistent://public/default/wt899bf6-a"]
    assert topics_hash(pair) == "677d89ad"


def test_pattern_matches_names_without_domain_and_partition() -> None:
    assert without_domain("persistent://public/default/t.*") == "public/default/t.*"
    assert without_domain("^non-persistent://public/default/t") == "^public/default/t"
    pattern = TopicsPattern("persistent://public/default/t-.*")
    assert pattern.matches("persistent://public/default/t-1-partition-3")
    assert pattern.matches("non-persistent://public/default/t-2")
    assert not pattern.matches("persistent://public/default/u-1")
    assert not TopicsPattern("public/default/t").matches("persistent://public/default/t-1")  # matched whole
    # RE2: no backtracking, however the pattern nests.
    assert not TopicsPattern("public/default/(a*)*b").matches("persistent://public/default/" + "a" * 5000)


@pytest.fixture
def raw(server: ServerProcess) -> Iterator[RawConnection]:
    conn = RawConnection(server.port)
    conn.handshake()
    yield conn
    conn.close()


def _admin(server: ServerProcess, method: str, path: str, body: bytes | None = None) -> int:
    request = urllib.request.Request(
        f"{server.admin_url}/admin/v2/persistent/public/default/{path}",
        data=body,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return reply.status


def _name(base: str, suffix: str) -> str:
    return f"persistent://public/default/{base}-{suffix}"


def test_connected_announces_topic_watchers(server: ServerProcess) -> None:
    conn = RawConnection(server.port)
    try:
        assert conn.handshake().connected.feature_flags.supports_topic_watchers
    finally:
        conn.close()


def test_watch_tells_each_new_and_deleted_topic(server: ServerProcess, raw: RawConnection) -> None:
    base = f"w{uuid.uuid4().hex[:8]}"
    _admin(server, "PUT", f"{base}-a")
    _admin(server, "PUT", f"other{base}")
    raw.send(
        T.WATCH_TOPIC_LIST,
        request_id=1,
        watcher_id=5,
        namespace="public/default",
        topics_pattern=f"public/default/{base}-.*",
    )
    success = raw.expect(T.WATCH_TOPIC_LIST_SUCCESS).watchTopicListSuccess
    assert list(success.topic) == [_name(base, "a")]
    assert success.topics_hash == topics_hash([_name(base, "a")])
    _admin(server, "PUT", f"{base}-b")
    update = raw.expect(T.WATCH_TOPIC_UPDATE).watchTopicUpdate
    assert (update.watcher_id, list(update.new_topics), list(update.deleted_topics)) == (5, [_name(base, "b")], [])
    assert update.topics_hash == topics_hash([_name(base, "a"), _name(base, "b")])
    # A partitioned topic: one update per partition.
    _admin(server, "PUT", f"{base}-c/partitions", b"2")
    for index in range(2):
        assert list(raw.expect(T.WATCH_TOPIC_UPDATE).watchTopicUpdate.new_topics) == [
            _name(base, f"c-partition-{index}")
        ]
    _admin(server, "DELETE", f"{base}-a")
    update = raw.expect(T.WATCH_TOPIC_UPDATE).watchTopicUpdate
    assert (list(update.new_topics), list(update.deleted_topics)) == ([], [_name(base, "a")])
    rest = [_name(base, "b"), _name(base, "c-partition-0"), _name(base, "c-partition-1")]
    assert update.topics_hash == topics_hash(rest)
    # A client that knows the list gets no topics back, only the hash.
    raw.send(
        T.WATCH_TOPIC_LIST,
        request_id=2,
        watcher_id=6,
        namespace="public/default",
        topics_pattern=f"persistent://public/default/{base}-.*",
        topics_hash=topics_hash(rest),
    )
    success = raw.expect(T.WATCH_TOPIC_LIST_SUCCESS).watchTopicListSuccess
    assert (list(success.topic), success.topics_hash) == ([], topics_hash(rest))
    raw.send(T.WATCH_TOPIC_LIST_CLOSE, request_id=3, watcher_id=5)
    raw.expect(T.SUCCESS)
    raw.send(T.WATCH_TOPIC_LIST_CLOSE, request_id=4, watcher_id=6)
    raw.expect(T.SUCCESS)
    _admin(server, "PUT", f"{base}-d")
    raw.assert_open()  # closed watches tell nothing more


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        pytest.param("persistent://public/default/" + "a" * 36, ServerError.NotAllowedError, id="too-long"),
        pytest.param("public/default/(", ServerError.InvalidTopicName, id="bad-regex"),
        # Not compiled at all: RE2 would take a second on it and log thousands of lines.
        pytest.param("(a|b)" * 200_000, ServerError.NotAllowedError, id="megabyte"),
    ],
)
def test_watch_refused(raw: RawConnection, pattern: str, error: int) -> None:
    raw.send(T.WATCH_TOPIC_LIST, request_id=1, watcher_id=1, namespace="public/default", topics_pattern=pattern)
    assert raw.expect(T.ERROR).error.error == error
    raw.assert_open()


def test_watches_are_told_topic_by_topic_in_the_order_they_began() -> None:
    topics: list[str] = []
    told: list[tuple[str, list[str], list[str]]] = []
    watches = TopicListWatches(lambda namespace: sorted(topics))
    pattern = TopicsPattern("public/default/t.*")
    first = watches.watch("public/default", pattern, lambda new, gone, digest: told.append(("first", new, gone)))
    watches.watch("public/default", pattern, lambda new, gone, digest: told.append(("second", new, gone)))
    topics += ["persistent://public/default/t-partition-0", "persistent://public/default/t-partition-1"]
    watches.changed("public/default")
    assert told == [
        ("first", ["persistent://public/default/t-partition-0"], []),
        ("second", ["persistent://public/default/t-partition-0"], []),
        ("first", ["persistent://public/default/t-partition-1"], []),
        ("second", ["persistent://public/default/t-partition-1"], []),
    ]
    told.clear()
    watches.unwatch(first)
    topics.pop()
    watches.changed("public/default")
    assert told == [("second", [], ["persistent://public/default/t-partition-1"])]


def test_topics_of_namespace_filtered_with_hash(server: ServerProcess, raw: RawConnection) -> None:
    base = f"g{uuid.uuid4().hex[:8]}"
    _admin(server, "PUT", f"{base}-a")
    raw.send(
        T.GET_TOPICS_OF_NAMESPACE, request_id=1, namespace="public/default", topics_pattern=f"public/default/{base}-.*"
    )
    answer = raw.expect(T.GET_TOPICS_OF_NAMESPACE_RESPONSE).getTopicsOfNamespaceResponse
    assert list(answer.topics) == [_name(base, "a")]
    assert (answer.filtered, answer.changed, answer.topics_hash) == (True, True, topics_hash([_name(base, "a")]))
    raw.send(
        T.GET_TOPICS_OF_NAMESPACE,
        request_id=2,
        namespace="public/default",
        topics_pattern=f"public/default/{base}-.*",
        topics_hash=answer.topics_hash,
    )
    again = raw.expect(T.GET_TOPICS_OF_NAMESPACE_RESPONSE).getTopicsOfNamespaceResponse
    assert (list(again.topics), again.filtered, again.changed) == ([], True, False)
    # Too long to evaluate: the whole list, unfiltered.
    raw.send(T.GET_TOPICS_OF_NAMESPACE, request_id=3, namespace="public/default", topics_pattern="a" * 51)
    whole = raw.expect(T.GET_TOPICS_OF_NAMESPACE_RESPONSE).getTopicsOfNamespaceResponse
    assert not whole.filtered and _name(base, "a") in whole.topics
    raw.send(T.GET_TOPICS_OF_NAMESPACE, request_id=4, namespace="public/default", topics_pattern="(")
    assert raw.expect(T.ERROR).error.error == ServerError.MetadataError


def test_java_pattern_consumer_follows_the_watch(server: ServerProcess, txn_harness: Scenario) -> None:
    """New and deleted topics reach a pattern consumer whose own re-check is ten minutes away."""
    base = f"persistent://public/default/pw-{uuid.uuid4().hex[:8]}"
    obs = txn_harness(server.url, "pattern_watch", base, server.admin_url)
    assert obs["watcher"] == "ok"
    assert obs["initial"] == ["a0"]
    assert obs["subscribed_b"] is True
    assert obs["after_new_topic"] == ["b0"]
    assert obs["subscribed_c"] is True
    assert obs["dropped_a"] is True
    assert obs["topics_after_delete"] == [f"{base}-b", f"{base}-c-partition-0", f"{base}-c-partition-1"]
