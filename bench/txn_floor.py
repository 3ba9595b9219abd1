"""The fixed server CPU of a transaction, command by command: what no change to a handler can take away.

A client of the raw protocol (``wire``) loops, one request at a time, over:

- ``ping``: three PINGs (a round trip answered by a handler that does nothing: the cost of reading, framing, and
  answering a command, and of the socket calls);
- ``txn``: NEW_TXN, ADD_PARTITION_TO_TXN and END_TXN (commit) of a transaction with no message, whose end writes
  a commit marker to the partition (one store commit, with its fsync);
- ``commit``: one message SENT without a transaction and its receipt (one store commit of one entry);

and prints the server's CPU (user + system of its process) per loop. Against this endpoint started from this checkout
(``--url`` for a running server, whose pid ``--pid`` gives). The client is Python and waits for every answer, so
nothing overlaps: each figure is the whole cost of its round trips and commits.

Run: ``python bench/txn_floor.py [--loops 2000]``.
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.server_process import ServerProcess  # noqa: E402
from wire.commands import frame  # noqa: E402
from wire.framing import Frame, FrameDecoder, encode_payload_command, make_body  # noqa: E402
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata  # noqa: E402

T = BaseCommand
TOPIC = "persistent://public/default/txn-floor"
PING = frame(T.PING)


class Client:
    """One connection speaking the binary protocol, one request at a time."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.pending: list[Frame] = []
        self.next_id = 0
        self.call(frame(T.CONNECT, client_version="txn-floor", protocol_version=21))

    def call(self, data: bytes) -> BaseCommand:
        """Send one frame and return the next command that comes back (the server's keep-alive PINGs answered)."""
        self.sock.sendall(data)
        while True:
            while not self.pending:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("the server closed the connection")
                self.pending.extend(self.decoder.feed(chunk))
            command = self.pending.pop(0).command
            if command.type == T.PING and data != PING:
                self.sock.sendall(frame(T.PONG))
                continue
            if command.type == T.ERROR:
                raise RuntimeError(f"the server answered {command.error}")
            return command

    def request_id(self) -> int:
        self.next_id += 1
        return self.next_id


def loops(client: Client) -> dict[str, Callable[[], None]]:
    """The loops to measure, by name."""
    client.call(frame(T.TC_CLIENT_CONNECT_REQUEST, request_id=client.request_id(), tc_id=0))
    client.call(frame(T.PRODUCER, topic=TOPIC, producer_id=1, request_id=client.request_id()))
    sequence = iter(range(1 << 62))

    def ping() -> None:
        for _ in range(3):
            client.call(PING)

    def txn() -> None:
        answer = client.call(frame(T.NEW_TXN, request_id=client.request_id(), tc_id=0, txn_ttl_millis=60_000))
        ids = {
            "txnid_most_bits": answer.newTxnResponse.txnid_most_bits,
            "txnid_least_bits": answer.newTxnResponse.txnid_least_bits,
        }
        client.call(frame(T.ADD_PARTITION_TO_TXN, request_id=client.request_id(), partitions=[TOPIC], **ids))
        end = client.call(frame(T.END_TXN, request_id=client.request_id(), txn_action=0, **ids))
        assert not end.endTxnResponse.HasField("error"), end

    def commit() -> None:
        sequence_id = next(sequence)
        metadata = MessageMetadata(producer_name="txn-floor", sequence_id=sequence_id, publish_time=1)
        send = BaseCommand(type=T.SEND)
        send.send.producer_id, send.send.sequence_id = 1, sequence_id
        client.call(encode_payload_command(send, make_body(metadata, b"x" * 100)))

    return {"ping": ping, "txn": txn, "commit": commit}


def measure(url: str, pid: int, count: int) -> dict[str, float]:
    host, port = url.removeprefix("pulsar://").rsplit(":", 1)
    client = Client(host, int(port))
    process = psutil.Process(pid)
    figures = {}
    for name, loop in loops(client).items():
        for _ in range(count // 10):  # warm-up
            loop()
        before = sum(process.cpu_times()[:2])
        began = time.monotonic()
        for _ in range(count):
            loop()
        figures[name] = (sum(process.cpu_times()[:2]) - before) * 1e6 / count
        print(
            f"{name}: {figures[name]:,.0f} µs of server CPU per loop ({count / (time.monotonic() - began):,.0f} "
            "loops/s)",
            flush=True,
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=2000, help="loops of each kind measured")
    parser.add_argument("--url", help="a running server (pulsar://host:port); its --pid is measured")
    parser.add_argument("--pid", type=int)
    args = parser.parse_args()
    if args.url:
        measure(args.url, args.pid, args.loops)
        return
    with tempfile.TemporaryDirectory(prefix="txn-floor-") as tmp:
        server = ServerProcess(Path(tmp), "--log-level", "WARNING").start()
        try:
            measure(server.url, server.process.pid, args.loops)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
