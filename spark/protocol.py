"""A small blocking Pulsar binary-protocol client on the project's ``wire`` codec.

It is what the Spark connector and the transactional producer (:mod:`spark.txn_client`) stand on:
connections with the CONNECT handshake and keepalive answers, request/response matching, topic lookup
(redirects included), partitioned metadata, topics of a namespace and schemas. It speaks to the
endpoint of this project and to an Apache Pulsar broker alike. One :class:`Client` (and each of its
connections) belongs to one thread.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import ssl
import struct
import time
from collections import deque
from typing import Any
from urllib.parse import urlparse

from spark.security import Security
from wire.commands import make, payload_of
from wire.framing import FrameDecoder, encode_command, encode_payload_command
from wire.pulsar_api_pb2 import BaseCommand, CommandGetTopicsOfNamespace, ServerError

T = BaseCommand
CLIENT_VERSION = "pulsar-txn-proxy-spark 0.1.0"
#: Protocol version this client speaks (v19 adds TC_CLIENT_CONNECT; v20 topic migration).
PROTOCOL_VERSION = 20
#: Seconds a request may take before :class:`OperationTimeout`.
DEFAULT_OPERATION_TIMEOUT = 30.0
#: Lookups follow at most this many redirects (Pulsar's ``maxLookupRedirects``).
MAX_REDIRECTS = 20
PARTITION_SUFFIX = "-partition-"
_SCHEMA_VERSION = struct.Struct(">q")


# -- errors -------------------------------------------------------------------------------------


class PulsarError(Exception):
    """A request failed; ``code`` is the Pulsar ``ServerError`` value (or None for client-side failures)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def code_name(self) -> str:
        """The ``ServerError`` name of :attr:`code`."""
        return ServerError.Name(self.code) if self.code is not None else "ClientError"


class ConnectionLostError(PulsarError):
    """The connection closed or could not be opened; requests on it may be retried on a new one."""


class TlsVerificationError(ConnectionLostError):
    """The broker's certificate is not trusted or does not name its host: connecting again cannot help."""


class OperationTimeoutError(PulsarError):
    """No answer within the operation timeout."""


class TopicNotFoundError(PulsarError):
    """``TopicNotFound``."""


class NotAllowedError(PulsarError):
    """``NotAllowedError``."""


class ServiceNotReadyError(PulsarError):
    """``ServiceNotReady``."""


class ProducerBusyError(PulsarError):
    """``ProducerBusy`` or ``ProducerFenced``."""


class AuthenticationError(PulsarError):
    """``AuthenticationError``: the broker refused the credentials (and closed the connection)."""


class AuthorizationError(PulsarError):
    """``AuthorizationError``: the role may not do this."""


class TransactionCoordinatorNotFoundError(PulsarError):
    """``TransactionCoordinatorNotFound``: no such coordinator, or transactions are off on the broker."""


class InvalidTxnStatusError(PulsarError):
    """``InvalidTxnStatus``: the transaction is not in a state that allows the operation."""


class TransactionConflictError(PulsarError):
    """``TransactionConflict``."""


class TransactionNotFoundError(PulsarError):
    """``TransactionNotFound``: unknown, already ended, or timed-out transaction."""


_ERRORS: dict[int, type[PulsarError]] = {
    ServerError.TopicNotFound: TopicNotFoundError,
    ServerError.AuthenticationError: AuthenticationError,
    ServerError.AuthorizationError: AuthorizationError,
    ServerError.NotAllowedError: NotAllowedError,
    ServerError.ServiceNotReady: ServiceNotReadyError,
    ServerError.ProducerBusy: ProducerBusyError,
    ServerError.ProducerFenced: ProducerBusyError,
    ServerError.TransactionCoordinatorNotFound: TransactionCoordinatorNotFoundError,
    ServerError.InvalidTxnStatus: InvalidTxnStatusError,
    ServerError.TransactionConflict: TransactionConflictError,
    ServerError.TransactionNotFound: TransactionNotFoundError,
}


def error_for(code: int, message: str) -> PulsarError:
    """The exception for a Pulsar ``ServerError`` code."""
    return _ERRORS.get(code, PulsarError)(f"{ServerError.Name(code)}: {message}", code)


# -- names ----------------------------------------------------------------------------------------


def full_topic_name(topic: str) -> str:
    """``my-topic`` -> ``persistent://public/default/my-topic``; ``t/ns/x`` -> ``persistent://t/ns/x``."""
    if "://" in topic:
        return topic
    parts = topic.split("/")
    if len(parts) == 1:
        return f"persistent://public/default/{topic}"
    if len(parts) == 3:
        return f"persistent://{topic}"
    raise ValueError(f"invalid topic name: {topic!r}")


