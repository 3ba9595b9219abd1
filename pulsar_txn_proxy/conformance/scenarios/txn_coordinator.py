"""The coordinator's answers where their details are the observation: error texts, timeouts below the coordinator's
tick and the signed reading of NEW_TXN's ttl, sends in a transaction that timed out, ends that reach a namespace that
does not exist, the admin API's transaction metadata, low-water marks and last message id.

Protocol-level scenarios speak the binary protocol on a raw socket (the official clients validate what they send);
client-level ones run the Java harness (``CoordinatorScenarios``). Transaction ids become ``T0``, ``T1``... in order
of appearance, also inside error texts, and positions become ``L:<entry>`` on the topic's ledger.

An end sent right after a transaction opened with a timeout below the tick races with the coordinator's own abort:
Pulsar's answer then depends on how far that abort got (InvalidTxnStatus ``Expect Txn ... OPEN ... ABORTING``,
``... COMMITTING ... ABORTING``, ``... ABORTING ... ABORTED``, or TransactionNotFound once it finished), so those
answers are compared as refused or not.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from typing import Any

import pulsar

from pulsar_txn_proxy.conformance.framework import Outcome, Run, drain, scenario, texts
from pulsar_txn_proxy.conformance.harness import run_scenario
from pulsar_txn_proxy.conformance.raw import RawConnection
from wire.framing import encode_payload_command, make_body
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata, ServerError, TxnAction

T = BaseCommand
_REQUEST_IDS = itertools.count(1)
#: The Java client's timeout texts name the connection, whose ports differ between runs.
_CONNECTION = re.compile(r"connection: \[[^\]]*\]")


class Txns:
    """Names transaction ids ``T0``, ``T1``... in order of appearance, in ids and in texts."""

    def __init__(self) -> None:
        self.names: dict[tuple[int, int], str] = {}

    def name(self, txn: tuple[int, int]) -> str:
        return self.names.setdefault(txn, f"T{len(self.names)}")

    def text(self, message: str) -> str:
        for (most, least), label in self.names.items():
            message = message.replace(f"({most},{least})", label)
        return message


class Raw:
    """A raw protocol connection that found its coordinator (and topics) as a client does."""

    def __init__(self, run: Run, txns: Txns) -> None:
        self.conn = RawConnection.to(run.target.service_url, timeout=20)
        self.conn.handshake()
        self.txns = txns
        self.messages: list[Any] = []
        self.lookup("persistent://pulsar/system/transaction_coordinator_assign-partition-0")
        self.conn.send(T.TC_CLIENT_CONNECT_REQUEST, request_id=next(_REQUEST_IDS), tc_id=0)
        self.expect(T.TC_CLIENT_CONNECT_RESPONSE)

    def reply(self) -> BaseCommand:
        """The next frame that is not a MESSAGE (those are kept for ``ack_next``)."""
        while True:
            command = self.conn.read().command
            if command.type != T.MESSAGE:
                return command
            self.messages.append(command.message.message_id)

    def expect(self, kind: int) -> BaseCommand:
        command = self.reply()
        assert command.type == kind, f"expected {T.Type.Name(kind)}, got {command}"
        return command

    def lookup(self, topic: str) -> dict[str, Any]:
        self.conn.send(T.LOOKUP, topic=topic, request_id=next(_REQUEST_IDS))
        return self.answer(self.expect(T.LOOKUP_RESPONSE).lookupTopicResponse)

    def partitioned_metadata(self, topic: str) -> dict[str, Any]:
        self.conn.send(T.PARTITIONED_METADATA, topic=topic, request_id=next(_REQUEST_IDS))
        return self.answer(self.expect(T.PARTITIONED_METADATA_RESPONSE).partitionMetadataResponse)

    def new_txn(self, ttl_ms: int) -> tuple[tuple[int, int], dict[str, Any]]:
        self.conn.send(T.NEW_TXN, request_id=next(_REQUEST_IDS), tc_id=0, txn_ttl_millis=ttl_ms)
        response = self.expect(T.NEW_TXN_RESPONSE).newTxnResponse
        txn = (response.txnid_most_bits, response.txnid_least_bits)
        self.txns.name(txn)
        return txn, self.answer(response)

    def end(self, txn: tuple[int, int], action: int) -> dict[str, Any]:
        self.conn.send(T.END_TXN, request_id=next(_REQUEST_IDS), txn_action=action, **_fields(txn))
        return self.answer(self.expect(T.END_TXN_RESPONSE).endTxnResponse)

    def add_partition(self, txn: tuple[int, int], topic: str) -> dict[str, Any]:
        self.conn.send(T.ADD_PARTITION_TO_TXN, request_id=next(_REQUEST_IDS), partitions=[topic], **_fields(txn))
        return self.answer(self.expect(T.ADD_PARTITION_TO_TXN_RESPONSE).addPartitionToTxnResponse)

    def add_subscription(self, txn: tuple[int, int], topic: str, sub: str) -> dict[str, Any]:
        self.conn.send(
            T.ADD_SUBSCRIPTION_TO_TXN,
            request_id=next(_REQUEST_IDS),
            subscription=[{"topic": topic, "subscription": sub}],
            **_fields(txn),
        )
        return self.answer(self.expect(T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE).addSubscriptionToTxnResponse)

    def producer(self, topic: str, producer_id: int) -> str:
        self.lookup(topic)
        self.conn.send(T.PRODUCER, topic=topic, producer_id=producer_id, request_id=next(_REQUEST_IDS))
        return self.expect(T.PRODUCER_SUCCESS).producer_success.producer_name

    def subscribe(self, topic: str, sub: str, consumer_id: int) -> None:
        """A Shared consumer that asks for 10 messages."""
        self.conn.send(
            T.SUBSCRIBE,
            topic=topic,
            subscription=sub,
            subType=1,
            consumer_id=consumer_id,
            request_id=next(_REQUEST_IDS),
        )
        self.expect(T.SUCCESS)
        self.conn.send(T.FLOW, consumer_id=consumer_id, messagePermits=10)

    def ack_next(self, consumer_id: int, txn: tuple[int, int]) -> dict[str, Any]:
        """Acknowledge the next message delivered, in ``txn``; the ACK_RESPONSE."""
        while not self.messages:
            self.messages.append(self.conn.expect(T.MESSAGE).message.message_id)
        message = self.messages.pop(0)
        self.conn.send(
            T.ACK,
            consumer_id=consumer_id,
            ack_type=0,
            request_id=next(_REQUEST_IDS),
            message_id=[{"ledgerId": message.ledgerId, "entryId": message.entryId}],
            **_fields(txn),
        )
        return self.answer(self.expect(T.ACK_RESPONSE).ackResponse)

    def send(
        self, producer_id: int, name: str, sequence_id: int, payload: bytes, txn: tuple[int, int] | None = None
    ) -> dict[str, Any]:
        """A SEND; its receipt's entry id, or its error."""
        ids = _fields(txn) if txn is not None else {}
        metadata = MessageMetadata(
            producer_name=name, sequence_id=sequence_id, publish_time=int(time.time() * 1000), **ids
        )
        command = BaseCommand(
            type=T.SEND, send={"producer_id": producer_id, "sequence_id": sequence_id, "num_messages": 1, **ids}
        )
        self.conn.send_raw(encode_payload_command(command, make_body(metadata, payload)))
        reply = self.reply()
        if reply.type == T.SEND_RECEIPT:
            return {"entry": reply.send_receipt.message_id.entryId}
        return self.answer(reply.send_error)

    def answer(self, response: Any) -> dict[str, Any]:
        if not response.HasField("error"):
            return {"ok": True}
        return {"error": ServerError.Name(response.error), "text": self.txns.text(response.message)}

    def close(self) -> None:
        self.conn.close()


