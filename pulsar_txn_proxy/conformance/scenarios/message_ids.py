"""Message ids that come off the wire or the admin API: signed ledger and entry ids (-1 is "before the first
entry"), ids before the first entry, beyond the end, of another ledger, and batch indexes in and out of range,
through acknowledgements, seeks, readers, redelivery, getLastMessageId and the admin API (official Python client).

Crafted ids are built from the ledger of the topic's messages; outcomes show only payloads, statuses and entry ids,
so they do not depend on the ledger ids a broker allocates.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pulsar

from pulsar_txn_proxy.conformance.framework import Outcome, Run, admin_open, drain, receive_n, scenario, texts
from pulsar_txn_proxy.conformance.harness import run_scenario
from pulsar_txn_proxy.conformance.raw import RawConnection, rid
from pulsar_txn_proxy.conformance.raw import add_subscription as _add_subscription
from pulsar_txn_proxy.conformance.raw import end_txn as _end
from pulsar_txn_proxy.conformance.raw import open_txn as _open
from pulsar_txn_proxy.conformance.raw import tc_connect as _tc_connect
from pulsar_txn_proxy.conformance.raw import txn_fields as _txn_fields
from wire.pulsar_api_pb2 import BaseCommand, CommandAck, CommandSubscribe, ServerError, TxnAction

T = BaseCommand

Earliest = pulsar.InitialPosition.Earliest
#: How long a drain waits for one more message once the backlog is expected to be in the receiver queue.
QUIET_MS = 300
#: How long a new consumer waits for its first message before it counts as getting none.
FIRST_MS = 2000
#: How long to wait for the acknowledgements the official client groups (every 100 ms) to reach the broker.
ACKS_S = 1.0
#: The subscription types redelivery inside batches is looked at with.
_REDELIVERY_KINDS = {
    "Shared": pulsar.ConsumerType.Shared,
    "Key_Shared": pulsar.ConsumerType.KeyShared,
    "Failover": pulsar.ConsumerType.Failover,
}


def _batched(client: pulsar.Client, topic: str, batches: int, size: int, prefix: str = "m") -> None:
    """``batches`` entries of ``size`` messages each, ``<prefix><entry>-<index>``."""
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_messages=size, batching_max_publish_delay_ms=60_000
    )
    for entry in range(batches):
        for index in range(size):
            producer.send_async(f"{prefix}{entry}-{index}".encode(), None)
        producer.flush()
    producer.close()


def _singles(client: pulsar.Client, topic: str, payloads: list[str]) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    for payload in payloads:
        producer.send(payload.encode())
    producer.close()


def _ledger(client: pulsar.Client, topic: str) -> int:
    """The ledger of the topic's first message."""
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    ledger = reader.read_next(5000).message_id().ledger_id()
    reader.close()
    return ledger


def _crafted(ledger: int) -> dict[str, pulsar.MessageId]:
    """Ids around a topic of two batch entries (0, 1; 5 messages each) and two single entries (2, 3)."""

    def mid(ledger_id: int, entry: int, index: int = -1) -> pulsar.MessageId:
        return pulsar.MessageId(-1, ledger_id, entry, index)

    return {
        "earliest": pulsar.MessageId.earliest,
        "latest": pulsar.MessageId.latest,
        "entry_minus_1": mid(ledger, -1),
        "entry_minus_1_index_0": mid(ledger, -1, 0),
        "first_batch_index_0": mid(ledger, 0, 0),
        "first_batch_no_index": mid(ledger, 0),
        "second_batch_index_2": mid(ledger, 1, 2),
        "second_batch_index_4": mid(ledger, 1, 4),
        "second_batch_index_9": mid(ledger, 1, 9),
        "single_entry": mid(ledger, 2),
        "last_entry": mid(ledger, 3),
        "beyond_end": mid(ledger, 7),
        "lower_ledger": mid(ledger - 1, 2),
        "higher_ledger": mid(ledger + 1000, 0),
        "minus_1_minus_1_index_3": mid(-1, -1, 3),
    }


def _mixed_topic(run: Run, client: pulsar.Client) -> tuple[str, int]:
    topic = run.topic("t")
    _batched(client, topic, 2, 5)
    _singles(client, topic, ["s2", "s3"])
    return topic, _ledger(client, topic)


