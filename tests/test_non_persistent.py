"""Non-persistent topics (``non-persistent://``) with the official client: messages go only to consumers connected
when they are published, per subscription type; a consumer without permits loses them (counted as drops); nothing
is stored, so a restart forgets the topics; transactions are refused the way Pulsar refuses them.
"""

from __future__ import annotations

import re
import sqlite3
import time
import urllib.error
import uuid
from collections.abc import Callable

import pulsar
import pytest

from tests.conftest import make_client
from tests.helpers import drain
from tests.server_process import ServerProcess
from tests.test_admin_http import http_json, wait_for_admin
from tests.test_bad_input import RawConnection, assert_logged_close
from tests.test_txn_bad_input import _add_partition, _open, _tc_connect, _txn_fields, _txn_send, rid
from wire.pulsar_api_pb2 import BaseCommand, CommandAck, ServerError

T = BaseCommand
EARLIEST = pulsar.InitialPosition.Earliest
SHARED = pulsar.ConsumerType.Shared
FAILOVER = pulsar.ConsumerType.Failover
KEY_SHARED = pulsar.ConsumerType.KeyShared
NS = "public/default"


@pytest.fixture
def np_topic() -> str:
    """A fresh non-persistent topic name."""
    return f"non-persistent://{NS}/np-{uuid.uuid4().hex[:12]}"


def numbered(n: int, prefix: str = "m") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


def payloads(messages: list[pulsar.Message]) -> list[bytes]:
    return [m.data() for m in messages]


def produce(client: pulsar.Client, topic: str, items: list[bytes], **kwargs: object) -> list[pulsar.MessageId]:
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(item, **kwargs) for item in items]
    producer.close()
    return ids


def stats_of(server: ServerProcess, topic: str) -> dict:
    wait_for_admin(server.admin_url)
    return http_json(f"{server.admin_url}/admin/v2/non-persistent/{NS}/{topic.rsplit('/', 1)[1]}/stats")


def listed(server: ServerProcess) -> list[str]:
    wait_for_admin(server.admin_url)
    return http_json(f"{server.admin_url}/admin/v2/non-persistent/{NS}")


# -- delivery and message ids -------------------------------------------------------------------------------


def test_connected_consumers_get_messages_late_ones_do_not(client: pulsar.Client, np_topic: str) -> None:
    """Each subscription gets every message published while it has a consumer; ids are 0:0 throughout."""
    first = client.subscribe(np_topic, "first")
    second = client.subscribe(np_topic, "second", consumer_type=SHARED)
    ids = produce(client, np_topic, numbered(5))
    # Pulsar answers every non-persistent publish with ledger 0, entry 0, and delivers with the same id.
    assert {(i.ledger_id(), i.entry_id(), i.partition(), i.batch_index()) for i in ids} == {(0, 0, -1, -1)}
    for consumer in (first, second):
        received = drain(consumer)
        assert payloads(received) == numbered(5)
        assert {(m.message_id().ledger_id(), m.message_id().entry_id()) for m in received} == {(0, 0)}
        for msg in received:
            consumer.acknowledge(msg)
    late = client.subscribe(np_topic, "late", initial_position=EARLIEST)
    assert drain(late) == []
    produce(client, np_topic, [b"after"])
    assert [payloads(drain(c)) for c in (first, second, late)] == [[b"after"]] * 3


def test_pattern_subscription_modes(client: pulsar.Client) -> None:
    """GET_TOPICS_OF_NAMESPACE by mode: the client's regex subscription mode picks persistent topics, the loaded
    non-persistent ones, or both (the client matches names without their domain, as Pulsar's clients do)."""
    tag = uuid.uuid4().hex[:10]
    np_name, p_name = f"non-persistent://{NS}/pat-{tag}-np", f"persistent://{NS}/pat-{tag}-p"
    np_producer = client.create_producer(np_name, batching_enabled=False)  # loads the non-persistent topic
    p_producer = client.create_producer(p_name, batching_enabled=False)
    modes = pulsar.RegexSubscriptionMode
    consumers = {
        mode: client.subscribe(re.compile(f"persistent://{NS}/pat-{tag}-.*"), f"sub-{i}", regex_subscription_mode=mode)
        for i, mode in enumerate((modes.PersistentOnly, modes.NonPersistentOnly, modes.AllTopics))
    }
    np_producer.send(b"to-np")
    p_producer.send(b"to-p")
    got = {mode: sorted((m.topic_name(), m.data()) for m in drain(c)) for mode, c in consumers.items()}
    assert got[modes.PersistentOnly] == [(p_name, b"to-p")]
    assert got[modes.NonPersistentOnly] == [(np_name, b"to-np")]
    assert got[modes.AllTopics] == sorted([(np_name, b"to-np"), (p_name, b"to-p")])