def _refused(answer: dict[str, Any] | None) -> bool:
    """Whether a raw answer or a Java outcome is an error (see the module docstring)."""
    return answer is not None and "error" in answer


def _fields(txn: tuple[int, int]) -> dict[str, int]:
    return {"txnid_most_bits": txn[0], "txnid_least_bits": txn[1]}


def _path(topic: str) -> str:
    return topic.removeprefix("persistent://")


def _relative(value: Any, ledger: int) -> Any:
    """``"<ledger>:<entry>"`` positions of the topic's ledger as ``"L:<entry>"``, in any JSON value."""
    if isinstance(value, dict):
        return {k: _relative(v, ledger) for k, v in value.items()}
    if isinstance(value, list):
        return [_relative(v, ledger) for v in value]
    if isinstance(value, str):
        return re.sub(rf"^{ledger}:", "L:", value)
    return value


def _harness(run: Run, name: str, *args: str) -> Any:
    obs = run_scenario(run.target.service_url, name, *args, timeout=120)
    obs.pop("timing_ms", None)

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, str):
            return _CONNECTION.sub("connection: [...]", value)
        return value

    return clean(obs)


# -- protocol ----------------------------------------------------------------------------------------------------


@scenario
def test_new_txn_ttl_and_end_texts(run: Run) -> Outcome:
    """ttl read as a signed long (2^64-1 is -1); below the 100 ms tick a transaction times out as it opens, and an
    end right away is refused (a commit as expecting COMMITTING); ended and unknown transactions, in Pulsar's
    words."""
    txns = Txns()
    raw = Raw(run, txns)
    out: dict[str, Any] = {}
    opened: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {}
    try:
        for label, ttl in (("ttl_max_uint64", 2**64 - 1), ("ttl_0", 0), ("ttl_99", 99), ("ttl_100", 100)):
            aborted, answer = raw.new_txn(ttl)
            committed, _ = raw.new_txn(ttl)
            opened[label] = (aborted, committed)
            out[label] = {
                "new": answer,
                "abort_at_once": _refused(raw.end(aborted, TxnAction.ABORT)),
                "commit_at_once": _refused(raw.end(committed, TxnAction.COMMIT)),
            }
        time.sleep(1.0)
        for label in ("ttl_max_uint64", "ttl_0"):
            aborted, committed = opened[label]
            out[label]["abort_later"] = raw.end(aborted, TxnAction.ABORT)
            out[label]["add_partition_later"] = raw.add_partition(committed, run.topic("p"))
        txn, _ = raw.new_txn(60_000)
        out["commit"] = raw.end(txn, TxnAction.COMMIT)
        out["commit_again"] = raw.end(txn, TxnAction.COMMIT)
        out["abort_committed"] = raw.end(txn, TxnAction.ABORT)
        unknown = (txn[0], txn[1] + 1_000_000)
        txns.name(unknown)
        out["unknown"] = raw.end(unknown, TxnAction.COMMIT)
    finally:
        raw.close()
    return out


