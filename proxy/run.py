"""Start the reactor with the broker on the embedded store; stop cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import time

from engine.broker import Broker, BrokerConfig
from engine.clock import SystemClock
from engine.store import Store
from engine.txn_buffer import SnapshotPolicy
from proxy.config import Settings, data_path
from proxy.server import BrokerService, PulsarFactory

log = logging.getLogger("pulsar_txn_proxy")


def serve(settings: Settings, started: float) -> int:
    """Run until stopped; returns the process exit code."""
    from twisted.internet import reactor

    store = Store(data_path(settings) / "store.sqlite")
    config = BrokerConfig(
        default_partitions=settings.default_partitions,
        deduplication=settings.deduplication,
        transaction_coordinators=settings.transaction_coordinators,
        snapshot_policy=SnapshotPolicy(
            settings.txn_snapshot_max_changes, settings.txn_snapshot_interval_seconds
        ),
        txn_end_delay_ms=settings.txn_end_delay_ms,
    )
    broker = Broker(store, SystemClock(reactor.callLater), config)
    service = BrokerService(broker, reactor, settings.advertised_address, settings.port)
    listener = reactor.listenTCP(settings.port, PulsarFactory(service), interface=settings.host)
    service.port = listener.getHost().port

    def shutdown() -> None:
        log.info("shutting down: %d connections", len(service.connections))
        listener.stopListening()
        for connection in list(service.connections):
            connection.transport.loseConnection()
        broker.close()

    reactor.addSystemEventTrigger("before", "shutdown", shutdown)
    log.info(
        "serving pulsar://%s:%d, data in %s, started in %.0f ms",
        settings.host,
        service.port,
        settings.data_dir,
        (time.monotonic() - started) * 1000,
    )
    reactor.run()
    return 0
