"""The server as ``proxy/run.py`` wires it (:func:`proxy.wiring.build_server`), run in this process on simulated
time: Twisted's ``MemoryReactorClock`` as the reactor and the engine's clock, in-memory transports (``iosim``), the
SQLite store and inline commits. A SEND is answered only after its commit; a consumer of a server wired again on
the same store gets the message. The store interface (:class:`engine.storage.Storage`) is checked against the
SQLite store method by method.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from twisted.internet.protocol import Protocol
from twisted.internet.testing import MemoryReactorClock
from twisted.test.iosim import FakeTransport, connect

from engine.broker import InlineCommits
from engine.clock import SystemClock
from engine.storage import Storage
from engine.store import Store
from proxy.config import Settings
from proxy.wiring import Server, build_server
from wire.commands import frame, make
from wire.framing import FrameDecoder, encode_payload_command, make_body
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata

T = BaseCommand
TOPIC = "persistent://public/default/wired"


class FrameClient(Protocol):
    """The client side of an in-memory connection: writes frames, keeps the commands it receives."""

    def __init__(self) -> None:
        self.decoder = FrameDecoder()
        self.received: list[BaseCommand] = []

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 (Twisted's name)
        self.received.extend(item.command for item in self.decoder.feed(data))

    def send(self, data: bytes) -> None:
        self.transport.write(data)

    def of_type(self, kind: int) -> list[BaseCommand]:
        return [command for command in self.received if command.type == kind]


def _wire(tmp_path: Path, reactor: MemoryReactorClock) -> Server:
    store = Store(tmp_path / "store.sqlite")
    return build_server(Settings(advertised_address="127.0.0.1"), reactor, store, SystemClock(reactor.callLater),
                        InlineCommits())


def _connect(server: Server, reactor: MemoryReactorClock) -> tuple[FrameClient, object]:
    client = FrameClient()
    connection = server.factory.buildProtocol(None)
    pump = connect(connection, FakeTransport(connection, True), client, FakeTransport(client, False), greet=False)
    return client, pump


def _settle(reactor: MemoryReactorClock, pump: object, turns: int = 20) -> None:
    """Move bytes both ways and run what falls due (the group commit runs at the end of a turn: ``callLater(0)``)."""
    for _ in range(turns):
        pump.pump()  # type: ignore[attr-defined]
        reactor.advance(0)
    pump.pump()  # type: ignore[attr-defined]


def _send_frame(sequence_id: int, payload: bytes) -> bytes:
    metadata = MessageMetadata(producer_name="wired", sequence_id=sequence_id, publish_time=1_700_000_000_000)
    command = make(T.SEND, producer_id=1, sequence_id=sequence_id, num_messages=1)
    return encode_payload_command(command, make_body(metadata, payload))


def test_a_send_is_received_after_the_server_is_wired_again_on_the_same_store(tmp_path: Path) -> None:
    reactor = MemoryReactorClock()
    server = _wire(tmp_path, reactor)
    client, pump = _connect(server, reactor)
    client.send(frame(T.CONNECT, client_version="wired", protocol_version=20))
    client.send(frame(T.PRODUCER, topic=TOPIC, producer_id=1, request_id=1, producer_name="wired"))
    _settle(reactor, pump)
    assert len(client.of_type(T.CONNECTED)) == 1
    assert len(client.of_type(T.PRODUCER_SUCCESS)) == 1

    client.send(_send_frame(0, b"hello"))
    pump.pump()  # type: ignore[attr-defined]
    topic_id = server.broker.store.topics()[TOPIC].topic_id
    assert client.of_type(T.SEND_RECEIPT) == [], "a receipt before the entry's commit"
    assert server.broker.store.last_entry_id(topic_id) == -1
    _settle(reactor, pump)
    assert server.broker.store.last_entry_id(topic_id) == 0
    [receipt] = client.of_type(T.SEND_RECEIPT)
    assert receipt.send_receipt.sequence_id == 0
    assert receipt.send_receipt.message_id.entryId == 0
    server.close()

    again = _wire(tmp_path, reactor)
    reader, pump = _connect(again, reactor)
    reader.send(frame(T.CONNECT, client_version="wired", protocol_version=20))
    reader.send(frame(T.SUBSCRIBE, topic=TOPIC, subscription="s", subType=0, consumer_id=1, request_id=1,
                      initialPosition=1))
    reader.send(frame(T.FLOW, consumer_id=1, messagePermits=10))
    _settle(reactor, pump)
    assert len(reader.of_type(T.SUCCESS)) == 1
    [message] = reader.of_type(T.MESSAGE)
    assert message.message.message_id.entryId == receipt.send_receipt.message_id.entryId
    assert message.message.message_id.ledgerId == receipt.send_receipt.message_id.ledgerId
    again.close()


def test_the_sqlite_store_satisfies_the_storage_interface() -> None:
    """Every member of :class:`Storage` is on :class:`Store` with the same signature, and every public member of the
    store is in the interface (an engine call added to one must be added to the other)."""
    wanted = {name for name in vars(Storage) if not name.startswith("_")}
    public = {name for name in vars(Store) if not name.startswith("_")}
    assert wanted == public
    for name in wanted:
        ours, theirs = getattr(Storage, name), getattr(Store, name)
        if isinstance(ours, property):
            assert isinstance(theirs, property), name
            ours, theirs = ours.fget, theirs.fget
        assert inspect.signature(ours) == inspect.signature(theirs), name