def test_acks_nacks_and_seek_change_nothing(client: pulsar.Client, np_topic: str) -> None:
    """Acknowledgements, negative acknowledgements and seeks are accepted and nothing is delivered again."""
    consumer = client.subscribe(np_topic, "sub", consumer_type=SHARED, negative_ack_redelivery_delay_ms=100)
    exclusive = client.subscribe(np_topic, "excl")
    produce(client, np_topic, numbered(3))
    received = drain(consumer)
    assert payloads(received) == numbered(3)
    consumer.acknowledge(received[0])
    consumer.negative_acknowledge(received[1])
    consumer.redeliver_unacknowledged_messages()
    exclusive.acknowledge_cumulative(drain(exclusive)[-1])
    time.sleep(0.4)
    assert drain(consumer, 300) == []  # nothing kept, so nothing redelivered
    exclusive.seek(received[0].message_id())
    exclusive.seek(int(time.time() * 1000) - 60_000)
    assert drain(exclusive, 300) == []
    produce(client, np_topic, [b"still-works"])
    assert payloads(drain(consumer)) == [b"still-works"]
    assert payloads(drain(exclusive)) == [b"still-works"]


def test_last_message_id_is_refused(client: pulsar.Client, np_topic: str) -> None:
    """GET_LAST_MESSAGE_ID gets Pulsar's answer for a non-persistent topic: UnknownError."""
    reader = client.create_reader(np_topic, pulsar.MessageId.earliest)
    with pytest.raises(pulsar.UnknownError):
        reader.has_message_available()
    produce(client, np_topic, [b"x"])
    assert reader.read_next(5000).data() == b"x"


# -- subscription types ----------------------------------------------------------------------------------


def test_exclusive(client: pulsar.Client, np_topic: str) -> None:
    """One consumer; a second is refused; once the last consumer leaves the subscription is gone."""
    first = client.subscribe(np_topic, "sub")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(np_topic, "sub")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(np_topic, "sub", consumer_type=SHARED)
    produce(client, np_topic, numbered(3))
    assert payloads(drain(first)) == numbered(3)
    first.close()
    # The subscription went with its consumer: a consumer of another type may take the name.
    shared = client.subscribe(np_topic, "sub", consumer_type=SHARED)
    produce(client, np_topic, [b"new"])
    assert payloads(drain(shared)) == [b"new"]
    shared.unsubscribe()
    again = client.subscribe(np_topic, "sub")
    produce(client, np_topic, [b"again"])
    assert payloads(drain(again)) == [b"again"]


def test_failover_takes_first_by_name(client: pulsar.Client, np_topic: str) -> None:
    """Pulsar passes partition 0 for a non-partitioned non-persistent topic: the first consumer by name is active."""
    late_name = client.subscribe(np_topic, "sub", consumer_type=FAILOVER, consumer_name="fb")
    early_name = client.subscribe(np_topic, "sub", consumer_type=FAILOVER, consumer_name="fa")
    produce(client, np_topic, numbered(6))
    assert payloads(drain(early_name)) == numbered(6)
    assert drain(late_name, 200) == []
    early_name.close()
    produce(client, np_topic, numbered(3, "n"))
    # The standby takes over for what comes next; nothing earlier is handed over (nothing is kept).
    assert payloads(drain(late_name)) == numbered(3, "n")


def test_shared_round_robin(client: pulsar.Client, np_topic: str) -> None:
    """Shared consumers take turns: both receive, every message exactly once."""
    consumers = [client.subscribe(np_topic, "sub", consumer_type=SHARED, consumer_name=f"c{i}") for i in range(2)]
    produce(client, np_topic, numbered(40))
    got = [drain(c) for c in consumers]
    assert got[0] and got[1]
    assert sorted(payloads(got[0] + got[1])) == sorted(numbered(40))


def test_key_shared_keys_stick(client: pulsar.Client, np_topic: str) -> None:
    """Key_Shared: each key goes to one consumer only; every message arrives once."""
    consumers = [client.subscribe(np_topic, "sub", consumer_type=KEY_SHARED) for _ in range(2)]
    producer = client.create_producer(np_topic, batching_enabled=False)
    for i in range(60):
        producer.send(f"{i}".encode(), partition_key=f"key-{i % 12}")
    got = [drain(c) for c in consumers]
    owners: dict[str, set[int]] = {}
    for index, messages in enumerate(got):
        for msg in messages:
            owners.setdefault(msg.partition_key(), set()).add(index)
    assert len(owners) == 12
    assert all(len(o) == 1 for o in owners.values())
    assert sorted(int(m.data()) for m in got[0] + got[1]) == list(range(60))


