"""Raw Pulsar protocol connections for the scenarios that look at frames no official client shows.

:class:`RawConnection` sends frames built by ``wire.commands`` on a plain socket and reads them back decoded; the
helpers below are the transaction-coordinator requests that several scenarios (and the project's own hostile-input
tests) make on it.
"""

from __future__ import annotations

import itertools
import socket
from urllib.parse import urlparse

from pulsar_txn_proxy.conformance import security
from wire.commands import frame
from wire.framing import Frame, FrameDecoder
from wire.pulsar_api_pb2 import BaseCommand

T = BaseCommand
_REQUEST_IDS = itertools.count(1000)


def rid() -> int:
    """A fresh request id."""
    return next(_REQUEST_IDS)


class RawConnection:
    """A Pulsar connection on a plain socket: send frames, read decoded frames."""

    def __init__(
        self,
        port: int,
        timeout: float = 5.0,
        host: str = "127.0.0.1",
        credentials: security.Credentials = security.NONE,
        tls: bool = False,
    ) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if tls:
            self.sock = credentials.ssl_context().wrap_socket(self.sock, server_hostname=host)
        #: How :meth:`handshake` authenticates (the fields :meth:`connect_fields` adds to a CONNECT).
        self.credentials = credentials
        #: The client port; the server logs ``[host:port]`` (the host differs behind a container's NAT).
        self.local = f":{self.sock.getsockname()[1]}]"
        self.decoder = FrameDecoder()
        self.pending: list[Frame] = []

    @classmethod
    def to(cls, service_url: str, timeout: float = 5.0) -> RawConnection:
        """A connection to the broker of a ``pulsar://host:port`` or ``pulsar+ssl://host:port`` service URL, with
        the TLS and authentication settings registered for it (:mod:`.security`)."""
        parsed = urlparse(service_url)
        tls = parsed.scheme == "pulsar+ssl"
        return cls(
            parsed.port or (6651 if tls else 6650),
            timeout,
            parsed.hostname or "127.0.0.1",
            security.for_url(service_url),
            tls,
        )

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, kind: int, **fields: object) -> None:
        self.send_raw(frame(kind, **fields))

    def read(self) -> Frame:
        """The next frame (PINGs are answered and skipped); fails on EOF or timeout."""
        while True:
            while self.pending:
                item = self.pending.pop(0)
                if item.command.type == T.PING:
                    self.send(T.PONG)
                    continue
                return item
            data = self.sock.recv(65536)
            assert data, "the server closed the connection"
            self.pending.extend(self.decoder.feed(data))

    def expect(self, kind: int) -> BaseCommand:
        """Read the next frame and check its type."""
        command = self.read().command
        assert command.type == kind, f"expected {T.Type.Name(kind)}, got {command}"
        return command

    def handshake(self) -> BaseCommand:
        """CONNECT (authenticated as the connection's credentials say) and wait for CONNECTED."""
        self.send(T.CONNECT, client_version="raw-test", protocol_version=20, **self.connect_fields())
        return self.expect(T.CONNECTED)

    def connect_fields(self) -> dict[str, object]:
        """The authentication fields a CONNECT of this connection carries."""
        return self.credentials.connect_fields()

    def assert_open(self) -> None:
        """A PING gets a PONG, and nothing else came before it."""
        self.send(T.PING)
        self.expect(T.PONG)

    def assert_closed_by_server(self, timeout: float = 5.0) -> None:
        """The server closes the socket in order (FIN, not RST), sending nothing first, within ``timeout``."""
        self.sock.settimeout(timeout)
        data = self.sock.recv(65536)
        assert data == b"", f"expected the connection to close, got {data!r}"


# -- transaction coordinator requests ------------------------------------------------------------------


def tc_connect(conn: RawConnection, tc_id: int) -> BaseCommand:
    """TC_CLIENT_CONNECT_REQUEST; its response."""
    conn.send(T.TC_CLIENT_CONNECT_REQUEST, request_id=rid(), tc_id=tc_id)
    return conn.expect(T.TC_CLIENT_CONNECT_RESPONSE).tcClientConnectResponse


def new_txn(conn: RawConnection, tc_id: int = 0, ttl_ms: int = 60_000) -> BaseCommand:
    """NEW_TXN; its response."""
    request_id = rid()
    conn.send(T.NEW_TXN, request_id=request_id, tc_id=tc_id, txn_ttl_millis=ttl_ms)
    response = conn.expect(T.NEW_TXN_RESPONSE).newTxnResponse
    assert response.request_id == request_id
    return response


def open_txn(conn: RawConnection, ttl_ms: int = 60_000) -> tuple[int, int]:
    """A new transaction of coordinator 0 (it must be granted); its id."""
    response = new_txn(conn, ttl_ms=ttl_ms)
    assert not response.HasField("error"), response
    return response.txnid_most_bits, response.txnid_least_bits


def txn_fields(txn: tuple[int, int]) -> dict[str, int]:
    """A transaction id as the fields of a command."""
    return {"txnid_most_bits": txn[0], "txnid_least_bits": txn[1]}


def send_end(conn: RawConnection, txn: tuple[int, int], action: int) -> int:
    """END_TXN without waiting; its request id."""
    request_id = rid()
    conn.send(T.END_TXN, request_id=request_id, txn_action=action, **txn_fields(txn))
    return request_id


def end_txn(conn: RawConnection, txn: tuple[int, int], action: int) -> BaseCommand:
    """END_TXN; its response."""
    request_id = send_end(conn, txn, action)
    response = conn.expect(T.END_TXN_RESPONSE).endTxnResponse
    assert response.request_id == request_id
    return response


def add_partition(conn: RawConnection, txn: tuple[int, int], topic: str) -> BaseCommand:
    """ADD_PARTITION_TO_TXN; its response."""
    conn.send(T.ADD_PARTITION_TO_TXN, request_id=rid(), partitions=[topic], **txn_fields(txn))
    return conn.expect(T.ADD_PARTITION_TO_TXN_RESPONSE).addPartitionToTxnResponse


def add_subscription(conn: RawConnection, txn: tuple[int, int], topic: str) -> BaseCommand:
    """ADD_SUBSCRIPTION_TO_TXN (subscription ``sub``); its response."""
    conn.send(
        T.ADD_SUBSCRIPTION_TO_TXN,
        request_id=rid(),
        subscription=[{"topic": topic, "subscription": "sub"}],
        **txn_fields(txn),
    )
    return conn.expect(T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE).addSubscriptionToTxnResponse
