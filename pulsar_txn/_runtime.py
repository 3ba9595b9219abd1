"""The blocking shell's engine room: sockets and one I/O thread driving the sans-I/O cores of :mod:`pulsar_txn.core`.

One lock guards every core; user threads change cores under it and wake the I/O thread, which alone reads and
writes sockets (TLS ones included), runs the cores' timers and turns their events into results, notifications (one
condition variable) and callbacks (run on a callback thread, never under the lock). Producers and consumers whose
registration is lost (connection closed, broker closed them) register again from a reconnection thread, with
backoff, until they or the client are closed.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from pulsar_txn.authentication import Authentication
from pulsar_txn.core.connection import (
    Closed,
    Connected,
    Connection,
    ConnectionState,
    HandleClosed,
    MessagesReady,
    Response,
    SendDone,
)
from pulsar_txn.core.consumer import ConsumerCore
from pulsar_txn.core.names import full_topic_name
from pulsar_txn.core.producer import ProducerCore
from pulsar_txn.exceptions import (
    RETRYABLE,
    AlreadyClosed,
    ConnectError,
    ProducerBlockedQuotaExceededException,
    PulsarException,
    Timeout,
    TopicNotFound,
    TransactionCoordinatorNotFoundError,
)
from wire.commands import payload_of
from wire.pulsar_api_pb2 import BaseCommand

T = BaseCommand
log = logging.getLogger("pulsar_txn")
#: Lookups follow at most this many redirects (Pulsar's ``maxLookupRedirects``).
MAX_REDIRECTS = 20
#: Bytes asked of a socket per recv. Not 1 MiB: recv allocates what it asks for and shrinks it to what came, and
#: a 1 MiB allocation costs 20-80 us (a receipt of 35 bytes then took 21 us to read against 3 us), more than the
#: further recv calls a large read needs.
_READ_SIZE = 1 << 16


class TlsVerificationError(ConnectError):
    """The broker's certificate is not trusted or does not name its host: trying again cannot help."""


class Waiter:
    """The outcome of one send, filled in by the I/O thread."""

    __slots__ = ("done", "error", "message_id")

    def __init__(self) -> None:
        self.done = False
        self.message_id: Any = None
        self.error: PulsarException | None = None


class Immediate:
    """A send's token the I/O thread calls itself, ``token(message_id, error)`` under the lock, instead of handing it
    to the callback thread: it must return at once and take no lock (the asyncio shell's, which only schedule work on
    their event loop)."""

    __slots__ = ()

    def __call__(self, message_id: Any, error: PulsarException | None) -> None:
        raise NotImplementedError


class Backoff:
    """The retry schedule of :meth:`Runtime.retrying` (and of the asyncio shell's retried requests): pauses from 50 ms
    doubling up to 1 s, for up to the operation timeout."""

    __slots__ = ("_deadline", "_delay", "_rt")

    def __init__(self, rt: Runtime, timeout: float | None = None) -> None:
        self._rt = rt
        self._deadline = rt.now() + (rt.operation_timeout if timeout is None else timeout)
        self._delay = 0.05

    def pause(self, exc: PulsarException) -> float:
        """The pause before the next attempt after ``exc`` (a retryable error); raises what the caller sees when no
        attempt is left (``exc`` itself, or a :class:`Timeout` as the official clients report it)."""
        if isinstance(exc, TlsVerificationError) or self._rt.closed:
            raise exc
        delay = self._delay
        if self._rt.now() + delay >= self._deadline:
            if isinstance(exc, TransactionCoordinatorNotFoundError):
                raise exc  # transactions are off on the broker (the Java client's CoordinatorNotFoundException)
            raise Timeout(f"operation timed out: {exc}") from exc
        self._delay = min(delay * 2, 1.0)
        return delay


class Link:
    """A socket and the connection core that speaks over it."""

    _ids = 0

    def __init__(self, sock: socket.socket, core: Connection) -> None:
        Link._ids += 1
        self.id = Link._ids
        self.sock = sock
        self.tls = isinstance(sock, ssl.SSLSocket)
        self.core = core
        self.out = bytearray()
        self.greeted: set[int] = set()