def _resubscribe_and_drain(client: pulsar.Client, topic: str, sub: str, **kwargs: Any) -> list[str]:
    consumer = client.subscribe(topic, sub, **kwargs)
    got = texts(drain(consumer, QUIET_MS, first_ms=FIRST_MS))
    consumer.close()
    return got


@scenario
def test_cumulative_ack_inside_a_batch_then_resubscribe(run: Run) -> Outcome:
    """Cumulative ack of the first, a middle and the last message of a batch; what a new consumer gets."""
    client = run.client()
    topic = run.topic("t")
    _batched(client, topic, 2, 5)
    outcome: Outcome = {}
    for batch_index_ack in (False, True):
        for index in (0, 2, 4, 5):
            sub = f"sub-{int(batch_index_ack)}-{index}"
            options = {"initial_position": Earliest, "batch_index_ack_enabled": batch_index_ack}
            consumer = client.subscribe(topic, sub, **options)
            received = receive_n(consumer, index + 1)
            consumer.acknowledge_cumulative(received[-1])
            consumer.close()
            outcome[f"batch_index_ack={batch_index_ack} index={index}"] = _resubscribe_and_drain(
                client, topic, sub, **options
            )
    return outcome


@scenario
def test_individual_acks_inside_a_batch_then_resubscribe(run: Run) -> Outcome:
    """Some, then all messages of a batch acknowledged one by one; what a new consumer gets."""
    client = run.client()
    topic = run.topic("t")
    _batched(client, topic, 2, 5)
    outcome: Outcome = {}
    for batch_index_ack in (False, True):
        sub = f"sub-{int(batch_index_ack)}"
        options = {"initial_position": Earliest, "batch_index_ack_enabled": batch_index_ack}
        consumer = client.subscribe(topic, sub, **options)
        received = receive_n(consumer, 10)
        for message in (received[0], received[2], received[4], received[6]):
            consumer.acknowledge(message)
        consumer.close()
        outcome[f"some batch_index_ack={batch_index_ack}"] = _resubscribe_and_drain(client, topic, sub, **options)
        consumer = client.subscribe(topic, sub, **options)
        # The unacknowledged ones: 6 with batch index acks (Pulsar), the 10 of both batches without.
        again = drain(consumer, limit=10, expect=6)
        for message in again:
            if message.data().decode().startswith("m0-"):
                consumer.acknowledge(message)
        consumer.close()
        outcome[f"first batch batch_index_ack={batch_index_ack}"] = _resubscribe_and_drain(
            client, topic, sub, **options
        )
    return outcome


@scenario
def test_acknowledge_crafted_ids(run: Run) -> Outcome:
    """Individual and cumulative acks of ids before the first entry, beyond the end, of other ledgers and with
    batch indexes, then a new consumer (and, for ids beyond the end, messages published after the ack)."""
    client = run.client()
    topic, ledger = _mixed_topic(run, client)
    outcome: Outcome = {}

    def acknowledge(sub: str, cumulative: bool, target: pulsar.MessageId) -> Any:
        consumer = client.subscribe(topic, sub, initial_position=Earliest)
        ack = consumer.acknowledge_cumulative if cumulative else consumer.acknowledge
        result = Run.attempt(lambda: ack(target))
        consumer.close()
        got = _resubscribe_and_drain(client, topic, sub)
        return result if "error" in result else got

    with ThreadPoolExecutor(8) as pool:
        acked = {
            sub: pool.submit(acknowledge, sub, cumulative, target)
            for cumulative in (False, True)
            for label, target in _crafted(ledger).items()
            if label not in ("earliest", "latest")
            for sub in [f"{'cumulative' if cumulative else 'individual'}-{label}"]
        }
        outcome.update({sub: future.result() for sub, future in acked.items()})
    _singles(client, topic, ["s4", "s5", "s6", "s7", "s8"])
    for cumulative in (False, True):
        sub = f"{'cumulative' if cumulative else 'individual'}-beyond_end"
        outcome[f"{sub} after more messages"] = _resubscribe_and_drain(client, topic, sub)
    return outcome


