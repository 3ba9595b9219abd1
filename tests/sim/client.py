"""A simulated Pulsar client written on ``wire/``: one connection, its requests, producers' receipts and consumers'
messages, driven by generator tasks on simulated time.

A task is a generator that yields :class:`Future` objects and is resumed with their values. Answers are commands;
a request the connection lost resolves to :data:`LOST`, one unanswered in time to :data:`TIMEOUT`.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from wire.commands import FIELD_OF_TYPE, frame, payload_of
from wire.framing import (
    FrameDecoder,
    ProtocolError,
    encode_payload_command,
    make_body,
)
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata

if TYPE_CHECKING:
    from tests.sim.world import Link, Scheduler

T = BaseCommand
LOST = "lost"
TIMEOUT = "timeout"
#: Seconds a request waits for its answer (the clients' operation timeout).
OPERATION_TIMEOUT = 30.0
Task = Generator["Future", Any, None]


class Future:
    """A value to come; callbacks run when it is resolved (only the first resolution counts)."""

    __slots__ = ("_callbacks", "done", "value")

    def __init__(self) -> None:
        self.done = False
        self.value: Any = None
        self._callbacks: list[Callable[[Any], None]] = []

    def resolve(self, value: Any) -> None:
        if self.done:
            return
        self.done, self.value = True, value
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(value)

    def then(self, callback: Callable[[Any], None]) -> None:
        if self.done:
            callback(self.value)
        else:
            self._callbacks.append(callback)


def spawn(sched: Scheduler, task: Task) -> None:
    """Run a task: each future it yields resumes it, in a call of its own, when resolved."""

    running = False

    def step(value: Any) -> None:
        nonlocal running
        while True:
            running = True
            try:
                future = task.send(value)
            except StopIteration:
                return
            finally:
                running = False
            if not future.done:
                future.then(resume)
                return
            value = future.value

    def resume(value: Any) -> None:
        # Resumed from whatever resolved the future (a frame being routed, a timer): run the task at once, unless
        # it is the task itself that resolved it.
        if running:
            sched.call_later(0, step, value)
        else:
            step(value)

    sched.call_later(0, step, None)


def sleep(sched: Scheduler, seconds: float) -> Future:
    future = Future()
    sched.call_later(seconds, future.resolve, None)
    return future


def gather(futures: list[Future]) -> Future:
    """A future of the values of all of ``futures``, in order."""
    result = Future()
    if not futures:
        result.resolve([])
        return result
    left = [len(futures)]

    def one(_: Any) -> None:
        left[0] -= 1
        if left[0] == 0:
            result.resolve([f.value for f in futures])

    for future in futures:
        future.then(one)
    return result


#: Command types whose payload has an ``error`` field (the answers that may carry one).
_WITH_ERROR = frozenset(
    kind
    for kind, name in FIELD_OF_TYPE.items()
    if "error" in BaseCommand.DESCRIPTOR.fields_by_name[name].message_type.fields_by_name
)

_MESSAGE, _SEND_RECEIPT, _SEND_ERROR = BaseCommand.MESSAGE, BaseCommand.SEND_RECEIPT, BaseCommand.SEND_ERROR
_ERROR, _PING, _CONNECTED, _FLOW = BaseCommand.ERROR, BaseCommand.PING, BaseCommand.CONNECTED, BaseCommand.FLOW
#: The closes of a producer or consumer the server starts.
_CLOSES = (BaseCommand.CLOSE_PRODUCER, BaseCommand.CLOSE_CONSUMER)

_U32 = struct.Struct(">I")
_parse_metadata = MessageMetadata.FromString

#: The SEND command and its message's metadata that :meth:`Connection.publish` fills for each message.
_SEND = BaseCommand(type=BaseCommand.SEND)
_METADATA = MessageMetadata()
#: Command types whose payload has a ``request_id`` (the answers to requests).
_WITH_REQUEST_ID = frozenset(
    kind
    for kind, name in FIELD_OF_TYPE.items()
    if "request_id" in BaseCommand.DESCRIPTOR.fields_by_name[name].message_type.fields_by_name
)


def failed(answer: Any) -> bool:
    """Whether an answer is a loss, a timeout or an error."""
    if type(answer) is not BaseCommand:
        return True
    kind = answer.type
    if kind in (_ERROR, _SEND_ERROR):
        return True
    # payload_of, without reading the type again
    return kind in _WITH_ERROR and getattr(answer, FIELD_OF_TYPE[kind]).HasField("error")


class Message:
    """A message a consumer got."""

    __slots__ = ("entry", "key", "ledger", "producer", "redelivery_count", "sent_at", "sequence_id", "txn")

    def __init__(self, command: Any, body: bytes, sent_at: float) -> None:
        #: When the server wrote it.
        self.sent_at = sent_at
        mid = command.message_id
        self.ledger, self.entry = mid.ledgerId, mid.entryId
        self.redelivery_count = command.redelivery_count
        # stored_metadata and stored_payload, inline: the metadata's size read once.
        (meta_size,) = _U32.unpack_from(body, 6)
        end = 10 + meta_size
        metadata = _parse_metadata(body[10:end])
        self.key = body[end:].decode()
        self.producer = metadata.producer_name
        self.sequence_id = metadata.sequence_id
        txn = None
        if metadata.HasField("txnid_most_bits") or metadata.HasField("txnid_least_bits"):
            txn = (metadata.txnid_most_bits, metadata.txnid_least_bits)
        self.txn = txn


class Connection:
    """One client connection to the simulated server."""

    def __init__(self, world: Any, name: str) -> None:
        self.world = world
        self.sched: Scheduler = world.sched
        self.name = name
        self.link: Link | None = None
        self.alive = False
        self.decoder = FrameDecoder()
        self._next_request = 0
        self.requests: dict[int, Future] = {}
        self.receipts: dict[tuple[int, int], Future] = {}
        self.consumers: dict[int, Callable[[Message], None]] = {}
        self.closed = Future()
        self._connected: Future | None = None
        #: (deadline, table, key) of what is awaited, oldest first, and the one timer that expires them.
        self._deadlines: deque[tuple[float, dict[Any, Future], Any]] = deque()
        self._sweeper: Any = None

    # -- life ----------------------------------------------------------------------------------

    def open(self) -> Future:
        """CONNECT; resolves to CONNECTED, or LOST."""
        self._connected = Future()
        self.link = self.world.connect(self)
        if self.link is not None:
            self.alive = True
            self.send(frame(T.CONNECT, client_version="sim", protocol_version=20))
            self.sched.call_later(OPERATION_TIMEOUT, self._connect_timed_out)
        return self._connected

    def _connect_timed_out(self) -> None:
        if self._connected is not None and not self._connected.done:
            self.abort("connect timed out")

    def abort(self, reason: str) -> None:
        if self.link is not None and self.link.open:
            self.link.reset(reason)
        else:
            self.connection_lost(reason)

    def connection_lost(self, reason: str) -> None:
        self.alive = False
        self._deadlines.clear()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        requests, self.requests = self.requests, {}
        receipts, self.receipts = self.receipts, {}
        if self._connected is not None:
            self._connected.resolve(LOST)
        for future in [*requests.values(), *receipts.values()]:
            future.resolve(LOST)
        self.consumers.clear()
        self.closed.resolve(reason)

    def send(self, data: bytes) -> None:
        if self.alive and self.link is not None:
            self.link.client_write(data)

    # -- requests ------------------------------------------------------------------------------

    def request(self, kind: int, **fields: Any) -> Future:
        """Send a request with a fresh request id; resolves to its answer, LOST or TIMEOUT."""
        future = Future()
        if not self.alive:
            future.resolve(LOST)
            return future
        self._next_request += 1
        request_id = self._next_request
        self.requests[request_id] = future
        self.link.client_write(frame(kind, request_id=request_id, **fields))  # type: ignore[union-attr]  # alive: it has a link
        self._expire(self.requests, request_id)
        return future

    def _expire(self, table: dict[Any, Future], key: Any) -> None:
        """Resolve ``table[key]`` to TIMEOUT if it is still awaited after the operation timeout."""
        self._deadlines.append((self.sched.now + OPERATION_TIMEOUT, table, key))
        if self._sweeper is None:
            self._sweeper = self.sched.call_at(self._deadlines[0][0], self._sweep)

    def _sweep(self) -> None:
        self._sweeper = None
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= self.sched.now:
            _, table, key = deadlines.popleft()
            future = table.pop(key, None)
            if future is not None:
                future.resolve(TIMEOUT)
        if deadlines and self.alive:
            self._sweeper = self.sched.call_at(deadlines[0][0], self._sweep)

    def publish(
        self, producer_id: int, producer_name: str, sequence_id: int, key: str, txn: tuple[int, int] | None
    ) -> Future:
        """SEND one message; resolves to its SEND_RECEIPT or SEND_ERROR, LOST or TIMEOUT."""
        future = Future()
        if not self.alive:
            future.resolve(LOST)
            return future
        # One metadata and one SEND command, their fields overwritten for each message (as ``wire.commands.frame``
        # keeps its commands).
        metadata = _METADATA
        metadata.Clear()
        metadata.producer_name, metadata.sequence_id = producer_name, sequence_id
        metadata.publish_time, metadata.partition_key = int(self.world.wall_ms()), key
        send = _SEND.send
        send.Clear()
        send.producer_id, send.sequence_id, send.num_messages = producer_id, sequence_id, 1
        if txn is not None:
            send.txnid_most_bits, send.txnid_least_bits = txn
            metadata.txnid_most_bits, metadata.txnid_least_bits = txn
        self.receipts[(producer_id, sequence_id)] = future
        self.link.client_write(  # type: ignore[union-attr]  # alive: it has a link
            encode_payload_command(_SEND, make_body(metadata, key.encode()))
        )
        self._expire(self.receipts, (producer_id, sequence_id))
        return future

    def send_flow(self, consumer_id: int, permits: int) -> None:
        self.send(frame(_FLOW, consumer_id=consumer_id, messagePermits=permits))

    def send_redeliver(self, consumer_id: int, ids: list[tuple[int, int]] | None = None) -> None:
        """Negative acknowledgement of the messages ``ids`` (ledger, entry) of a consumer, or of all it holds."""
        fields: dict[str, Any] = {"consumer_id": consumer_id}
        if ids:
            fields["message_ids"] = [{"ledgerId": ledger, "entryId": entry} for ledger, entry in ids]
        self.send(frame(T.REDELIVER_UNACKNOWLEDGED_MESSAGES, **fields))

    # -- what arrives --------------------------------------------------------------------------

    def data_received(self, data: bytes, sent_at: float) -> None:
        route = self._route
        frames, error = self.decoder.decode(data)
        try:
            for item in frames:
                route(item.command, item.body, sent_at)
            if error is not None:
                raise error
        except ProtocolError as exc:
            self.world.fail(f"{self.name}: the server sent a malformed frame: {exc}")
            self.abort("malformed frame")

    def _route(self, command: BaseCommand, body: bytes | None, sent_at: float) -> None:
        kind = command.type
        if kind == _MESSAGE:
            message = command.message
            handler = self.consumers.get(message.consumer_id)
            if handler is not None and body is not None:
                handler(Message(message, body, sent_at))
            return
        if kind == _SEND_RECEIPT:
            payload = command.send_receipt
            future = self.receipts.pop((payload.producer_id, payload.sequence_id), None)
            if future is not None:
                future.resolve(command)
            return
        if kind == _SEND_ERROR:
            payload = command.send_error
            future = self.receipts.pop((payload.producer_id, payload.sequence_id), None)
            if future is not None:
                future.resolve(command)
            return
        if kind == _PING:
            self.send(frame(T.PONG))
            return
        if kind == _CONNECTED:
            if self._connected is not None:
                self._connected.resolve(command)
            return
        if kind in _CLOSES:
            # The server dropped a producer or consumer: start over on a new connection, as simple as it is safe.
            self.abort(f"server closed a {type(payload_of(command)).__name__}")
            return
        if kind in _WITH_REQUEST_ID:
            future = self.requests.pop(getattr(command, FIELD_OF_TYPE[kind]).request_id, None)
            if future is not None:
                future.resolve(command)
