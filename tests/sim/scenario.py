"""One seeded scenario: its options, the world it runs in, the workload's actors, the faults and the history.

A seed expands into :class:`Options` (printed with a failure); the options alone decide the run. The workload:
a producer of plain messages with deduplication (resending after reconnects), a producer of transactions over
several partitions (committed or aborted), consume-transform-produce workers that read the input topic and, in one
transaction each turn, write to the output topic and acknowledge their inputs, a plain consumer (individual or
cumulative acks, negative acks), and at the end an audit consumer that reads every partition from the start.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import random
import struct
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from tests.sim.client import Connection, Future, Message, failed, gather, sleep, spawn
from tests.sim.disk import SimDisk
from tests.sim.server import SLOW_COMMIT_SECONDS, SimServer, broker_config
from tests.sim.world import EPOCH, Link, NetworkFaults, Scheduler
from wire.commands import NO_ID
from wire.pulsar_api_pb2 import BaseCommand, CommandAck, CommandSubscribe

T = BaseCommand
IN = "persistent://public/default/sim-in"
OUT = "persistent://public/default/sim-out"
AUDIT = "audit"
#: Simulated seconds the run goes on after the faults stop: every transaction left open times out and every
#: worker drains what is left (liveness).
LIVENESS_SECONDS = 150.0
#: Simulated seconds between the end of the workload and the audit: transactions left open time out meanwhile.
SETTLE_SECONDS = 45.0
#: Simulated seconds the set-up (topics, audit subscriptions) may take at most, before any fault.
SETUP_SECONDS = 30.0
#: Seconds the audit consumer reads before the checks.
AUDIT_SECONDS = 15.0
Task = Generator[Future, Any, None]
#: What the trace hash takes before each piece of data: its tag, the simulated time, its length.
_TRACE_HEAD = struct.Struct(">cdI")
#: Plain messages a scenario sends at least.
MIN_MESSAGES = 50
#: Plain messages the source producer holds back until ``leave_at`` (when it is set).
HELD_MESSAGES = 12
#: Permits a consumer gives at first, and again (half of it) each time it received half of it.
FLOW_PERMITS = 1000


@dataclass
class Options:
    """Everything a run depends on; a seed chooses them."""

    seed: int
    partitions: int = 3
    coordinators: int = 2
    messages: int = 70
    txn_batches: int = 10
    workers: int = 2
    ctp_sub: str = "Shared"
    batch: int = 4
    abort_rate: float = 0.1
    stall_rate: float = 0.05
    ttl_ms: int = 20_000
    end_delay_ms: int = 0
    snapshot_changes: int = 1000
    cumulative: bool = False
    nack_rate: float = 0.05
    latency: float = 0.001
    jitter: float = 0.002
    short_reads: float = 0.1
    stalls: float = 0.0
    commit_delay: float = 0.002
    #: (time, mode): mode "now", "in-write" (the next write is cut short) or "after-write" (after the next write,
    #: before its callbacks).
    crashes: list[tuple[float, str]] = field(default_factory=list)
    #: (time, seconds) the disk is full.
    disk_full: list[tuple[float, float]] = field(default_factory=list)
    #: (time, actor) connections reset.
    resets: list[tuple[float, str]] = field(default_factory=list)
    #: When faults stop.
    heal: float = 120.0
    #: Seconds the disk is full from the moment both producers are done (0: never), when the consumers acknowledge
    #: the last messages: the last writes of their cursors fail.
    late_disk_full: float = 0.0
    #: Seconds (at most) the producer of transactions waits between registering a transaction's partitions and
    #: sending to them, until the faults stop (0: it does not): a slow client, whose transaction spans commits.
    think: float = 0.0
    #: Workers leaving with transactional acks in flight (0: not): the source producer's last :data:`HELD_MESSAGES`
    #: wait for this time (after the last crash); when a worker takes one of them the disk fills for ``leave_spell``
    #: seconds and is slow, and a worker that sends transactional acks meanwhile leaves (its connection reset) while
    #: their commit is in flight, to fail.
    leave_at: float = 0.0
    leave_spell: float = 0.0
    #: A crash (a mode of ``crashes``; "": none) as the first transaction that was open while the disk was full is
    #: ended with room on the disk again, before the faults stop: the server must have written again what the failed
    #: commits lost of the transaction's coordinator log records (or its partitions never learn its end).
    end_crash: str = ""
    #: The disk is full from the first pause of the producer of transactions (``think``) for this share of the pause
    #: (0: not): the commits that fail meanwhile lose the log records of its transaction, which sends once there is
    #: room again.
    think_spell: float = 0.0

    @classmethod
    def from_seed(cls, seed: int, later_faults: bool = True) -> Options:
        """The options ``seed`` chooses (``later_faults=False``: as it chose them before the later faults were added,
        see :meth:`with_later_faults`)."""
        rng = random.Random(seed)
        partitions = rng.randint(3, 5)
        heal = rng.uniform(60.0, 150.0)
        crashes = sorted(
            (round(rng.uniform(3.0, heal), 3), rng.choice(["now", "now", "in-write", "after-write"]))
            for _ in range(rng.choice([1, 1, 2, 3]))
        )
        disk_full = sorted(
            (round(rng.uniform(2.0, heal), 3), round(rng.uniform(0.5, 15.0), 3)) for _ in range(rng.choice([0, 1, 2]))
        )
        actors = ["src", "txsrc", "plain", "ctp0", "ctp1", "ctp2"]
        resets = sorted((round(rng.uniform(2.0, heal), 3), rng.choice(actors)) for _ in range(rng.randint(0, 4)))
        workers = rng.randint(1, 3)
        options = cls(
            seed=seed,
            partitions=partitions,
            coordinators=rng.randint(2, 4),
            messages=rng.randint(40, 70),
            txn_batches=rng.randint(5, 12),
            workers=workers,
            ctp_sub=rng.choice(["Shared", "Failover", "Key_Shared"] if workers > 1 else ["Shared", "Exclusive"]),
            batch=rng.randint(2, 6),
            abort_rate=rng.choice([0.0, 0.1, 0.3]),
            stall_rate=rng.choice([0.0, 0.05, 0.15]),
            ttl_ms=rng.choice([5_000, 10_000, 30_000]),
            end_delay_ms=rng.choice([0, 0, 50, 400]),
            snapshot_changes=rng.choice([2, 10, 1000]),
            cumulative=rng.random() < 0.5,
            nack_rate=rng.choice([0.0, 0.05, 0.2]),
            latency=rng.choice([0.0002, 0.001, 0.01]),
            jitter=rng.choice([0.0, 0.002, 0.02]),
            short_reads=rng.choice([0.0, 0.1, 0.5]),
            stalls=rng.choice([0.0, 0.0, 0.01]),
            commit_delay=rng.choice([0.0, 0.002, 0.05]),
            crashes=crashes,
            disk_full=disk_full,
            resets=resets,
            heal=round(heal, 3),
            late_disk_full=_late_disk_full(seed),
        )
        return options.with_later_faults().with_workers_leaving().with_end_crash() if later_faults else options

    def with_later_faults(self) -> Options:
        """Add the faults that came after the others, for some seeds: a spell of full disk as the first transactions
        open (their first transaction-buffer snapshots are lost with their commits), a crash in the seconds after the
        first spell ends, at once or after the next write (while what the failed commits lost is written again), and
        a slow producer of transactions (``think``). Drawn apart from the other options, so that adding them changed
        none of those."""
        rng = random.Random(self.seed * 31 + 11)
        disk_full, crashes = list(self.disk_full), list(self.crashes)
        if rng.random() < 0.25:
            disk_full = sorted([*disk_full, (round(rng.uniform(1.5, 4.0), 3), round(rng.uniform(1.0, 6.0), 3))])
        if disk_full and rng.random() < 0.4:
            when, seconds = disk_full[0]
            mode = rng.choice(["now", "after-write"])
            # After the first write once there is room (what it carries of the commits lost before it), or a while on.
            crash = round(when + seconds + (0.001 if mode == "after-write" else rng.uniform(0.05, 3.0)), 3)
            if crash < self.heal:
                crashes = sorted([*crashes, (crash, mode)])
        think = round(rng.uniform(0.2, 2.0), 3) if rng.random() < 0.35 else 0.0
        return self.replace(disk_full=disk_full, crashes=crashes, think=think)

    def with_workers_leaving(self) -> Options:
        """At least :data:`MIN_MESSAGES` plain messages (each is stored and transformed: at least twice as many
        messages stored), and for some seeds a spell of full disk while the workers are busy, during which workers
        leave with their transactional acks in flight (``leave_at``). Drawn apart from the other options."""
        rng = random.Random(self.seed * 31 + 13)
        messages = max(self.messages, MIN_MESSAGES)
        if rng.random() >= 0.35:
            return self.replace(messages=messages)
        # After the last crash (an armed one waits up to 5 s for its write), the restart and the reconnections: a
        # restart would give the entries back whatever the server does.
        last_crash = max((when for when, _ in self.crashes), default=0.0)
        leave_at = round(max(last_crash + 10.0, rng.uniform(10.0, 30.0)), 3)
        return self.replace(
            messages=messages,
            leave_at=leave_at,
            leave_spell=round(rng.uniform(0.5, 3.0), 3),
            heal=max(self.heal, round(leave_at + 20.0, 3)),
        )

    def with_end_crash(self) -> Options:
        """For some seeds, a crash as a transaction that was open while the disk was full ends (``end_crash``), and
        a spell of full disk as the slow producer of transactions first pauses (``think_spell``). Drawn apart from
        the other options."""
        rng = random.Random(self.seed * 31 + 17)
        end_crash = rng.choice(["now", "now", "in-write", "after-write"]) if rng.random() < 0.5 else ""
        think_spell = round(rng.uniform(0.3, 0.9), 3) if self.think and rng.random() < 0.4 else 0.0
        return self.replace(end_crash=end_crash, think_spell=think_spell)

    def describe(self) -> str:
        return " ".join(f"{f.name}={getattr(self, f.name)!r}".replace(" ", "") for f in dataclasses.fields(self))

    def replace(self, **changes: Any) -> Options:
        return dataclasses.replace(self, **changes)


def _late_disk_full(seed: int) -> float:
    """Drawn apart from the other options, so that adding it changed none of them."""
    rng = random.Random(seed * 31 + 7)
    return round(rng.uniform(1.0, 5.0), 3) if rng.random() < 0.3 else 0.0


# -- the history ---------------------------------------------------------------------------------


@dataclass
class SendRec:
    key: str
    topic: str
    producer: str
    seq: int
    txn: tuple[int, int] | None
    #: pending, ok (receipted), dup (receipted as a duplicate), failed
    state: str = "pending"


@dataclass
class TxnRec:
    txn: tuple[int, int]
    kind: str
    keys: list[str] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)
    #: open, committing, committed, aborting, aborted, failed (ended with an error: outcome unknown)
    state: str = "open"
    end_sent_at: float | None = None
    commit_sent_at: float | None = None
    committed_at: float | None = None
    opened_at: float = 0.0


@dataclass(slots=True)
class Delivery:
    time: float
    sub: str
    topic: str
    consumer: int
    incarnation: int
    message: Message


class History:
    def __init__(self) -> None:
        self.sends: dict[str, SendRec] = {}
        self.txns: dict[tuple[int, int], TxnRec] = {}
        self.deliveries: list[Delivery] = []
        #: plain acks answered: (time, topic, entry, cumulative, consumer, incarnation)
        self.plain_acks: list[tuple[float, str, int, bool, int, int]] = []
        #: when the server crashed; when the disk became full (True) or had room again (False)
        self.crashes: list[float] = []
        self.disk_changes: list[tuple[float, bool]] = []

    def had_time_to_store(self, when: float, seconds: float) -> bool:
        """Whether, after ``when`` and before the next crash, the server ran ``seconds`` in a row with room on its
        disk (a commit that failed for want of room is retried within that time)."""
        crash = min((t for t in self.crashes if t > when), default=float("inf"))
        full, free_since = False, when
        for at, state in self.disk_changes:
            if at <= when:
                full = state
                continue
            if at >= crash:
                break
            if not full and state and at - free_since >= seconds:
                return True
            if full and not state:
                free_since = at
            full = state
        return not full and crash - max(free_since, when) >= seconds

    def disk_was_full_since(self, when: float) -> bool:
        """Whether the disk was full at some moment from ``when`` on."""
        full = False
        for at, state in self.disk_changes:
            if at > when and state:
                return True
            if at <= when:
                full = state
        return full


# -- the world -----------------------------------------------------------------------------------


class World:
    """The simulated machine: scheduler, network, disk, the server and its restarts, faults, trace and history."""

    def __init__(self, options: Options, tracing: bool = True) -> None:
        self.options = options
        self.sched = Scheduler()
        #: Whether the trace is kept (links skip calling :meth:`trace` when not).
        self.tracing = tracing
        if not tracing:
            # Nothing asks for the trace hash (a campaign): its pieces are not kept (2.5% of a run's CPU).
            self.trace = _untraced  # type: ignore[method-assign]
        self.rng = random.Random(options.seed * 7919 + 1)
        self.net = NetworkFaults(
            random.Random(options.seed * 7919 + 2),
            options.latency,
            options.jitter,
            options.short_reads,
            options.stalls,
        )
        self.disk = SimDisk()
        self.config = broker_config(
            options.partitions, options.coordinators, options.end_delay_ms, options.snapshot_changes
        )
        self.server: SimServer | None = None
        self.incarnation = 0
        #: What the trace hash is of, piece by piece (hashed once at the end: the same hash, fewer calls).
        self._trace: list[bytes] = []
        self.failures: list[str] = []
        self.history = History()
        self.counters: Counter[str] = Counter()
        self._write_crash: str | None = None
        self._ports = 40000
        self.actors: dict[str, Connection | None] = {}
        self.healed = False
        #: The workload is over: actors finish what they are doing and stop.
        self.stopping = False
        self._producers_done = 0
        self.timed_out = 0
        #: The spell of ``leave_at``: the disk full and slow, workers leaving with their acks in flight.
        self.leaving = False
        self._left = False
        #: Whether the crash of ``end_crash`` came; whether the spell of ``think_spell`` did.
        self._end_crashed = False
        self._thought = False

    # -- basics --------------------------------------------------------------------------------

    def trace(self, tag: bytes, data: bytes) -> None:
        self._trace += (_TRACE_HEAD.pack(tag, self.sched.now, len(data)), data)

    def trace_hash(self) -> str:
        """The hash of the run's trace ("" when it was not traced)."""
        if self.trace is _untraced:
            return ""
        return hashlib.blake2b(b"".join(self._trace), digest_size=16).hexdigest()

    def wall_ms(self) -> int:
        return int((EPOCH + self.sched.now) * 1000)

    def fail(self, message: str) -> None:
        if message not in self.failures:
            self.failures.append(message)

    # -- the server ------------------------------------------------------------------------------

    def start_server(self) -> None:
        self.incarnation += 1
        self.trace(b"R", str(self.incarnation).encode())
        try:
            self.server = SimServer(self, self.disk, self.config, self.options.commit_delay)
        except Exception as exc:  # a start the disk cannot take: try again, as a supervisor would
            self.trace(b"E", repr(exc).encode())
            self.counters["failed start"] += 1
            self.disk.crash()
            self.server = None
            self.sched.call_later(1.0, self.start_server)

    def connect(self, client: Connection) -> Link | None:
        server = self.server
        if server is None:
            self.sched.call_later(self.options.latency, client.connection_lost, "connection refused")
            return None
        self._ports += 1
        link = Link(self, server.accept(), client, self._ports)
        server.links.append(link)
        return link

    def crash(self, reason: str, final: bool = False) -> None:
        """Kill the server; it restarts after a while (``final``: at once, and it is not counted as a fault)."""
        server = self.server
        if server is None:
            return
        self.trace(b"K", reason.encode())
        self.history.crashes.append(self.sched.now)
        if not final:
            self.counters["crash"] += 1
            if server.commits.in_flight:
                self.counters["crash with a commit in flight"] += 1
            if server.commits.written_not_done:
                self.counters["crash between a write and its callbacks"] += 1
        self.timed_out += sum(c.stats.timed_out for c in server.broker.coordinators.coordinators)
        self.server = None
        server.crash()
        if final:
            self.start_server()
        else:
            self.sched.call_later(self.rng.uniform(0.2, 3.0), self.start_server)

    def take_write_crash(self) -> str | None:
        mode, self._write_crash = self._write_crash, None
        return mode

    def _arm_crash(self, mode: str) -> None:
        if mode == "now":
            self.crash("crash")
            return
        self._write_crash = mode
        self.sched.call_later(5.0, self._crash_if_still_armed, mode)

    def _crash_if_still_armed(self, mode: str) -> None:
        if self._write_crash == mode:
            self._write_crash = None
            self.crash("crash (no write came)")

    def _disk_full(self, full: bool) -> None:
        self.trace(b"D", b"full" if full else b"free")
        self.disk.set_full(full)
        self.history.disk_changes.append((self.sched.now, full))

    def producer_done(self) -> None:
        """A producer sent all it had; once both did, the disk may fill up for a while (``late_disk_full``)."""
        self._producers_done += 1
        seconds = self.options.late_disk_full
        if self._producers_done == 2 and seconds and self.sched.now + seconds < self.options.heal:
            self._disk_full(True)
            self.sched.call_later(seconds, self._disk_full, False)

    def ending(self, rec: TxnRec) -> None:
        """An END_TXN is about to be sent for ``rec``: the crash of ``end_crash`` comes if it is the first transaction
        open while the disk was full to end with room on the disk."""
        mode = self.options.end_crash
        if not mode or self._end_crashed or self._left or self.healed or self.server is None or self.disk.full:
            return
        if self.history.disk_was_full_since(rec.opened_at):
            self._end_crashed = True
            self.counters["crash as a transaction open while the disk was full ends"] += 1
            self.sched.call_later(0.0, self._arm_crash, mode)

    def thinking(self, pause: float) -> None:
        """The producer of transactions pauses ``pause`` seconds with a transaction registered: the spell of
        ``think_spell`` begins, at its first pause with room on the disk."""
        share = self.options.think_spell
        if not share or self._thought or self.healed or self.disk.full:
            return
        self._thought = True
        self._disk_full(True)
        self.sched.call_later(pause * share, self._end_think_spell)

    def _end_think_spell(self) -> None:
        now = self.sched.now
        if not self.healed and not any(when <= now < when + s for when, s in self.options.disk_full):
            self._disk_full(False)

    def _reset(self, actor: str) -> None:
        conn = self.actors.get(actor)
        if conn is not None and conn.alive:
            self.counters["connection reset"] += 1
            conn.abort("reset by the network")

    def _heal(self) -> None:
        self.healed = True
        self._write_crash = None
        self.net.enabled = False
        if self.disk.full:
            self._disk_full(False)
        if not self.counters["crash"]:
            # Every crash of the options came while the server was down, or was armed and dropped by the heal: the
            # scenario has one crash all the same.
            self.crash("crash (none came before the faults stopped)")

    def start_leaving(self) -> None:
        """A worker took a held-back message (``leave_at``): the spell begins, once."""
        if self._left or self.healed:
            return
        self._left = self.leaving = True
        self._disk_full(True)
        self.sched.call_later(self.options.leave_spell, self._stop_leaving)

    def _stop_leaving(self) -> None:
        self.leaving = False
        if not self.healed:
            self._disk_full(False)

    def schedule_faults(self) -> None:
        o = self.options
        for when, mode in o.crashes:
            self.sched.call_at(when, self._arm_crash, mode)
        for when, seconds in o.disk_full:
            self.sched.call_at(when, self._disk_full, True)
            self.sched.call_at(min(when + seconds, o.heal), self._disk_full, False)
        for when, actor in o.resets:
            self.sched.call_at(when, self._reset, actor)
        self.sched.call_at(o.heal, self._heal)

    def backoff(self, rng: random.Random) -> Future:
        return sleep(self.sched, rng.uniform(0.1, 2.0))