# -- drops -----------------------------------------------------------------------------------------------


def test_consumer_without_permits_loses_messages(server: ServerProcess, client: pulsar.Client, np_topic: str) -> None:
    """A consumer whose queue (1 permit) is full does not get later messages: they are dropped, and counted."""
    slow = client.subscribe(np_topic, "slow", receiver_queue_size=1)
    fast = client.subscribe(np_topic, "fast")
    before = stats_of(server, np_topic)  # the drop rate is measured from here
    assert before["subscriptions"]["slow"]["msgDropRate"] == 0.0
    produce(client, np_topic, numbered(5))
    assert payloads(drain(fast)) == numbered(5)
    # Only the first message fitted the slow consumer's single permit.
    assert payloads(drain(slow)) == [b"m0"]
    produce(client, np_topic, [b"later"])
    assert payloads(drain(slow)) == [b"later"]  # receiving granted a new permit
    time.sleep(1.1)
    stats = stats_of(server, np_topic)
    slow_stats, fast_stats = stats["subscriptions"]["slow"], stats["subscriptions"]["fast"]
    assert slow_stats["msgDropRate"] > 0.0
    assert fast_stats["msgDropRate"] == 0.0
    assert (slow_stats["msgOutCounter"], fast_stats["msgOutCounter"]) == (2, 6)
    assert (slow_stats["msgBacklog"], slow_stats["type"], len(slow_stats["consumers"])) == (0, "Exclusive", 1)
    assert (stats["msgInCounter"], stats["msgOutCounter"], stats["storageSize"]) == (6, 8, 0)
    assert stats["msgDropRate"] == 0.0  # as Pulsar: drops show per subscription only
    assert np_topic in listed(server)


def test_stats_keep_counts_of_removed_subscriptions(
    server: ServerProcess, client: pulsar.Client, np_topic: str
) -> None:
    """A subscription disappears with its last consumer; the topic's out counter keeps what it delivered."""
    consumer = client.subscribe(np_topic, "gone")
    producer = client.create_producer(np_topic, batching_enabled=False, producer_name=f"p-{uuid.uuid4().hex[:6]}")
    for item in numbered(4):
        producer.send(item)
    assert len(drain(consumer)) == 4
    consumer.close()
    stats = stats_of(server, np_topic)
    assert stats["subscriptions"] == {}
    assert (stats["msgInCounter"], stats["msgOutCounter"]) == (4, 4)
    assert [(p["producerName"], p["msgDropRate"]) for p in stats["publishers"]] == [(producer.producer_name(), 0.0)]


def test_stats_of_unknown_topic(server: ServerProcess) -> None:
    """A non-persistent topic that is not loaded has no stats (404)."""
    wait_for_admin(server.admin_url)
    with pytest.raises(urllib.error.HTTPError) as failure:
        http_json(f"{server.admin_url}/admin/v2/non-persistent/{NS}/never-{uuid.uuid4().hex[:8]}/stats")
    assert failure.value.code == 404


# -- partitions and restarts -----------------------------------------------------------------------------


def test_partitioned_non_persistent_topic(partitioned: pulsar.Client, np_topic: str) -> None:
    """Auto-created non-persistent topics get the default partitions; ids carry the partition, entry 0:0."""
    assert partitioned.get_topic_partitions(np_topic) == [f"{np_topic}-partition-{i}" for i in range(3)]
    consumer = partitioned.subscribe(np_topic, "sub", consumer_type=SHARED)
    ids = produce(partitioned, np_topic, numbered(12))
    assert sorted(i.partition() for i in ids) == [0] * 4 + [1] * 4 + [2] * 4
    assert {(i.ledger_id(), i.entry_id()) for i in ids} == {(0, 0)}
    received = drain(consumer)
    assert sorted(payloads(received)) == sorted(numbered(12))
    for msg in received:
        assert msg.topic_name() == f"{np_topic}-partition-{msg.message_id().partition()}"


def test_restart_forgets_non_persistent_topics(server_factory: Callable[..., ServerProcess], np_topic: str) -> None:
    """Nothing of a non-persistent topic reaches the store; after a restart the topic and its messages are gone."""
    proc = server_factory()
    client = make_client(proc.url)
    consumer = client.subscribe(np_topic, "sub")
    produce(client, np_topic, numbered(3))
    assert payloads(drain(consumer)) == numbered(3)
    assert listed(proc) == [np_topic]
    client.close()
    proc.stop()
    db = sqlite3.connect(proc.data_dir / "store.sqlite")
    try:
        stored = [
            row
            for table in ("topics", "partitioned_topics", "schemas", "metadata")
            for row in db.execute(f"SELECT * FROM {table}")
            if any(np_topic in str(value) for value in row)
        ]
        entries = db.execute("SELECT count(*) FROM entries").fetchone()[0]
    finally:
        db.close()
    assert stored == []
    assert entries == 0  # no log was ever written
    proc.start()
    assert listed(proc) == []
    client = make_client(proc.url)
    try:
        again = client.subscribe(np_topic, "sub", initial_position=EARLIEST)
        assert drain(again) == []
    finally:
        client.close()