@scenario
def test_namespace_not_found(run: Run) -> Outcome:
    """Lookups of a topic in a namespace that does not exist."""
    raw = Raw(run, Txns())
    topic = f"persistent://public/{run.name('missing')}/t"
    try:
        return {"partitioned_metadata": raw.partitioned_metadata(topic), "lookup": raw.lookup(topic)}
    finally:
        raw.close()


@scenario
def test_send_after_abort_and_low_water_mark(run: Run) -> Outcome:
    """A send in an aborted transaction is accepted and never delivered, and holds back nothing; once an end of a
    later transaction named a low-water mark past it, it is refused."""
    txns = Txns()
    raw = Raw(run, txns)
    topic = run.topic("t")
    try:
        name = raw.producer(topic, 1)
        txn, _ = raw.new_txn(60_000)
        out: dict[str, Any] = {"add": raw.add_partition(txn, topic), "send": raw.send(1, name, 0, b"t-0", txn)}
        out["abort"] = raw.end(txn, TxnAction.ABORT)
        out["late_send"] = raw.send(1, name, 1, b"late", txn)
        out["plain_send"] = raw.send(1, name, 2, b"p-0")
        later, _ = raw.new_txn(60_000)
        raw.add_partition(later, topic)
        out["later_send"] = raw.send(1, name, 3, b"later", later)
        out["later_commit"] = raw.end(later, TxnAction.COMMIT)
        out["send_below_low_water_mark"] = raw.send(1, name, 4, b"too-late", txn)
    finally:
        raw.close()
    consumer = run.client().subscribe(topic, "check", initial_position=pulsar.InitialPosition.Earliest)
    out["received"] = texts(drain(consumer, 1000))
    return out


# -- admin ---------------------------------------------------------------------------------------------------------