@scenario
def test_seek_to_crafted_ids(run: Run) -> Outcome:
    """A consumer seeks to earliest, latest, ids inside batches, before the first entry, beyond the end and of
    other ledgers."""
    client = run.client()
    topic, ledger = _mixed_topic(run, client)
    outcome: Outcome = {}

    def seeks(inclusive: bool) -> Outcome:
        consumer = client.subscribe(
            topic, f"sub-{inclusive}", initial_position=Earliest, start_message_id_inclusive=inclusive
        )
        receive_n(consumer, 12)
        seen: Outcome = {}
        for label, target in _crafted(ledger).items():
            result = Run.attempt(lambda target=target: consumer.seek(target))
            seen[f"{label} inclusive={inclusive}"] = result if "error" in result else texts(drain(consumer, QUIET_MS))
        consumer.close()
        return seen

    with ThreadPoolExecutor(2) as pool:
        for seen in pool.map(seeks, (False, True)):
            outcome.update(seen)
    beyond = client.subscribe(topic, "beyond", initial_position=Earliest)
    beyond.seek(_crafted(ledger)["beyond_end"])
    higher = client.subscribe(topic, "higher", initial_position=Earliest)
    higher.seek(_crafted(ledger)["higher_ledger"])
    _singles(client, topic, ["s4", "s5", "s6", "s7", "s8"])
    outcome["beyond_end then"] = texts(drain(beyond, QUIET_MS, expect=1))
    outcome["higher_ledger then"] = texts(drain(higher, QUIET_MS, expect=5))
    outcome["beyond_end backlog"] = _backlog(run, topic, "beyond")
    beyond.close()
    outcome["beyond_end new consumer"] = _resubscribe_and_drain(client, topic, "beyond")
    return outcome


def _backlog(run: Run, topic: str, sub: str) -> Any:
    stats = run.admin("GET", _admin_path(run, topic) + "/stats").body
    return stats["subscriptions"][sub]["msgBacklog"]


@scenario
def test_readers_at_crafted_ids(run: Run) -> Outcome:
    """Readers (exclusive and inclusive) started at earliest, latest, ids inside batches, before the first entry,
    beyond the end and of other ledgers."""
    client = run.client()
    topic, ledger = _mixed_topic(run, client)
    outcome: Outcome = {}
    readers = {}
    for inclusive in (False, True):
        for label, target in _crafted(ledger).items():
            readers[f"{label} inclusive={inclusive}"] = client.create_reader(
                topic, target, start_message_id_inclusive=inclusive
            )
    outcome.update(_drain_all(readers))
    _singles(client, topic, ["s4", "s5", "s6", "s7", "s8"])
    outcome.update({f"{key} then": got for key, got in _drain_all(readers).items()})
    return outcome


def _drain_all(readers: dict[str, pulsar.Reader]) -> dict[str, list[str]]:
    """What each reader gets, drained side by side (each until it is quiet)."""
    with ThreadPoolExecutor(len(readers)) as pool:
        drained = {key: pool.submit(drain, reader, QUIET_MS) for key, reader in readers.items()}
        return {key: texts(future.result()) for key, future in drained.items()}


@scenario
def test_redelivery_inside_batches(run: Run) -> Outcome:
    """Negative acks and redeliver-unacknowledged on Shared, Key_Shared and Failover subscriptions of a batched
    topic, with batch-index acks off and on: which messages come back, and their redelivery counts. Each request
    waits until the acks before it reached the broker (the client sends them grouped every 100 ms)."""
    client = run.client()
    topic = run.topic("t")
    _batched(client, topic, 2, 5)
    outcome: Outcome = {}
    for kind, consumer_type in _REDELIVERY_KINDS.items():
        for batch_index_ack in (False, True):
            consumer = client.subscribe(
                topic,
                f"sub-{kind}-{batch_index_ack}",
                consumer_type=consumer_type,
                initial_position=Earliest,
                negative_ack_redelivery_delay_ms=100,
                batch_index_ack_enabled=batch_index_ack,
            )
            case = f"{kind} batch_index_ack={batch_index_ack}"
            received = receive_n(consumer, 10)
            for message in received[:2] + received[5:7]:
                consumer.acknowledge(message)
            time.sleep(ACKS_S)
            consumer.negative_acknowledge(received[3])
            again = drain(consumer, 1000, expect=3)
            outcome[f"after nack {case}"] = sorted((m.data().decode(), m.redelivery_count()) for m in again)
            for message in again:
                if message.data().decode() != "m0-3":
                    consumer.acknowledge(message)
            time.sleep(ACKS_S)
            consumer.redeliver_unacknowledged_messages()
            outcome[f"after redeliver {case}"] = sorted(
                (m.data().decode(), m.redelivery_count()) for m in drain(consumer, 1000, expect=1)
            )
            consumer.close()
    return outcome


