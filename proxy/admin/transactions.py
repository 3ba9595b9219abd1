"""Transaction inspection: ``/admin/v3/transactions/...`` as ``pulsar-admin transactions`` calls it.

Shapes follow Pulsar's ``TransactionCoordinatorStats``, ``TransactionMetadata``, ``TransactionBufferStats``,
``TransactionPendingAckStats`` (and their ``*InternalStats``), ``TransactionInBufferStats``,
``TransactionInPendingAckStats`` and ``PositionInPendingAckStats``, field for field; as Pulsar's JSON, they leave out
null fields. The buffer's recovery figures, which Pulsar does not report, are metrics (:mod:`proxy.admin.metrics`).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from engine.clock import now_ms
from engine.coordinator import COORDINATOR_ASSIGN_TOPIC, Coordinator, TxnMeta
from engine.errors import BrokerError
from engine.names import TopicName
from engine.topic import Topic
from engine.transactions import TxnAction, TxnId
from proxy.admin.context import AdminContext
from proxy.admin.http import AdminError, Call, Router, from_broker_error
from proxy.admin.topic_stats import ledger_internal_stats
from proxy.admin.topics import existing_topic, subscription_of

V3 = "/admin/v3/transactions"
TOPIC = "{tenant}/{namespace}/{topic}"


def _position(topic: Topic, entry_id: int | None) -> str | None:
    return None if entry_id is None else f"{topic.ledger_id}:{entry_id}"


def _without_nulls(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def register(router: Router, ctx: AdminContext) -> None:
    """Add the transaction routes."""
    broker = ctx.broker
    coordinators = broker.coordinators

    def topic_of(call: Call) -> Topic:
        try:
            name = TopicName.parse(f"persistent://{call['tenant']}/{call['namespace']}/{call['topic']}")
        except BrokerError:
            raise AdminError(412, "Topic name is not valid") from None
        return existing_topic(ctx, name)

    def txn_of(call: Call) -> TxnId:
        return TxnId(call.path_integer("most"), call.path_integer("least"))

    def coordinator(tc_id: int) -> Coordinator:
        try:
            return coordinators.coordinator(tc_id)
        except BrokerError:
            raise AdminError(404, f"Transaction coordinator not found! coordinator id : {tc_id}") from None

    def coordinator_stats(c: Coordinator) -> dict[str, Any]:
        return {
            "state": "Ready",
            "leastSigBits": c.sequence,
            "lowWaterMark": c.low_water_mark(),
            "ongoingTxnSize": len(c.txns),
            "recoverStartTime": broker.stats.recover_start_ms,
            "recoverEndTime": broker.stats.recover_end_ms,
        }

    def in_buffer(topic: Topic, txn: TxnId) -> dict[str, Any]:
        buffer = topic.txn_buffer
        return _without_nulls(
            {"startPosition": _position(topic, buffer.ongoing.get(txn)), "aborted": txn in buffer.aborted}
        )

    def in_pending_ack(topic: Topic, sub_name: str, txn: TxnId) -> dict[str, Any]:
        sub = topic.subscriptions.get(sub_name)
        cumulative = sub.pending_ack.cumulative if sub is not None else None
        if cumulative is None or cumulative[0] != txn:
            return {}
        _, entry_id, unacked = cumulative
        position = _position(topic, entry_id)
        if unacked:
            # Inside a batch, Pulsar names the last acknowledged index (the first unacknowledged one, less one).
            position = f"{position}:{(unacked & -unacked).bit_length() - 2}"
        return {"cumulativeAckPosition": position}

    def metadata(meta: TxnMeta) -> dict[str, Any]:
        produced = {}
        for partition in meta.partitions:
            topic = broker.existing_topic(partition)
            # As Pulsar: under the name the client added it with.
            produced[meta.partition_names.get(partition, partition)] = (
                in_buffer(topic, meta.txn) if topic else {"aborted": False}
            )
        acked: dict[str, dict[str, Any]] = {}
        for topic_name, sub_name in meta.subscriptions:
            topic = broker.existing_topic(topic_name)
            # As Pulsar: under the name the client added it with.
            name = meta.subscription_names.get(topic_name, topic_name)
            acked.setdefault(name, {})[sub_name] = in_pending_ack(topic, sub_name, meta.txn) if topic else {}
        out = {
            "txnId": str(meta.txn),
            "status": meta.status.value,
            "openTimestamp": meta.opened_ms,
            # Pulsar's coordinator keeps the timeout itself under this name.
            "timeoutAt": meta.timeout_ms,
            "producedPartitions": produced,
            "ackedPartitions": acked,
        }
        if meta.owner is not None:
            # The role that opened it, when authentication gave it one (Pulsar leaves the field out otherwise).
            out["owner"] = meta.owner
        return out

    def low_water_marks(topic: Topic) -> dict[str, int]:
        """The low-water marks a partition learned from the ends it saw, by coordinator id."""
        return {str(tc_id): mark for tc_id, mark in topic.txn_buffer.low_water_marks.items()}

    @router.route("GET", V3 + "/coordinators")
    def list_coordinators(call: Call) -> Any:
        url = ctx.broker_url(call.host)
        return [{"id": c.tc_id, "brokerServiceUrl": url} for c in coordinators.coordinators]

    @router.route("GET", V3 + "/coordinatorStats")
    def get_coordinator_stats(call: Call) -> Any:
        tc_id = call.integer("coordinatorId")
        if tc_id is not None:
            return coordinator_stats(coordinator(tc_id))
        return {str(c.tc_id): coordinator_stats(c) for c in coordinators.coordinators}

    @router.route("GET", V3 + "/coordinatorInternalStats/{coordinatorId}")
    def coordinator_internal(call: Call) -> Any:
        tc_id = call.path_integer("coordinatorId")
        coordinator(tc_id)
        records = [r for c, _, r in broker.store.txn_log() if c == tc_id]
        name = f"pulsar/system/persistent/__transaction_log_{tc_id}"
        stats = ledger_internal_stats(-1, len(records), sum(len(r) for r in records), len(records) - 1)
        return {"transactionLogStats": {"managedLedgerName": name, "managedLedgerInternalStats": stats}}

    @router.route("GET", V3 + "/transactionMetadata/{most}/{least}")
    def transaction_metadata(call: Call) -> Any:
        try:
            return metadata(coordinators.meta(txn_of(call)))
        except BrokerError as exc:
            raise AdminError(404, exc.message) from None

    @router.route("GET", V3 + "/slowTransactions/{timeout}")
    def slow_transactions(call: Call) -> Any:
        timeout = call.path_integer("timeout")
        tc_id = call.integer("coordinatorId")
        chosen = [coordinator(tc_id)] if tc_id is not None else coordinators.coordinators
        now = now_ms(broker.clock)
        return {
            str(meta.txn): metadata(meta) for c in chosen for meta in c.txns.values() if meta.opened_ms + timeout < now
        }

    @router.route("GET", V3 + f"/transactionInBufferStats/{TOPIC}/{{most}}/{{least}}")
    def transaction_in_buffer(call: Call) -> Any:
        return in_buffer(topic_of(call), txn_of(call))

    @router.route("GET", V3 + f"/transactionInPendingAckStats/{TOPIC}/{{sub}}/{{most}}/{{least}}")
    def transaction_in_pending_ack(call: Call) -> Any:
        topic = topic_of(call)
        return in_pending_ack(topic, call["sub"], txn_of(call))

    @router.route("GET", V3 + f"/transactionBufferStats/{TOPIC}")
    def buffer_stats(call: Call) -> Any:
        topic = topic_of(call)
        buffer = topic.txn_buffer
        out: dict[str, Any] = {
            "state": "Ready",
            "maxReadPosition": _position(topic, topic.read_limit),
            "lastSnapshotTimestamps": buffer.last_snapshot_ms,
            "ongoingTxnSize": len(buffer.ongoing),
            "recoverStartTime": buffer.recover_start_ms,
            "recoverEndTime": buffer.recover_end_ms,
            "totalAbortedTransactions": len(buffer.aborted),
            "snapshotType": "Single",
        }
        if call.flag("lowWaterMarks"):
            out["lowWaterMarks"] = low_water_marks(topic)
        return out

    @router.route("GET", V3 + f"/transactionBufferInternalStats/{TOPIC}")
    def buffer_internal(call: Call) -> Any:
        topic = topic_of(call)
        snapshot = broker.store.txn_buffer_snapshot(topic.topic_id)
        if snapshot is None:
            raise AdminError(404, "Transaction buffer Snapshot for the topic does not exist")
        name = f"{topic.name.namespace_name}/persistent/__transaction_buffer_snapshot"
        stats = ledger_internal_stats(-1, 1, len(snapshot), 0)
        return {
            "snapshotType": "Single",
            "singleSnapshotSystemTopicInternalStats": {"managedLedgerName": name, "managedLedgerInternalStats": stats},
        }

    @router.route("GET", V3 + f"/pendingAckStats/{TOPIC}/{{sub}}")
    def pending_ack_stats(call: Call) -> Any:
        sub = subscription_of(topic_of(call), call["sub"])
        out: dict[str, Any] = {
            "state": "Ready",
            "ongoingTxnSize": len(sub.pending_ack.txns),
            "recoverStartTime": sub.topic.txn_buffer.recover_start_ms,
            "recoverEndTime": sub.topic.txn_buffer.recover_end_ms,
        }
        if call.flag("lowWaterMarks"):
            marks = coordinators.pending_ack_marks.get((sub.topic.name.full, sub.name), {})
            out["lowWaterMarks"] = {str(tc_id): mark for tc_id, mark in marks.items()}
        return out

    @router.route("GET", V3 + f"/pendingAckInternalStats/{TOPIC}/{{sub}}")
    def pending_ack_internal(call: Call) -> Any:
        topic = topic_of(call)
        sub = subscription_of(topic, call["sub"])
        records = [r for s, _, _, r in broker.store.pending_acks(topic.topic_id) if s == sub.name]
        name = f"{topic.name.namespace_name}/persistent/{topic.name.local}-{sub.name}__transaction_pending_ack"
        stats = ledger_internal_stats(-1, len(records), sum(len(r) for r in records), len(records) - 1)
        return {"pendingAckLogStats": {"managedLedgerName": name, "managedLedgerInternalStats": stats}}

    @router.route("GET", V3 + f"/positionStatsInPendingAck/{TOPIC}/{{sub}}/{{ledger}}/{{entry}}")
    def position_in_pending_ack(call: Call) -> Any:
        topic = topic_of(call)
        sub = subscription_of(topic, call["sub"])
        ledger, entry_id = call.path_integer("ledger"), call.path_integer("entry")
        batch_index = call.integer("batchIndex")
        if ledger != topic.ledger_id or entry_id < 0 or entry_id > topic.last_confirmed:
            return {"state": "InvalidPosition"}
        if sub.cursor.is_acked(entry_id):
            return {"state": "MarkDelete"}
        pending = sub.pending_ack
        # As Pulsar: only individual acks count here, not a pending cumulative ack.
        whole = any(mask is None for mask in pending.held.get(entry_id, {}).values())
        if batch_index is None or batch_index < 0:
            return {"state": "PendingAck" if whole or entry_id in pending.held else "NotInPendingAck"}
        if whole or pending.held_indexes(entry_id) >> batch_index & 1:
            return {"state": "PendingAck"}
        unacked = sub.cursor.unacked_mask(entry_id)
        if unacked is not None and not unacked >> batch_index & 1:
            return {"state": "MarkDelete"}
        return {"state": "NotInPendingAck"}

    @router.route("POST", V3 + "/abortTransaction/{most}/{least}")
    def abort_transaction(call: Call) -> Any:
        done: Deferred = Deferred()

        def ended(result: Any) -> None:
            if isinstance(result, BrokerError):
                done.errback(from_broker_error(result))
            else:
                done.callback(None)

        try:
            coordinators.end(txn_of(call), TxnAction.ABORT, ended)
        except BrokerError as exc:
            raise from_broker_error(exc) from None
        return done

    @router.route("POST", V3 + "/transactionCoordinator/replicas")
    def scale(call: Call) -> Any:
        raise AdminError(405, f"The coordinators of {COORDINATOR_ASSIGN_TOPIC} are set with --transaction-coordinators")