def _untraced(tag: bytes, data: bytes) -> None:
    """:meth:`World.trace` of a world that keeps no trace."""


# -- actors --------------------------------------------------------------------------------------


@functools.cache
def partition(topic: str, index: int) -> str:
    """The name of a partition (one string object per name: its hash is computed once)."""
    return f"{topic}-partition-{index}"


def signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


class Actor:
    """A client that reconnects whenever its connection is lost."""

    #: Whether it runs once the workload stopped (the audit).
    after_stop = False

    def __init__(self, world: World, name: str) -> None:
        self.world = world
        self.name = name
        self.rng = random.Random(f"{world.options.seed}-{name}")
        self.conn: Connection | None = None
        self.done = False

    def start(self) -> None:
        spawn(self.world.sched, self.run())

    def connect(self) -> Generator[Future, Any, bool]:
        conn = Connection(self.world, self.name)
        self.conn = conn
        self.world.actors[self.name] = conn
        answer = yield conn.open()
        if failed(answer):
            conn.abort("connect failed")
            return False
        return True

    def run(self) -> Task:
        while not self.done:
            if self.world.stopping and not self.after_stop:
                self.done = True
                break
            ok = yield from self.connect()
            if ok:
                yield from self.session()
            if not self.done:
                yield self.world.backoff(self.rng)
        if self.conn is not None and self.conn.alive and not self.after_stop:
            self.conn.abort(f"{self.name} stops")

    def session(self) -> Task:
        raise NotImplementedError

    def lost(self) -> None:
        if self.conn is not None:
            self.conn.abort(f"{self.name} starts over")