@scenario
def test_transaction_metadata_and_low_water_marks(run: Run) -> Outcome:
    """getTransactionMetadata of an open transaction that produced and acknowledged; the fields of the coordinator's
    stats; the transaction buffer's and the pending ack's low-water marks before and after ends on the topic (the
    second transaction does not ack)."""
    txns = Txns()
    raw = Raw(run, txns)
    topic = run.topic("t")
    path = _path(topic)
    try:
        name = raw.producer(topic, 1)
        ledger = _ledger(run, path)
        raw.subscribe(topic, "sub", 1)
        plain = raw.send(1, name, 0, b"p-0")
        first, _ = raw.new_txn(45_000)
        out: dict[str, Any] = {
            "plain": plain,
            "add_partition": raw.add_partition(first, topic),
            "add_subscription": raw.add_subscription(first, topic, "sub"),
            "ack": raw.ack_next(1, first),
            "send": raw.send(1, name, 1, b"t-0", first),
        }
        meta = run.admin("GET", f"/admin/v3/transactions/transactionMetadata/{first[0]}/{first[1]}")
        body = dict(meta.body) if meta.status == 200 else meta.body
        if isinstance(body, dict):
            body["txnId"] = txns.text(str(body.get("txnId")))
            body["openTimestamp"] = isinstance(body.get("openTimestamp"), int)
            if run.credentials.method:
                # A broker that authenticates names the role that opened the transaction: the run's own, which
                # depends on the credentials it was given (absent without authentication, as recorded).
                body.pop("owner", None)
        out["metadata"] = {
            "status": meta.status,
            "body": json.loads(json.dumps(_relative(body, ledger)).replace(topic, "<t>")),
        }
        stats = run.admin("GET", "/admin/v3/transactions/coordinatorStats?coordinatorId=0")
        out["coordinator_stats_fields"] = sorted(stats.body) if stats.status == 200 else stats.status
        out["buffer_marks_open"] = _marks(run, f"/admin/v3/transactions/transactionBufferStats/{path}")
        out["pending_ack_marks_open"] = _marks(run, f"/admin/v3/transactions/pendingAckStats/{path}/sub")
        out["commit"] = raw.end(first, TxnAction.COMMIT)
        second, _ = raw.new_txn(45_000)
        raw.add_partition(second, topic)
        raw.send(1, name, 2, b"t-1", second)
        out["abort"] = raw.end(second, TxnAction.ABORT)
        out["buffer_marks_ended"] = _marks(run, f"/admin/v3/transactions/transactionBufferStats/{path}")
        out["pending_ack_marks_ended"] = _marks(run, f"/admin/v3/transactions/pendingAckStats/{path}/sub")
        out["metadata_ended"] = run.admin("GET", f"/admin/v3/transactions/transactionMetadata/{first[0]}/{first[1]}")
        out["metadata_ended"] = {
            "status": out["metadata_ended"].status,
            "body": txns.text(str(out["metadata_ended"].body)),
        }
    finally:
        raw.close()
    return out


def _marks(run: Run, path: str) -> Any:
    """The coordinators a stats answer has ``lowWaterMarks`` for (their values depend on every open transaction of
    the coordinator, other clients' included)."""
    answer = run.admin("GET", path + "?lowWaterMarks=true")
    if answer.status != 200:
        return {"status": answer.status}
    return {"keys": sorted(answer.body.get("lowWaterMarks", {}))}


def _ledger(run: Run, path: str) -> int:
    stats = run.admin("GET", f"/admin/v2/persistent/{path}/internalStats").body
    return int(stats["ledgers"][-1]["ledgerId"]) if stats.get("ledgers") else -1


@scenario
def test_admin_last_message_id_with_open_txn(run: Run) -> Outcome:
    """The admin API's last message id is the last entry of the log: an open transaction's message, then its
    marker, then a batch of three."""
    txns = Txns()
    raw = Raw(run, txns)
    topic = run.topic("t")
    path = _path(topic)
    out: dict[str, Any] = {}
    try:
        name = raw.producer(topic, 1)
        ledger = _ledger(run, path)
        out["plain"] = raw.send(1, name, 0, b"p-0")
        out["after_plain"] = _last(run, path, ledger)
        txn, _ = raw.new_txn(45_000)
        raw.add_partition(txn, topic)
        out["txn_send"] = raw.send(1, name, 1, b"t-0", txn)
        out["with_open_txn"] = _last(run, path, ledger)
        out["plain_behind_txn"] = raw.send(1, name, 2, b"p-1")
        out["behind_open_txn"] = _last(run, path, ledger)
        out["commit"] = raw.end(txn, TxnAction.COMMIT)
        out["after_commit"] = _last(run, path, ledger)
    finally:
        raw.close()
    producer = run.client().create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=100)
    for payload in ("b-0", "b-1", "b-2"):
        producer.send_async(payload.encode(), None)
    producer.flush()
    out["after_batch"] = _last(run, path, ledger)
    return out


def _last(run: Run, path: str, ledger: int) -> Any:
    answer = run.admin("GET", f"/admin/v2/persistent/{path}/lastMessageId")
    body = dict(answer.body) if answer.status == 200 else answer.body
    if isinstance(body, dict) and body.get("ledgerId") == ledger:
        body["ledgerId"] = "L"
    return {"status": answer.status, "body": body}


# -- Java client ---------------------------------------------------------------------------------------------------


@scenario
def test_java_late_send_after_timeout(run: Run) -> Outcome:
    """A timed-out txn (client state forced back to OPEN) sends again: accepted, never delivered, nothing held
    back; refused once a later txn's end passed its low-water mark."""
    return _harness(run, "late_send_after_timeout", run.topic("t"))


