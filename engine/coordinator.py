"""Transaction coordinators: transaction ids, the durable transaction log, timeouts and ending.

Ending a transaction takes two steps, as in Pulsar: first the COMMITTING (or ABORTING) record, then,
in one store transaction, the markers on every produced partition, the acknowledgements on every acked
subscription and the removal of the transaction from the log. Both go into the same store transaction
(where the first, deleted by the second, need not be written) unless an end delay (a testing aid)
separates them; then a crash between the two leaves a COMMITTING/ABORTING record that recovery
finishes. A crash before the first leaves an OPEN transaction that recovery times out. Partitions, subscriptions
and the coordinator apply an end only once it is durable: a commit that fails (a full disk) leaves the transaction
COMMITTING/ABORTING, answers END_TXN with the error, and the end is tried again (by the client, or by the
coordinator after a pause), as Pulsar's coordinator retries the markers it could not write.

Replies wait for durability only where a crash could otherwise break a promise. Every commit carries
everything staged before it, in order, so a record is durable before any later reply that waited for
a commit. NEW_TXN replies at once when its id comes from a block of ids already reserved durably (an
id is never handed out twice); ADD_PARTITION/ADD_SUBSCRIPTION reply at once, because what depends on
them (a send's receipt, the end of the transaction) waits for a later commit. Those records do not
even ask for a commit of their own: they ride with the next one a reply waits for, so a transaction of
one message costs two commits (its send and its end), not four. A crash can then only lose a
transaction that nothing durable refers to; the client learns it through TransactionNotFound.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from engine.clock import now_ms
from engine.deadlines import DeadlineTracker
from engine.errors import BrokerError
from engine.names import TopicName
from engine.transactions import (
    ENDED,
    ENDING,
    TRANSITIONS,
    TxnAction,
    TxnId,
    TxnStatus,
    invalid_status,
    not_found,
)
from wire.pulsar_api_pb2 import ServerError

if TYPE_CHECKING:
    from engine.clock import Clock
    from engine.store import Store
    from engine.topic import Topic


class CoordinatorHost(Protocol):
    """What the coordinators need of the broker above them, passed down at construction (``engine.broker.Broker``
    satisfies it): the store and the clock, the group commit (``after_commit``, ``request_flush``, ``flush``), the
    loaded topics whose buffers and pending acks an end reaches, and the namespaces that exist."""

    store: Store
    clock: Clock
    namespaces: Container[str]

    def after_commit(self, callback: Callable[[Any], None], value: Any) -> None: ...

    def request_flush(self) -> None: ...

    def flush(self) -> None: ...

    def existing_topic(self, topic: str) -> Topic | None: ...


log = logging.getLogger(__name__)

#: Transaction ids reserved durably at a time.
SEQUENCE_BLOCK = 1000
#: The tick of Pulsar's transaction timeout tracker. A transaction whose timeout is shorter (zero and negative ones
#: included) times out as it opens; its abort is in flight for one tick, and ending it then fails as in Pulsar.
TIMEOUT_TICK_MS = 100
#: Transactions that timed out while the server was down aborted per turn of the event loop after a restart: the
#: server answers meanwhile, and each turn's aborts share one group commit.
RECOVERY_ABORT_SLICE = 256
#: Seconds before a coordinator tries again to end a transaction whose end a failed commit lost.
END_RETRY_SECONDS = 1.0
#: System topic whose partitions stand for the coordinators; clients discover them through it.
COORDINATOR_ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"

Done = Callable[[Any], None]


@lru_cache(maxsize=4096)
def _quoted(name: str) -> str:
    """A topic name as a JSON string (a transaction's log records name the same partitions over and over)."""
    return json.dumps(name)


@lru_cache(maxsize=4096)
def _namespace_of(topic: str) -> str:
    """The namespace of a full topic name (every end of a transaction checks those of its partitions)."""
    return TopicName.parse(topic).namespace_name


@dataclass(eq=False, slots=True)
class TxnMeta:
    """What a coordinator knows of one transaction."""

    txn: TxnId
    status: TxnStatus
    opened_ms: int
    timeout_ms: int
    partitions: list[str] = field(default_factory=list)
    #: The names partitions were added under where the client did not give the full name (reported as given).
    partition_names: dict[str, str] = field(default_factory=dict)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)
    #: The same for the topics of subscriptions.
    subscription_names: dict[str, str] = field(default_factory=dict)
    waiters: list[Done] = field(default_factory=list)
    timed_out: bool = False
    #: COMMITTING/ABORTING without an end under way (see ``Coordinators._hold``).
    held: bool = False
    #: The role that opened it (None: opened without authentication); only it or a super-user may use it.
    owner: str | None = None