class Setup(Actor):
    """Creates both partitioned topics and the audit subscription on each partition, before any fault."""

    #: Every audit subscription was created.
    subscribed = False

    def session(self) -> Task:
        assert self.conn is not None
        o = self.world.options
        for topic in (IN, OUT):
            answer = yield self.conn.request(T.PARTITIONED_METADATA, topic=topic)
            if failed(answer):
                return
        for topic in (IN, OUT):
            for index in range(o.partitions):
                answer = yield self.conn.request(
                    T.SUBSCRIBE,
                    topic=partition(topic, index),
                    subscription=AUDIT,
                    subType=CommandSubscribe.Exclusive,
                    consumer_id=index + (100 if topic == OUT else 0),
                    initialPosition=CommandSubscribe.Earliest,
                )
                if failed(answer):
                    return
        self.subscribed = True
        yield sleep(self.world.sched, 0.5)
        self.done = True
        self.conn.abort("setup done")


class Producers:
    """Producers of one actor on every partition of a topic, named ``<prefix>-<partition>``, with their next
    sequence ids (continuing from what the server stored for the name)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.next_seq: dict[int, int] = {}

    def open(self, conn: Connection, topic: str, partitions: int) -> Generator[Future, Any, bool]:
        answers = yield gather(
            [
                conn.request(T.PRODUCER, topic=partition(topic, i), producer_id=i, producer_name=f"{self.prefix}-{i}")
                for i in range(partitions)
            ]
        )
        for index, answer in enumerate(answers):
            if failed(answer):
                return False
            last = signed(answer.producer_success.last_sequence_id)
            self.next_seq[index] = max(self.next_seq.get(index, 0), last + 1)
        return True

    def take(self, index: int) -> int:
        seq = self.next_seq[index]
        self.next_seq[index] = seq + 1
        return seq


class SourceProducer(Actor):
    """Plain messages with deduplication; on any failure it reconnects and resends what was not receipted."""

    def __init__(self, world: World) -> None:
        super().__init__(world, "src")
        self.pending: list[SendRec] = []
        self.made = 0
        self.producers = Producers("src")

    def session(self) -> Task:
        conn = self.conn
        assert conn is not None
        o = self.world.options
        ok = yield from self.producers.open(conn, IN, o.partitions)
        if not ok:
            self.lost()
            return
        history = self.world.history
        while conn.alive:
            if not self.pending and self.made >= o.messages:
                self.done = True
                self.world.producer_done()
                conn.abort("src done")
                return
            if o.leave_at and self._holding() and not self.pending:
                yield sleep(self.world.sched, o.leave_at - self.world.sched.now)
                continue
            while len(self.pending) < self.rng.randint(1, 8) and self.made < o.messages and not self._holding():
                index = self.made % o.partitions
                key = f"s{self.made}"
                rec = SendRec(key, partition(IN, index), f"src-{index}", self.producers.take(index), None)
                history.sends[key] = rec
                self.pending.append(rec)
                self.made += 1
            futures = [conn.publish(int(r.producer[4:]), r.producer, r.seq, r.key, None) for r in self.pending]
            answers = yield gather(futures)
            for rec, answer in zip(list(self.pending), answers, strict=True):
                if failed(answer):
                    continue
                ledger = answer.send_receipt.message_id.ledgerId
                rec.state = "dup" if ledger == NO_ID else "ok"
                if rec.state == "dup":
                    self.world.counters["deduplicated resend"] += 1
                self.pending.remove(rec)
            if self.pending:
                # As the official clients: a failed send closes the connection; every pending message is resent.
                self.lost()
                return
            yield sleep(self.world.sched, self.rng.uniform(0.0, 0.5))

    def _holding(self) -> bool:
        """Whether the next message is one of those held back until ``leave_at``."""
        o = self.world.options
        return bool(o.leave_at) and self.made >= o.messages - HELD_MESSAGES and self.world.sched.now < o.leave_at


class TxnClient:
    """What transactional actors share: TC_CLIENT_CONNECT, opening, registering and ending transactions."""

    def __init__(self, world: World, kind: str, rng: random.Random) -> None:
        self.world = world
        self.kind = kind
        self.rng = rng

    def connect_coordinators(self, conn: Connection) -> Generator[Future, Any, bool]:
        answers = yield gather(
            [conn.request(T.TC_CLIENT_CONNECT_REQUEST, tc_id=i) for i in range(self.world.options.coordinators)]
        )
        return not any(failed(a) for a in answers)

    def open(self, conn: Connection) -> Generator[Future, Any, TxnRec | None]:
        o = self.world.options
        opened_at = self.world.sched.now
        answer = yield conn.request(T.NEW_TXN, tc_id=self.rng.randrange(o.coordinators), txn_ttl_millis=o.ttl_ms)
        if failed(answer):
            return None
        txn = (answer.newTxnResponse.txnid_most_bits, answer.newTxnResponse.txnid_least_bits)
        if txn in self.world.history.txns:
            self.world.fail(f"transaction id {txn} was handed out twice")
        rec = TxnRec(txn, self.kind, opened_at=opened_at)
        self.world.history.txns[txn] = rec
        return rec

    def end(self, conn: Connection, rec: TxnRec, commit: bool) -> Generator[Future, Any, bool]:
        world = self.world
        rec.end_sent_at = world.sched.now
        if commit:
            rec.commit_sent_at = world.sched.now
        rec.state = "committing" if commit else "aborting"
        if world.disk.full:
            world.counters["END_TXN while the disk is full"] += 1
        world.ending(rec)
        answer = yield conn.request(
            T.END_TXN, txnid_most_bits=rec.txn[0], txnid_least_bits=rec.txn[1], txn_action=0 if commit else 1
        )
        if failed(answer):
            rec.state = "failed"
            return False
        rec.state = "committed" if commit else "aborted"
        if commit:
            rec.committed_at = world.sched.now
        return True

    def abandon(self, conn: Connection, rec: TxnRec) -> Generator[Future, Any, None]:
        """Abort a transaction that went wrong, if the connection still works (else it times out)."""
        if conn.alive and rec.state == "open":
            yield from self.end(conn, rec, commit=False)


class TxnProducer(Actor):
    """Transactions of 1-3 messages on distinct input partitions, committed or aborted."""

    def __init__(self, world: World) -> None:
        super().__init__(world, "txsrc")
        self.producers = Producers("txsrc")
        self.txns = TxnClient(world, "txsrc", self.rng)
        self.think_rng = random.Random(f"{world.options.seed}-txsrc-think")
        self.made = 0
        self.batches = 0

    def session(self) -> Task:
        conn = self.conn
        assert conn is not None
        o = self.world.options
        ok = yield from self.txns.connect_coordinators(conn)
        ok = ok and (yield from self.producers.open(conn, IN, o.partitions))
        if not ok:
            self.lost()
            return
        while conn.alive:
            if self.batches >= o.txn_batches:
                self.done = True
                self.world.producer_done()
                conn.abort("txsrc done")
                return
            self.batches += 1
            rec = yield from self.txns.open(conn)
            if rec is None:
                self.lost()
                return
            chosen = self.rng.sample(range(o.partitions), self.rng.randint(1, min(3, o.partitions)))
            answer = yield conn.request(
                T.ADD_PARTITION_TO_TXN,
                txnid_most_bits=rec.txn[0],
                txnid_least_bits=rec.txn[1],
                partitions=[partition(IN, i) for i in chosen],
            )
            if o.think and not self.world.healed:
                pause = self.think_rng.uniform(0.0, o.think)
                self.world.thinking(pause)
                yield sleep(self.world.sched, pause)
            futures = []
            for index in chosen:
                key = f"x{self.made}"
                self.made += 1
                send = SendRec(key, partition(IN, index), f"txsrc-{index}", self.producers.take(index), rec.txn)
                self.world.history.sends[key] = send
                rec.keys.append(key)
                futures.append(conn.publish(index, send.producer, send.seq, key, rec.txn))
            answers = yield gather(futures)
            for key, receipt in zip(rec.keys, answers, strict=True):
                self.world.history.sends[key].state = "failed" if failed(receipt) else "ok"
            if failed(answer) or any(failed(a) for a in answers):
                yield from self.txns.abandon(conn, rec)
                self.lost()
                return
            yield sleep(self.world.sched, self.rng.uniform(0.0, 1.0))
            yield from self.txns.end(conn, rec, commit=self.rng.random() >= o.abort_rate)


class Subscriber(Actor):
    """An actor with a consumer on every input partition (consumer id = partition index)."""

    sub = ""
    sub_type = CommandSubscribe.Exclusive

    def __init__(self, world: World, name: str) -> None:
        super().__init__(world, name)
        self.consumer_serial = 0
        self.inbox: list[tuple[int, Message]] = []
        #: The inbox list ``_waiting`` indexes, and the (partition, entry) of each message in it.
        self._indexed: list[tuple[int, Message]] = self.inbox
        self._waiting: set[tuple[int, int]] = set()
        #: Messages each consumer (by partition) received since it subscribed.
        self.received: dict[int, int] = {}
        self._waiter: Future | None = None

    def wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.resolve(None)

    def wait(self, conn: Connection) -> Future:
        """A future resolved when a message arrives or the connection is lost."""
        waiter = Future()
        self._waiter = waiter
        conn.closed.then(waiter.resolve)
        return waiter

    def subscribe(self, conn: Connection, topic: str, permits: int = FLOW_PERMITS) -> Generator[Future, Any, bool]:
        o = self.world.options
        self.consumer_serial += 1
        serial = self.consumer_serial
        self.received = {}
        for index in range(o.partitions):
            conn.consumers[index] = functools.partial(
                self._got, index, partition(topic, index), hash((self.name, serial))
            )
        answers = yield gather(
            [
                conn.request(
                    T.SUBSCRIBE,
                    topic=partition(topic, i),
                    subscription=self.sub,
                    subType=self.sub_type,
                    consumer_id=i,
                    consumer_name=f"{self.name}-{serial}",
                    initialPosition=CommandSubscribe.Earliest,
                )
                for i in range(o.partitions)
            ]
        )
        if any(failed(a) for a in answers):
            return False
        for index in range(o.partitions):
            conn.send_flow(index, permits)
        return True

    def _got(self, index: int, topic: str, consumer: int, message: Message) -> None:
        """A message of partition ``index`` (named ``topic``) reached the consumer (``consumer``: its name's hash)."""
        world = self.world
        world.history.deliveries.append(
            Delivery(world.sched.now, self.sub, topic, consumer, world.incarnation, message)
        )
        received = self.received.get(index, 0) + 1
        self.received[index] = received
        if received % (FLOW_PERMITS // 2) == 0 and self.conn is not None:
            self.conn.send_flow(index, FLOW_PERMITS // 2)
        inbox = self.inbox
        if inbox is not self._indexed:
            # The actor took messages out (it replaces the list when it does): index what is left.
            self._indexed, self._waiting = inbox, {(i, m.entry) for i, m in inbox}
        mark = (index, message.entry)
        if mark in self._waiting:
            # Delivered again while still waiting here: the clients drop such duplicates (and, as they do, count
            # the permit it took as free again).
            return
        self._waiting.add(mark)
        inbox.append((index, message))
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.resolve(None)

    topic = IN


class PlainConsumer(Subscriber):
    """Acknowledges without transactions (individually or cumulatively, asking for a response), nacks some."""

    sub = "plain"

    def __init__(self, world: World) -> None:
        super().__init__(world, "plain")
        self.sub_type = CommandSubscribe.Failover if world.options.cumulative else CommandSubscribe.Exclusive

    def session(self) -> Task:
        conn = self.conn
        assert conn is not None
        self.inbox = []
        ok = yield from self.subscribe(conn, IN)
        if not ok:
            self.lost()
            return
        o = self.world.options
        while conn.alive and not self.world.stopping:
            if not self.inbox:
                yield self.wait(conn)
                continue
            index = self.inbox[0][0]
            taken = [m for i, m in self.inbox if i == index]
            self.inbox = [(i, m) for i, m in self.inbox if i != index]
            if self.rng.random() < o.nack_rate:
                conn.send_redeliver(index)
                continue
            if o.cumulative:
                taken = [max(taken, key=lambda m: m.entry)]
            answer = yield conn.request(
                T.ACK,
                consumer_id=index,
                ack_type=CommandAck.Cumulative if o.cumulative else CommandAck.Individual,
                message_id=[{"ledgerId": m.ledger, "entryId": m.entry} for m in taken],
            )
            if not failed(answer):
                consumer = hash((self.name, self.consumer_serial))
                for message in taken:
                    self.world.history.plain_acks.append(
                        (
                            self.world.sched.now,
                            partition(IN, index),
                            message.entry,
                            o.cumulative,
                            consumer,
                            self.world.incarnation,
                        )
                    )


class TransformWorker(Subscriber):
    """Consume-transform-produce: in one transaction, send ``o:<key>`` for a few inputs and acknowledge them."""

    sub = "ctp"

    def __init__(self, world: World, number: int) -> None:
        super().__init__(world, f"ctp{number}")
        self.sub_type = getattr(CommandSubscribe, world.options.ctp_sub)
        self.producers = Producers(f"ctp{number}")
        self.txns = TxnClient(world, "ctp", self.rng)
        self.leave_rng = random.Random(f"{world.options.seed}-{self.name}-leave")

    def session(self) -> Task:
        conn = self.conn
        assert conn is not None
        o = self.world.options
        self.inbox = []
        ok = yield from self.txns.connect_coordinators(conn)
        ok = ok and (yield from self.producers.open(conn, OUT, o.partitions))
        ok = ok and (yield from self.subscribe(conn, IN))
        if not ok:
            self.lost()
            return
        while conn.alive and not self.world.stopping:
            if not self.inbox:
                yield self.wait(conn)
                yield sleep(self.world.sched, self.rng.uniform(0.0, 0.2))
                continue
            taken, self.inbox = self.inbox[: o.batch], self.inbox[o.batch :]
            rec = yield from self.txns.open(conn)
            if rec is None:
                self.lost()
                return
            outs = sorted({hash_partition(m.key, o.partitions) for _, m in taken})
            ins = sorted({i for i, _ in taken})
            answers = yield gather(
                [
                    conn.request(
                        T.ADD_PARTITION_TO_TXN,
                        txnid_most_bits=rec.txn[0],
                        txnid_least_bits=rec.txn[1],
                        partitions=[partition(OUT, i) for i in outs],
                    ),
                    conn.request(
                        T.ADD_SUBSCRIPTION_TO_TXN,
                        txnid_most_bits=rec.txn[0],
                        txnid_least_bits=rec.txn[1],
                        subscription=[{"topic": partition(IN, i), "subscription": self.sub} for i in ins],
                    ),
                ]
            )
            if o.leave_at and self.world.sched.now >= o.leave_at:
                # The transaction is open and registered (the disk had room): now the disk fills.
                self.world.start_leaving()
            futures = []
            for _, message in taken:
                out = hash_partition(message.key, o.partitions)
                key = f"o:{message.key}"
                rec.keys.append(key)
                rec.acked.append(message.key)
                name = f"{self.producers.prefix}-{out}"
                send = SendRec(key, partition(OUT, out), name, self.producers.take(out), rec.txn)
                self.world.history.sends[f"{key}@{rec.txn}"] = send
                futures.append(conn.publish(out, name, send.seq, key, rec.txn))
            for index in ins:
                futures.append(
                    conn.request(
                        T.ACK,
                        consumer_id=index,
                        ack_type=CommandAck.Individual,
                        message_id=[{"ledgerId": m.ledger, "entryId": m.entry} for i, m in taken if i == index],
                        txnid_most_bits=rec.txn[0],
                        txnid_least_bits=rec.txn[1],
                    )
                )
            if o.leave_at and self.world.leaving:
                # Leave once the acks arrived (the network delays a write by latency + jitter at most, but for a
                # stall), while their commit is in flight on the slow disk (and fails: the disk is full).
                delay = o.latency + o.jitter + self.leave_rng.uniform(0.0005, SLOW_COMMIT_SECONDS)
                self.world.sched.call_later(delay, self._leave, conn)
            answers += yield gather(futures)
            if any(failed(a) for a in answers):
                yield from self.txns.abandon(conn, rec)
                if not conn.alive:
                    return
                self.give_back(conn, taken)
                continue
            if self.rng.random() < o.stall_rate and not self.world.healed:
                # A worker that stalls past its transaction's timeout (a fault: none after the faults stop).
                yield sleep(self.world.sched, o.ttl_ms / 1000 + self.rng.uniform(0.5, 5.0))
                if not conn.alive:
                    return
            commit = self.rng.random() >= o.abort_rate
            ok = yield from self.txns.end(conn, rec, commit)
            if not (ok and commit) and conn.alive:
                self.give_back(conn, taken)

    def _leave(self, conn: Connection) -> None:
        if conn.alive:
            self.world.counters["worker left with transactional acks in flight"] += 1
            conn.abort("the worker leaves")

    def give_back(self, conn: Connection, taken: list[tuple[int, Message]]) -> None:
        """Negatively acknowledge inputs whose transaction did not commit (as the clients do when one aborts): they
        come back once no transaction holds them.

        A copy of one of them may be waiting in the inbox already (the server delivered it again when the
        transaction aborted or timed out): the nack hands that copy back too, so it is dropped (the Java client drops
        the messages it asks to be redelivered from the head of its receiver queue). Kept, it would be a second live
        copy, and two workers holding the same inputs make each other's acks conflict, abort and nack again, forever.
        """
        for index in sorted({i for i, _ in taken}):
            conn.send_redeliver(index, [(m.ledger, m.entry) for i, m in taken if i == index])
        given = {(i, m.entry) for i, m in taken}
        if any((i, m.entry) in given for i, m in self.inbox):
            self.inbox = [(i, m) for i, m in self.inbox if (i, m.entry) not in given]


def hash_partition(key: str, partitions: int) -> int:
    return sum(key.encode()) % partitions


class Auditor(Subscriber):
    """At the end: reads every partition of both topics from the start through the audit subscription."""

    sub = AUDIT
    after_stop = True

    def __init__(self, world: World, topic: str) -> None:
        super().__init__(world, f"audit-{topic[-3:]}")
        self.topic = topic

    def session(self) -> Task:
        conn = self.conn
        assert conn is not None
        ok = yield from self.subscribe(conn, self.topic, permits=100_000)
        if not ok:
            self.lost()
            return
        self.done = True


class Leftover(Subscriber):
    """After the final restart: a new consumer of a workload's subscription, that only records what it gets (what
    was acknowledged must not come back)."""

    after_stop = True

    def __init__(self, world: World, sub: str, sub_type: int) -> None:
        super().__init__(world, f"leftover-{sub}")
        self.sub = sub
        self.sub_type = sub_type

    def session(self) -> Task:
        conn = self.conn
        assert conn is not None
        ok = yield from self.subscribe(conn, IN)
        if not ok:
            self.lost()
            return
        self.done = True


# -- running -------------------------------------------------------------------------------------


class Scenario:
    """A run of one set of options: workload, faults, liveness window, audit, checks."""

    def __init__(self, options: Options, log: bool = False, trace: bool = True) -> None:
        self.options = options
        self.world = World(options, trace)
        if not log:
            logging.disable(logging.CRITICAL)

    def run(self) -> World:
        world = self.world
        try:
            self._run()
        except _RunawayError:
            sched = world.sched
            world.fail(
                f"runaway: {sched.events:,} events (the budget) by simulated second {sched.runaway:.3f}, and the "
                "scenario had not finished: something loops (liveness)"
            )
        return world

    def _run_until(self, until: float) -> None:
        sched = self.world.sched
        sched.run_until(until)
        if sched.runaway is not None:
            raise _RunawayError

    def _run(self) -> None:
        world = self.world
        o = self.options
        world.start_server()
        setup = Setup(world, "setup")
        setup.start()
        # The workload starts at 2 s, or once the audit subscriptions exist if that takes longer (the network may
        # stall a request): messages sent before a partition has a subscription are not kept.
        world.sched.run_until(SETUP_SECONDS, stop=lambda: setup.subscribed)
        self._run_until(2.0)
        actors: list[Actor] = [SourceProducer(world), TxnProducer(world), PlainConsumer(world)]
        actors += [TransformWorker(world, n) for n in range(o.workers)]
        for actor in actors:
            actor.start()
        world.schedule_faults()
        self._run_until(o.heal + LIVENESS_SECONDS)
        world.stopping = True
        for actor in actors:
            if isinstance(actor, Subscriber):
                actor.wake()
        self._run_until(world.sched.now + SETTLE_SECONDS)
        # A last crash: the audit reads what the disk kept, and acknowledged messages must not come back.
        world.crash("final crash", final=True)
        self._run_until(world.sched.now + 1.0)
        auditors = [Auditor(world, IN), Auditor(world, OUT)]
        leftovers = [Leftover(world, "plain", actors[2].sub_type), Leftover(world, "ctp", actors[-1].sub_type)]
        for auditor in [*auditors, *leftovers]:
            auditor.start()
        self._run_until(world.sched.now + AUDIT_SECONDS)
        if world.server is not None:
            world.timed_out += sum(c.stats.timed_out for c in world.server.broker.coordinators.coordinators)
        if world.timed_out:
            world.counters["transaction timed out"] += world.timed_out
        from tests.sim.checks import check

        check(world, {a.topic: a.inbox for a in auditors}, actors)


class _RunawayError(Exception):
    """The scenario used up its budget of events (:data:`tests.sim.world.EVENT_BUDGET`)."""