@scenario
def test_java_end_errors(run: Run) -> Outcome:
    """END_TXN answers as the Java client reports them: ended and unknown txns, timeouts 0 and -1 ms."""
    out = _harness(run, "end_errors")
    for timeout in ("timeout_0", "timeout_-1"):
        # Whether the abort right away is refused, and which error, depends on how far the timeout's own abort got;
        # a commit right away is refused in Pulsar's words.
        out[timeout]["abort_at_once"] = _refused(out[timeout]["abort_at_once"])
        out[timeout]["commit_at_once"] = _refused_by_timeout(out[timeout]["commit_at_once"])
    return out


def _refused_by_timeout(answer: Any) -> Any:
    """A commit sent right after a transaction timed out, as refused because the timeout's abort took it.

    Pulsar 4.2.4 answers it three ways, depending on how far that abort got (all three seen on the reference
    standalone): the transaction is gone (TransactionNotFoundException), or it is ABORTING and the coordinator
    expected it OPEN (the abort came between its read of the status and its update) or COMMITTING (the abort came
    first). Any other answer (a commit that succeeds, another error) is kept as it is."""
    if isinstance(answer, dict):
        error, text = answer.get("error"), str(answer.get("text") or "")
        if error == "TransactionNotFoundException" or (
            error == "InvalidTxnStatusException" and _ABORTING.search(text) is not None
        ):
            return "refused: its timeout aborted it"
    return answer


_ABORTING = re.compile(r"^Expect Txn `[^`]*` to be in (OPEN|COMMITTING) status but it is in ABORTING status$")


@scenario
def test_java_missing_namespace_end(run: Run) -> Outcome:
    """A txn that registered a partition of a namespace that does not exist: its commit is never answered (the
    client times out) and it stays COMMITTING, so an abort is refused."""
    return _harness(run, "missing_namespace_end", f"persistent://public/{run.name('missing')}/t")


@scenario
def test_transaction_buffer_stats_fields(run: Run) -> Outcome:
    """transactionBufferStats carries Pulsar's fields, no more: with a transaction open on the topic, and after it
    committed (lowWaterMarks only when asked for)."""
    txns = Txns()
    raw = Raw(run, txns)
    topic = run.topic("tb-stats")
    path = f"/admin/v3/transactions/transactionBufferStats/{topic.removeprefix('persistent://')}"

    def fields(query: str = "") -> dict[str, Any]:
        stats = run.admin("GET", path + query).body or {}
        return {
            "fields": sorted(stats),
            "state": stats.get("state"),
            "ongoing": stats.get("ongoingTxnSize"),
            "snapshot_type": stats.get("snapshotType"),
        }

    try:
        name = raw.producer(topic, 1)
        txn, _ = raw.new_txn(60_000)
        raw.add_partition(txn, topic)
        raw.send(1, name, 0, b"in-txn", txn)
        out = {"open": fields(), "open_with_low_water_marks": fields("?lowWaterMarks=true")}
        raw.end(txn, TxnAction.COMMIT)
        out["committed"] = fields()
    finally:
        raw.close()
    return out


@scenario
def test_metadata_names_topics_as_added(run: Run) -> Outcome:
    """transactionMetadata names produced partitions and acknowledged subscriptions' topics as the client added them:
    a short name (what the Go client's TestTxn_TCClient and TestTxn_RegisterTopic add) and a full one."""
    txns = Txns()
    raw = Raw(run, txns)
    short = run.name("short")
    full = run.topic("full")
    out: dict[str, Any] = {}
    try:
        for consumer_id, topic in enumerate((f"persistent://public/default/{short}", full)):
            raw.subscribe(topic, "my-sub", consumer_id)
        txn, _ = raw.new_txn(60_000)
        labels = {short: "short name", full: "full name"}
        for topic, label in labels.items():
            out[f"add_subscription {label}"] = raw.add_subscription(txn, topic, "my-sub")
            out[f"add_partition {label}"] = raw.add_partition(txn, topic)
        meta = run.admin("GET", f"/admin/v3/transactions/transactionMetadata/{txn[0]}/{txn[1]}").body or {}
        out["produced"] = sorted(labels.get(topic, topic) for topic in meta.get("producedPartitions", {}))
        acked = meta.get("ackedPartitions", {})
        out["acked"] = {labels.get(topic, topic): sorted(subs) for topic, subs in acked.items()}
        raw.end(txn, TxnAction.ABORT)
    finally:
        raw.close()
    return out