# -- transactions, on raw sockets (the Python client has none) ---------------------------------------------


def test_transactional_send_closes_the_connection(server: ServerProcess, np_topic: str) -> None:
    """As Pulsar (its non-persistent topic throws on a transactional publish): the connection is closed."""
    conn = RawConnection(server.port)
    try:
        conn.handshake()
        _tc_connect(conn, 0)
        conn.send(T.PRODUCER, topic=np_topic, producer_id=1, request_id=rid())
        success = conn.expect(T.PRODUCER_SUCCESS).producer_success
        assert success.last_sequence_id == -1
        txn = _open(conn)
        assert not _add_partition(conn, txn, np_topic).HasField("error")  # the coordinator takes any partition
        _txn_send(conn, success.producer_name, 0, b"in-txn", txn)
        conn.assert_closed_by_server()
    finally:
        conn.close()
    assert_logged_close(server, conn, "PublishTxnMessage is not supported by non-persistent topic")


def test_transactional_ack_is_a_conflict(server: ServerProcess, np_topic: str) -> None:
    """A transactional ACK on a non-persistent subscription gets TransactionConflict, and the connection stays."""
    conn = RawConnection(server.port)
    try:
        conn.handshake()
        _tc_connect(conn, 0)
        conn.send(T.SUBSCRIBE, topic=np_topic, subscription="sub", subType=0, consumer_id=1, request_id=rid())
        conn.expect(T.SUCCESS)
        txn = _open(conn)
        request_id = rid()
        conn.send(
            T.ACK,
            consumer_id=1,
            ack_type=CommandAck.Individual,
            message_id=[{"ledgerId": 0, "entryId": 0}],
            request_id=request_id,
            **_txn_fields(txn),
        )
        response = conn.expect(T.ACK_RESPONSE).ackResponse
        assert (response.request_id, response.error) == (request_id, ServerError.TransactionConflict)
        assert response.message == "Transaction acknowledge only support the `PersistentSubscription`."
        conn.assert_open()
    finally:
        conn.close()


def test_unused_topics_are_dropped(server_factory: Callable[..., ServerProcess]) -> None:
    """A topic without producers and subscriptions goes after a policy check interval; one in use stays."""
    proc = server_factory("--policy-check-interval-seconds", "1")
    unused, used = (f"non-persistent://{NS}/np-{tag}-{uuid.uuid4().hex[:8]}" for tag in ("unused", "used"))
    client = make_client(proc.url)
    try:
        produce(client, unused, numbered(2))
        consumer = client.subscribe(used, "sub")
        assert listed(proc) == sorted([unused, used])
        deadline = time.monotonic() + 10
        while unused in listed(proc):
            assert time.monotonic() < deadline, "the unused topic was not dropped"
            time.sleep(0.2)
        time.sleep(2.5)
        assert listed(proc) == [used]
        # The dropped topic comes back as a new one when used again.
        produce(client, unused, numbered(1))
        assert unused in listed(proc)
        consumer.close()
    finally:
        client.close()


def test_acks_are_answered_and_keep_the_connection(server: ServerProcess, np_topic: str) -> None:
    """Individual and cumulative ACKs (any id) on a non-persistent subscription are answered and change nothing; the
    connection stays open (an ACK once reached the persistent topics' last entry and closed it)."""
    conn = RawConnection(server.port)
    try:
        conn.handshake()
        conn.send(T.SUBSCRIBE, topic=np_topic, subscription="sub", subType=0, consumer_id=1, request_id=rid())
        conn.expect(T.SUCCESS)
        for ack_type in (CommandAck.Individual, CommandAck.Cumulative):
            for ledger, entry in ((0, 0), (5, 7), (2**64 - 1, 2**64 - 1)):
                request_id = rid()
                conn.send(T.ACK, consumer_id=1, ack_type=ack_type, request_id=request_id,
                          message_id=[{"ledgerId": ledger, "entryId": entry}])
                response = conn.expect(T.ACK_RESPONSE).ackResponse
                assert (response.request_id, response.HasField("error")) == (request_id, False)
        conn.send(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, consumer_id=1, message_ids=[{"ledgerId": 0, "entryId": 0}])
        conn.assert_open()
    finally:
        conn.close()
    assert "Traceback" not in server.log()
