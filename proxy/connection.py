"""One client connection: the handshake state machine and the routing of commands into the engine.

States: ``AWAITING_CONNECT`` (only CONNECT is valid) -> ``CONNECTED`` -> ``CLOSED``. A frame that
breaks the protocol closes this connection alone, with the reason logged. With authentication enabled, CONNECT
must carry credentials a provider accepts (else ERROR AuthenticationError and close, as Pulsar), and credentials
that expire are refreshed on the live connection with AUTH_CHALLENGE / AUTH_RESPONSE.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, auto
from typing import TYPE_CHECKING, Any, Protocol

from twisted.internet import protocol
from twisted.internet.interfaces import IDelayedCall
from twisted.internet.task import LoopingCall
from twisted.python.failure import Failure

from engine.authorization import TenantNotFoundError
from engine.clock import now_ms
from engine.cursor import mask_to_words, words_to_mask
from engine.errors import BrokerError
from engine.names import TopicName
from engine.subscription import Consumer, Delivery, SubType
from engine.topic import DUPLICATE, AccessMode, Producer, Topic
from engine.transactions import TxnId
from proxy.authentication import AuthenticationError
from proxy.stats_json import consumer_stats
from proxy.tls import verified_peer_certificate
from proxy.topic_lists import TopicListCommands
from proxy.transactions import TransactionCommands, transactional_ack
from wire.commands import NO_ID, MessageEncoder, ReceiptEncoder, frame, make, payload_of, type_name
from wire.framing import (
    FrameDecoder,
    ProtocolError,
    encode_command,
    parse_body,
)
from wire.message_id import MessageId
from wire.pulsar_api_pb2 import (
    BaseCommand,
    CommandAck,
    KeySharedMode,
    ServerError,
)
from wire.validate import check_command, flow_permits

if TYPE_CHECKING:
    from engine.broker import Broker
    from engine.store import StoredSchema
    from proxy.authentication import Authenticator
    from wire.framing import MessageBody
    from wire.pulsar_api_pb2 import CommandSeek, CommandSubscribe, Schema

log = logging.getLogger(__name__)

T = BaseCommand
#: The most frequent command's type, as a constant (a look-up on the message class costs more).
_SEND = T.SEND
#: Highest protocol version this endpoint speaks (v20: topic migration).
PROTOCOL_VERSION = 20
#: Seconds a closing connection may take to flush its last writes before it is aborted.
CLOSE_GRACE_SECONDS = 5.0
#: Sends awaiting their receipt before the connection stops reading (Pulsar's
#: ``maxPendingPublishRequestsPerConnection``); reading resumes below half of it.
MAX_PENDING_SENDS = 1000
_SCHEMA_VERSION = struct.Struct(">q")
#: What Pulsar answers a PRODUCER or SUBSCRIBE whose check needs a tenant that does not exist (its exception's text).
_MISSING_TENANT = (ServerError.AuthorizationError, "org.apache.pulsar.common.util.RestException: HTTP 404 Not Found")
#: What Pulsar answers to refused credentials, whatever the reason (the reason is only logged).
AUTHENTICATION_FAILED = "Failed to authenticate"
#: The challenge that asks a client for fresh credentials (Pulsar's ``AuthData.REFRESH_AUTH_DATA``).
REFRESH_AUTH_DATA = b"PulsarAuthRefresh"
#: Commands only a server sends: receiving one is a protocol violation.
_SERVER_ONLY = frozenset(
    {
        T.CONNECTED,
        T.SEND_RECEIPT,
        T.SEND_ERROR,
        T.MESSAGE,
        T.SUCCESS,
        T.ERROR,
        T.PRODUCER_SUCCESS,
        T.PARTITIONED_METADATA_RESPONSE,
        T.LOOKUP_RESPONSE,
        T.CONSUMER_STATS_RESPONSE,
        T.REACHED_END_OF_TOPIC,
        T.GET_LAST_MESSAGE_ID_RESPONSE,
        T.ACTIVE_CONSUMER_CHANGE,
        T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
        T.GET_SCHEMA_RESPONSE,
        T.ACK_RESPONSE,
        T.GET_OR_CREATE_SCHEMA_RESPONSE,
        T.WATCH_TOPIC_LIST_SUCCESS,
        T.WATCH_TOPIC_UPDATE,
    }
)


@dataclass(frozen=True)
class ConnectionTimeouts:
    """How long a peer may stay silent, take to say CONNECT, or take to finish a frame it began (seconds)."""

    #: Between keep-alive checks: a peer silent for a whole interval gets a PING, and is dropped if it is still
    #: silent at the next check (Pulsar's keepAliveIntervalSeconds).
    keep_alive: float = 30.0
    handshake: float = 10.0
    frame: float = 30.0


class State(Enum):
    """Connection states."""

    AWAITING_CONNECT = auto()
    CONNECTED = auto()
    CLOSED = auto()


class ConnectionService(Protocol):
    """What a connection asks of the service all connections share, passed down at construction
    (``proxy.server.BrokerService`` satisfies it): the engine, the reactor, the settings of a connection, and the
    commands that need more than one connection's state."""

    broker: Broker
    reactor: Any
    timeouts: ConnectionTimeouts
    authenticator: Authenticator | None
    authentication_refresh_check_seconds: float
    #: Epoch seconds (token expiry times are).
    clock: Callable[[], float]
    server_version: str
    connections: set[PulsarConnection]

    def flush_later(self, connection: PulsarConnection) -> None: ...

    def lookup_urls(self, listener_name: str, reached_host: str) -> tuple[str | None, str | None]: ...

    def partitioned_metadata(self, topic: str) -> int: ...

    def check_lookup(self, topic: str) -> None: ...

    def register_schema(self, name: TopicName, schema: Schema) -> int: ...

    def schema_proto(self, schema: StoredSchema, topic: TopicName) -> dict[str, object]: ...

    def create_initial_subscription(self, topic: Any, name: str) -> None: ...

    def subscribe(self, connection: PulsarConnection, request: CommandSubscribe) -> Consumer: ...

    def unsubscribe(self, consumer: Consumer, force: bool) -> None: ...

    def seek(self, consumer: Consumer, request: CommandSeek) -> None: ...


