"""Start the reactor with the broker on the embedded store; stop cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import gc
import logging
import socket
import time
from typing import Any

from engine.broker import Broker, BrokerConfig
from engine.clock import SystemClock
from engine.namespaces import PolicyEnforcer
from engine.store import Store
from engine.txn_buffer import SnapshotPolicy
from proxy.commits import ThreadedCommits
from proxy.config import Settings, data_path, super_user_roles
from proxy.connection import ConnectionTimeouts
from proxy.server import BrokerService, PulsarFactory
from proxy.transport import adopt_eager

log = logging.getLogger("pulsar_txn_proxy")

#: Allocations between collections of the youngest generation (CPython's default is 700). Every message allocates a
#: handful of short-lived objects, so the default collects every few dozen messages: about 6% of a SEND's work.
#: Reference counting frees those objects; the collector only finds cycles, which the message path does not make.
GC_YOUNG_THRESHOLD = 50_000


def serve(settings: Settings, started: float, pulsar_socket: socket.socket) -> int:
    """Run until stopped, serving the Pulsar protocol on ``pulsar_socket`` (bound and listening); the exit code."""
    from proxy.reactor import install

    reactor = install()
    _log_twisted_to_logging()

    store = Store(data_path(settings) / "store.sqlite")
    config = BrokerConfig(
        default_partitions=settings.default_partitions,
        deduplication=settings.deduplication,
        transaction_coordinators=settings.transaction_coordinators,
        snapshot_policy=SnapshotPolicy(settings.txn_snapshot_max_changes, settings.txn_snapshot_interval_seconds),
        txn_end_delay_ms=settings.txn_end_delay_ms,
        authorization_enabled=settings.authorization_enabled,
        super_user_roles=super_user_roles(settings),
    )
    commits = ThreadedCommits(reactor)
    broker = Broker(store, SystemClock(reactor.callLater), config, commits)
    timeouts = ConnectionTimeouts(
        keep_alive=settings.keep_alive_interval_seconds,
        handshake=settings.handshake_timeout_seconds,
        frame=settings.frame_timeout_seconds,
    )
    service = BrokerService(broker, reactor, settings.advertised_address, settings.port, timeouts)
    commits.after_completions = service.flush_written
    listener = adopt_eager(reactor, pulsar_socket, PulsarFactory(service))
    service.port = listener.getHost().port
    # The admin API's web stack takes a while to import: bring it up once the Pulsar port is served.
    admin: list[Any] = []
    reactor.callWhenRunning(lambda: admin.extend(filter(None, [_listen_admin(reactor, settings, broker, service)])))
    policies = PolicyEnforcer(broker, settings.policy_check_interval_seconds)
    policies.start()

    def shutdown() -> None:
        log.info("shutting down: %d connections", len(service.connections))
        listener.stopListening()
        policies.stop()
        for port in admin:
            port.stopListening()
        for connection in list(service.connections):
            connection.transport.loseConnection()
        broker.close()

    reactor.addSystemEventTrigger("before", "shutdown", shutdown)
    # What start-up built lives as long as the process: move it out of the collector's sight, then collect rarely.
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    log.info(
        "serving pulsar://%s:%d, data in %s, started in %.0f ms",
        settings.host,
        service.port,
        settings.data_dir,
        (time.monotonic() - started) * 1000,
    )
    reactor.run()
    return 0


def _log_twisted_to_logging() -> None:
    """Send what Twisted logs (failed accepts when file descriptors run out, unhandled errors) to :mod:`logging`.

    Until a program begins Twisted's logging, Twisted only keeps its events in memory, and nobody sees them.
    """
    from twisted.logger import STDLibLogObserver, globalLogBeginner

    globalLogBeginner.beginLoggingTo([STDLibLogObserver(name="twisted")], redirectStandardIO=False)


def _listen_admin(reactor: Any, settings: Settings, broker: Broker, service: BrokerService) -> Any:
    """Serve the admin API on its port; if the port is taken, log it and go on without (the Pulsar port works)."""
    from twisted.internet.error import CannotListenError

    from proxy.admin import admin_site

    try:
        port = reactor.listenTCP(
            settings.admin_port,
            admin_site(broker, service, settings.admin_port),
            backlog=settings.listen_backlog,
            interface=settings.host,
        )
    except CannotListenError as exc:
        log.error("admin API disabled: cannot listen on port %d: %s", settings.admin_port, exc.socketError)
        return None
    log.info("admin API on http://%s:%d", settings.host, port.getHost().port)
    return port
