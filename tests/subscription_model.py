"""A model-based test of one subscription: random operations on a real server, checked against a reference model.

:class:`SubscriptionMachine` (a hypothesis ``RuleBasedStateMachine``) publishes to a fresh topic (batched and not)
and consumes one Exclusive subscription through the official Python client (receive, individual/cumulative ack,
batch-index ack, negative ack, redeliver, seek) or through the project's transaction client (transactional
individual/cumulative acks, commit, abort), closes and reopens consumers and SIGKILLs/restarts the server. The
:class:`Model` holds what the broker has acknowledged by Pulsar's semantics; the official client's own
acknowledgement rules are modelled as the C++ client applies them (a batch message's individual ack reaches the broker
only when every message of that received batch is acked, unless batch-index ack is enabled; a cumulative ack inside
a batch acknowledges up to the entry before it, once).

Checks are made where the model is exact: after "close, resubscribe and drain until quiet", after redelivery (asked
for, or after a negative ack) and after a seek, the set of messages delivered equals published minus acknowledged
minus held (acknowledged individually in the open transaction), each once after a resubscription; a message received
at any time must not be one that was acknowledged or held when the last drain ended (and still is). A cumulative ack
in an open transaction holds nothing back: Pulsar 4.2.4 delivers those messages to a new consumer until the commit.
After a server crash acknowledgements that were not part of a committed transaction may be lost (Pulsar persists the
cursor lazily), so drains after a restart may also bring those back, until a fresh consumer's drain settles them.

The target is a local :class:`~tests.server_process.ServerProcess` (restartable), or the broker at
``MODEL_SERVICE_URL`` (e.g. the reference Pulsar; the restart rule is then off). ``tests/model_run.py`` runs the
machine for a time budget (``make model``); ``tests/test_subscription_model.py`` runs it briefly in ``make test``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulsar
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

import pulsar_txn
from tests.server_process import ServerProcess

#: Where failing examples are kept, so that the next run tries them first.
ROOT_DATABASE = str(Path(__file__).resolve().parent.parent / ".hypothesis" / "model")
#: Most messages one example publishes.
MAX_MESSAGES = 30
#: How long a drain waits for messages the model expects (a restart includes the client's reconnection).
PATIENCE = 5.0
RESTART_PATIENCE = 20.0
#: Silence that ends a drain once everything expected has come.
QUIET = 0.25
#: Rules left out (no-ops), named in MODEL_WITHOUT (comma-separated): to look past a known defect while it is open.
WITHOUT = frozenset(filter(None, os.environ.get("MODEL_WITHOUT", "").split(",")))
#: The official client's negative-ack redelivery delay.
NACK_DELAY_MS = 100


# -- the target -------------------------------------------------------------------------------------------------


class Target:
    """The broker under test, one official client and one transaction client on it, shared by all examples."""

    def __init__(self) -> None:
        url = os.environ.get("MODEL_SERVICE_URL")
        self.server: ServerProcess | None = None
        self._tmp: str | None = None
        if not url:
            self._tmp = tempfile.mkdtemp(prefix="subscription-model-")
            self.server = ServerProcess(Path(self._tmp) / "data").start()
            url = self.server.url
        self.url = url
        self.client = pulsar.Client(
            url, operation_timeout_seconds=15, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
        )
        self.txn = pulsar_txn.Client(url, operation_timeout_seconds=15)
        self.examples = 0

    @property
    def restartable(self) -> bool:
        return self.server is not None

    def restart(self) -> None:
        """SIGKILL the server and start it again on the same port and data."""
        assert self.server is not None
        self.server.kill()
        self.server.start()

    def close(self) -> None:
        self.txn.close()
        self.client.close()
        if self.server is not None:
            self.server.kill()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)


_target: Target | None = None


def target() -> Target:
    """The shared target, started on first use and stopped at exit."""
    global _target
    if _target is None:
        _target = Target()
        atexit.register(_target.close)
    return _target


# -- the reference model ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Msg:
    """A published message: its label (the payload), entry ``(ledger, entry)``, batch index and batch size."""

    label: str
    entry: tuple[int, int]
    index: int
    size: int  # 0: stored alone
    py_id: Any  # the official client's MessageId

    @property
    def position(self) -> tuple[int, int, int]:
        return (*self.entry, self.index)


@dataclass
class Model:
    """What the broker holds: published messages, acknowledged ones, and those the open transaction acknowledged."""

    messages: dict[str, Msg] = field(default_factory=dict)
    acked: set[str] = field(default_factory=set)
    held: set[str] = field(default_factory=set)
    #: Acknowledged cumulatively in the open transaction: acknowledged at its commit, but (as Pulsar 4.2.4 does, the
    #: cursor staying where it is until then) delivered again to a consumer that subscribes or asks for redelivery.
    pending: set[str] = field(default_factory=set)
    #: Acknowledged in committed transactions: durable through a crash.
    committed: set[str] = field(default_factory=set)
    #: Acknowledged before a crash outside a transaction: may be delivered once more.
    uncertain: set[str] = field(default_factory=set)

    def expected(self) -> set[str]:
        """What a fresh consumer must receive: every message neither acknowledged nor held."""
        return set(self.messages) - self.acked - self.held

    def forbidden(self) -> set[str]:
        """What no consumer may receive now."""
        return (self.acked - self.uncertain) | self.held

    def where(self, predicate: Any) -> set[str]:
        return {m.label for m in self.messages.values() if predicate(m)}

    def ack(self, labels: set[str]) -> None:
        self.acked |= labels - self.held - self.pending

    @property
    def in_transaction(self) -> set[str]:
        return self.held | self.pending

    def entry_of(self, msg: Msg) -> set[str]:
        return self.where(lambda m: m.entry == msg.entry)

    def before_entry(self, msg: Msg) -> set[str]:
        return self.where(lambda m: m.entry < msg.entry)

    def up_to(self, msg: Msg) -> set[str]:
        return self.where(lambda m: m.position <= msg.position)

    def describe(self, labels: set[str]) -> str:
        return ", ".join(
            f"{m.label}@{m.entry[0]}:{m.entry[1]}" + (f"[{m.index}/{m.size}]" if m.size else "")
            for m in sorted((self.messages[x] for x in labels), key=lambda m: m.position)
        )


@dataclass
class Acker:
    """The C++ client's per-delivery batch acker: indexes of one received batch not yet acknowledged by the user."""

    remaining: set[int]
    last_index: int = -1
    previous_entry_acked: bool = False