@dataclass
class CoordinatorStats:
    """Counters since start."""

    created: int = 0
    committed: int = 0
    aborted: int = 0
    timed_out: int = 0


class Coordinator:
    """One transaction coordinator (``tc_id``) and its transactions."""

    def __init__(self, tc_id: int) -> None:
        self.tc_id = tc_id
        self.sequence = 0
        #: Ids up to this one are reserved in the store; ``reserving`` is the block being reserved.
        self.reserved = 0
        self.reserving = 0
        self.txns: dict[int, TxnMeta] = {}
        self.stats = CoordinatorStats()

    def low_water_mark(self) -> int:
        """Every transaction of this coordinator with a sequence up to this one has ended (``txns`` is kept in
        ascending order of sequence, so its first key is the lowest)."""
        return next(iter(self.txns)) - 1 if self.txns else self.sequence


class Coordinators:
    """All coordinators of this endpoint, sharing the broker's store."""

    def __init__(self, broker: CoordinatorHost, count: int, end_delay_ms: int = 0) -> None:
        self.broker = broker
        self.store = broker.store
        self.clock = broker.clock
        self.coordinators = [Coordinator(i) for i in range(count)]
        #: Testing aid: a pause between an end's first durable step and its second.
        self.end_delay_ms = end_delay_ms
        #: When each OPEN transaction times out.
        self.timeouts: DeadlineTracker[TxnId] = DeadlineTracker(self.clock, self._expire)
        #: Transactions that timed out while the server was down, ABORTING, whose aborts recovery left to later turns.
        self._expired: deque[TxnMeta] = deque()
        #: Transactions not yet ended, of all coordinators (the broker asks at every group commit).
        self._live = 0
        #: (topic, subscription) -> coordinator id -> low-water mark. As Pulsar's pending-ack handles, a subscription
        #: learns marks from the ends of its transactions once it took a transactional acknowledgement (in memory).
        self.pending_ack_marks: dict[tuple[str, str], dict[int, int]] = {}

    def __len__(self) -> int:
        return len(self.coordinators)

    # -- lookups ------------------------------------------------------------------------------

    def coordinator(self, tc_id: int) -> Coordinator:
        """The coordinator with this id, or TransactionCoordinatorNotFound."""
        if 0 <= tc_id < len(self.coordinators):
            return self.coordinators[tc_id]
        raise BrokerError(
            ServerError.TransactionCoordinatorNotFound, f"Transaction coordinator with id {tc_id} not found!"
        )

    def meta(self, txn: TxnId) -> TxnMeta:
        """A live transaction, or TransactionCoordinatorNotFound / TransactionNotFound."""
        meta = self.coordinator(txn.most).txns.get(txn.least)
        if meta is None:
            raise not_found(txn)
        return meta

    def live(self, txn: TxnId) -> TxnMeta | None:
        """A transaction that has not ended, or None (also for an unknown coordinator)."""
        if not 0 <= txn.most < len(self.coordinators):
            return None
        return self.coordinators[txn.most].txns.get(txn.least)

    def ended(self, txn: TxnId) -> bool:
        """Whether the coordinator opened ``txn`` and it has ended."""
        if not 0 <= txn.most < len(self.coordinators):
            return False
        coordinator = self.coordinators[txn.most]
        return 0 < txn.least <= coordinator.sequence and txn.least not in coordinator.txns

    def require_open(self, txn: TxnId) -> TxnMeta:
        """A transaction that is OPEN, or the error Pulsar gives."""
        meta = self.meta(txn)
        if meta.status is not TxnStatus.OPEN:
            raise invalid_status(txn, TxnStatus.OPEN, meta.status)
        return meta

    # -- requests -----------------------------------------------------------------------------

    def new_txn(self, tc_id: int, timeout_ms: int, done: Done, owner: str | None = None) -> None:
        """Open a transaction for ``owner``; ``done(TxnId)`` once its id can never be handed out again.

        ``timeout_ms`` is a signed 64-bit value, as Pulsar reads the wire's field; below one tracker tick the
        transaction times out at once.
        """
        coordinator = self.coordinator(tc_id)
        coordinator.sequence += 1
        txn = TxnId(tc_id, coordinator.sequence)
        meta = TxnMeta(txn, TxnStatus.OPEN, now_ms(self.clock), timeout_ms, owner=owner)
        coordinator.txns[txn.least] = meta
        self._live += 1
        coordinator.stats.created += 1
        # The log's JSON text, written out directly (json.dumps of a dict costs several times more, per transaction).
        text = f'{{"op": "open", "opened_ms": {meta.opened_ms}, "timeout_ms": {timeout_ms}'
        if owner is not None:
            text += f', "owner": {json.dumps(owner)}'
        self.store.stage_txn_record(tc_id, txn.least, text + "}")
        if timeout_ms < TIMEOUT_TICK_MS:
            self._time_out(meta, TIMEOUT_TICK_MS)
        else:
            self._arm_timeout(meta, meta.timeout_ms / 1000)
        if txn.least <= coordinator.reserved:
            done(txn)
            return
        if txn.least > coordinator.reserving:
            coordinator.reserving = txn.least + SEQUENCE_BLOCK - 1
            self.store.stage_counter(f"tc_sequence_{tc_id}", coordinator.reserving)
            block = coordinator.reserving

            def stored(result: Any) -> None:
                if isinstance(result, BrokerError):
                    # The block was not stored (a full disk): the next NEW_TXN reserves one again, and none of its
                    # ids is answered at once (they would be handed out again after a restart).
                    coordinator.reserving = coordinator.reserved
                else:
                    coordinator.reserved = max(coordinator.reserved, block)

            self.broker.after_commit(stored, None)
        self.broker.after_commit(done, txn)

    def add_partitions(
        self, txn: TxnId, partitions: list[str], done: Done, given: dict[str, str] | None = None
    ) -> None:
        """Register partitions the transaction produces to (full names; ``given``: the names the client gave, by
        full name, reported instead)."""
        meta = self.require_open(txn)
        for partition in partitions:
            self._enlist_partition(meta, partition, (given or {}).get(partition))
        done(txn)

    def enlist_partition(self, txn: TxnId, partition: str) -> TxnMeta:
        """Make sure an open transaction that a message is sent to ``partition`` in ends there too; its meta.

        Clients register partitions before sending, and the registration is answered before it is durable: a crash
        can lose it while the client goes on sending in the transaction (Pulsar's coordinator, which persists it
        first, keeps it). The send's receipt waits for a commit, which carries the record.
        """
        meta = self.require_open(txn)
        self._enlist_partition(meta, partition)
        return meta

    def _enlist_partition(self, meta: TxnMeta, partition: str, given: str | None = None) -> None:
        if partition not in meta.partitions:
            meta.partitions.append(partition)
            text = f'{{"op": "partition", "topic": {_quoted(partition)}'
            if given is not None and given != partition:
                meta.partition_names[partition] = given
                text += f', "name": {_quoted(given)}'
            self.store.stage_txn_record(meta.txn.most, meta.txn.least, text + "}")

    def add_subscriptions(
        self, txn: TxnId, subscriptions: list[tuple[str, str]], done: Done, given: dict[str, str] | None = None
    ) -> None:
        """Register subscriptions the transaction acknowledges on (``given``: the topic names as the client gave
        them, by full name)."""
        meta = self.require_open(txn)
        for topic, subscription in subscriptions:
            self._enlist(meta, topic, subscription, (given or {}).get(topic))
        done(txn)

    def enlist_subscription(self, txn: TxnId, topic: str, subscription: str) -> None:
        """Make sure an open transaction that acknowledged on a subscription ends there too.

        Clients register subscriptions before acknowledging; this covers one that did not, so that
        no acknowledgement stays held after its transaction ended.
        """
        self._enlist(self.require_open(txn), topic, subscription)
        self.pending_ack_marks.setdefault((topic, subscription), {})

    def _enlist(self, meta: TxnMeta, topic: str, subscription: str, given: str | None = None) -> None:
        if (topic, subscription) not in meta.subscriptions:
            meta.subscriptions.append((topic, subscription))
            record = {"op": "subscription", "topic": topic, "subscription": subscription}
            if given is not None and given != topic and topic not in meta.subscription_names:
                meta.subscription_names[topic] = record["name"] = given
            self._record(meta, record)

    def end(self, txn: TxnId, action: TxnAction, done: Done) -> None:
        """Commit or abort; ``done(None)`` once every partition and subscription has applied it.

        As in Pulsar: the same end again joins the one under way; the other end is refused, naming the status it
        asked for; an end that would reach a namespace that does not exist is never answered. While a timeout's
        abort is in flight, a commit is refused as expecting COMMITTING (Pulsar's coordinator finds the transaction
        ABORTING), and an abort as expecting ABORTING but finding ABORTED (Pulsar's coordinator lets it join, and
        the timeout's abort moves the transaction to ABORTED before the client's can).
        """
        meta = self.meta(txn)
        target = ENDING[action]
        if meta.timed_out and meta.status is TxnStatus.ABORTING and action is TxnAction.ABORT:
            raise invalid_status(txn, TxnStatus.ABORTING, TxnStatus.ABORTED)
        if meta.status is not target and target not in TRANSITIONS[meta.status]:
            raise invalid_status(txn, target, meta.status)
        if self._touches_missing_namespace(meta):
            # Pulsar's coordinator cannot reach the partition or subscription and never answers: the client's
            # request times out, and the transaction stays COMMITTING/ABORTING.
            self._hold(meta, target)
            return
        meta.waiters.append(done)
        if meta.status is not target or meta.held:
            meta.held = False
            self._begin_end(meta, target, self.end_delay_ms)

    def _touches_missing_namespace(self, meta: TxnMeta) -> bool:
        namespaces = self.broker.namespaces
        return any(_namespace_of(topic) not in namespaces for topic in meta.partitions) or any(
            _namespace_of(topic) not in namespaces for topic, _ in meta.subscriptions
        )

    def _hold(self, meta: TxnMeta, target: TxnStatus) -> None:
        """Move ``meta`` to COMMITTING/ABORTING without ending it, as Pulsar keeps a transaction whose end cannot reach
        a namespace that does not exist; the next end once the namespace exists (or a restart) finishes it."""
        if meta.status is TxnStatus.OPEN:
            meta.held = True
            meta.status = target
            self.timeouts.discard(meta.txn)
            self._record(meta, {"op": "status", "status": target.value})
            self.broker.request_flush()

    def _begin_end(self, meta: TxnMeta, target: TxnStatus, delay_ms: int) -> None:
        meta.status = target
        self.timeouts.discard(meta.txn)
        if delay_ms:
            self._record(meta, {"op": "status", "status": target.value})
            self.broker.after_commit(lambda result: self._status_stored(meta, result, delay_ms), None)
        else:
            # Both steps in one store transaction: all or nothing, and one fsync less per transaction. The status
            # record would be deleted by the transaction that writes it, so it is not written at all.
            self._finish(meta)

    def _status_stored(self, meta: TxnMeta, result: Any, delay_ms: int) -> None:
        if isinstance(result, BrokerError):
            self._end_failed(meta, result)
        else:
            self.clock.call_later(delay_ms / 1000, lambda: self._finish(meta))

    def _finish(self, meta: TxnMeta) -> None:
        """The second durable step: markers, acknowledgements, and removal from the log, in one commit. The
        partitions and subscriptions end the transaction, and the coordinator forgets it, once that is durable."""
        action = TxnAction.COMMIT if meta.status is TxnStatus.COMMITTING else TxnAction.ABORT
        coordinator = self.coordinators[meta.txn.most]
        low_water_mark = coordinator.low_water_mark()
        for partition in meta.partitions:
            topic = self.broker.existing_topic(partition)
            if topic is not None:
                topic.txn_buffer.end(meta.txn, action, low_water_mark)
        for topic_name, sub_name in meta.subscriptions:
            topic = self.broker.existing_topic(topic_name)
            subscription = topic.subscriptions.get(sub_name) if topic is not None else None
            if subscription is not None:
                subscription.pending_ack.end(meta.txn, action)
            marks = self.pending_ack_marks.get((topic_name, sub_name))
            if marks is not None:
                marks[meta.txn.most] = max(marks.get(meta.txn.most, -1), low_water_mark)
        self.store.stage_txn_removal(meta.txn.most, meta.txn.least)
        self.broker.after_commit(lambda result: self._finished(meta, action, result), None)

    def _finished(self, meta: TxnMeta, action: TxnAction, result: Any) -> None:
        if isinstance(result, BrokerError):
            self._end_failed(meta, result)
            return
        coordinator = self.coordinators[meta.txn.most]
        meta.status = ENDED[action]
        if coordinator.txns.pop(meta.txn.least, None) is not None:
            self._live -= 1
        if action is TxnAction.COMMIT:
            coordinator.stats.committed += 1
        else:
            coordinator.stats.aborted += 1
        waiters, meta.waiters = meta.waiters, []
        for waiter in waiters:
            waiter(None)

    def _end_failed(self, meta: TxnMeta, error: BrokerError) -> None:
        """A commit of the end was lost (a full disk). As in Pulsar, the transaction stays COMMITTING/ABORTING; its
        END_TXN fails and may be sent again, and the coordinator tries again itself after a pause."""
        log.warning("ending %s failed (%s); trying again in %g s", meta.txn, error.message, END_RETRY_SECONDS)
        meta.held = True
        waiters, meta.waiters = meta.waiters, []
        for waiter in waiters:
            waiter(error)
        self.clock.call_later(END_RETRY_SECONDS, lambda: self._retry_end(meta))

    def _retry_end(self, meta: TxnMeta) -> None:
        if meta.held and self.live(meta.txn) is meta:
            meta.held = False
            self._finish(meta)

    def records_lost(self, records: list[tuple[int, int, str]]) -> None:
        """Log records a failed commit lost: stage again those of transactions that are still live (the next commit
        carries them), so that a restart knows what was answered of them."""
        for tc_id, least, text in records:
            if self.live(TxnId(tc_id, least)) is not None:
                self.store.stage_txn_record(tc_id, least, text)

    def _record(self, meta: TxnMeta, record: dict[str, Any]) -> None:
        # Staged only: the commit that carries it is the next one somebody waits for (see the module docstring).
        self.store.stage_txn_record(meta.txn.most, meta.txn.least, json.dumps(record))

    # -- timeouts -----------------------------------------------------------------------------

    def _arm_timeout(self, meta: TxnMeta, seconds: float) -> None:
        self.timeouts.add(meta.txn, self.clock.monotonic() + max(seconds, 0.0))

    def _expire(self, txn: TxnId) -> None:
        meta = self.coordinators[txn.most].txns.get(txn.least)
        if meta is None or meta.status is not TxnStatus.OPEN:
            return
        self._time_out(meta, self.end_delay_ms)

    def _time_out(self, meta: TxnMeta, delay_ms: int) -> None:
        log.info("transaction %s timed out after %d ms; aborting", meta.txn, meta.timeout_ms)
        meta.timed_out = True
        self.coordinators[meta.txn.most].stats.timed_out += 1
        self._begin_end(meta, TxnStatus.ABORTING, delay_ms)

    # -- recovery -----------------------------------------------------------------------------

    def recover(self) -> None:
        """Replay the log: finish COMMITTING/ABORTING transactions, time out expired OPEN ones.

        As Pulsar's coordinator, which is ready once its log is replayed and whose timeout tracker aborts what expired
        afterwards: an OPEN transaction whose timeout passed while the server was down becomes ABORTING here (it can
        no longer be committed, nor sent to), and its abort runs in later turns of the event loop,
        :data:`RECOVERY_ABORT_SLICE` at a time, so that the server answers its clients meanwhile.
        """
        for coordinator in self.coordinators:
            coordinator.sequence = self.store.counter(f"tc_sequence_{coordinator.tc_id}")
            coordinator.reserved = coordinator.reserving = coordinator.sequence
        for tc_id, least, text in self.store.txn_log():
            if tc_id >= len(self.coordinators):
                log.warning("transaction log names coordinator %d; only %d are configured", tc_id, len(self))
                continue
            coordinator = self.coordinators[tc_id]
            coordinator.sequence = max(coordinator.sequence, least)
            record = json.loads(text)
            meta = coordinator.txns.get(least)
            if record["op"] == "open":
                meta = TxnMeta(
                    TxnId(tc_id, least),
                    TxnStatus.OPEN,
                    record["opened_ms"],
                    record["timeout_ms"],
                    owner=record.get("owner"),
                )
                coordinator.txns[least] = meta
            elif meta is None:
                continue
            elif record["op"] == "partition":
                meta.partitions.append(record["topic"])
                if "name" in record:
                    meta.partition_names[record["topic"]] = record["name"]
            elif record["op"] == "subscription":
                meta.subscriptions.append((record["topic"], record["subscription"]))
                if "name" in record:
                    meta.subscription_names.setdefault(record["topic"], record["name"])
            elif record["op"] == "status":
                meta.status = TxnStatus(record["status"])
        self._live = sum(len(c.txns) for c in self.coordinators)
        now = now_ms(self.clock)
        for coordinator in self.coordinators:
            # Ascending order of sequence (see Coordinator.low_water_mark): records written again after a failed
            # commit may have come later in the log.
            coordinator.txns = dict(sorted(coordinator.txns.items()))
            for meta in list(coordinator.txns.values()):
                if meta.status in (TxnStatus.COMMITTING, TxnStatus.ABORTING):
                    log.info("finishing %s transaction %s after restart", meta.status.value, meta.txn)
                    self._finish(meta)
                elif meta.opened_ms + meta.timeout_ms <= now:
                    meta.timed_out = True
                    meta.status = TxnStatus.ABORTING
                    coordinator.stats.timed_out += 1
                    self._expired.append(meta)
                else:
                    self._arm_timeout(meta, (meta.opened_ms + meta.timeout_ms - now) / 1000)
        if self._expired:
            log.info("%d transactions timed out while the server was down; aborting them", len(self._expired))
            self.clock.call_later(0, self._abort_expired)
        self.broker.flush()

    def _abort_expired(self) -> None:
        """Abort the next :data:`RECOVERY_ABORT_SLICE` transactions that timed out while the server was down (their
        ends share this turn's group commit); the rest in the next turn."""
        for _ in range(min(RECOVERY_ABORT_SLICE, len(self._expired))):
            meta = self._expired.popleft()
            if self.live(meta.txn) is meta:
                self._begin_end(meta, TxnStatus.ABORTING, self.end_delay_ms)
        if self._expired:
            self.clock.call_later(0, self._abort_expired)

    # -- figures ------------------------------------------------------------------------------

    def active(self) -> int:
        """Transactions not yet ended (counted as they open and end: the broker asks at every group commit)."""
        return self._live
