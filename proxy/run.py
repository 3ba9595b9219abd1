"""Start the reactor with the broker on the embedded store; stop cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import gc
import logging
import socket
import time
from typing import TYPE_CHECKING, Any

from engine.broker import Broker, BrokerConfig
from engine.clock import SystemClock
from engine.namespaces import PolicyEnforcer
from engine.store import Store
from engine.txn_buffer import SnapshotPolicy
from proxy.commits import ThreadedCommits
from proxy.config import Settings, data_path, super_user_roles
from proxy.connection import ConnectionTimeouts
from proxy.listeners import Listeners
from proxy.server import BrokerService, PulsarFactory
from proxy.transport import adopt_eager

if TYPE_CHECKING:
    from proxy.authentication import Authenticator

log = logging.getLogger("pulsar_txn_proxy")

#: Allocations between collections of the youngest generation (CPython's default is 700). Every message allocates a
#: handful of short-lived objects, so the default collects every few dozen messages: about 6% of a SEND's work.
#: Reference counting frees those objects; the collector only finds cycles, which the message path does not make.
GC_YOUNG_THRESHOLD = 50_000


def serve(
    settings: Settings,
    started: float,
    pulsar_socket: socket.socket,
    *,
    tls_socket: socket.socket | None = None,
    tls_options: Any = None,
    authenticator: Authenticator | None = None,
) -> int:
    """Run until stopped, serving the Pulsar protocol on ``pulsar_socket`` (bound and listening) and over TLS
    (``tls_options``, see proxy.tls) on ``tls_socket``, authenticating with ``authenticator``; the exit code."""
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
        entry_cache_bytes=settings.managed_ledger_cache_size_mb * 1024 * 1024,
        max_message_size=settings.max_message_size,
        authorization_enabled=settings.authorization_enabled,
        super_user_roles=super_user_roles(settings),
    )
    if settings.authorization_enabled and not settings.authentication_enabled:
        # As in Pulsar: connections then have no role, and every command that is checked is refused.
        log.warning("authorization is enabled without authentication: clients have no role and are refused")
    commits = ThreadedCommits(reactor)
    broker = Broker(store, SystemClock(reactor.callLater), config, commits)
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
    commits.after_completions = service.flush_written
    listener = adopt_eager(reactor, pulsar_socket, PulsarFactory(service))
    service.port = listener.getHost().port
    listeners = [listener]
    if tls_socket is not None:
        from proxy.tls import wrap

        tls_listener = adopt_eager(reactor, tls_socket, wrap(PulsarFactory(service), tls_options))
        service.tls_port = tls_listener.getHost().port
        listeners.append(tls_listener)
    # The admin API's web stack takes a while to import: bring it up once the Pulsar port is served.
    admin: list[Any] = []
    reactor.callWhenRunning(
        lambda: admin.extend(_listen_admin(reactor, settings, broker, service, authenticator, tls_options))
    )
    policies = PolicyEnforcer(broker, settings.policy_check_interval_seconds)
    policies.start()

    def shutdown() -> None:
        log.info("shutting down: %d connections", len(service.connections))
        for port in listeners:
            port.stopListening()
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
        "serving pulsar://%s:%d%s, data in %s, started in %.0f ms",
        settings.host,
        service.port,
        "" if service.tls_port is None else f" and pulsar+ssl://{settings.host}:{service.tls_port}",
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


def _listen_admin(
    reactor: Any,
    settings: Settings,
    broker: Broker,
    service: BrokerService,
    authenticator: Authenticator | None,
    tls_options: Any,
) -> list[Any]:
    """Serve the admin API on its port (and https port); a port that is taken is logged and left out (the Pulsar
    port works)."""
    from twisted.internet.error import CannotListenError

    from proxy.admin import admin_site

    site = admin_site(
        broker,
        service,
        settings.admin_port,
        authenticator,
        settings.authenticate_metrics_endpoint,
        settings.admin_tls_port,
    )
    ports = []
    try:
        port = reactor.listenTCP(settings.admin_port, site, backlog=settings.listen_backlog, interface=settings.host)
        log.info("admin API on http://%s:%d", settings.host, port.getHost().port)
        ports.append(port)
    except CannotListenError as exc:
        log.error("admin API disabled: cannot listen on port %d: %s", settings.admin_port, exc.socketError)
    if settings.admin_tls_port is not None:
        try:
            port = reactor.listenSSL(
                settings.admin_tls_port, site, tls_options, backlog=settings.listen_backlog, interface=settings.host
            )
            log.info("admin API on https://%s:%d", settings.host, port.getHost().port)
            ports.append(port)
        except CannotListenError as exc:
            log.error("admin https disabled: cannot listen on port %d: %s", settings.admin_tls_port, exc.socketError)
    return ports