@dataclass
class Session:
    """One consumer on the subscription: the official client's (``py``) or the transaction client's (``tx``)."""

    kind: str
    consumer: Any
    in_hand: dict[str, tuple[Any, Acker | None]] = field(default_factory=dict)
    ackers: dict[tuple[int, int], Acker] = field(default_factory=dict)

    def receive(self, timeout: float) -> tuple[str, Any] | None:
        if self.kind == "py":
            try:
                msg = self.consumer.receive(timeout_millis=max(int(timeout * 1000), 1))
            except pulsar.Timeout:
                return None
            return msg.data().decode(), msg
        try:
            got = self.consumer.receive(max(int(timeout * 1000), 1))
        except pulsar_txn.Timeout:
            return None
        return got.data().decode(), got

    def track(self, model: Model, label: str, msg: Any) -> None:
        """Keep a received message for later acknowledgement (with its batch acker, for the official client)."""
        m = model.messages[label]
        acker = None
        if self.kind == "py" and m.size:
            acker = self.ackers.get(m.entry)
            if acker is None or m.index <= acker.last_index:
                acker = self.ackers[m.entry] = Acker(set(range(m.size)))
            acker.last_index = m.index
        self.in_hand[label] = (msg, acker)

    def close(self) -> None:
        self.consumer.close()


# -- the state machine --------------------------------------------------------------------------------------------


def traced(step: Callable[..., None]) -> Callable[..., None]:
    """Record a rule's call in the machine's trace; an exception it raises gets the steps so far as a note."""

    @functools.wraps(step)
    def run(machine: SubscriptionMachine, **kwargs: Any) -> None:
        if step.__name__ in WITHOUT:
            return
        args = ", ".join(f"{key}={value!r}" for key, value in kwargs.items())
        machine.trace.append(f"{step.__name__}({args})")
        try:
            step(machine, **kwargs)
        except Exception as exc:
            exc.add_note("steps: " + "; ".join(machine.trace))
            raise

    return run