def parse_url(url: str) -> tuple[str, int, bool]:
    """``(host, port, tls)`` of a ``pulsar://`` or ``pulsar+ssl://`` URL."""
    parsed = urlparse(url.split(",")[0])
    if "://" not in url:
        raise ValueError(f"The scheme part is missing: {url}")  # what the official client raises
    if parsed.scheme in ("http", "https"):
        raise ValueError(f"HTTP lookup is not supported: {url} (pulsar://host:port or pulsar+ssl://host:port)")
    if parsed.scheme not in ("pulsar", "pulsar+ssl"):
        raise ValueError(f"Invalid scheme: {parsed.scheme}")
    if not parsed.hostname:
        raise ValueError(f"no host in the service URL {url!r}")
    tls = parsed.scheme == "pulsar+ssl"
    return parsed.hostname, parsed.port or (6651 if tls else 6650), tls


class Runtime:
    """Connections of one client, the I/O thread and the reconnection thread."""

    def __init__(
        self,
        service_url: str,
        authentication: Authentication | None,
        operation_timeout: float,
        connection_timeout: float,
        tls_trust_certs_file_path: str | None,
        tls_allow_insecure_connection: bool,
        tls_validate_hostname: bool,
        tls_certificate: tuple[str, str] | None,
        listener_name: str | None,
    ) -> None:
        parse_url(service_url)
        self.service_url = service_url.split(",")[0].rstrip("/")
        self.auth = authentication or Authentication()
        self.operation_timeout = operation_timeout
        self.connection_timeout = connection_timeout
        self.listener_name = listener_name
        self._tls = (tls_trust_certs_file_path, tls_allow_insecure_connection, tls_validate_hostname)
        self._tls_certificate = tls_certificate or self.auth.tls_certificate
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.closed = False
        self._links: dict[str, Link] = {}
        self._results: dict[tuple[int, int], Response] = {}
        self._waiting: set[tuple[int, int]] = set()
        #: What runs as a waited-for request's successful answer is read (:meth:`request`'s ``on_success``).
        self._on_success: dict[tuple[int, int], Callable[[], None]] = {}
        #: Requests answered through a callback (:meth:`request_async`, :meth:`on_response`).
        self._answer_hooks: dict[tuple[int, int], Callable[[Any, PulsarException | None], None]] = {}
        #: :meth:`when`'s predicates and callbacks.
        self._watchers: list[tuple[Callable[[], bool], Callable[[PulsarException | None], None]]] = []
        self._connect_lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._woken = False
        #: Whether the I/O thread is between a wake-up and its next write of every link's output (read and written
        #: with the lock held, but for the I/O thread setting it on waking): then a user thread leaves what it queued
        #: to it rather than writing itself (a write releases the GIL, which the busy I/O thread then holds).
        self._io_active = False
        #: When the I/O thread will wake at the latest (the lock held to read or write it).
        self._planned = 0.0
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._callbacks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._reconnects: queue.SimpleQueue[ProducerCore | ConsumerCore | None] = queue.SimpleQueue()
        #: Producers whose registration was lost, until they register again: the I/O thread runs their timers (their
        #: sends time out at ``send_timeout_millis`` while the reconnections are refused or slow).
        self._detached: set[ProducerCore] = set()
        #: Called (under the lock) when a consumer core (by ``id``) queued messages: the asyncio shell's wake-ups.
        self.ready_hooks: dict[int, Callable[[], None]] = {}
        self._next_id = 0
        self._threads = [
            threading.Thread(target=self._io_loop, name="pulsar-txn-io", daemon=True),
            threading.Thread(target=self._callback_loop, name="pulsar-txn-callbacks", daemon=True),
            threading.Thread(target=self._reconnect_loop, name="pulsar-txn-reconnect", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    #: The clock the cores run on (seconds, monotonic).
    now = staticmethod(time.monotonic)

    def next_id(self) -> int:
        """A producer/consumer id unique within this client."""
        with self.lock:
            self._next_id += 1
            return self._next_id

    def check_open(self) -> None:
        if self.closed:
            raise AlreadyClosed("the client is closed")

    # -- waking and waiting ------------------------------------------------------------------

    def wake(self) -> None:
        """Have the I/O thread write what the cores queued."""
        if not self._woken and not self._io_active:
            self._woken = True
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")

    def kick(self, *cores: ProducerCore | ConsumerCore) -> None:
        """Write what ``cores`` queued now (the lock held), from the calling thread: a send costs no hop through the
        I/O thread. The I/O thread is woken only for what could not be written or for a timer due earlier than it
        planned to wake; while it is awake, it writes what was queued before it waits again."""
        if self._io_active:
            return
        wake = False
        for core in cores:
            conn = core.conn
            if conn is None:
                continue
            if conn.has_output:
                link = conn.owner
                self._transmit(link)
                wake = wake or bool(link.out)
            due = core.poll_timeout()
            if due is not None and due < self._planned:
                wake = True
        if wake:
            self.wake()

    def pump(self, core: ConsumerCore) -> None:
        """Read what the broker already sent to ``core``'s connection, from the calling thread (the lock held): a
        consuming thread that keeps the GIL busy would otherwise leave the data in the socket until the I/O thread wins
        the GIL back (up to the interpreter's switch interval, 5 ms), and then wait on an empty queue. Nothing to do
        while the I/O thread is awake: it reads before it waits again."""
        conn = core.conn
        if self._io_active or conn is None:
            return
        link = conn.owner
        if link is None or link.core.state is ConnectionState.CLOSED:
            return
        self._read(link, self.now())
        self._dispatch(link)
        if link.core.has_output:
            self._send_now(link)

    def _send_now(self, link: Link) -> None:
        self._transmit(link)
        if link.out:
            self.wake()

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None) -> bool:
        """Wait (the lock held) until ``predicate()``; False if ``timeout`` seconds passed first."""
        deadline = None if timeout is None else self.now() + timeout
        while not predicate():
            if self.closed:
                raise AlreadyClosed("the client is closed")
            if deadline is None:
                self.cond.wait(1.0)
            else:
                remaining = deadline - self.now()
                if remaining <= 0:
                    return False
                self.cond.wait(min(remaining, 1.0))
        return True

    # -- connections -------------------------------------------------------------------------

    def _ssl_context(self) -> ssl.SSLContext:
        trust, insecure, validate = self._tls
        context = ssl.create_default_context(cafile=trust)
        context.check_hostname = validate and not insecure
        if insecure:
            context.verify_mode = ssl.CERT_NONE
        if self._tls_certificate:
            context.load_cert_chain(*self._tls_certificate)
        return context

    def connection(self, url: str | None = None) -> Link:
        """The ready connection to ``url`` (default: the service URL), opened if needed."""
        url = (url or self.service_url).rstrip("/")
        with self._connect_lock:
            self.check_open()
            with self.lock:
                link = self._links.get(url)
            if link is None or link.core.state is ConnectionState.CLOSED:
                link = self._open(url)
        with self.lock:
            self.wait_for(lambda: link.core.state is not ConnectionState.CONNECTING, None)
            if link.core.state is ConnectionState.CLOSED:
                raise link.core.error or ConnectError(f"cannot connect to {url}")
        return link

    def _open(self, url: str) -> Link:
        host, port, tls = parse_url(url)
        try:
            sock = socket.create_connection((host, port), timeout=self.connection_timeout)
        except OSError as exc:
            raise ConnectError(f"cannot connect to {url}: {exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls:
            try:
                sock = self._ssl_context().wrap_socket(sock, server_hostname=host)
            except ssl.SSLCertVerificationError as exc:
                sock.close()
                raise TlsVerificationError(f"TLS handshake with {url} failed: {exc}") from None
            except (OSError, ssl.SSLError) as exc:
                sock.close()
                raise ConnectError(f"TLS handshake with {url} failed: {exc}") from None
        sock.setblocking(False)
        auth = self.auth
        with self.lock:
            core = Connection(url, self.now(), lambda: (auth.method, auth.data()), self.operation_timeout)
            link = Link(sock, core)
            core.owner = link
            self._links[url] = link
            self._selector.register(sock, selectors.EVENT_READ, link)
            self.wake()
        return link

    def request(
        self,
        link: Link,
        kind: int,
        timeout: float | None = None,
        on_success: Callable[[], None] | None = None,
        **fields: Any,
    ) -> Any:
        """Send a request on ``link`` and wait for its answer's sub-message (its error raised). ``on_success`` runs
        (the lock held) as a successful answer is read, before anything the connection brought after it."""
        with self.lock:
            self.check_open()
            request_id = link.core.request(kind, self.now(), timeout, **fields)
            key = (link.id, request_id)
            self._waiting.add(key)
            if on_success is not None:
                self._on_success[key] = on_success
            self._dispatch(link)
            self._send_now(link)
            try:
                self.wait_for(lambda: key in self._results, None)
            finally:
                self._waiting.discard(key)
                self._on_success.pop(key, None)
            response = self._results.pop(key)
        if response.error is not None:
            raise response.error
        assert response.command is not None
        return payload_of(response.command)

    def request_async(
        self,
        link: Link,
        kind: int,
        callback: Callable[[Any, PulsarException | None], None],
        timeout: float | None = None,
        **fields: Any,
    ) -> None:
        """Send a request on ``link``; ``callback(answer, error)`` runs (the lock held, on the thread that reads the
        answer: it must return at once) with the answer's sub-message or the error. :meth:`request` without
        waiting."""
        with self.lock:
            self.check_open()
            request_id = link.core.request(kind, self.now(), timeout, **fields)
            self.on_response(link, request_id, callback)

    def on_response(self, link: Link, request_id: int, callback: Callable[[Any, PulsarException | None], None]) -> None:
        """Have ``callback(answer, error)`` run (the lock held) when a request a core made is answered:
        :meth:`wait_request` without waiting."""
        self._answer_hooks[(link.id, request_id)] = callback
        self._dispatch(link)
        self._send_now(link)

    def when(self, predicate: Callable[[], bool], callback: Callable[[PulsarException | None], None]) -> None:
        """Run ``callback(None)`` (the lock held, at once or on the thread that makes ``predicate()`` true: it must
        return at once) when ``predicate()`` holds, or ``callback(AlreadyClosed)`` if the client closes first:
        :meth:`wait_for` without waiting."""
        with self.lock:
            self._settle(predicate, callback)

    def _settle(self, predicate: Callable[[], bool], callback: Callable[[PulsarException | None], None]) -> None:
        """A :meth:`when` callback run if its predicate holds or the client closed, kept otherwise (the lock held)."""
        if predicate():
            callback(None)
        elif self.closed:
            callback(AlreadyClosed("the client is closed"))
        else:
            self._watchers.append((predicate, callback))

    def _notify(self) -> None:
        """Wake the threads in :meth:`wait_for` and run the :meth:`when` callbacks whose predicate now holds (the
        lock held)."""
        self.cond.notify_all()
        if self._watchers:
            watchers, self._watchers = self._watchers, []
            for predicate, callback in watchers:
                self._settle(predicate, callback)

    def wait_request(self, link: Link, request_id: int) -> Any:
        """Wait (the lock held) for a request a core made."""
        key = (link.id, request_id)
        self._waiting.add(key)
        self._dispatch(link)
        self._send_now(link)
        try:
            self.wait_for(lambda: key in self._results, None)
        finally:
            self._waiting.discard(key)
        response = self._results.pop(key)
        if response.error is not None:
            raise response.error
        return payload_of(response.command)

    def retrying(self, operation: Callable[[], Any], timeout: float | None = None) -> Any:
        """Run ``operation`` again on a retryable error (lost connection, service not ready) for up to the operation
        timeout. Still failing then (broker unreachable, service not ready...), it is a :class:`Timeout`, as the
        official clients report it."""
        backoff = Backoff(self, timeout)
        while True:
            try:
                return operation()
            except RETRYABLE as exc:
                time.sleep(backoff.pause(exc))

    def lookup(self, topic: str) -> Link:
        """The connection to the broker serving ``topic`` (a partition or non-partitioned topic)."""
        topic = full_topic_name(topic)
        url, authoritative = self.service_url, False
        tls = parse_url(self.service_url)[2]
        for _ in range(MAX_REDIRECTS):
            fields: dict[str, Any] = {"topic": topic, "authoritative": authoritative}
            if self.listener_name:
                fields["advertised_listener_name"] = self.listener_name
            response = self.request(self.connection(url), T.LOOKUP, **fields)
            target = (response.brokerServiceUrlTls if tls else response.brokerServiceUrl) or url
            if response.response == 1:  # Connect
                if response.proxy_through_service_url:
                    return self.connection()
                return self.connection(target)
            url, authoritative = target, response.authoritative
        raise PulsarException(f"too many lookup redirects for {topic}")

    def partitions(self, topic: str) -> int:
        """Partition count of ``topic`` (0: not partitioned)."""
        response = self.retrying(
            lambda: self.request(self.connection(), T.PARTITIONED_METADATA, topic=full_topic_name(topic))
        )
        return response.partitions

    # -- registering producers and consumers ---------------------------------------------------

    def register_producer(self, core: ProducerCore) -> None:
        """Look the topic up and register ``core`` there (PRODUCER); entries in flight are sent again."""
        link = self.lookup(core.topic)
        producer_id = self.next_id()
        response = self.request(link, T.PRODUCER, **core.producer_command(producer_id))
        with self.lock:
            if core.closed:
                return
            core.attach(link.core, producer_id, response, self.now())
            self._detached.discard(core)
            self.kick(core)

    def register_consumer(self, core: ConsumerCore) -> None:
        """Look the topic up and register ``core`` there (SUBSCRIBE), then grant its queue as permits."""
        link = self.lookup(core.topic)
        consumer_id = self.next_id()
        with self.lock:
            fields = core.subscribe_command(consumer_id)
        self.request(link, T.SUBSCRIBE, **fields)
        with self.lock:
            if core.closed:
                return
            core.attach(link.core, consumer_id)
            self.kick(core)

    def link_of(self, core: ProducerCore | ConsumerCore) -> Link | None:
        """The link a core is attached to."""
        conn = core.conn
        return None if conn is None else conn.owner

    # -- the I/O thread -------------------------------------------------------------------------

    def _io_loop(self) -> None:
        # The lock is held but while waiting in select: one release and one acquire per wake-up, so a user thread
        # woken by what this thread read takes the lock once, as this thread goes to wait.
        self.lock.acquire()
        try:
            while True:
                if self.closed and not any(link.out for link in self._links.values()):
                    break
                now = self.now()
                due = [t for link in self._links.values() if (t := link.core.poll_timeout()) is not None]
                due += [t for core in self._detached if (t := core.poll_timeout()) is not None]
                timeout = max(0.0, min([*due, now + 1.0]) - now)
                self._planned = now + timeout
                for link in self._links.values():
                    self._transmit(link)
                    if link.sock.fileno() >= 0:
                        with contextlib.suppress(KeyError, ValueError):
                            self._selector.modify(
                                link.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if link.out else 0), link
                            )
                tls_pending = any(link.tls and link.sock.pending() for link in self._links.values())
                self._io_active = False
                self.lock.release()
                try:
                    ready = self._selector.select(0 if tls_pending else timeout)
                finally:
                    self._io_active = True
                    self.lock.acquire()
                now = self.now()
                readable = {key.data for key, mask in ready if key.data is not None and mask & selectors.EVENT_READ}
                if any(key.data is None for key, _ in ready):
                    with contextlib.suppress(OSError):
                        while self._wake_r.recv(4096):
                            pass
                    self._woken = False
                for link in list(self._links.values()):
                    if link.core.has_output:  # what user threads left to this thread since it woke
                        self._transmit(link)
                    if link in readable or (link.tls and link.sock.pending()):
                        self._read(link, now)
                    link.core.handle_timeout(now)
                    self._dispatch(link)
                    self._transmit(link)
                    if link.core.state is ConnectionState.CLOSED and not link.out:
                        self._drop(link)
                for core in list(self._detached):
                    if core.closed or core.conn is not None:
                        self._detached.discard(core)
                        continue
                    core.handle_timeout(now)  # a batch due is queued to wait for the registration
                    self._complete(core.expire(now))
                self._notify()
        finally:
            self.lock.release()
        for link in list(self._links.values()):
            self._drop(link)

    def _read(self, link: Link, now: float) -> None:
        while True:
            try:
                data = link.sock.recv(_READ_SIZE)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except OSError as exc:
                link.core.close(ConnectError(f"connection to {link.core.url} lost: {exc}"))
                return
            link.core.handle_bytes(data, now)
            if not data or link.core.state is ConnectionState.CLOSED:
                return
            if len(data) < _READ_SIZE and not link.tls:
                return  # drained for now: no second recv only to hear EAGAIN (the selector reports what comes next)

    def _transmit(self, link: Link) -> None:
        data = link.core.poll_transmit()
        if data:
            link.out += data
        while link.out:
            try:
                sent = link.sock.send(link.out[: 1 << 20])
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except OSError as exc:
                link.out.clear()
                link.core.close(ConnectError(f"connection to {link.core.url} lost: {exc}"))
                self._dispatch(link)
                return
            del link.out[:sent]

    def _drop(self, link: Link) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(link.sock)
        with contextlib.suppress(OSError):
            link.sock.close()
        if self._links.get(link.core.url.rstrip("/")) is link:
            del self._links[link.core.url.rstrip("/")]

    def _dispatch(self, link: Link) -> None:
        """Turn the events of ``link``'s core into results, callbacks and reconnections (the lock held)."""
        while (event := link.core.poll_event()) is not None:
            if isinstance(event, SendDone):
                token = event.token
                if isinstance(token, Waiter):
                    token.done, token.message_id, token.error = True, event.message_id, event.error
                elif token is not None:
                    if isinstance(token, Immediate):
                        token(event.message_id, event.error)
                    else:
                        self._callbacks.put(lambda t=token, e=event: t(e.message_id, e.error))
            elif isinstance(event, Response):
                key = (link.id, event.request_id)
                answer_hook = self._answer_hooks.pop(key, None)
                if answer_hook is not None:
                    error = event.error
                    answer_hook(None if error is not None else payload_of(event.command), error)
                elif key in self._waiting:
                    self._results[key] = event
                    hook = self._on_success.pop(key, None)
                    if hook is not None and event.error is None:
                        hook()
            elif isinstance(event, HandleClosed):
                if not event.handle.closed and not self.closed:
                    if isinstance(event.handle, ProducerCore):
                        self._detached.add(event.handle)
                    self._reconnects.put(event.handle)
            elif isinstance(event, Closed):
                log.info("connection to %s closed: %s", link.core.url, event.error)
            elif isinstance(event, MessagesReady):
                hook = self.ready_hooks.get(id(event.consumer))
                if hook is not None:
                    hook()
            elif isinstance(event, Connected):
                pass
        self._notify()

    def _complete(self, events: list[SendDone]) -> None:
        """Hand the outcomes of sends that failed outside a connection to their waiters and callbacks (the lock
        held)."""
        for event in events:
            token = event.token
            if isinstance(token, Waiter):
                token.done, token.error = True, event.error
            elif isinstance(token, Immediate):
                token(None, event.error)
            elif token is not None:
                self._callbacks.put(lambda t=token, e=event.error: t(None, e))
        if events:
            self._notify()

    def call_back(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the callback thread."""
        self._callbacks.put(callback)

    def callbacks_done(self) -> None:
        """Wait until the callbacks queued so far have run (unless called from a callback)."""
        if threading.current_thread() is self._threads[1] or self.closed:
            return
        done = threading.Event()
        self._callbacks.put(done.set)
        done.wait()

    def _callback_loop(self) -> None:
        while (callback := self._callbacks.get()) is not None:
            try:
                callback()
            except Exception:
                log.exception("a send callback raised")

    def _reconnect_loop(self) -> None:
        while (core := self._reconnects.get()) is not None:
            delay = 0.1
            while not (core.closed or self.closed):
                try:
                    if isinstance(core, ProducerCore):
                        self.register_producer(core)
                    else:
                        self.register_consumer(core)
                    break
                except TopicNotFound:
                    log.warning("topic %s is gone; %s stops reconnecting", core.topic, type(core).__name__)
                    break
                except (PulsarException, OSError) as exc:
                    log.info("registering again on %s failed (%s); retrying in %.1f s", core.topic, exc, delay)
                    if isinstance(core, ProducerCore):
                        with self.lock:
                            if isinstance(exc, ProducerBlockedQuotaExceededException):
                                # As the official clients: the backlog quota's exception policy fails what waits.
                                self._complete(core.fail_pending(exc))
                            else:
                                self._complete(core.expire(self.now()))
                    time.sleep(delay)
                    delay = min(delay * 2, 2.0)

    def close(self) -> None:
        """Close every connection and stop the threads."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            for link in self._links.values():
                link.core.close(AlreadyClosed("the client is closed"))
                self._dispatch(link)
            self._notify()
            self.wake()
        self._callbacks.put(None)
        self._reconnects.put(None)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(5)


__all__ = ["Backoff", "Immediate", "Link", "Runtime", "Timeout", "Waiter"]
