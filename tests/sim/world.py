"""Simulated time and network: one event queue drives the server's reactor, its engine clock and the clients.

Nothing here reads the wall clock. Events due at the same simulated time run in the order they were scheduled, so a
run is a function of its seed alone.
"""

from __future__ import annotations

import functools
import random
from collections import deque
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.python.failure import Failure

#: Wall-clock time (epoch seconds) at simulated time 0: what the engine records as publish and open times.
EPOCH = 1_800_000_000.0


class Call:
    """A scheduled call (Twisted's ``IDelayedCall`` as far as the server and ``LoopingCall`` use it)."""

    __slots__ = ("args", "called", "cancelled", "fn", "owner", "sched", "time")

    def __init__(
        self, sched: Scheduler, when: float, fn: Callable[..., object], args: tuple[Any, ...], owner: object = None
    ) -> None:
        self.sched = sched
        self.time = when
        self.fn = fn
        self.args = args
        self.cancelled = False
        self.called = False
        #: The server (its :class:`ServerReactor`) that scheduled it, if one did: its crash cancels it.
        self.owner = owner

    def getTime(self) -> float:  # noqa: N802 (Twisted's name)
        return self.time

    def cancel(self) -> None:
        self.cancelled = True

    def active(self) -> bool:
        return not (self.cancelled or self.called)

    def reset(self, seconds_from_now: float) -> None:
        self.sched.push(self, self.sched.now + seconds_from_now)

    def delay(self, seconds: float) -> None:
        self.reset(self.time - self.sched.now + seconds)


#: Events a scenario may run at most (today's run 2,000-6,000): past it, it stops with a "runaway" verdict.
EVENT_BUDGET = 20_000


