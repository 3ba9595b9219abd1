"""A simulation runtime for :mod:`pulsar_txn.core`: the client's sans-I/O core driven over a simulated
:class:`~tests.sim.world.Link` on the simulator's clock, as the blocking and asyncio shells drive it over a socket.

Bytes the link delivers go into :meth:`Connection.handle_bytes`, what :meth:`Connection.poll_transmit` returns is
written into the link, :meth:`Connection.poll_timeout` becomes one scheduler call, and the events of
:meth:`Connection.poll_event` resolve the :class:`~tests.sim.client.Future` objects the simulated tasks wait on
(answers, receipts) or wake the consumers' tasks. Nothing here reads the wall clock: a run is a function of its seed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pulsar_txn.core.connection import (
    Closed,
    Connected,
    Connection,
    ConnectionState,
    Event,
    HandleClosed,
    MessagesReady,
    Response,
    SendDone,
)
from pulsar_txn.exceptions import ConnectError, PulsarException
from tests.sim.client import Future
from tests.sim.world import EPOCH, ClientEnd
from wire.pulsar_api_pb2 import BaseCommand

if TYPE_CHECKING:
    from pulsar_txn.core.consumer import ConsumerCore, ReceivedMessage
    from pulsar_txn.core.producer import OutMessage, ProducerCore
    from pulsar_txn.core.transaction import TransactionCore
    from tests.sim.world import Call, Link

T = BaseCommand
URL = "pulsar://10.0.0.1:6650"


class SimCoreClient(ClientEnd):
    """One :class:`pulsar_txn.core.connection.Connection` over one simulated link.

    ``connected`` resolves True once the handshake is done (False if the connection closed first); ``closed``
    resolves with the error once it is closed. The methods that start an operation return a future of its outcome
    (a :class:`Response`, or a :class:`SendDone` for a send). A producer or consumer the broker closes (or that
    loses its registration) closes the whole connection: the simulated client starts over, as after a reset.
    """

    def __init__(self, world: Any, name: str) -> None:
        self.world = world
        self.sched = world.sched
        self.name = name
        self.core = Connection(URL, self.sched.now)
        self.connected = Future()
        self.closed = Future()
        #: Called with a consumer core whose queue received messages.
        self.on_messages: Callable[[ConsumerCore], None] = lambda consumer: None
        self._requests: dict[int, Future] = {}
        self._handles = 0
        self._timer: Call | None = None
        self._pumping = False
        self.link: Link | None = world.connect(self)
        self.pump()

    # -- what the world calls ---------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.core.state is not ConnectionState.CLOSED

    def data_received(self, data: bytes, sent_at: float) -> None:
        self.core.handle_bytes(data, self.sched.now)
        self.pump()

    def connection_lost(self, reason: str) -> None:
        self.link = None
        self.core.close(ConnectError(f"{self.name}: {reason}"))
        self.pump()

    def abort(self, reason: str) -> None:
        """Reset the connection (a fault, or the client giving up on it)."""
        if self.link is not None:
            self.link.reset(reason)
        else:
            self.connection_lost(reason)

    # -- the driving loop ---------------------------------------------------------------------------

    def pump(self) -> None:
        """Write what the core has to send, hand out its events, and set its timer."""
        if self._pumping:
            return  # an event's handler started an operation: the loop below picks its bytes up
        self._pumping = True
        core = self.core
        try:
            while True:
                data = core.poll_transmit()
                if data and self.link is not None:
                    self.link.client_write(data)
                event = core.poll_event()
                if event is None:
                    break
                self._dispatch(event)
        finally:
            self._pumping = False
        self._arm_timer()

    def _arm_timer(self) -> None:
        due = self.core.poll_timeout()
        timer = self._timer
        if timer is not None and timer.active():
            if timer.time == due:
                return
            timer.cancel()
        self._timer = None if due is None else self.sched.call_at(due, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.core.handle_timeout(self.sched.now)
        self.pump()

    def _dispatch(self, event: Event) -> None:
        if isinstance(event, Response):
            future = self._requests.pop(event.request_id, None)
            if future is not None:
                future.resolve(event)
        elif isinstance(event, SendDone):
            if isinstance(event.token, Future):
                event.token.resolve(event)
        elif isinstance(event, MessagesReady):
            self.on_messages(event.consumer)
        elif isinstance(event, Connected):
            self.connected.resolve(True)
        elif isinstance(event, HandleClosed):
            if self.alive:
                self.abort(f"{self.name}: the broker closed a producer or consumer")
        elif isinstance(event, Closed):
            self.connected.resolve(False)
            self.closed.resolve(event.error)
            if self.link is not None:
                link, self.link = self.link, None
                link.client_close()

    # -- operations ---------------------------------------------------------------------------------

    def request(self, kind: int, **fields: Any) -> Future:
        """Send a request; the future resolves with its :class:`Response`."""
        future = Future()
        self._requests[self.core.request(kind, self.sched.now, **fields)] = future
        self.pump()
        return future

    def create_producer(self, producer: ProducerCore) -> Future:
        """Register ``producer`` on this connection (what it had in flight is sent again); resolves True or False."""
        producer.wall_clock = self.wall_clock
        self._handles += 1
        producer_id = self._handles
        done = Future()

        def registered(answer: Response) -> None:
            if answer.error is None and self.alive:
                producer.attach(self.core, producer_id, answer.command.producer_success, self.sched.now)
                self.pump()
                done.resolve(True)
            else:
                done.resolve(False)

        self.request(T.PRODUCER, **producer.producer_command(producer_id)).then(registered)
        return done

    def subscribe(self, consumer: ConsumerCore) -> Future:
        """Register ``consumer`` on this connection (it grants its permits); resolves True or False."""
        self._handles += 1
        consumer_id = self._handles
        done = Future()

        def registered(answer: Response) -> None:
            if answer.error is None and self.alive:
                consumer.attach(self.core, consumer_id)
                self.pump()
                done.resolve(True)
            else:
                done.resolve(False)

        self.request(T.SUBSCRIBE, **consumer.subscribe_command(consumer_id)).then(registered)
        return done

    def send(self, producer: ProducerCore, message: OutMessage) -> Future:
        """Queue ``message`` (batched if the producer batches); the future resolves with its :class:`SendDone`."""
        message.token = future = Future()
        producer.send(message, self.sched.now)
        self.pump()
        return future

    def fail_sends(self, producer: ProducerCore, error: PulsarException) -> None:
        """Fail what ``producer`` has queued or in flight (a client giving up on it rather than sending it again on its
        next connection)."""
        for done in producer.fail_pending(error):
            self._dispatch(done)

    def ack_in_txn(self, consumer: ConsumerCore, message: ReceivedMessage, txn: TransactionCore) -> Future:
        """Acknowledge ``message`` in ``txn``; the future resolves with the ACK's :class:`Response`. Raises what the
        core raises (``NotConnected``: the consumer registered again since the message came)."""
        info = message.info
        request_id = consumer.ack(
            message.position, info.batch_size, info.batch, False, self.sched.now, txn, info.generation
        )
        assert request_id is not None
        future = Future()
        self._requests[request_id] = future
        self.pump()
        return future

    def wall_clock(self) -> float:
        """The simulated wall clock (epoch seconds), for the publish times the producers write."""
        return EPOCH + self.sched.now
