"""One broker connection as a state machine: CONNECT handshake, request/response matching with deadlines,
keepalive, authentication challenges, and routing of receipts and messages to the producer and consumer cores
attached to it."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from pulsar_txn.exceptions import (
    ConnectError,
    PulsarException,
    Timeout,
    from_server_error,
)
from wire.commands import make, payload_of
from wire.framing import FrameDecoder, ProtocolError, encode_command, encode_payload_command
from wire.pulsar_api_pb2 import BaseCommand

T = BaseCommand
CLIENT_VERSION = "pulsar-txn 0.1.0"
#: v19 adds TC_CLIENT_CONNECT; v20 topic migration.
PROTOCOL_VERSION = 20
#: Pulsar's ``keepAliveIntervalSeconds``: a PING after this long without a frame, closed after twice as long.
KEEPALIVE_SECONDS = 30.0


class ConnectionState(Enum):
    CONNECTING = "CONNECTING"
    READY = "READY"
    CLOSED = "CLOSED"


@dataclass(slots=True)
class Connected:
    """The handshake finished."""

    server_version: str
    protocol_version: int
    max_message_size: int


@dataclass(slots=True)
class Response:
    """The answer to request ``request_id``; ``error`` is set when it failed (an error answer, a timeout, a lost
    connection), ``command`` otherwise."""

    request_id: int
    command: BaseCommand | None
    error: PulsarException | None = None


class ProducerCore(Protocol):
    """A producer attached to a connection, as the connection routes to it (``pulsar_txn.core.producer``)."""

    producer_id: int

    def handle_receipt(self, command: BaseCommand) -> list[SendDone]: ...

    def detach(self, conn: Connection) -> None: ...


class ConsumerCore(Protocol):
    """A consumer attached to a connection, as the connection routes to it (``pulsar_txn.core.consumer``)."""

    consumer_id: int

    def handle_message(self, command: Any, body: bytes) -> bool: ...

    def detach(self, conn: Connection) -> None: ...


@dataclass(slots=True)
class Closed:
    """The connection is closed; every request on it failed with ``error``."""

    error: PulsarException


@dataclass(slots=True)
class HandleClosed:
    """A producer or consumer lost its registration (CLOSE_PRODUCER / CLOSE_CONSUMER, or its connection closed): it
    must register again."""

    handle: ProducerCore | ConsumerCore


@dataclass(slots=True)
class SendDone:
    """A message was stored (``message_id``) or failed (``error``); ``token`` is what the shell passed in."""

    token: Any
    message_id: Any
    error: PulsarException | None = None


@dataclass(slots=True)
class MessagesReady:
    """A consumer's incoming queue received messages."""

    consumer: ConsumerCore


Event = Connected | Response | Closed | HandleClosed | SendDone | MessagesReady


def check(command: BaseCommand) -> Any:
    """The sub-message of a response, or the :class:`PulsarException` it carries raised."""
    payload = payload_of(command)
    kind = command.type
    if kind == T.ERROR:
        raise from_server_error(payload.error, payload.message)
    if kind == T.PARTITIONED_METADATA_RESPONSE and payload.response == 1:
        raise from_server_error(payload.error, payload.message)
    if kind == T.LOOKUP_RESPONSE and payload.response == 2:
        raise from_server_error(payload.error, payload.message)
    fields = payload.DESCRIPTOR.fields_by_name
    for name, text in (("error", "message"), ("error_code", "error_message")):
        if name in fields and payload.HasField(name):
            raise from_server_error(getattr(payload, name), getattr(payload, text))
    return payload