class PulsarConnection(protocol.Protocol):
    """Speaks the Pulsar binary protocol with one client."""

    def __init__(self, service: ConnectionService) -> None:
        self.service = service
        #: The role CONNECT authenticated (None while authentication is disabled), its method and when its
        #: credentials expire (epoch seconds; None: never).
        self.role: str | None = None
        self.auth_method = ""
        self._auth_expires_at: float | None = None
        self._auth_refresh: LoopingCall | None = None
        #: An AUTH_CHALLENGE is unanswered; still unanswered at the next check, the connection closes.
        self._auth_challenge_pending = False
        self._supports_auth_refresh = False
        self.broker = service.broker
        self.state = State.AWAITING_CONNECT
        self.decoder = FrameDecoder(self.broker.config.max_message_size)
        self._receipts = ReceiptEncoder()
        self._messages = MessageEncoder()
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self._producer_requests: dict[int, int] = {}
        self._held_notices: list[tuple[Consumer, bool]] = []
        #: Consumers whose SUBSCRIBE waits for their new subscription to be stored (their notices are held).
        self._subscribing: set[Consumer] = set()
        self._heard_since_ping = True
        self._keepalive: LoopingCall | None = None
        #: Closes a connection that does not say CONNECT in time, or leaves a frame unfinished for too long.
        self._handshake_timer: IDelayedCall | None = None
        self._frame_timer: IDelayedCall | None = None
        #: Cuts off a closing peer that does not read (see close); cancelled once the connection is gone.
        self._abort_timer: IDelayedCall | None = None
        #: When the frame that is buffered unfinished began to arrive (reactor seconds), or None.
        self._frame_begun: float | None = None
        self.peer = "?"
        self.client_version = ""
        #: When the connection was accepted (epoch milliseconds), for the admin API's stats.
        self.connected_ms = now_ms(self.broker.clock)
        #: Sends not answered yet, and whether reading is paused because of them (publish back-pressure).
        self._pending_sends = 0
        self._reading_paused = False
        #: Plain SENDs of one producer read in a row and checked, not yet published: the run ends (is published in
        #: one go) at the first frame that is not one of them, and with the read (see :meth:`_end_run`).
        #: Each is ``(sequence id, highest sequence id, body)``, the highest as its receipt echoes it: NO_ID when the
        #: SEND gave none (0 in a transaction's run, as Pulsar answers).
        self._run: list[tuple[int, int, MessageBody]] = []
        self._run_producer: Producer | None = None
        #: The transaction of the run's SENDs (None: plain SENDs); a run holds the SENDs of one transaction.
        self._run_txn: TxnId | None = None
        #: Frames written during this reactor turn, sent together at its end (one ``send`` per turn).
        self._outbox: list[bytes] = []
        #: Whether a read is being handled: what it writes is sent when it ends, with no end-of-turn flush.
        self._reading = False
        #: What the TLS layer decrypted from one network read so far, handled as one read at its end (begin_read).
        self._gathered: list[bytes] | None = None
        #: False while the transport holds more unsent bytes than its buffer size (the peer does not read): no
        #: messages are dispatched to this connection's consumers meanwhile (see pauseProducing).
        self.writable = True
        self.protocol_version = 0
        self._handlers: dict[int, Callable[[BaseCommand, bytes | None], None]] = {
            T.PING: self._on_ping,
            T.PONG: lambda c, b: None,
            T.PARTITIONED_METADATA: self._on_partitioned_metadata,
            T.LOOKUP: self._on_lookup,
            T.PRODUCER: self._on_producer,
            T.SEND: self._on_send,
            T.CLOSE_PRODUCER: self._on_close_producer,
            T.SUBSCRIBE: self._on_subscribe,
            T.FLOW: self._on_flow,
            T.ACK: self._on_ack,
            T.REDELIVER_UNACKNOWLEDGED_MESSAGES: self._on_redeliver,
            T.UNSUBSCRIBE: self._on_unsubscribe,
            T.CLOSE_CONSUMER: self._on_close_consumer,
            T.SEEK: self._on_seek,
            T.GET_LAST_MESSAGE_ID: self._on_get_last_message_id,
            T.GET_SCHEMA: self._on_get_schema,
            T.GET_OR_CREATE_SCHEMA: self._on_get_or_create_schema,
            T.CONSUMER_STATS: self._on_consumer_stats,
            T.AUTH_RESPONSE: self._on_auth_response,
        }
        TransactionCommands(self).register(self._handlers)
        self.topic_lists = TopicListCommands(self)
        self.topic_lists.register(self._handlers)

    # -- transport events ------------------------------------------------------------------

    def connectionMade(self) -> None:  # noqa: N802 (Twisted's name)
        peer = self.transport.getPeer()
        self.peer = f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"
        # Responses are small and latency-bound: send them at once, as Pulsar brokers do.
        self.transport.setTcpNoDelay(True)
        # The transport tells this connection when its peer stops reading (pauseProducing) and reads again.
        self.transport.registerProducer(self, True)
        self.service.connections.add(self)
        timeouts = self.service.timeouts
        self._keepalive = LoopingCall(self._keepalive_tick)
        self._keepalive.clock = self.service.reactor
        self._keepalive.start(timeouts.keep_alive, now=False)
        self._handshake_timer = self.service.reactor.callLater(
            timeouts.handshake, self.close, f"no CONNECT within {timeouts.handshake:g} s"
        )

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        if self.state is State.CLOSED:
            return
        if self._gathered is not None:
            self._gathered.append(data)
            return
        self._heard_since_ping = True
        self._reading = True
        try:
            completed = self._handle_frames(data)
        finally:
            self._reading = False
        # The answers to this read go out now, not after the reads of every other connection in this turn.
        if self._outbox:
            self.flush()
        if self._frame_begun is not None or self.decoder.buffered:
            self._watch_unfinished_frame(completed)

    def begin_read(self) -> None:
        """Gather the data received until :meth:`end_read` (the TLS records of one network read)."""
        self._gathered = []

    def end_read(self) -> None:
        """Handle what was gathered since :meth:`begin_read` as one read."""
        gathered, self._gathered = self._gathered, None
        if gathered:
            self.dataReceived(gathered[0] if len(gathered) == 1 else b"".join(gathered))

    def _watch_unfinished_frame(self, completed: bool) -> None:
        """Time a frame that has begun to arrive: a peer that never finishes it is dropped (slow loris).

        ``completed``: this read finished a frame, so what is buffered now is a frame begun by this read. Busy
        connections end many reads inside a frame; one timer per connection serves them all: it is armed when a frame
        is begun and none is, and when it fires it closes the connection only if the unfinished frame is older than
        the timeout (else it waits for the newer one's deadline).
        """
        if not self.decoder.buffered:
            self._frame_begun = None
        elif self._frame_begun is None or completed:
            self._frame_begun = self.service.reactor.seconds()
            if self._frame_timer is None and self.state is not State.CLOSED:
                self._frame_timer = self.service.reactor.callLater(self.service.timeouts.frame, self._frame_timed_out)

    def _frame_timed_out(self) -> None:
        self._frame_timer = None
        if self._frame_begun is None:
            return
        timeout = self.service.timeouts.frame
        left = self._frame_begun + timeout - self.service.reactor.seconds()
        if left > 0:
            self._frame_timer = self.service.reactor.callLater(left, self._frame_timed_out)
        else:
            self.close(f"a frame begun {timeout:g} s ago is still unfinished")

    def _handle_frames(self, data: bytes) -> bool:
        """Handle the frames ``data`` completes; whether it completed any."""
        frames, error = self.decoder.decode(data)
        closed, connected = State.CLOSED, State.CONNECTED
        for item in frames:
            if self.state is closed:
                break
            try:
                # The most frequent command first, with no detour through _handle; a plain SEND's command was only
                # scanned (see wire.framing.scan_plain_send).
                send = item.send
                if send is not None and self.state is connected:
                    self._on_plain_send(*send, item.body)
                    continue
                txn_send = item.txn_send
                if txn_send is not None and self.state is connected:
                    # A transactional SEND of the shape clients send: only scanned too (wire.framing.scan_txn_send).
                    self._on_txn_send(*txn_send, item.body)
                    continue
                command = item.command
                if command.type == _SEND and self.state is State.CONNECTED:
                    self._on_send(command, item.body)
                    continue
                if self._run:
                    self._end_run()
                self._handle(command, item.body)
            except ProtocolError as exc:
                self._end_run()
                self.close(f"protocol violation in {type_name(item.command.type)}: {exc}")
            except Exception:
                log.exception("[%s] failed handling %s", self.peer, type_name(item.command.type))
                self._end_run()
                self.close("internal error")
        else:
            if error is not None and self.state is not State.CLOSED:
                self._end_run()
                self.close(f"malformed frame: {error}")
                return bool(frames)
        if self._run:
            self._end_run()
        return bool(frames)

    def _end_run(self) -> None:
        """Publish the run of SENDs read so far (before what comes after them is handled or answered)."""
        if not self._run:
            return
        run, self._run = self._run, []
        txn, self._run_txn = self._run_txn, None
        try:
            if txn is None:
                self.service.publish_run(self, self._run_producer, run)
            else:
                self.service.publish_txn_run(self, self._run_producer, txn, run)
        except Exception:
            log.exception("[%s] failed handling SEND", self.peer)
            self.close("internal error")

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:  # noqa: N802
        self.state = State.CLOSED
        self.service.connections.discard(self)
        for loop in (self._keepalive, self._auth_refresh):
            if loop is not None and loop.running:
                loop.stop()
        for timer in (self._handshake_timer, self._frame_timer, self._abort_timer):
            if timer is not None and timer.active():
                timer.cancel()
        for producer in self.producers.values():
            if producer.topic is not None:
                producer.topic.remove_producer(producer)
        for consumer in self.consumers.values():
            if consumer.subscription is not None:
                consumer.subscription.remove_consumer(consumer)
        self.producers.clear()
        self.consumers.clear()
        self.topic_lists.close()

    # -- flow control: Twisted calls these as this connection's transport fills and drains ------------

    def pauseProducing(self) -> None:  # noqa: N802 (Twisted's name)
        """The peer does not read what is sent: stop dispatching to its consumers."""
        self.writable = False

    def resumeProducing(self) -> None:  # noqa: N802
        """The peer read what was queued: dispatch to its consumers again."""
        self.writable = True
        for consumer in list(self.consumers.values()):
            if consumer.subscription is not None:
                consumer.subscription.dispatch()

    def stopProducing(self) -> None:  # noqa: N802
        """The connection is going away; connectionLost detaches the consumers."""

    def close(self, reason: str) -> None:
        """Close this connection, logging why: flush what is written, then FIN (as Pulsar does).

        A peer that does not read what is left is cut off after ``CLOSE_GRACE_SECONDS``.
        """
        if self.state is State.CLOSED:
            return
        log.warning("[%s] closing connection: %s", self.peer, reason)
        self.flush()
        # A paused producer would hold the close until the peer reads everything; the grace period bounds it.
        self.transport.unregisterProducer()
        self.state = State.CLOSED
        self.transport.loseConnection()
        # Aborting a connection already lost would reach into a TLS layer that is gone (Twisted raises).
        self._abort_timer = self.service.reactor.callLater(CLOSE_GRACE_SECONDS, self.transport.abortConnection)

    def _keepalive_tick(self) -> None:
        if not self._heard_since_ping:
            self.close("keepalive timeout: no traffic since the last PING")
            return
        self._heard_since_ping = False
        self.write(frame(T.PING))

    def write(self, data: bytes) -> None:
        """Send bytes unless the connection is closed: after the read being handled, else at the end of this turn."""
        if self.state is State.CLOSED:
            return
        if not self._outbox and not self._reading:
            self.service.flush_later(self)
        self._outbox.append(data)

    def flush(self) -> None:
        """Send what was written since the last flush, in one write."""
        if self._outbox and self.state is not State.CLOSED:
            self.transport.write(b"".join(self._outbox))
        self._outbox.clear()

    def send(self, kind: int, **fields: object) -> None:
        """Send one simple command."""
        self.write(frame(kind, **fields))

    def error(self, request_id: int, exc: BrokerError) -> None:
        """Answer a request with CommandError."""
        self.send(T.ERROR, request_id=request_id, error=exc.code, message=exc.message)

    # -- dispatch -----------------------------------------------------------------------------

    def _handle(self, command: BaseCommand, body: bytes | None) -> None:
        kind = command.type
        check_command(command)
        if self.state is State.AWAITING_CONNECT:
            if kind != T.CONNECT:
                raise ProtocolError(f"{type_name(kind)} before CONNECT")
            self._on_connect(command)
            return
        if kind == T.CONNECT:
            raise ProtocolError("second CONNECT on a connected connection")
        if kind in _SERVER_ONLY:
            raise ProtocolError("command is only sent by servers")
        handler = self._handlers.get(kind)
        if handler is None:
            self._unsupported(command)
            return
        if not payload_of(command).IsInitialized():
            raise ProtocolError("required fields are missing")
        handler(command, body)

    def _unsupported(self, command: BaseCommand) -> None:
        payload = payload_of(command)
        if "request_id" in payload.DESCRIPTOR.fields_by_name and payload.HasField("request_id"):
            self.error(
                payload.request_id,
                BrokerError(ServerError.NotAllowedError, f"{type_name(command.type)} is not supported"),
            )
        else:
            log.info("[%s] ignoring unsupported %s", self.peer, type_name(command.type))

    # -- handshake, keepalive, lookup --------------------------------------------------------

    def _on_connect(self, command: BaseCommand) -> None:
        connect = command.connect
        self.client_version = connect.client_version
        authenticator = self.service.authenticator
        if authenticator is not None and authenticator.enabled:
            self.auth_method = connect.auth_method_name or "none"
            self._supports_auth_refresh = connect.feature_flags.supports_auth_refresh
            try:
                identity = authenticator.identify(self.auth_method, connect.auth_data, self.peer_certificate())
            except AuthenticationError as exc:
                self._authentication_failed("connect", exc)
                return
            self.role = identity.role
            self._watch_expiry(identity.expires_at)
        elif connect.auth_method_name not in ("", "none"):
            log.info("[%s] auth method %r ignored: authentication is off", self.peer, connect.auth_method_name)
        self.state = State.CONNECTED
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        self.protocol_version = min(connect.protocol_version, PROTOCOL_VERSION)
        self.send(
            T.CONNECTED,
            server_version=self.service.server_version,
            protocol_version=self.protocol_version,
            max_message_size=self.broker.config.max_message_size,
            # What this endpoint supports of what Pulsar announces; a client uses what it is told of.
            feature_flags={"supports_topic_watchers": True},
        )

    def peer_certificate(self) -> object | None:
        """The client certificate the TLS handshake verified (a pyOpenSSL X509), None on a plain connection."""
        return verified_peer_certificate(self.transport)

    def _authentication_failed(self, stage: str, exc: AuthenticationError) -> None:
        """Answer as Pulsar does (one ERROR with request id -1 and a fixed message) and close; log the reason."""
        log.info("[%s] authentication failed on %s (method %s): %s", self.peer, stage, self.auth_method, exc.message)
        self.send(T.ERROR, request_id=NO_ID, error=ServerError.AuthenticationError, message=AUTHENTICATION_FAILED)
        self.close(f"authentication failed: {exc.message}")

    def _watch_expiry(self, expires_at: float | None) -> None:
        """Check credentials that expire every authentication-refresh-check-seconds (as Pulsar's broker)."""
        self._auth_expires_at = expires_at
        if expires_at is None or self._auth_refresh is not None:
            return
        self._auth_refresh = LoopingCall(self._check_credentials)
        self._auth_refresh.clock = self.service.reactor
        self._auth_refresh.start(self.service.authentication_refresh_check_seconds, now=False)

    def _check_credentials(self) -> None:
        """Expired credentials: ask the client for fresh ones once; close if it cannot or did not answer."""
        expires_at = self._auth_expires_at
        if self.state is not State.CONNECTED or expires_at is None or expires_at >= self.service.clock():
            return
        if self._auth_challenge_pending:
            self.close("the client did not answer AUTH_CHALLENGE with fresh credentials in time")
        elif not self._supports_auth_refresh:
            self.close("credentials expired and the client does not support refreshing them")
        else:
            self._auth_challenge_pending = True
            # As Pulsar's: the challenge and the protocol version, no server version.
            self.send(
                T.AUTH_CHALLENGE,
                challenge={"auth_method_name": self.auth_method, "auth_data": REFRESH_AUTH_DATA},
                protocol_version=self.protocol_version,
            )

    def _on_auth_response(self, command: BaseCommand, body: bytes | None) -> None:
        authenticator = self.service.authenticator
        if authenticator is None or not authenticator.enabled:
            return
        response = command.authResponse.response
        try:
            identity = authenticator.identify(self.auth_method, response.auth_data, self.peer_certificate())
        except AuthenticationError as exc:
            self._authentication_failed("auth response", exc)
            return
        if identity.role != self.role:
            self.close(f"the role cannot change on a credentials refresh: {self.role} -> {identity.role}")
            return
        self._auth_challenge_pending = False
        self._watch_expiry(identity.expires_at)

    def _on_ping(self, command: BaseCommand, body: bytes | None) -> None:
        self.send(T.PONG)

    # -- authorization ------------------------------------------------------------------------

    def authorize(
        self,
        name: TopicName,
        operation: str,
        refused: str,
        subscription: str | None = None,
        missing_tenant: tuple[int, str] = _MISSING_TENANT,
    ) -> None:
        """Raise AuthorizationError with Pulsar's ``refused`` text unless this connection's role may do the topic
        operation (it always may with authorization off); a tenant that does not exist fails the check with
        ``missing_tenant`` (code, message), as each of Pulsar's commands reports it."""
        try:
            allowed = self.broker.authorization.allow_topic_operation(name, self.role, operation, subscription)
        except TenantNotFoundError:
            raise BrokerError(*missing_tenant) from None
        if not allowed:
            raise BrokerError(ServerError.AuthorizationError, refused)

    def _on_partitioned_metadata(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.partitionMetadata
        try:
            name = TopicName.parse(request.topic)
            # As Pulsar: a tenant that is not there is reported as missing, not as a refusal.
            missing = (ServerError.TopicNotFound, f"Tenant or namespace or topic does not exist: {name.namespace_name}")
            self.authorize(name, "LOOKUP", "Client is not authorized to Get Partition Metadata", None, missing)
            partitions = self.service.partitioned_metadata(request.topic)
        except BrokerError as exc:
            self.send(
                T.PARTITIONED_METADATA_RESPONSE,
                request_id=request.request_id,
                response=1,
                error=exc.code,
                message=exc.message,
            )
            return
        self.send(T.PARTITIONED_METADATA_RESPONSE, request_id=request.request_id, partitions=partitions, response=0)

    def _on_lookup(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.lookupTopic
        try:
            name = TopicName.parse(request.topic)
            missing = (ServerError.AuthorizationError, "Exception occurred while trying to authorize lookup")
            self.authorize(name, "LOOKUP", "Client is not authorized to Lookup", None, missing)
            self.service.check_lookup(request.topic)
            url, url_tls = self.service.lookup_urls(request.advertised_listener_name, self.transport.getHost().host)
        except BrokerError as exc:
            self.send(
                T.LOOKUP_RESPONSE,
                request_id=request.request_id,
                response=2,
                error=exc.code,
                message=exc.message,
            )
            return
        self.send(
            T.LOOKUP_RESPONSE,
            request_id=request.request_id,
            response=1,
            brokerServiceUrl=url,
            brokerServiceUrlTls=url_tls,
            authoritative=True,
            proxy_through_service_url=False,
        )

    # -- producers ---------------------------------------------------------------------------

    def _on_producer(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.producer
        existing = self.producers.get(request.producer_id)
        if existing is not None:
            self._producer_success(existing, request.request_id, ready=True)
            return
        try:
            name = TopicName.parse(request.topic)
            self.authorize(name, "PRODUCE", "Client is not authorized to Produce")
            if request.initial_subscription_name:
                subscription = request.initial_subscription_name
                self.authorize(name, "SUBSCRIBE", "Client is not authorized to Produce", subscription)
            topic = self.broker.client_topic(request.topic)
            schema_version = None
            if request.HasField("schema"):
                schema_version = self.service.register_schema(topic.name, request.schema)
            if request.initial_subscription_name:
                self.service.create_initial_subscription(topic, request.initial_subscription_name)
            name = request.producer_name or self.broker.generate_producer_name()
            producer = Producer(
                request.producer_id,
                name,
                AccessMode(request.producer_access_mode),
                request.epoch,
                self,
                metadata={kv.key: kv.value for kv in request.metadata},
            )
            ready = topic.add_producer(producer)
        except BrokerError as exc:
            self.error(request.request_id, exc)
            return
        producer.schema_version = schema_version
        self.producers[request.producer_id] = producer
        self._producer_requests[request.producer_id] = request.request_id
        self._producer_success(producer, request.request_id, ready)

    def _producer_success(self, producer: Producer, request_id: int, ready: bool) -> None:
        fields: dict[str, object] = {
            "request_id": request_id,
            "producer_name": producer.name,
            "last_sequence_id": producer.topic.last_sequence_id(producer.name) if producer.topic else -1,
            "producer_ready": ready,
        }
        # Always set, empty without a schema, as Pulsar does: the Java client 4.0.x requires the field.
        version = producer.schema_version
        fields["schema_version"] = b"" if version is None else _SCHEMA_VERSION.pack(version)
        self.send(T.PRODUCER_SUCCESS, **fields)

    def producer_ready(self, producer: Producer) -> None:
        """A producer waiting for exclusive access got it."""
        request_id = self._producer_requests.get(producer.producer_id)
        if request_id is not None:
            self._producer_success(producer, request_id, ready=True)

    def close_producer(self, producer: Producer) -> None:
        """Server-initiated close (fenced, or topic going away); the client reconnects it."""
        if self.producers.get(producer.producer_id) is producer:
            del self.producers[producer.producer_id]
            self.send(T.CLOSE_PRODUCER, producer_id=producer.producer_id, request_id=NO_ID)

    def _on_send(self, command: BaseCommand, body: bytes | None) -> None:
        send = command.send
        # What _handle checks of any command, for a SEND (check_command leaves a SEND as it is: it holds no strings).
        if not send.IsInitialized():
            raise ProtocolError("required fields are missing")
        sequence_id = send.sequence_id
        if not (send.HasField("txnid_most_bits") or send.HasField("txnid_least_bits")):
            highest = send.highest_sequence_id if send.HasField("highest_sequence_id") else None
            self._on_plain_send(send.producer_id, sequence_id, highest, body)
            return
        self._on_txn_send(
            send.producer_id, sequence_id, send.highest_sequence_id, send.txnid_most_bits, send.txnid_least_bits, body
        )

    def _on_txn_send(
        self, producer_id: int, sequence_id: int, highest: int, most: int, least: int, body: bytes | None
    ) -> None:
        """A SEND in transaction ``(most, least)``: checked, then added to the run of its producer's SENDs in it
        (checked against the transaction when published, see publish_txn_run)."""
        run, run_txn = self._run, self._run_txn
        if (
            run
            and run_txn is not None
            and run_txn.least == least
            and run_txn.most == most
            and body is not None
            and self.producers.get(producer_id) is self._run_producer
        ):
            # The SEND after the first of its transaction's run, as most are: as in _on_plain_send, the checks left
            # are the body's checksum and back-pressure, and a SEND that fails them goes through them all.
            message = parse_body(body)
            if message.checksum_ok and self._pending_sends < MAX_PENDING_SENDS - 1:
                self._pending_sends += 1
                run.append((sequence_id, highest, message))
                return
        accepted = self._accept_send(producer_id, sequence_id, body)
        if accepted is None:
            return
        producer, message = accepted
        txn = (most, least)
        if producer is not self._run_producer or txn != self._run_txn:
            self._end_run()
            self._run_producer, self._run_txn = producer, TxnId(most, least)
        # As Pulsar: a transactional SEND's receipt echoes its highest sequence id as read, 0 when not given.
        self._run.append((sequence_id, highest, message))

    def _on_plain_send(self, producer_id: int, sequence_id: int, highest: int | None, body: bytes | None) -> None:
        """A SEND outside a transaction: checked, then added to the run of its producer's SENDs."""
        run = self._run
        if run and self._run_txn is None and body is not None and self.producers.get(producer_id) is self._run_producer:
            # The SEND after the first of a plain run, as most are: its producer was found ready by that first one,
            # so :meth:`_accept_send`'s checks come down to the body's checksum and back-pressure. A SEND that fails
            # its checksum, or would pause reading, goes through them all.
            message = parse_body(body)
            if message.checksum_ok and self._pending_sends < MAX_PENDING_SENDS - 1:
                self._pending_sends += 1
                run.append((sequence_id, NO_ID if highest is None else highest, message))
                return
        accepted = self._accept_send(producer_id, sequence_id, body)
        if accepted is None:
            return
        producer, message = accepted
        if producer is not self._run_producer or self._run_txn is not None:
            self._end_run()
            self._run_producer = producer
        self._run.append((sequence_id, NO_ID if highest is None else highest, message))

    def _accept_send(
        self, producer_id: int, sequence_id: int, body: bytes | None
    ) -> tuple[Producer, MessageBody] | None:
        """Check a SEND: its producer must be ready and its body whole (else ProtocolError); a body whose checksum
        fails is answered with SEND_ERROR (None). Counts an accepted SEND as pending (publish back-pressure)."""
        producer = self.producers.get(producer_id)
        # A producer with a run going was found ready by the run's first SEND, and only other commands (which end
        # the run first) change that.
        if producer is None or not (
            (self._run and producer is self._run_producer)
            or (producer.topic is not None and producer in producer.topic.producers)
        ):
            raise ProtocolError(f"SEND for producer {producer_id}, which is not ready on this connection")
        if body is None:
            raise ProtocolError("SEND without a message body")
        message = parse_body(body)
        if not message.checksum_ok:
            self._end_run()
            self.send(
                T.SEND_ERROR,
                producer_id=producer.producer_id,
                sequence_id=sequence_id,
                error=ServerError.ChecksumError,
                message="Checksum failed on the broker",
            )
            return None
        self._pending_sends += 1
        if self._pending_sends >= MAX_PENDING_SENDS and not self._reading_paused:
            # As Pulsar: stop reading from a client that sends faster than its entries become durable.
            self._reading_paused = True
            self.transport.pauseProducing()
        return producer, message

    def receipt(self, producer: Producer, sequence_id: int, highest: int | None, result: int | BrokerError) -> None:
        """Answer a SEND once its entry is durable (or it failed); ``highest`` is the SEND's highest sequence id."""
        self._answered(1)
        self.write(self._answer(producer, sequence_id, highest, result))

    def receipts(
        self,
        producer: Producer,
        sends: list[tuple[int, int, MessageBody]],
        results: list[int | BrokerError] | BrokerError,
    ) -> None:
        """Answer a run of SENDs ``(sequence id, highest sequence id or NO_ID, body)`` once durable, as :meth:`receipt`
        answers each: ``results`` holds each one's entry id, ``DUPLICATE`` or error, or is the error of them all."""
        self._answered(len(sends))
        if isinstance(results, BrokerError):
            results = [results] * len(sends)
        ledger = producer.topic.ledger_id  # type: ignore[union-attr]
        encoded = self._receipts.encode_run(producer.producer_id, ledger, sends, results)
        if encoded is None:  # errors or duplicates among them: each answered alone
            answer = self._answer
            encoded = b"".join(
                answer(producer, sequence_id, highest, result)
                for (sequence_id, highest, _), result in zip(sends, results, strict=True)
            )
        self.write(encoded)

    def _answered(self, count: int) -> None:
        """``count`` sends are answered: read again once few enough are left (publish back-pressure)."""
        self._pending_sends -= count
        if self._reading_paused and self._pending_sends <= MAX_PENDING_SENDS // 2 and self.state is not State.CLOSED:
            self._reading_paused = False
            self.transport.resumeProducing()

    def _answer(self, producer: Producer, sequence_id: int, highest: int | None, result: int | BrokerError) -> bytes:
        """The SEND_RECEIPT (or SEND_ERROR) frame of one SEND's ``result``: its entry id, DUPLICATE or its error."""
        if isinstance(result, BrokerError):
            return frame(
                T.SEND_ERROR,
                producer_id=producer.producer_id,
                sequence_id=sequence_id,
                error=result.code,
                message=result.message,
            )
        if result == DUPLICATE:
            ledger = entry = NO_ID
        else:
            ledger, entry = producer.topic.ledger_id, result  # type: ignore[union-attr]
        return self._receipts.encode(producer.producer_id, sequence_id, ledger, entry, highest)

    def _on_close_producer(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.close_producer
        producer = self.producers.pop(request.producer_id, None)
        self._producer_requests.pop(request.producer_id, None)
        if producer is not None and producer.topic is not None:
            producer.topic.remove_producer(producer)
        self.send(T.SUCCESS, request_id=request.request_id)

    # -- consumers ----------------------------------------------------------------------------

    def _on_subscribe(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.subscribe
        known = self.consumers.get(request.consumer_id)
        if known is not None:
            self._answer_subscribe(known, request.request_id)
            return
        try:
            name = TopicName.parse(request.topic)
            self.authorize(name, "CONSUME", "Client is not authorized to subscribe", request.subscription)
            consumer = self.service.subscribe(self, request)
        except BrokerError as exc:
            self.error(request.request_id, exc)
            return
        self.consumers[request.consumer_id] = consumer
        self._answer_subscribe(consumer, request.request_id)

    def _answer_subscribe(self, consumer: Consumer, request_id: int) -> None:
        """Answer SUBSCRIBE once the subscription is stored (a new durable one is at the next commit); if that
        commit fails, answer its error and detach the consumer, as if the subscribe had failed."""
        subscription = consumer.subscription
        topic = subscription.topic if subscription is not None else None
        if not isinstance(topic, Topic):
            self._subscribed(consumer, request_id)
            return
        self._subscribing.add(consumer)

        def stored(error: BrokerError | None) -> None:
            self._subscribing.discard(consumer)
            if self.state is State.CLOSED or self.consumers.get(consumer.consumer_id) is not consumer:
                return
            if error is None:
                self._subscribed(consumer, request_id)
                return
            del self.consumers[consumer.consumer_id]
            if consumer.subscription is not None:
                consumer.subscription.remove_consumer(consumer)
            self._held_notices = [(held, active) for held, active in self._held_notices if held is not consumer]
            self.error(request_id, error)

        topic.when_stored(subscription, stored)

    def _subscribed(self, consumer: Consumer, request_id: int) -> None:
        self.send(T.SUCCESS, request_id=request_id)
        held, self._held_notices = self._held_notices, []
        for held_consumer, is_active in held:
            self.active_consumer_change(held_consumer, is_active)

    def deliver(self, consumer: Consumer, deliveries: list[Delivery]) -> None:
        """Write MESSAGE frames."""
        if self.state is State.CLOSED:
            return
        topic = consumer.subscription.topic if consumer.subscription else None
        ledger = topic.ledger_id if topic else 0
        # The client takes the partition of received message ids from here, as the Java broker sends it.
        partition = topic.name.partition_index if topic else -1
        encode = self._messages.encode
        consumer_id, epoch = consumer.consumer_id, consumer.epoch
        parts = []
        for delivery in deliveries:
            entry, mask = delivery.entry, delivery.unacked_mask
            words = None if mask is None else mask_to_words(mask)
            count = delivery.redelivery_count
            parts.append(encode(consumer_id, ledger, entry.entry_id, partition, count, words, epoch, entry.body))
        self.write(b"".join(parts))

    def active_consumer_change(self, consumer: Consumer, is_active: bool) -> None:
        """Tell a Failover consumer whether it is the active one."""
        if self.consumers.get(consumer.consumer_id) is not consumer or consumer in self._subscribing:
            self._held_notices.append((consumer, is_active))
            return
        self.send(T.ACTIVE_CONSUMER_CHANGE, consumer_id=consumer.consumer_id, is_active=is_active)

    def reached_end_of_topic(self, consumer: Consumer) -> None:
        """Tell a consumer that its terminated topic has nothing more to deliver."""
        if self.consumers.get(consumer.consumer_id) is consumer:
            self.send(T.REACHED_END_OF_TOPIC, consumer_id=consumer.consumer_id)

    def close_consumer(self, consumer: Consumer) -> None:
        """Server-initiated close (seek, topic going away); the client re-subscribes."""
        if self.consumers.get(consumer.consumer_id) is consumer:
            del self.consumers[consumer.consumer_id]
            self.send(T.CLOSE_CONSUMER, consumer_id=consumer.consumer_id, request_id=NO_ID)

    def _consumer(self, consumer_id: int) -> Consumer | None:
        consumer = self.consumers.get(consumer_id)
        if consumer is None or consumer.subscription is None:
            return None
        return consumer

    def _on_flow(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.flow
        consumer = self._consumer(request.consumer_id)
        if consumer is None:
            log.info("[%s] FLOW for unknown consumer %d", self.peer, request.consumer_id)
            return
        consumer.last_flow_ms = now_ms(self.broker.clock)
        consumer.subscription.flow(consumer, flow_permits(request.messagePermits))  # type: ignore[union-attr]

    def _on_ack(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.ack
        consumer = self._consumer(request.consumer_id)
        if request.HasField("txnid_most_bits") or request.HasField("txnid_least_bits"):
            transactional_ack(self, consumer, request)
            return
        if consumer is None:
            log.info("[%s] ACK for unknown consumer %d", self.peer, request.consumer_id)
            return
        subscription = consumer.subscription
        topic = subscription.topic  # type: ignore[union-attr]
        acks = []
        # A non-persistent topic keeps no entries: its acknowledgements name nothing (every id is 0:0) and change
        # nothing, as Pulsar's NonPersistentSubscription ignores them; they are still answered.
        stored = topic.name.persistent
        for mid in map(MessageId.from_proto, request.message_id) if stored else ():
            # As Pulsar: ids before the first entry, beyond the last one or of another ledger acknowledge nothing.
            entry = mid.stored_entry(topic.ledger_id, topic.last_confirmed)
            if entry is not None:
                acks.append((entry, words_to_mask(list(mid.ack_set)) if mid.ack_set else None))
        subscription.acknowledge(  # type: ignore[union-attr]
            consumer, acks, cumulative=request.ack_type == CommandAck.Cumulative
        )
        if request.HasField("request_id"):
            self._ack_response(request, None)

    def _ack_response(self, request: CommandAck, exc: BrokerError | None) -> None:
        fields: dict[str, object] = {"consumer_id": request.consumer_id, "request_id": request.request_id}
        if request.HasField("txnid_most_bits") or request.HasField("txnid_least_bits"):
            fields.update(txnid_least_bits=request.txnid_least_bits, txnid_most_bits=request.txnid_most_bits)
        if exc is not None:
            fields.update(error=exc.code, message=exc.message)
        self.send(T.ACK_RESPONSE, **fields)

    def ack_response(self, request: CommandAck, exc: BrokerError | None) -> None:
        """Answer an ACK that asked for a response."""
        self._ack_response(request, exc)

    def _on_redeliver(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.redeliverUnacknowledgedMessages
        consumer = self._consumer(request.consumer_id)
        if consumer is None:
            log.info("[%s] REDELIVER for unknown consumer %d", self.peer, request.consumer_id)
            return
        if request.HasField("consumer_epoch"):
            consumer.epoch = max(consumer.epoch or 0, request.consumer_epoch)
        ids = None
        if len(request.message_ids):
            ledger = consumer.subscription.topic.ledger_id  # type: ignore[union-attr]
            ids = [mid.entry for mid in map(MessageId.from_proto, request.message_ids) if mid.ledger == ledger]
        consumer.subscription.redeliver(consumer, ids)  # type: ignore[union-attr]

    def _on_unsubscribe(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.unsubscribe
        consumer = self._consumer(request.consumer_id)
        if consumer is None:
            self.error(request.request_id, BrokerError(ServerError.MetadataError, "Consumer not found"))
            return
        try:
            self.service.unsubscribe(consumer, force=request.force)
        except BrokerError as exc:
            self.error(request.request_id, exc)
            return
        self.consumers.pop(request.consumer_id, None)
        self.send(T.SUCCESS, request_id=request.request_id)

    def _on_close_consumer(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.close_consumer
        consumer = self.consumers.pop(request.consumer_id, None)
        if consumer is not None and consumer.subscription is not None:
            consumer.subscription.remove_consumer(consumer)

        # Answer once the acknowledgements sent before the close are durable: a client that closed its
        # consumer must not get those messages again, even if the server is killed right after. A commit that
        # failed (a full disk) is answered all the same, as Pulsar answers a close at once: the cursor is written
        # again after a pause, and waiting for that would hold the client's close for as long as the disk is full.
        self.broker.after_commit(lambda _: self.send(T.SUCCESS, request_id=request.request_id), None)

    def _on_seek(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.seek
        consumer = self._consumer(request.consumer_id)
        if consumer is None:
            self.error(request.request_id, BrokerError(ServerError.MetadataError, "Consumer not found"))
            return
        try:
            self.service.seek(consumer, request)
        except BrokerError as exc:
            self.error(request.request_id, exc)
            return
        self.send(T.SUCCESS, request_id=request.request_id)

    def _on_get_last_message_id(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.getLastMessageId
        consumer = self._consumer(request.consumer_id)
        if consumer is None:
            self.error(request.request_id, BrokerError(ServerError.MetadataError, "Consumer not found"))
            return
        subscription = consumer.subscription
        topic = subscription.topic  # type: ignore[union-attr]
        if not topic.name.persistent:
            # As Pulsar 4.2: a non-persistent topic has no last position, and the failure is answered this way.
            failure = BrokerError(ServerError.UnknownError, "Failed to recover Transaction Buffer.")
            self.error(request.request_id, failure)
            return
        last = topic.last_entry()
        compaction = topic.compaction
        if consumer.read_compacted and compaction.exists and (last is None or last.entry_id <= compaction.horizon):
            # Nothing after the compacted view: its last entry is the last this consumer can get.
            last = compaction.last()
        partition = topic.name.partition_index
        if last is None:
            last_id = MessageId(-1, -1, partition)
        else:
            batch_index = last.num_messages - 1 if last.is_batch else -1
            last_id = MessageId(topic.ledger_id, last.entry_id, partition, batch_index)
        mark_delete = subscription.cursor.mark_delete  # type: ignore[union-attr]
        response = make(T.GET_LAST_MESSAGE_ID_RESPONSE, request_id=request.request_id)
        written = last_id.to_proto(response.getLastMessageIdResponse.last_message_id)
        # As Pulsar: the partition and batch index of the last message id are written even when they are -1.
        written.partition, written.batch_index = last_id.partition, last_id.batch_index
        MessageId(topic.ledger_id, max(mark_delete, -1)).to_proto(
            response.getLastMessageIdResponse.consumer_mark_delete_position
        )
        self.write(encode_command(response))

    def _on_get_schema(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.getSchema
        version = _SCHEMA_VERSION.unpack(request.schema_version)[0] if len(request.schema_version) == 8 else None
        try:
            topic = TopicName.parse(request.topic)
        except BrokerError as exc:
            self.send(
                T.GET_SCHEMA_RESPONSE,
                request_id=request.request_id,
                error_code=exc.code,
                error_message=exc.message,
            )
            return
        schema = self.broker.schemas.get(topic.partitioned_parent.full, version)
        if schema is None:
            self.send(
                T.GET_SCHEMA_RESPONSE,
                request_id=request.request_id,
                error_code=ServerError.TopicNotFound,
                error_message="Topic not found or no-schema",
            )
            return
        self.send(
            T.GET_SCHEMA_RESPONSE,
            request_id=request.request_id,
            schema=self.service.schema_proto(schema, topic),
            schema_version=_SCHEMA_VERSION.pack(schema.version),
        )

    def _on_get_or_create_schema(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.getOrCreateSchema
        try:
            version = self.service.register_schema(TopicName.parse(request.topic), request.schema)
        except BrokerError as exc:
            self.send(
                T.GET_OR_CREATE_SCHEMA_RESPONSE,
                request_id=request.request_id,
                error_code=exc.code,
                error_message=exc.message,
            )
            return
        self.send(
            T.GET_OR_CREATE_SCHEMA_RESPONSE,
            request_id=request.request_id,
            schema_version=_SCHEMA_VERSION.pack(version),
        )

    def _on_consumer_stats(self, command: BaseCommand, body: bytes | None) -> None:
        request = command.consumerStats
        consumer = self._consumer(request.consumer_id)
        if consumer is None:
            self.send(
                T.CONSUMER_STATS_RESPONSE,
                request_id=request.request_id,
                error_code=ServerError.ConsumerNotFound,
                error_message=f"Consumer {request.consumer_id} not found",
            )
            return
        subscription = consumer.subscription
        stats = consumer_stats(self.broker.stats, consumer, subscription)  # type: ignore[arg-type]
        # Every field set, as Pulsar answers: the Java client reads each of them.
        self.send(
            T.CONSUMER_STATS_RESPONSE,
            request_id=request.request_id,
            msgRateOut=stats["msgRateOut"],
            msgThroughputOut=stats["msgThroughputOut"],
            msgRateRedeliver=stats["msgRateRedeliver"],
            consumerName=consumer.name,
            availablePermits=stats["availablePermits"],
            unackedMessages=stats["unackedMessages"],
            blockedConsumerOnUnackedMsgs=stats["blockedConsumerOnUnackedMsgs"],
            address=stats["address"],
            connectedSince=stats["connectedSince"],
            type=SubType(subscription.sub_type).name.title().replace("_s", "_S"),  # type: ignore[union-attr]
            msgRateExpired=0.0,
            msgBacklog=subscription.backlog(),  # type: ignore[union-attr]
            messageAckRate=stats["messageAckRate"],
        )


def sticky_ranges(request: object) -> tuple[bool, list[tuple[int, int]]]:
    """Key_Shared mode and fixed hash ranges of a SUBSCRIBE."""
    meta = request.keySharedMeta  # type: ignore[attr-defined]
    sticky = meta.keySharedMode == KeySharedMode.STICKY
    return sticky, [(r.start, r.end) for r in meta.hashRanges]
