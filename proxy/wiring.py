"""One wiring of the server: the engine and the Pulsar protocol service, built from what the caller hands in.

:func:`build_server` takes the four things that differ between production and a test or a simulation: the reactor
(Twisted's, or ``MemoryReactorClock``), the store (the SQLite :class:`engine.store.Store`, or anything that
satisfies :class:`engine.storage.Storage`), the clock (``SystemClock`` on the reactor, or ``ManualClock``) and the
commit runner (``ThreadedCommits``, or ``InlineCommits``). It listens on nothing: the caller connects the returned
``factory`` to its ports (``proxy/run.py``) or to in-memory transports (a test).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.broker import Broker, BrokerConfig, CommitRunner
from engine.ledgers import LedgerRollover
from engine.policy_enforcer import PolicyEnforcer
from engine.txn_buffer import SnapshotPolicy
from proxy.commits import ThreadedCommits
from proxy.config import Settings, super_user_roles
from proxy.connection import ConnectionTimeouts
from proxy.listeners import Listeners
from proxy.server import BrokerService, PulsarFactory

if TYPE_CHECKING:
    from engine.clock import Clock
    from engine.storage import Storage
    from proxy.authentication import Authenticator

log = logging.getLogger("pulsar_txn_proxy")


@dataclass
class Server:
    """A wired server: the engine, the protocol service behind every connection and the factory of connections."""

    broker: Broker
    service: BrokerService
    factory: PulsarFactory
    policies: PolicyEnforcer

    def close(self) -> None:
        """Stop the policy checks, drop every connection and close the engine (the caller stops its ports first)."""
        self.policies.stop()
        for connection in list(self.service.connections):
            connection.transport.loseConnection()
        self.broker.close()


def broker_config(settings: Settings) -> BrokerConfig:
    """The engine's settings, from the server's."""
    return BrokerConfig(
        default_partitions=settings.default_partitions,
        deduplication=settings.deduplication,
        transaction_coordinators=settings.transaction_coordinators,
        snapshot_policy=SnapshotPolicy(settings.txn_snapshot_max_changes, settings.txn_snapshot_interval_seconds),
        txn_end_delay_ms=settings.txn_end_delay_ms,
        entry_cache_bytes=settings.managed_ledger_cache_size_mb * 1024 * 1024,
        max_message_size=settings.max_message_size,
        authorization_enabled=settings.authorization_enabled,
        super_user_roles=super_user_roles(settings),
        active_consumer_failover_delay_ms=settings.active_consumer_failover_delay_time_millis,
        ledger_rollover=LedgerRollover(
            settings.managed_ledger_max_entries_per_ledger,
            settings.managed_ledger_min_ledger_rollover_time_minutes,
            settings.managed_ledger_max_ledger_rollover_time_minutes,
        ),
        default_retention=(settings.default_retention_time_in_minutes, settings.default_retention_size_in_mb),
    )


def build_server(
    settings: Settings,
    reactor: Any,
    store: Storage,
    clock: Clock,
    commits: CommitRunner,
    *,
    authenticator: Authenticator | None = None,
) -> Server:
    """Build the engine on ``store``, ``clock`` and ``commits`` and the protocol service on ``reactor``; start the
    periodic policy checks (on ``clock``)."""
    if settings.authorization_enabled and not settings.authentication_enabled:
        # As in Pulsar: connections then have no role, and every command that is checked is refused.
        log.warning("authorization is enabled without authentication: clients have no role and are refused")
    broker = Broker(store, clock, broker_config(settings), commits)  # type: ignore[arg-type]
    timeouts = ConnectionTimeouts(
        keep_alive=settings.keep_alive_interval_seconds,
        handshake=settings.handshake_timeout_seconds,
        frame=settings.frame_timeout_seconds,
    )
    listeners = None
    if settings.advertised_listeners:
        listeners = Listeners.parse(settings.advertised_listeners, settings.internal_listener_name)
    service = BrokerService(
        broker,
        reactor,
        settings.advertised_address,
        settings.port,
        timeouts,
        listeners,
        authenticator=authenticator,
        authentication_refresh_check_seconds=settings.authentication_refresh_check_seconds,
    )
    if isinstance(commits, ThreadedCommits):
        # Receipts and answers of a commit go out as soon as it completes (see ThreadedCommits).
        commits.after_completions = service.flush_written
    policies = PolicyEnforcer(broker, settings.policy_check_interval_seconds)
    policies.start()
    return Server(broker, service, PulsarFactory(service), policies)