def _last_id(consumer: pulsar.Consumer, ledger: int | None) -> dict[str, Any]:
    mid = consumer.get_last_message_id()
    if mid.ledger_id() == ledger:
        shown: Any = "ledger"
    else:
        shown = "valid" if mid.ledger_id() >= 0 else mid.ledger_id()
    return {"ledger": shown, "entry": mid.entry_id(), "batch_index": mid.batch_index()}


@scenario
def test_get_last_message_id(run: Run) -> Outcome:
    """getLastMessageId of an empty topic, after batches, after a single message, and a reader's hasMessageAvailable
    at each id it got."""
    client = run.client()
    topic = run.topic("t")
    consumer = client.subscribe(topic, "sub", initial_position=Earliest)
    outcome: Outcome = {"empty": _last_id(consumer, None)}
    _batched(client, topic, 2, 5)
    ledger = _ledger(client, topic)
    outcome["after batches"] = _last_id(consumer, ledger)
    _singles(client, topic, ["s2"])
    outcome["after single"] = _last_id(consumer, ledger)
    received = receive_n(consumer, 11)
    consumer.acknowledge_cumulative(received[-1])
    outcome["after ack"] = _last_id(consumer, ledger)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    available = []
    for _ in range(11):
        available.append(reader.has_message_available())
        reader.read_next(5000)
    available.append(reader.has_message_available())
    outcome["has_message_available"] = available
    return outcome


# -- admin API -------------------------------------------------------------------------------------------


def _admin_path(run: Run, topic: str) -> str:
    return "/admin/v2/persistent/public/default/" + topic.rsplit("/", 1)[1]


def _message_by_id(run: Run, path: str, ledger: int, entry: int) -> dict[str, Any]:
    """Status and the entry the id header names, of ``GET .../ledger/{l}/entry/{e}``."""
    assert run.target.admin_url
    request = urllib.request.Request(f"{run.target.admin_url}{path}/ledger/{ledger}/entry/{entry}")
    try:
        with admin_open(run.target.admin_url, request, timeout=15) as response:
            header = response.headers.get("X-Pulsar-Message-ID", "")
            return {"status": response.status, "entry": int(header.split(":")[1])}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code}


def _examine(run: Run, path: str, initial: str, position: int) -> dict[str, Any]:
    assert run.target.admin_url
    url = f"{run.target.admin_url}{path}/examinemessage?initialPosition={initial}&messagePosition={position}"
    try:
        with admin_open(run.target.admin_url, url, timeout=15) as response:
            header = response.headers.get("X-Pulsar-Message-ID", "")
            return {"status": response.status, "entry": int(header.split(":")[1])}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code}


@scenario
def test_admin_reset_cursor_to_crafted_ids(run: Run) -> Outcome:
    """``resetcursor`` with a message id body: ids inside batches, before the first entry, beyond the end, of other
    ledgers, excluded or not; what a consumer gets afterwards."""
    client = run.client()
    topic, ledger = _mixed_topic(run, client)
    path = _admin_path(run, topic)
    bodies: dict[str, dict[str, Any]] = {
        "earliest": {"ledgerId": -1, "entryId": -1},
        "latest": {"ledgerId": 2**63 - 1, "entryId": 2**63 - 1},
        "entry_minus_1": {"ledgerId": ledger, "entryId": -1},
        "first_entry": {"ledgerId": ledger, "entryId": 0},
        "second_batch_index_2": {"ledgerId": ledger, "entryId": 1, "batchIndex": 2},
        "second_batch_excluded": {"ledgerId": ledger, "entryId": 1, "excluded": True},
        "single_entry": {"ledgerId": ledger, "entryId": 2},
        "last_entry_excluded": {"ledgerId": ledger, "entryId": 3, "excluded": True},
        "just_after_end": {"ledgerId": ledger, "entryId": 4},
        "beyond_end": {"ledgerId": ledger, "entryId": 9},
        "lower_ledger": {"ledgerId": ledger - 1, "entryId": 2},
        "higher_ledger": {"ledgerId": ledger + 1000, "entryId": 0},
    }
    outcome: Outcome = {}
    for label, body in bodies.items():
        sub = f"sub-{label}"
        client.subscribe(topic, sub, initial_position=Earliest).close()
        answer = run.admin("POST", f"{path}/subscription/{sub}/resetcursor", body)
        got = _resubscribe_and_drain(client, topic, sub) if answer.status < 300 else None
        outcome[label] = {"status": answer.status, "then": got}
    _singles(client, topic, ["s4", "s5", "s6", "s7", "s8", "s9", "s10"])
    for label in ("beyond_end", "higher_ledger", "just_after_end", "latest"):
        outcome[f"{label} then"] = _resubscribe_and_drain(client, topic, f"sub-{label}")
    return outcome


