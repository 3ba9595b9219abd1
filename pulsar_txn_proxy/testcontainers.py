"""The endpoint's container image as a testcontainers module (``pip install 'pulsar-txn-proxy[testcontainers]'``).

::

    from pulsar_txn_proxy.testcontainers import PulsarTxnProxyContainer

    with PulsarTxnProxyContainer().with_server_args("--default-partitions", "3") as container:
        client = pulsar.Client(container.get_service_url())      # pulsar://<host>:<port>
        requests.get(container.get_http_url() + "/admin/v2/clusters")

The image is ``localhost/pulsar-txn-proxy:latest`` (built by ``make image``), or any image of the project.

A Pulsar lookup answers the address and port the broker advertises, and the official clients connect there. So
the server listens inside the container on the same port number it is published on (a free port of this host),
and advertises the host the clients reach: lookups then send them back to the published port. ``start()``
returns once the admin API answers (it starts after the Pulsar port is served); a container that exits or does
not answer in time raises :class:`ContainerStartError` with its log.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any

from testcontainers.core.container import DockerContainer

from pulsar_txn_proxy.endpoint import free_port

DEFAULT_IMAGE = "localhost/pulsar-txn-proxy:latest"


class ContainerStartError(RuntimeError):
    """The container exited, or did not answer within the start timeout (the message carries its log)."""


class PulsarTxnProxyContainer(DockerContainer):
    """pulsar-txn-proxy in a container, with :meth:`get_service_url` and :meth:`get_http_url`.

    ``port`` / ``http_port`` choose the published ports (default: free ones of this host); both are also the
    ports inside the container. Other keyword arguments go to :class:`DockerContainer`.
    """

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        *,
        port: int | None = None,
        http_port: int | None = None,
        startup_timeout: float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(image, **kwargs)
        self.port = port or free_port()
        self.http_port = http_port or free_port()
        self.startup_timeout = startup_timeout
        self._server_args: list[str] = []
        self.with_bind_ports(self.port, self.port)
        self.with_bind_ports(self.http_port, self.http_port)
        # The image's health check probes this port.
        self.with_env("PULSAR_TXN_PROXY_PORT", str(self.port))

    def with_server_args(self, *args: str) -> PulsarTxnProxyContainer:
        """More ``pulsar-txn-proxy serve`` options (``"--default-partitions", "3"``,
        ``"--transaction-coordinators", "0"``)."""
        self._server_args += args
        return self

    def get_service_url(self) -> str:
        """``pulsar://<host>:<port>``: the Pulsar protocol port as clients on this host reach it."""
        return f"pulsar://{self.get_container_host_ip()}:{self.port}"

    def get_http_url(self) -> str:
        """``http://<host>:<port>``: the admin REST API and ``/metrics``."""
        return f"http://{self.get_container_host_ip()}:{self.http_port}"

    def start(self) -> PulsarTxnProxyContainer:
        """Start the container and wait until the endpoint serves."""
        self.with_command(
            [
                "serve",
                "--port", str(self.port),
                "--admin-port", str(self.http_port),
                "--advertised-address", self.get_container_host_ip(),
                *self._server_args,
            ]
        )  # fmt: skip
        super().start()
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        url = self.get_http_url() + "/admin/v2/clusters"
        while time.monotonic() < deadline:
            wrapped = self.get_wrapped_container()
            wrapped.reload()
            if wrapped.status in ("exited", "dead"):
                raise ContainerStartError(f"the container exited while starting:\n{self._logs()}")
            try:
                with urllib.request.urlopen(url, timeout=1.0) as answer:
                    if answer.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                if exc.code == 401:  # authentication is on: it serves
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise ContainerStartError(f"the endpoint did not answer at {url} in {self.startup_timeout} s:\n{self._logs()}")

    def _logs(self) -> str:
        stdout, stderr = self.get_logs()
        return (stdout + stderr).decode(errors="replace")