class Connection:
    """A broker connection, sans I/O.

    ``auth`` returns ``(method, data)`` to send with CONNECT and on AUTH_CHALLENGE. ``now`` is any monotonic clock in
    seconds, passed to every call that may start or check a timer.
    """

    def __init__(
        self,
        url: str,
        now: float,
        auth: Callable[[], tuple[str, bytes]] = lambda: ("none", b""),
        operation_timeout: float = 30.0,
        keepalive: float = KEEPALIVE_SECONDS,
    ) -> None:
        self.url = url
        self.state = ConnectionState.CONNECTING
        self.operation_timeout = operation_timeout
        self.keepalive = keepalive
        self.server_version = ""
        self.protocol_version = 0
        self.max_message_size = 5 * 1024 * 1024
        self.error: PulsarException | None = None
        #: Whatever the shell keeps for this connection (its socket wrapper); the core never reads it.
        self.owner: Any = None
        self.producers: dict[int, ProducerCore] = {}
        self.consumers: dict[int, ConsumerCore] = {}
        self._auth = auth
        self._decoder = FrameDecoder(64 * 1024 * 1024)
        self._out: list[bytes] = []
        self._events: deque[Event] = deque()
        self._deadlines: dict[int, float] = {}
        self._next_request = 0
        self._last_received = now
        self._ping_sent = False
        method, data = auth()
        fields: dict[str, Any] = {
            "client_version": CLIENT_VERSION,
            "auth_method_name": method,
            "protocol_version": PROTOCOL_VERSION,
            "feature_flags": {"supports_auth_refresh": True},
        }
        if data:
            fields["auth_data"] = data
        self._handshake_deadline = now + operation_timeout
        self.send(make(T.CONNECT, **fields))

    # -- the sans-I/O surface ----------------------------------------------------------------

    def handle_bytes(self, data: bytes, now: float) -> None:
        """Bytes received from the broker; ``b""`` means it closed the connection."""
        if self.state is ConnectionState.CLOSED:
            return
        if not data:
            self.close(ConnectError(f"connection to {self.url} closed by the broker"))
            return
        self._last_received = now
        self._ping_sent = False
        try:
            for frame in self._decoder.feed(data):
                self._handle(frame.command, frame.body, now)
                if self.state is ConnectionState.CLOSED:
                    return
        except ProtocolError as exc:
            self.close(ConnectError(f"protocol error from {self.url}: {exc}"))

    def poll_transmit(self) -> bytes:
        """The bytes to write to the socket now (``b""``: none)."""
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        return data

    def poll_event(self) -> Event | None:
        """The next user-visible event, or None."""
        return self._events.popleft() if self._events else None

    def poll_timeout(self) -> float | None:
        """When :meth:`handle_timeout` should next be called (None: no timer)."""
        if self.state is ConnectionState.CLOSED:
            return None
        times = [self._last_received + (2 if self._ping_sent else 1) * self.keepalive]
        if self.state is ConnectionState.CONNECTING:
            times.append(self._handshake_deadline)
        if self._deadlines:
            times.append(min(self._deadlines.values()))
        for handle in (*self.producers.values(), *self.consumers.values()):
            due = handle.poll_timeout()
            if due is not None:
                times.append(due)
        return min(times)

    def handle_timeout(self, now: float) -> None:
        """Run the timers due at ``now``: request deadlines, keepalive, producers' and consumers' timers."""
        if self.state is ConnectionState.CLOSED:
            return
        if self.state is ConnectionState.CONNECTING and now >= self._handshake_deadline:
            self.close(ConnectError(f"no CONNECTED from {self.url} in time"))
            return
        if now >= self._last_received + 2 * self.keepalive:
            self.close(ConnectError(f"{self.url} stopped answering keepalive pings"))
            return
        if now >= self._last_received + self.keepalive and not self._ping_sent:
            self._ping_sent = True
            self.send(make(T.PING))
        for request_id, deadline in list(self._deadlines.items()):
            if now >= deadline:
                del self._deadlines[request_id]
                self._events.append(Response(request_id, None, Timeout(f"no answer from {self.url} in time")))
        for handle in (*self.producers.values(), *self.consumers.values()):
            handle.handle_timeout(now)

    # -- used by the shells and the producer/consumer cores -----------------------------------

    @property
    def ready(self) -> bool:
        return self.state is ConnectionState.READY

    @property
    def has_output(self) -> bool:
        """Whether :meth:`poll_transmit` has bytes."""
        return bool(self._out)

    def send(self, command: BaseCommand, body: bytes | None = None) -> None:
        """Queue one frame (a payload frame when ``body`` is given)."""
        if self.state is not ConnectionState.CLOSED:
            self._out.append(encode_command(command) if body is None else encode_payload_command(command, body))

    def send_raw(self, frame: bytes) -> None:
        """Queue an encoded frame."""
        if self.state is not ConnectionState.CLOSED:
            self._out.append(frame)

    def request(self, kind: int, now: float, timeout: float | None = None, **fields: Any) -> int:
        """Queue a request (its ``request_id`` filled in); a :class:`Response` event answers it."""
        self._next_request += 1
        request_id = self._next_request
        if self.state is ConnectionState.CLOSED:
            self._events.append(Response(request_id, None, self.error or ConnectError("connection closed")))
            return request_id
        self._deadlines[request_id] = now + (self.operation_timeout if timeout is None else timeout)
        self.send(make(kind, request_id=request_id, **fields))
        return request_id

    def emit(self, event: Event) -> None:
        self._events.append(event)

    def close(self, error: PulsarException | None = None) -> None:
        """Close: every pending request fails, the producers and consumers attached are told."""
        if self.state is ConnectionState.CLOSED:
            return
        self.state = ConnectionState.CLOSED
        self.error = error or ConnectError(f"connection to {self.url} closed")
        for request_id in self._deadlines:
            self._events.append(Response(request_id, None, self.error))
        self._deadlines.clear()
        self._events.append(Closed(self.error))
        for handle in (*self.producers.values(), *self.consumers.values()):
            handle.detach(self)
            self._events.append(HandleClosed(handle))
        self.producers.clear()
        self.consumers.clear()

    # -- incoming frames ---------------------------------------------------------------------

    def _handle(self, command: BaseCommand, body: bytes | None, now: float) -> None:
        kind = command.type
        if kind == T.MESSAGE:
            consumer = self.consumers.get(command.message.consumer_id)
            if consumer is not None and consumer.handle_message(command.message, body or b""):
                self._events.append(MessagesReady(consumer))
        elif kind in (T.SEND_RECEIPT, T.SEND_ERROR):
            payload = payload_of(command)
            producer = self.producers.get(payload.producer_id)
            if producer is not None:
                self._events.extend(producer.handle_receipt(command))
        elif kind == T.PING:
            self.send(make(T.PONG))
        elif kind == T.PONG:
            pass
        elif kind == T.CONNECTED:
            if self.state is ConnectionState.CONNECTING:
                connected = command.connected
                self.state = ConnectionState.READY
                self.server_version = connected.server_version
                self.protocol_version = connected.protocol_version
                if connected.HasField("max_message_size"):
                    self.max_message_size = connected.max_message_size
                self._events.append(Connected(self.server_version, self.protocol_version, self.max_message_size))
        elif kind == T.ERROR and self.state is ConnectionState.CONNECTING:
            self.close(from_server_error(command.error.error, command.error.message))
        elif kind == T.AUTH_CHALLENGE:
            method, data = self._auth()
            self.send(
                make(
                    T.AUTH_RESPONSE,
                    client_version=CLIENT_VERSION,
                    response={"auth_method_name": method, "auth_data": data},
                    protocol_version=PROTOCOL_VERSION,
                )
            )
        elif kind == T.CLOSE_PRODUCER:
            producer = self.producers.pop(command.close_producer.producer_id, None)
            if producer is not None:
                producer.detach(self)
                self._events.append(HandleClosed(producer))
        elif kind == T.CLOSE_CONSUMER:
            consumer = self.consumers.pop(command.close_consumer.consumer_id, None)
            if consumer is not None:
                consumer.detach(self)
                self._events.append(HandleClosed(consumer))
        elif kind == T.ACTIVE_CONSUMER_CHANGE or kind == T.TOPIC_MIGRATED:
            pass
        else:
            payload = payload_of(command)
            fields = payload.DESCRIPTOR.fields_by_name
            if "request_id" in fields and payload.HasField("request_id"):
                request_id = payload.request_id
                if self._deadlines.pop(request_id, None) is not None:
                    try:
                        check(command)
                    except PulsarException as exc:
                        self._events.append(Response(request_id, command, exc))
                    else:
                        self._events.append(Response(request_id, command))