class SubscriptionMachine(RuleBasedStateMachine):
    """Random operations on one subscription of a fresh topic, checked against :class:`Model`."""

    def __init__(self) -> None:
        super().__init__()
        self.target = target()
        self.target.examples += 1
        self.topic = f"persistent://public/default/model-{uuid.uuid4().hex[:16]}"
        self.subscription = "sub"
        self.model = Model()
        self.batch_index_ack = False
        self.session: Session | None = None
        self.txn: pulsar_txn.Transaction | None = None
        self.published = 0
        self.producers: dict[bool, Any] = {}
        #: What was acknowledged or held when the last drain ended: the broker must never send it again (unless a
        #: seek or an abort gives it back). Later acks may cross copies already on their way, as in Pulsar.
        self.settled: set[str] = set()
        #: Acknowledgements the official client may not have sent yet (it groups them for up to 100 ms).
        self.unflushed = False
        #: Whether the open transaction acknowledges cumulatively (decided by its first acknowledgement).
        self.txn_cumulative: bool | None = None
        #: The steps so far, for failure messages.
        self.trace: list[str] = []

    # -- sessions --

    def _open(self, kind: str) -> Session:
        if kind == "py":
            consumer = self.target.client.subscribe(
                self.topic,
                self.subscription,
                consumer_type=pulsar.ConsumerType.Exclusive,
                initial_position=pulsar.InitialPosition.Earliest,
                negative_ack_redelivery_delay_ms=NACK_DELAY_MS,
                batch_index_ack_enabled=self.batch_index_ack,
                # After a seek the C++ client drops what precedes the sought id, and the id itself unless inclusive.
                start_message_id_inclusive=True,
            )
        else:
            consumer = self.target.txn.subscribe(
                self.topic,
                self.subscription,
                consumer_type=pulsar_txn.ConsumerType.Exclusive,
                initial_position=pulsar_txn.InitialPosition.Earliest,
            )
        return Session(kind, consumer)

    def _drain(self, patience: float = PATIENCE, dups_ok: bool = False, fresh: bool = False) -> set[str]:
        """Receive until everything expected came and then nothing for QUIET; check the set (and each once).

        Acknowledgements a crash may have lost (``Model.uncertain``) may come back. A ``fresh`` consumer settles
        them: what it got is unacknowledged, what it did not get is. (The consumer that lived through the crash cannot:
        the C++ client drops redelivered messages up to its last cumulative ack without telling anyone.)
        """
        assert self.session is not None
        expected = self.model.expected()
        got: list[str] = []
        deadline = time.monotonic() + patience
        while True:
            missing = expected - set(got)
            wait = max(deadline - time.monotonic(), 0.01) if missing else QUIET
            item = self.session.receive(wait)
            if item is None:
                break
            label, msg = item
            assert label in self.model.messages, f"received {label!r}, which was never published"
            got.append(label)
            self.session.track(self.model, label, msg)
        seen = set(got)
        lost = expected - seen
        wrong = seen - expected - self.model.uncertain
        twice = sorted(label for label, n in Counter(got).items() if n > 1)
        assert not lost, f"not delivered again (lost or stranded): {self.model.describe(lost)}"
        assert not wrong, (
            f"delivered although acknowledged ({self.model.describe(wrong & self.model.acked)}) "
            f"or held by the open transaction ({self.model.describe(wrong & self.model.held)})"
        )
        if not dups_ok:
            assert not twice, f"delivered more than once in one drain: {self.model.describe(set(twice))}"
        if fresh:
            self.model.acked -= seen
            self.model.uncertain = set()
        self.settled = self.model.forbidden()
        return seen

    def _pick(self, pick: int, allowed: set[str] | None = None) -> tuple[str, Any, Acker | None] | None:
        """The ``pick``-th (modulo) message in hand that is neither acknowledged nor held, in position order."""
        assert self.session is not None
        candidates = [
            label
            for label in self.session.in_hand
            if label not in self.model.acked
            and label not in self.model.in_transaction
            and (allowed is None or label in allowed)
        ]
        if not candidates:
            return None
        candidates.sort(key=lambda label: self.model.messages[label].position)
        label = candidates[pick % len(candidates)]
        msg, acker = self.session.in_hand[label]
        return label, msg, acker

    # -- set-up --

    @initialize(batch_index_ack=st.booleans())
    @traced
    def initialize(self, batch_index_ack: bool) -> None:
        """Producers (batching and not) and a first official consumer, which creates the subscription."""
        self.batch_index_ack = batch_index_ack
        client = self.target.client
        self.producers[False] = client.create_producer(self.topic, batching_enabled=False)
        self.producers[True] = client.create_producer(
            self.topic, batching_enabled=True, batching_max_messages=1000, batching_max_publish_delay_ms=60_000
        )
        self.session = self._open("py")

    def teardown(self) -> None:
        # Best effort: a consumer the broker already dropped, a transaction the coordinator already ended.
        for closable in [self.session, *self.producers.values()]:
            if closable is not None:
                with contextlib.suppress(Exception):
                    closable.close()
        if self.txn is not None:
            with contextlib.suppress(Exception):
                self.txn.abort()

    # -- publishing --

    @precondition(lambda self: self.published < MAX_MESSAGES)
    @rule(count=st.integers(1, 5), batched=st.booleans())
    @traced
    def publish(self, count: int, batched: bool) -> None:
        """Publish ``count`` messages: one batch entry, or one entry each."""
        labels = [f"m{self.published + i}" for i in range(count)]
        self.published += count
        producer = self.producers[batched]
        ids: dict[str, Any] = {}
        if batched:
            done = threading.Semaphore(0)

            def sent(result: Any, mid: Any, label: str) -> None:
                assert result == pulsar.Result.Ok, result
                ids[label] = mid
                done.release()

            for label in labels:
                producer.send_async(label.encode(), lambda r, mid, label=label: sent(r, mid, label))
            producer.flush()
            for _ in labels:
                assert done.acquire(timeout=15), "no send receipt"
        else:
            for label in labels:
                ids[label] = producer.send(label.encode())
        for label in labels:
            mid = ids[label]
            entry = (mid.ledger_id(), mid.entry_id())
            size = count if batched and mid.batch_index() >= 0 else 0
            self.model.messages[label] = Msg(label, entry, max(mid.batch_index(), 0), size, mid)

    # -- receiving (either session) --

    @rule(count=st.integers(1, 8))
    @traced
    def receive(self, count: int) -> None:
        """Receive what is there; nothing acknowledged or held may arrive."""
        assert self.session is not None
        for _ in range(count):
            item = self.session.receive(0.05)
            if item is None:
                return
            label, msg = item
            assert label in self.model.messages, f"received {label!r}, which was never published"
            bad = self.settled & self.model.forbidden()
            assert label not in bad, f"{self.model.describe({label})} delivered although " + (
                "held by the open transaction" if label in self.model.held else "acknowledged"
            )
            self.session.track(self.model, label, msg)

    # -- the official client's acknowledgements --

    def _py(self) -> bool:
        return self.session is not None and self.session.kind == "py"

    @precondition(_py)
    @rule(pick=st.integers(0, 100))
    @traced
    def acknowledge(self, pick: int) -> None:
        chosen = self._pick(pick)
        if chosen is None:
            return
        label, msg, acker = chosen
        m = self.model.messages[label]
        self.session.consumer.acknowledge(msg)  # type: ignore[union-attr]
        self.unflushed = True
        if acker is None:
            self.model.ack({label})
            return
        acker.remaining.discard(m.index)
        if not acker.remaining:
            self.model.ack(self.model.entry_of(m))
        elif self.batch_index_ack:
            self.model.ack({label})

    @precondition(_py)
    @rule(pick=st.integers(0, 100))
    @traced
    def acknowledge_cumulative(self, pick: int) -> None:
        """Not while a transaction holds messages (what Pulsar then does is not modelled)."""
        chosen = self._pick(pick)
        if chosen is None or self.model.in_transaction:
            return
        label, msg, acker = chosen
        m = self.model.messages[label]
        self.session.consumer.acknowledge_cumulative(msg)  # type: ignore[union-attr]
        self.unflushed = True
        if acker is None:
            self.model.ack(self.model.up_to(m))
            return
        acker.remaining -= set(range(m.index + 1))
        if not acker.remaining:
            self.model.ack(self.model.before_entry(m) | self.model.entry_of(m))
        elif self.batch_index_ack:
            self.model.ack(self.model.up_to(m))
        elif not acker.previous_entry_acked:
            acker.previous_entry_acked = True
            self.model.ack(self.model.before_entry(m))

    @precondition(_py)
    @rule(pick=st.integers(0, 100))
    @traced
    def negative_acknowledge_and_drain(self, pick: int) -> None:
        """A negative ack: on an Exclusive subscription the client then asks for every unacknowledged message."""
        chosen = self._pick(pick)
        if chosen is None:
            return
        self._flush_acks()
        self.session.consumer.negative_acknowledge(chosen[1])  # type: ignore[union-attr]
        self._redelivered()

    @precondition(_py)
    @rule()
    @traced
    def redeliver_and_drain(self) -> None:
        self._flush_acks()
        self.session.consumer.redeliver_unacknowledged_messages()  # type: ignore[union-attr]
        self._redelivered()

    def _flush_acks(self) -> None:
        """Give the official client time to send grouped acknowledgements (a redelivery does not wait for them)."""
        if self.unflushed:
            time.sleep(0.3)
            self.unflushed = False

    def _redelivered(self) -> None:
        assert self.session is not None
        self.session.in_hand.clear()
        self.session.ackers.clear()
        # Copies already on their way when the client cleared its queue may arrive as well: at-least-once.
        self._drain(dups_ok=True)

    @precondition(_py)
    @rule(where=st.integers(-2, 100))
    @traced
    def seek_and_drain(self, where: int) -> None:
        """Seek to the earliest (-2), the latest (-1) or a message stored alone; the cursor is reset there.

        Not while a transaction holds messages (what Pulsar then does is not modelled).
        """
        if self.model.in_transaction:
            return
        self._flush_acks()
        alone = sorted((m for m in self.model.messages.values() if not m.size), key=lambda m: m.position)
        if where == -2 or (where >= 0 and not alone):
            self.session.consumer.seek(pulsar.MessageId.earliest)  # type: ignore[union-attr]
            self.model.acked = set()
        elif where == -1:
            self.session.consumer.seek(pulsar.MessageId.latest)  # type: ignore[union-attr]
            self.model.acked = set(self.model.messages)
        else:
            m = alone[where % len(alone)]
            self.session.consumer.seek(m.py_id)  # type: ignore[union-attr]
            self.model.acked = self.model.where(lambda x: x.position < m.position)
        self.model.uncertain = set()
        self._redelivered()

    # -- consumers come and go --

    @rule(kind=st.sampled_from(["py", "tx"]))
    @traced
    def reconnect_and_drain(self, kind: str) -> None:
        """Close the consumer, subscribe again (with either client) and receive until quiet."""
        assert self.session is not None
        self.session.close()
        self.session = self._open(kind)
        self._drain(fresh=True)

    # -- transactions (acks through the transaction client's consumer; commit/abort from either session) --

    def _tx(self) -> bool:
        return self.session is not None and self.session.kind == "tx"

    @precondition(_tx)
    @rule(pick=st.integers(0, 100))
    @traced
    def transactional_acknowledge(self, pick: int) -> None:
        self._transactional_acknowledge(pick, cumulative=False)

    @precondition(_tx)
    @rule(pick=st.integers(0, 100))
    @traced
    def transactional_acknowledge_cumulative(self, pick: int) -> None:
        self._transactional_acknowledge(pick, cumulative=True)

    def _transactional_acknowledge(self, pick: int, cumulative: bool) -> None:
        """Acknowledge in the open transaction (opened here if there is none).

        One transaction acknowledges either individually or cumulatively (the other kind is then left out): Pulsar
        4.2.4 strands an individually acknowledged message after an abort when the same transaction also acknowledged
        cumulatively.
        """
        if self.txn is None:
            self.txn = self.target.txn.new_transaction(timeout_ms=600_000)
        if self.txn_cumulative is None:
            self.txn_cumulative = cumulative
        chosen = self._pick(pick)
        if chosen is None or cumulative != self.txn_cumulative:
            return
        label, msg, _ = chosen
        consumer = self.session.consumer  # type: ignore[union-attr]
        (consumer.acknowledge_cumulative if cumulative else consumer.acknowledge)(msg, txn=self.txn)
        m = self.model.messages[label]
        if cumulative:
            self.model.pending |= self.model.up_to(m) - self.model.acked - self.model.held
        else:
            self.model.held.add(label)

    @precondition(lambda self: self.txn is not None)
    @rule()
    @traced
    def commit(self) -> None:
        assert self.txn is not None
        self.txn.commit()
        self.txn, self.txn_cumulative = None, None
        self.model.acked |= self.model.in_transaction
        self.model.committed |= self.model.in_transaction
        self.model.held, self.model.pending = set(), set()

    @precondition(lambda self: self.txn is not None)
    @rule()
    @traced
    def abort(self) -> None:
        """Abort: the held messages are released (delivered again at the latest after a redelivery/reconnect)."""
        assert self.txn is not None
        self.txn.abort()
        self.txn, self.txn_cumulative = None, None
        self.model.held, self.model.pending = set(), set()

    # -- the server dies --

    @precondition(lambda self: self.target.restartable)
    @rule()
    @traced
    def restart_and_drain(self) -> None:
        """SIGKILL the server with the consumer attached, start it again; the consumer gets its backlog back.

        Acknowledgements outside committed transactions may be lost in the crash (Pulsar persists the cursor lazily);
        the official client's grouped acks are given time to leave first.
        """
        assert self.session is not None
        self._flush_acks()
        self.target.restart()
        self.model.uncertain |= self.model.acked - self.model.committed
        # Both clients' consumers reconnect on their own; the transaction client's then gets every unacknowledged
        # message (it does not drop redelivered ones up to its last cumulative ack, as the C++ client does).
        fresh = self.session.kind == "tx"
        self.session.in_hand.clear()
        self.session.ackers.clear()
        self._drain(RESTART_PATIENCE, dups_ok=True, fresh=fresh)
