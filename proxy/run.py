"""Start the reactor with the broker on the embedded store; stop cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import gc
import logging
import socket
import time
from typing import TYPE_CHECKING, Any

from engine.broker import Broker
from engine.clock import SystemClock
from engine.store import Store
from proxy.commits import ThreadedCommits
from proxy.config import Settings, data_path
from proxy.server import BrokerService, PulsarFactory
from proxy.transport import adopt_eager
from proxy.wiring import build_server

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
    server = build_server(
        settings, reactor, store, SystemClock(reactor.callLater), ThreadedCommits(reactor), authenticator=authenticator
    )
    broker, service = server.broker, server.service
    listener = adopt_eager(reactor, pulsar_socket, server.factory)
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

    def shutdown() -> None:
        log.info("shutting down: %d connections", len(service.connections))
        for port in listeners:
            port.stopListening()
        for port in admin:
            port.stopListening()
        server.close()

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