@scenario
def test_admin_skip_examine_and_get_by_id(run: Run) -> Outcome:
    """``skip`` counts on a batched topic, ``examinemessage`` positions and ``ledger/{l}/entry/{e}`` with ids
    before the first entry, beyond the end and of other ledgers."""
    client = run.client()
    topic, ledger = _mixed_topic(run, client)
    path = _admin_path(run, topic)
    outcome: Outcome = {}
    for count in (0, 1, 3, 9):
        sub = f"skip-{count}"
        client.subscribe(topic, sub, initial_position=Earliest).close()
        status = run.admin("POST", f"{path}/subscription/{sub}/skip/{count}").status
        outcome[f"skip {count}"] = {"status": status, "then": _resubscribe_and_drain(client, topic, sub)}
    for initial in ("earliest", "latest"):
        for position in (0, 1, 2, 4, 5):
            outcome[f"examine {initial} {position}"] = _examine(run, path, initial, position)
    for label, (ledger_id, entry) in {
        "entry_minus_1": (ledger, -1),
        "first": (ledger, 0),
        "last": (ledger, 3),
        "beyond_end": (ledger, 4),
        "lower_ledger": (ledger - 1, 0),
        "higher_ledger": (ledger + 1000, 0),
        "minus_1": (-1, -1),
    }.items():
        outcome[f"get {label}"] = _message_by_id(run, path, ledger_id, entry)
    return outcome


@scenario
def test_admin_create_subscription_at_crafted_ids(run: Run) -> Outcome:
    """``PUT .../subscription/{sub}`` with a message id body before the first entry, inside a batch, beyond the end
    and of other ledgers; what a consumer gets, also after more messages."""
    client = run.client()
    topic, ledger = _mixed_topic(run, client)
    path = _admin_path(run, topic)
    bodies: dict[str, dict[str, Any]] = {
        "entry_minus_1": {"ledgerId": ledger, "entryId": -1},
        "second_batch_index_2": {"ledgerId": ledger, "entryId": 1, "batchIndex": 2},
        "single_entry": {"ledgerId": ledger, "entryId": 2},
        "beyond_end": {"ledgerId": ledger, "entryId": 9},
        "lower_ledger": {"ledgerId": ledger - 1, "entryId": 2},
        "higher_ledger": {"ledgerId": ledger + 1000, "entryId": 0},
    }
    outcome: Outcome = {}
    for label, body in bodies.items():
        outcome[label] = {"status": run.admin("PUT", f"{path}/subscription/sub-{label}", body).status}
    _singles(client, topic, ["s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11"])
    for label in bodies:
        outcome[label]["then"] = _resubscribe_and_drain(client, topic, f"sub-{label}")
    return outcome


@scenario
def test_java_client_acks_seeks_and_readers(run: Run) -> Outcome:
    """The official Java client (tests/java, ``MessageIdScenarios``): cumulative acks inside batches (entry -1 for the
    first batch), batch-index acks, seeks to entry -1 and into a batch, readers started there."""
    observed = run_scenario(run.target.service_url, "message_ids", run.topic("t"), timeout=120)
    return {k: v for k, v in observed.items() if k != "timing_ms"}