class Scheduler:
    """Simulated monotonic time (seconds since the start of the run) and the queue of calls due.

    Calls due at the same time run in the order they were scheduled: the queue is a heap of the distinct times
    calls are due at, each with the calls due then in a FIFO (comparing floats costs less than comparing
    ``(time, order)`` tuples, and a call due at a time already queued needs no heap operation).

    It runs at most ``budget`` events: a scenario that loops (a server or client answering itself, a retry without
    a pause) stops there, deterministically, with ``runaway`` set, instead of taking the machine's CPU and memory.
    """

    def __init__(self, budget: int = EVENT_BUDGET) -> None:
        self.now = 0.0
        #: The distinct times something is due at (a heap), and what is due at each, in order: a :class:`Call`, or
        #: a delivery's ``(fn, args)`` (:meth:`schedule`).
        self._times: list[float] = []
        self._due: dict[float, deque[Any]] = {}
        self.events = 0
        self.budget = budget
        #: The simulated time at which the budget ran out (None: it did not).
        self.runaway: float | None = None

    def _add(self, when: float, item: Any) -> None:
        due = self._due.get(when)
        if due is None:
            self._due[when] = deque((item,))
            heappush(self._times, when)
        else:
            due.append(item)

    def call_at(self, when: float, fn: Callable[..., object], *args: Any) -> Call:
        now = self.now
        call = Call(self, when if when > now else now, fn, args)
        self._add(call.time, call)
        return call

    def schedule(self, when: float, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
        """:meth:`call_at` for the network's deliveries, which are never cancelled: no call is made or returned."""
        now = self.now
        self._add(when if when > now else now, (fn, args))

    def push(self, call: Call, when: float) -> None:
        """(Re)schedule ``call`` at ``when`` (where it was queued before no longer counts)."""
        call.time = max(when, self.now)
        self._add(call.time, call)

    def call_later(self, delay: float, fn: Callable[..., object], *args: Any) -> Call:
        when = self.now + delay if delay > 0.0 else self.now
        call = Call(self, when, fn, args)
        self._add(when, call)
        return call

    def run_until(self, until: float, stop: Callable[[], bool] | None = None) -> None:
        """Run every call due up to ``until`` (or until ``stop()`` is true), then move time to ``until``; nothing
        once the budget of events ran out."""
        if self.runaway is not None:
            return
        times = self._times
        due_at = self._due
        budget = self.budget
        # The count of events is kept in a local (nothing reads it while calls run), written back however this ends.
        events = self.events
        try:
            while times:
                when = times[0]
                if when > until:
                    break
                due = due_at[when]
                # What runs now may queue calls due now: they join this FIFO, after what is in it.
                while due:
                    item = due.popleft()
                    if type(item) is tuple:  # a delivery (never cancelled)
                        if events >= budget:
                            self.runaway = when
                            return
                        self.now = when
                        events += 1
                        item[0](*item[1])
                    else:
                        if item.cancelled or when != item.time:
                            continue
                        if events >= budget:
                            self.runaway = when
                            return
                        self.now = when
                        item.called = True
                        events += 1
                        item.fn(*item.args)
                    if stop is not None and stop():
                        return
                heappop(times)
                del due_at[when]
        finally:
            self.events = events
        if until > self.now:
            self.now = until

    def cancel_owned_by(self, owner: object) -> None:
        """Cancel every call ``owner`` scheduled that has not run."""
        for due in self._due.values():
            for item in due:
                if type(item) is not tuple and item.owner is owner:
                    item.cancelled = True

    def owned_by(self, owner: object) -> list[Call]:
        """The calls ``owner`` scheduled that have not run, in the order they would run."""
        return [
            item
            for when in sorted(self._due)
            for item in self._due[when]
            if type(item) is not tuple and item.owner is owner and item.active()
        ]


class ServerReactor:
    """What the server sees as its reactor (and, through :class:`SimClock`, its engine clock).

    Every call it schedules is marked as its own, so that a crash can drop them all: nothing of a crashed server runs
    again.
    """

    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched

    def seconds(self) -> float:
        return self.sched.now

    def callLater(self, delay: float, fn: Callable[..., object], *args: Any, **kwargs: Any) -> Call:  # noqa: N802
        sched = self.sched
        if kwargs:
            fn, args = functools.partial(fn, *args, **kwargs), ()
        # Scheduler.call_later, with the call marked as this reactor's.
        now = sched.now
        when = now + delay if delay > 0.0 else now
        call = Call(sched, when, fn, args, self)
        sched._add(when, call)
        return call

    def getDelayedCalls(self) -> list[Call]:  # noqa: N802
        return self.sched.owned_by(self)

    def crash(self) -> None:
        """Cancel everything the server scheduled."""
        self.sched.cancel_owned_by(self)


class SimClock:
    """The engine's :class:`engine.clock.Clock` on simulated time, scheduling through the server's reactor."""

    def __init__(self, reactor: ServerReactor) -> None:
        self._reactor = reactor

    def now(self) -> float:
        return EPOCH + self._reactor.sched.now

    def monotonic(self) -> float:
        return self._reactor.sched.now

    def call_later(self, delay: float, fn: Callable[[], object]) -> Call:
        return self._reactor.callLater(delay, fn)


class NetworkFaults:
    """Seeded network behaviour of every link: latency, jitter, short reads and stalls."""

    def __init__(self, rng: random.Random, latency: float, jitter: float, short_reads: float, stalls: float) -> None:
        self.rng = rng
        self._random = rng.random
        self._bits = rng.getrandbits
        self.latency = latency
        self.jitter = jitter
        self.short_reads = short_reads
        self.stalls = stalls
        self.enabled = True

    def carry(self, data: bytes, now: float) -> tuple[float, list[bytes]]:
        """When a write made at ``now`` arrives (before the link keeps its bytes in order) and the reads it arrives
        in (short reads: cut in 1-3 places)."""
        if not self.enabled:
            return now + self.latency, [data]
        random_ = self._random
        extra = random_() * self.jitter
        if self.stalls and random_() < self.stalls:
            extra += self.rng.uniform(0.5, 4.0)
        at = now + (self.latency + extra)
        size = len(data)
        if size < 2 or random_() >= self.short_reads:
            return at, [data]
        # rng.randint(1, 3) cuts at rng.randrange(1, size) each: the same draws from the same generator, without
        # the cost of those methods (a tenth of the simulator's own time).
        bits = self._bits
        count = _below(bits, 3) + 1
        cuts = sorted({_below(bits, size - 1) + 1 for _ in range(count)})
        return at, [data[a:b] for a, b in zip([0, *cuts], [*cuts, size], strict=True)]


def _below(bits: Callable[[int], int], n: int) -> int:
    """A number in [0, n) drawn as ``random.Random`` draws it for ``randrange`` and ``randint`` (``_randbelow``: the
    least number of bits that holds n - 1, drawn again until below n), so the same numbers come out."""
    k = n.bit_length()
    r = bits(k)
    while r >= n:
        r = bits(k)
    return r


class ClientEnd:
    """What a link delivers to on the client side."""

    def data_received(self, data: bytes, sent_at: float) -> None:
        """Bytes the server wrote at ``sent_at`` arrived."""

    def connection_lost(self, reason: str) -> None: ...


class Link:
    """One TCP connection between a simulated client and the server: two ordered byte streams with seeded delays and
    short reads, which either side (or a fault) may close or reset."""

    def __init__(self, world: Any, protocol: Any, client: ClientEnd, port: int) -> None:
        self.world = world
        self.sched: Scheduler = world.sched
        self.faults: NetworkFaults = world.net
        self.protocol = protocol
        self.client = client
        self.open = True
        self.server_reading = True
        self._held: list[bytes] = []
        self._to_server_at = 0.0
        self._to_client_at = 0.0
        self.transport = ServerTransport(self, port)
        protocol.makeConnection(self.transport)

    # -- client -> server --------------------------------------------------------------------

    def client_write(self, data: bytes) -> None:
        if not self.open:
            return
        sched = self.sched
        at, pieces = self.faults.carry(data, sched.now)
        if at < self._to_server_at:
            at = self._to_server_at
        self._to_server_at = at
        # The pieces of one write arrive at the same time, one read each: one event delivers them all (what they
        # schedule runs after the last, as it would after separate events queued together; ``at`` is never before
        # now).
        sched._add(at, (self._deliver_to_server, (pieces,)))

    def _deliver_to_server(self, pieces: list[bytes]) -> None:
        tracing = self.world.tracing
        protocol = self.protocol
        for data in pieces:
            if not self.open:
                return
            if not self.server_reading:
                self._held.append(data)
                continue
            if tracing:
                self.world.trace(b"S", data)
            protocol.dataReceived(data)

    def resume_server_reading(self) -> None:
        self.server_reading = True
        held, self._held = self._held, []
        self._deliver_to_server(held)

    # -- server -> client --------------------------------------------------------------------

    def server_write(self, data: bytes) -> None:
        if not self.open:
            return
        sched = self.sched
        now = sched.now
        at, pieces = self.faults.carry(data, now)
        if at < self._to_client_at:
            at = self._to_client_at
        self._to_client_at = at
        sched._add(at, (self._deliver_to_client, (pieces, now)))

    def _deliver_to_client(self, pieces: list[bytes], sent_at: float) -> None:
        tracing = self.world.tracing
        client = self.client
        for data in pieces:
            if not self.open:
                return
            if tracing:
                self.world.trace(b"C", data)
            client.data_received(data, sent_at)

    # -- closing -----------------------------------------------------------------------------

    def server_close(self) -> None:
        """The server closed: the client gets what was written first, then the FIN."""
        at = max(self.sched.now, self._to_client_at)
        self.sched.call_at(at, self.reset, "closed by the server", False)

    def client_close(self) -> None:
        at = max(self.sched.now, self._to_server_at)
        self.sched.call_at(at, self.reset, "closed by the client", False)

    def reset(self, reason: str = "reset", abort: bool = True) -> None:
        """Both ends learn that the connection is gone; nothing in flight arrives."""
        if not self.open:
            return
        self.open = False
        self.world.trace(b"X", reason.encode())
        failure = Failure(ConnectionLost(reason) if abort else ConnectionDone(reason))
        self.protocol.connectionLost(failure)
        self.client.connection_lost(reason)

    def vanish(self) -> None:
        """The server process died: the client sees a reset; the dead server's objects are not told."""
        if self.open:
            self.open = False
            self.world.trace(b"X", b"server crashed")
            self.client.connection_lost("server crashed")


class ServerTransport:
    """The server end of a :class:`Link`: the transport methods :class:`proxy.connection.PulsarConnection` calls."""

    def __init__(self, link: Link, port: int) -> None:
        self.link = link
        self._peer = IPv4Address("TCP", "10.0.0.2", port)
        self._host = IPv4Address("TCP", "10.0.0.1", 6650)
        self.disconnecting = False
        self.producer: Any = None

    def write(self, data: bytes) -> None:
        if not self.disconnecting:
            self.link.server_write(data)

    def writeSequence(self, seq: list[bytes]) -> None:  # noqa: N802
        self.write(b"".join(seq))

    def loseConnection(self) -> None:  # noqa: N802
        if not self.disconnecting:
            self.disconnecting = True
            self.link.server_close()

    def abortConnection(self) -> None:  # noqa: N802
        self.disconnecting = True
        self.link.reset("aborted by the server")

    def getPeer(self) -> IPv4Address:  # noqa: N802
        return self._peer

    def getHost(self) -> IPv4Address:  # noqa: N802
        return self._host

    def setTcpNoDelay(self, enabled: bool) -> None:  # noqa: N802
        pass

    def registerProducer(self, producer: Any, streaming: bool) -> None:  # noqa: N802
        self.producer = producer

    def unregisterProducer(self) -> None:  # noqa: N802
        self.producer = None

    def pauseProducing(self) -> None:  # noqa: N802
        self.link.server_reading = False

    def resumeProducing(self) -> None:  # noqa: N802
        self.link.resume_server_reading()