def split_partition(topic: str) -> tuple[str, int]:
    """``(parent name, partition index)`` of a topic; the index is -1 for a non-partition."""
    base, sep, index = topic.rpartition(PARTITION_SUFFIX)
    if sep and base and index.isdigit():
        return base, int(index)
    return topic, -1


def namespace_of(topic: str) -> str:
    """``tenant/namespace`` of a full topic name."""
    rest = full_topic_name(topic).partition("://")[2]
    tenant, namespace, _ = rest.split("/", 2)
    return f"{tenant}/{namespace}"


def _address(url: str) -> tuple[str, int]:
    parsed = urlparse(url)
    if parsed.scheme not in ("pulsar", "pulsar+ssl", "") or not parsed.hostname:
        raise ValueError(f"unsupported service URL {url!r} (pulsar://host:port or pulsar+ssl://host:port expected)")
    return parsed.hostname, parsed.port or (6651 if parsed.scheme == "pulsar+ssl" else 6650)


def is_tls(url: str) -> bool:
    """Whether ``url`` is a ``pulsar+ssl://`` one."""
    return url.startswith("pulsar+ssl://")


# -- one connection -------------------------------------------------------------------------------


class Connection:
    """One TCP connection to a broker, used by one thread.

    Frames that are not the answer being waited for are kept: MESSAGE frames per consumer, receipts per
    producer, server-initiated closes; PINGs are answered on the spot.
    """

    def __init__(self, url: str, timeout: float = DEFAULT_OPERATION_TIMEOUT, security: Security | None = None) -> None:
        self.url = url
        #: Credentials (sent with CONNECT and again on AUTH_CHALLENGE) and TLS options; None: none.
        self.security = security or Security()
        self.timeout = timeout
        self.closed = False
        self._decoder = FrameDecoder()
        self._responses: dict[int, BaseCommand] = {}
        self.messages: dict[int, deque[tuple[Any, bytes]]] = {}
        self.receipts: dict[int, deque[BaseCommand]] = {}
        self.closed_consumers: set[int] = set()
        self.closed_producers: set[int] = set()
        self._next_request = 0
        host, port = _address(url)
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ConnectionLostError(f"cannot connect to {url}: {exc}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        if is_tls(url):
            try:
                self._sock = self.security.ssl_context().wrap_socket(self._sock, server_hostname=host)
            except ssl.SSLCertVerificationError as exc:
                self._sock.close()
                raise TlsVerificationError(f"TLS handshake with {url} failed: {exc}") from None
            except (OSError, ssl.SSLError) as exc:
                self._sock.close()
                raise ConnectionLostError(f"TLS handshake with {url} failed: {exc}") from None
        self.send_command(
            make(
                T.CONNECT,
                client_version=CLIENT_VERSION,
                auth_method_name=self.security.auth_method,
                **({"auth_data": data} if (data := self.security.data()) else {}),
                protocol_version=PROTOCOL_VERSION,
                feature_flags={"supports_auth_refresh": True},
            )
        )
        deadline = time.monotonic() + timeout
        connected = None
        while connected is None:
            if time.monotonic() >= deadline:
                self.close()
                raise OperationTimeoutError(f"no CONNECTED from {url} in time")
            for command, _ in self._read(deadline):
                if command.type == T.CONNECTED:
                    connected = command.connected
                elif command.type == T.ERROR:
                    self.close()
                    raise error_for(command.error.error, command.error.message)
        self.server_version = connected.server_version
        self.protocol_version = connected.protocol_version
        self.max_message_size = connected.max_message_size or 5 * 1024 * 1024

    def new_request_id(self) -> int:
        """A request id unique on this connection."""
        self._next_request += 1
        return self._next_request

    # -- sending ------------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        """Write encoded frames."""
        if self.closed:
            raise ConnectionLostError(f"connection to {self.url} is closed")
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self.close()
            raise ConnectionLostError(f"connection to {self.url} lost: {exc}") from None

    def send_command(self, command: BaseCommand, body: bytes | None = None) -> None:
        """Write one command (a payload frame when ``body`` is given)."""
        self.send_raw(encode_command(command) if body is None else encode_payload_command(command, body))

    # -- receiving ----------------------------------------------------------------------------

    def _read(self, deadline: float | None) -> list[tuple[BaseCommand, bytes | None]]:
        """Wait (until ``deadline``; None: poll) for bytes and return the frames they complete.

        PINGs are answered here; the caller routes the rest.
        """
        if self.closed:
            raise ConnectionLostError(f"connection to {self.url} is closed")
        wait = 0.0 if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            # Decrypted bytes a TLS socket holds already are invisible to select.
            pending = isinstance(self._sock, ssl.SSLSocket) and self._sock.pending()
            ready, _, _ = ([self._sock], None, None) if pending else select.select([self._sock], [], [], wait)
            if not ready:
                return []
            data = self._sock.recv(1 << 20)
        except OSError as exc:
            self.close()
            raise ConnectionLostError(f"connection to {self.url} lost: {exc}") from None
        if not data:
            self.close()
            raise ConnectionLostError(f"connection to {self.url} closed by the broker")
        frames = []
        for frame in self._decoder.feed(data):
            if frame.command.type == T.PING:
                self.send_command(make(T.PONG))
            elif frame.command.type != T.PONG:
                frames.append((frame.command, frame.body))
        return frames

    def _route(self, command: BaseCommand, body: bytes | None) -> None:
        kind = command.type
        if kind == T.MESSAGE:
            queue = self.messages.get(command.message.consumer_id)
            if queue is not None:
                queue.append((command.message, body or b""))
        elif kind in (T.SEND_RECEIPT, T.SEND_ERROR):
            payload = payload_of(command)
            queue = self.receipts.get(payload.producer_id)
            if queue is not None:
                queue.append(command)
        elif kind == T.CLOSE_CONSUMER:
            self.closed_consumers.add(command.close_consumer.consumer_id)
        elif kind == T.CLOSE_PRODUCER:
            self.closed_producers.add(command.close_producer.producer_id)
        elif kind == T.AUTH_CHALLENGE:
            # The broker's credentials expired: answer with fresh ones (a token supplier is asked again).
            response = {"auth_method_name": self.security.auth_method, "auth_data": self.security.data()}
            self.send_command(
                make(
                    T.AUTH_RESPONSE, client_version=CLIENT_VERSION, response=response, protocol_version=PROTOCOL_VERSION
                )
            )
        else:
            payload = payload_of(command)
            if "request_id" in payload.DESCRIPTOR.fields_by_name and payload.HasField("request_id"):
                self._responses[payload.request_id] = command

    def pump(self, deadline: float | None = None) -> int:
        """Read frames: those already there (``deadline`` None), or wait for some until ``deadline``.

        Returns how many were read (0 when the deadline passed first).
        """
        while True:
            frames = self._read(deadline)
            for command, body in frames:
                self._route(command, body)
            if frames or deadline is None or time.monotonic() >= deadline:
                return len(frames)

    def wait_for(self, request_id: int, deadline: float) -> BaseCommand:
        """The response to ``request_id`` (an OperationTimeoutError after ``deadline``)."""
        while request_id not in self._responses:
            if time.monotonic() >= deadline:
                raise OperationTimeoutError(f"no answer from {self.url} in time")
            self.pump(deadline)
        return self._responses.pop(request_id)

    def request(self, kind: int, timeout: float | None = None, **fields: Any) -> Any:
        """Send a request (its ``request_id`` is filled in) and return the response's sub-message.

        A response carrying an error raises the matching :class:`PulsarError`.
        """
        request_id = self.new_request_id()
        self.send_command(make(kind, request_id=request_id, **fields))
        response = self.wait_for(request_id, time.monotonic() + (timeout or self.timeout))
        return check(response)

    def close_consumer(self, consumer_id: int) -> None:
        """Close a consumer of this connection (its unacknowledged messages go back to the subscription); a broker
        that does not answer costs the connection."""
        self.messages.pop(consumer_id, None)
        if not self.closed:
            try:
                self.request(T.CLOSE_CONSUMER, consumer_id=consumer_id, timeout=5.0)
            except PulsarError:
                self.close()

    def close(self) -> None:
        """Close the socket (idempotent)."""
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                self._sock.close()


def check(response: BaseCommand) -> Any:
    """The sub-message of a response, or the error it carries raised."""
    payload = payload_of(response)
    kind = response.type
    if kind == T.ERROR:
        raise error_for(payload.error, payload.message)
    if kind == T.PARTITIONED_METADATA_RESPONSE and payload.response == 1:
        raise error_for(payload.error, payload.message)
    if kind == T.LOOKUP_RESPONSE and payload.response == 2:
        raise error_for(payload.error, payload.message)
    fields = payload.DESCRIPTOR.fields_by_name
    for name, text in (("error", "message"), ("error_code", "error_message")):
        if name in fields and payload.HasField(name):
            raise error_for(getattr(payload, name), getattr(payload, text))
    return payload


# -- the client: lookups and a connection per broker ---------------------------------------------


class Client:
    """Connections to the brokers of one cluster, found through the service URL.

    Not thread-safe: use one per thread (or per Spark task).
    """

    def __init__(
        self, service_url: str, operation_timeout: float = DEFAULT_OPERATION_TIMEOUT, security: Security | None = None
    ) -> None:
        _address(service_url)
        self.service_url = service_url
        self.operation_timeout = operation_timeout
        #: TLS options and credentials of every connection (``spark.security.Security``).
        self.security = security
        self._connections: dict[str, Connection] = {}
        self._ids = 0

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_id(self) -> int:
        """A producer/consumer id unique within this client."""
        self._ids += 1
        return self._ids

    def connection(self, url: str | None = None) -> Connection:
        """The (re)opened connection to ``url`` (default: the service URL).

        A kept connection first answers what the broker sent meanwhile (keepalive PINGs); one the broker
        closed while it sat idle is replaced.
        """
        url = url or self.service_url
        conn = self._connections.get(url)
        if conn is not None and not conn.closed:
            with contextlib.suppress(ConnectionLostError):
                conn.pump()
        if conn is None or conn.closed:
            conn = Connection(url, self.operation_timeout, self.security)
            self._connections[url] = conn
        return conn

    def request(self, kind: int, url: str | None = None, **fields: Any) -> Any:
        """A request on the connection to ``url``, retried once on a fresh connection if it was lost."""
        try:
            return self.connection(url).request(kind, **fields)
        except ConnectionLostError:
            return self.connection(url).request(kind, **fields)

    def lookup(self, topic: str) -> Connection:
        """The connection to the broker that serves ``topic`` (a topic partition)."""
        topic = full_topic_name(topic)
        url, authoritative = self.service_url, False
        for _ in range(MAX_REDIRECTS):
            response = self.request(T.LOOKUP, url=url, topic=topic, authoritative=authoritative)
            # Over TLS the broker's TLS URL, as the official clients choose.
            tls_target = response.brokerServiceUrlTls if is_tls(self.service_url) else ""
            target = tls_target or response.brokerServiceUrl or url
            if response.response == 1:  # Connect
                if response.proxy_through_service_url:
                    return self.connection()
                return self.connection(target)
            url, authoritative = target, response.authoritative
        raise PulsarError(f"too many lookup redirects for {topic}")

    def partitions(self, topic: str) -> int:
        """Partition count of ``topic`` (0: not partitioned)."""
        response = self.request(T.PARTITIONED_METADATA, topic=full_topic_name(topic))
        return response.partitions

    def partition_names(self, topic: str) -> list[str]:
        """The partitions of ``topic``, or ``[topic]`` if it is not partitioned (or is a partition)."""
        topic = full_topic_name(topic)
        if split_partition(topic)[1] >= 0:
            return [topic]
        count = self.partitions(topic)
        return [f"{topic}{PARTITION_SUFFIX}{i}" for i in range(count)] if count else [topic]

    def topics_of_namespace(self, namespace: str) -> list[str]:
        """Every persistent topic (partitions included) of ``tenant/namespace``."""
        response = self.request(
            T.GET_TOPICS_OF_NAMESPACE, namespace=namespace, mode=CommandGetTopicsOfNamespace.PERSISTENT
        )
        return list(response.topics)

    def topics_matching(self, pattern: str) -> list[str]:
        """Topic partitions whose topic (partition suffix removed) fully matches ``pattern``.

        System topics (local names starting with ``__``) are left out, as Pulsar's pattern consumers do.
        """
        pattern = full_topic_name(pattern)
        regex = re.compile(pattern)
        found = []
        for name in self.topics_of_namespace(namespace_of(pattern)):
            parent = split_partition(name)[0]
            local = parent.rsplit("/", 1)[-1]
            if not local.startswith("__") and regex.fullmatch(parent):
                found.append(name)
        return sorted(found)

    def schema(self, topic: str, version: int | None = None) -> tuple[Any, int] | None:
        """The topic's ``(Schema, version)`` (the latest, or ``version``), or None if it has none."""
        fields: dict[str, Any] = {"topic": full_topic_name(split_partition(full_topic_name(topic))[0])}
        if version is not None and version >= 0:
            fields["schema_version"] = _SCHEMA_VERSION.pack(version)
        try:
            response = self.request(T.GET_SCHEMA, **fields)
        except TopicNotFoundError:
            return None
        version_bytes = response.schema_version
        number = _SCHEMA_VERSION.unpack(version_bytes)[0] if len(version_bytes) == 8 else -1
        return response.schema, number

    def close(self) -> None:
        """Close every connection."""
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