@scenario
def test_transactional_acks_of_crafted_ids(run: Run) -> Outcome:
    """Transactional ACKs (raw protocol, each in a transaction then committed) of ids before the first entry, of
    other ledgers and beyond the end: the error each ACK_RESPONSE carries, and what a consumer gets afterwards."""
    client = run.client()
    topic = run.topic("t")
    _singles(client, topic, ["s0", "s1", "s2"])
    ledger = _ledger(client, topic)
    conn = RawConnection.to(run.target.service_url)
    try:
        conn.handshake()
        _tc_connect(conn, 0)
        _raw_request(
            conn,
            T.SUBSCRIBE,
            T.SUCCESS,
            topic=topic,
            subscription="sub",
            subType=0,
            consumer_id=1,
            initialPosition=CommandSubscribe.Earliest,
        )
        outcome: Outcome = {}
        for label, ack_type, ledger_id, entry in (
            ("individual entry -1", CommandAck.Individual, ledger, -1),
            ("cumulative entry -1", CommandAck.Cumulative, ledger, -1),
            ("individual entry -2", CommandAck.Individual, ledger, -2),
            ("individual lower ledger", CommandAck.Individual, ledger - 1, 1),
            ("cumulative lower ledger", CommandAck.Cumulative, ledger - 1, 1),
            ("individual beyond end", CommandAck.Individual, ledger, 9),
            ("cumulative beyond end", CommandAck.Cumulative, ledger, 9),
            ("cumulative higher ledger", CommandAck.Cumulative, ledger + 1000, 0),
        ):
            txn = _open(conn)
            _add_subscription(conn, txn, topic)
            mid = {"ledgerId": ledger_id % 2**64, "entryId": entry % 2**64}  # as a Java client writes a long
            response = _raw_request(
                conn, T.ACK, T.ACK_RESPONSE, consumer_id=1, ack_type=ack_type, message_id=[mid], **_txn_fields(txn)
            ).ackResponse
            outcome[label] = ServerError.Name(response.error) if response.HasField("error") else "ok"
            outcome[f"{label} commit"] = _end(conn, txn, TxnAction.COMMIT).HasField("error")
        _raw_request(conn, T.CLOSE_CONSUMER, T.SUCCESS, consumer_id=1)
    finally:
        conn.close()
    _singles(client, topic, [f"s{i}" for i in range(3, 11)])
    outcome["then"] = _resubscribe_and_drain(client, topic, "sub")
    return outcome


def _raw_request(conn: RawConnection, kind: int, answer: int, **fields: Any) -> BaseCommand:
    """Send a request with a fresh request id; its answer (other frames in between are skipped)."""
    conn.send(kind, request_id=rid(), **fields)
    while True:
        command = conn.read().command
        if command.type == answer:
            return command


@scenario
def test_get_last_message_id_on_the_wire(run: Run) -> Outcome:
    """GET_LAST_MESSAGE_ID_RESPONSE field by field (raw protocol): an empty topic, then a batch entry; ledger ids
    are shown as "ledger" when they are the topic's."""
    client = run.client()
    topic = run.topic("t")
    conn = RawConnection.to(run.target.service_url)
    outcome: Outcome = {}
    try:
        conn.handshake()
        _raw_request(
            conn,
            T.SUBSCRIBE,
            T.SUCCESS,
            topic=topic,
            subscription="sub",
            subType=0,
            consumer_id=1,
            initialPosition=CommandSubscribe.Earliest,
        )
        raw_empty = _raw_request(conn, T.GET_LAST_MESSAGE_ID, T.GET_LAST_MESSAGE_ID_RESPONSE, consumer_id=1)
        _batched(client, topic, 1, 3)
        raw_batch = _raw_request(conn, T.GET_LAST_MESSAGE_ID, T.GET_LAST_MESSAGE_ID_RESPONSE, consumer_id=1)
    finally:
        conn.close()
    ledger = _ledger(client, topic)
    for label, command in (("empty", raw_empty), ("batch", raw_batch)):
        response = command.getLastMessageIdResponse
        for field in ("last_message_id", "consumer_mark_delete_position"):
            mid = getattr(response, field)
            outcome[f"{label} {field}"] = {
                name: "ledger" if name == "ledgerId" and value == ledger else value
                for name, value in ((f.name, v) for f, v in mid.ListFields())
            }
    return outcome
