"""What every admin handler works with: the engine, the Pulsar protocol service and this endpoint's addresses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred

from engine.errors import BrokerError
from proxy.admin.http import AdminError

if TYPE_CHECKING:
    from engine.broker import Broker
    from proxy.server import BrokerService


@dataclass
class AdminContext:
    """The engine and the addresses the admin API reports."""

    broker: Broker
    service: BrokerService
    admin_port: int
    #: The https port of the admin API, when TLS is configured.
    admin_tls_port: int | None = None

    @property
    def cluster(self) -> str:
        return self.broker.config.cluster

    def host(self, reached: str) -> str:
        """The host name to advertise: the configured one, else the one the client reached."""
        return self.service.advertised_address or reached or "localhost"

    def broker_url(self, reached: str) -> str:
        """The Pulsar protocol URL of this endpoint."""
        return f"pulsar://{self.host(reached)}:{self.service.port}"

    def web_url(self, reached: str) -> str:
        """The admin HTTP URL of this endpoint."""
        return f"http://{self.host(reached)}:{self.admin_port}"

    def broker_url_tls(self, reached: str) -> str:
        """The ``pulsar+ssl://`` URL of this endpoint; empty without a TLS port (as Pulsar's lookup answers)."""
        port = self.service.tls_port
        return "" if port is None else f"pulsar+ssl://{self.host(reached)}:{port}"

    def web_url_tls(self, reached: str) -> str:
        """The admin https URL of this endpoint; empty without one."""
        port = self.admin_tls_port
        return "" if port is None else f"https://{self.host(reached)}:{port}"

    def committed(self, value: Any = None) -> Deferred:
        """A Deferred firing with ``value`` once everything staged so far is durable."""
        done: Deferred = Deferred()

        def fire(result: Any) -> None:
            if isinstance(result, BrokerError):
                done.errback(AdminError(500, result.message))
            else:
                done.callback(value)

        self.broker.after_commit(fire, None)
        return done
