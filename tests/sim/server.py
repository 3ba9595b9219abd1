"""The real server (connection handling, broker, coordinators, store) assembled on simulated time and disk.

It is built from the same constructors ``proxy/run.py`` calls, with the simulated reactor, engine clock, commit
runner and store in place of the real ones. A crash drops every object of the server and every call it scheduled;
the next server is built from what the disk kept.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.broker import Broker, BrokerConfig
from engine.policy_enforcer import PolicyEnforcer
from engine.txn_buffer import SnapshotPolicy
from proxy.connection import ConnectionTimeouts
from proxy.server import BrokerService, PulsarFactory
from tests.sim.disk import SimDisk, SimStore
from tests.sim.world import EPOCH, ServerReactor, SimClock

if TYPE_CHECKING:
    from tests.sim.world import Link

#: Seconds (at most) a commit waits to be written, and then to complete, while the disk is slow (``World.leaving``).
SLOW_COMMIT_SECONDS = 0.05
#: Seconds between checks of namespace policies (as ``policy-check-interval-seconds``' default).
POLICY_CHECK_SECONDS = 60.0


class SimCommits:
    """A :class:`engine.broker.CommitRunner` on simulated time: the write runs a seeded while after the commit
    was asked for (a slow disk), its completion a while after the write; a crash may come in between, or cut the
    write itself short."""

    def __init__(self, server: SimServer, rng: random.Random, delay: float) -> None:
        self.server = server
        self.rng = rng
        self.delay = delay
        self.in_flight = 0
        self.written_not_done = 0
        self.after_completions: Callable[[], None] = lambda: None

    def run(self, work: Callable[[], None], done: Callable[[BaseException | None], None], small: bool) -> None:
        self.in_flight += 1
        delay = SLOW_COMMIT_SECONDS if self.server.world.leaving else self.delay
        self.server.reactor.callLater(self.rng.random() * delay, self._write, work, done)

    def _write(self, work: Callable[[], None], done: Callable[[BaseException | None], None]) -> None:
        server = self.server
        crash = server.world.take_write_crash()
        error: BaseException | None = None
        if crash == "in-write":
            server.disk.interrupt_next_write(self.rng.randint(1, 400))
        try:
            work()
        except Exception as exc:
            error = exc
        finally:
            server.disk.clear_interrupt()
        if crash == "in-write":
            server.world.crash("crash inside a write")
            return
        self.written_not_done += 1
        if crash == "after-write":
            server.world.crash("crash between a commit's write and its callbacks")
            return
        delay = SLOW_COMMIT_SECONDS if server.world.leaving else self.delay
        server.reactor.callLater(self.rng.random() * delay, self._done, done, error)

    def _done(self, done: Callable[[BaseException | None], None], error: BaseException | None) -> None:
        self.in_flight -= 1
        self.written_not_done -= 1
        done(error)
        self.after_completions()

    def drain(self) -> None:
        pass


class SimServer:
    """One life of the server, between a start and a crash."""

    def __init__(self, world: Any, disk: SimDisk, config: BrokerConfig, commit_delay: float) -> None:
        self.world = world
        self.disk = disk
        self.reactor = ServerReactor(world.sched)
        self.store = SimStore(disk)
        self.commits = SimCommits(self, random.Random(world.rng.random()), commit_delay)
        self.broker = Broker(self.store, SimClock(self.reactor), config, self.commits)
        self.service = BrokerService(self.broker, self.reactor, "10.0.0.1", 6650, ConnectionTimeouts())
        self.service.clock = lambda: EPOCH + world.sched.now
        self.commits.after_completions = self.service.flush_written
        self.factory = PulsarFactory(self.service)
        self.policies = PolicyEnforcer(self.broker, POLICY_CHECK_SECONDS)
        self.policies.start()
        self.links: list[Link] = []

    def accept(self) -> Any:
        """A new connection's protocol, as the listening port builds it."""
        return self.factory.buildProtocol(None)

    def crash(self) -> None:
        """Die at once: no call of this server runs again, its clients see resets, the disk keeps what it kept."""
        self.reactor.crash()
        for link in self.links:
            link.vanish()
        self.links = []
        self.disk.crash()


def broker_config(partitions: int, coordinators: int, end_delay_ms: int, snapshot_changes: int) -> BrokerConfig:
    """The broker settings of a scenario: deduplication on, partitioned topics created on first use."""
    return BrokerConfig(
        default_partitions=partitions,
        deduplication=True,
        transaction_coordinators=coordinators,
        snapshot_policy=SnapshotPolicy(snapshot_changes, 5.0),
        txn_end_delay_ms=end_delay_ms,
    )
