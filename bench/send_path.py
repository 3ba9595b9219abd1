"""The SEND -> SEND_RECEIPT path alone, with no JVM: server CPU per non-batched message, before and after a change.

A raw-protocol producer (one connection, one producer, pre-encoded SEND frames of 100-byte messages, at most
``--window`` unanswered, as ``pulsar-perf produce -db -o 10000``) sends ``--messages`` messages to a server started
from each checkout given; the server's CPU time (user + system, all its threads) over the run is divided by the
messages. Checkouts run alternately, ``--runs`` times each, and the median and range are printed.

Run: ``python bench/send_path.py [--messages 200000] [--runs 3] CHECKOUT [CHECKOUT...]`` (each checkout with its own
``.venv``).
"""

from __future__ import annotations

import argparse
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.server_process import first_answer, free_port  # noqa: E402
from wire.commands import make  # noqa: E402
from wire.framing import FrameDecoder, encode_command, encode_payload_command, make_body  # noqa: E402
from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata  # noqa: E402

T = BaseCommand
_U32 = struct.Struct(">I")


def _answer(sock: socket.socket, decoder: FrameDecoder, kind: int) -> BaseCommand:
    while True:
        data = sock.recv(65536)
        if not data:
            raise RuntimeError("the server closed the connection")
        for frame in decoder.feed(data):
            if frame.command.type == kind:
                return frame.command
            if frame.command.type == T.ERROR:
                raise RuntimeError(str(frame.command))


def _sends(producer_name: str, count: int) -> list[bytes]:
    payload = b"x" * 100
    frames = []
    for sequence_id in range(count):
        meta = MessageMetadata(producer_name=producer_name, sequence_id=sequence_id, publish_time=1_700_000_000_000)
        command = make(T.SEND, producer_id=1, sequence_id=sequence_id, num_messages=1)
        frames.append(encode_payload_command(command, make_body(meta, payload)))
    return frames


def produce(port: int, messages: int, window: int) -> float:
    """Send ``messages`` SENDs and wait for their receipts; the seconds it took."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    decoder = FrameDecoder()
    sock.sendall(encode_command(make(T.CONNECT, client_version="send_path", protocol_version=21)))
    _answer(sock, decoder, T.CONNECTED)
    topic = f"persistent://public/default/send-path-{uuid.uuid4().hex[:8]}"
    sock.sendall(encode_command(make(T.PRODUCER, topic=topic, producer_id=1, request_id=1)))
    name = _answer(sock, decoder, T.PRODUCER_SUCCESS).producer_success.producer_name
    frames = _sends(name, messages)
    sock.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
    sent = received = 0
    pending = b""
    inbox = b""
    began = time.monotonic()
    while received < messages:
        for _, events in selector.select(1.0):
            if events & selectors.EVENT_READ:
                data = sock.recv(1 << 20)
                if not data:
                    raise RuntimeError("the server closed the connection")
                inbox += data
                offset = 0
                while len(inbox) - offset >= 4:
                    (total,) = _U32.unpack_from(inbox, offset)
                    if len(inbox) - offset - 4 < total:
                        break
                    offset += 4 + total
                    received += 1
                inbox = inbox[offset:]
            if events & selectors.EVENT_WRITE:
                if not pending and sent < messages and sent - received < window:
                    upto = min(messages, sent + 200, received + window)
                    pending = b"".join(frames[sent:upto])
                    sent = upto
                if pending:
                    written = sock.send(pending)
                    pending = pending[written:]
        if not pending and (sent >= messages or sent - received >= window):
            selector.modify(sock, selectors.EVENT_READ)
        else:
            selector.modify(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
    elapsed = time.monotonic() - began
    sock.close()
    return elapsed


def measure(checkout: Path, messages: int, window: int) -> tuple[float, float]:
    """One run against a fresh server of ``checkout``: (server CPU µs per message, messages per second)."""
    port = free_port()
    with tempfile.TemporaryDirectory() as work:
        command = [
            str(checkout / ".venv" / "bin" / "python"), "-m", "proxy", "serve", "--host", "127.0.0.1",
            "--port", str(port), "--admin-port", str(free_port()), "--data-dir", f"{work}/data",
            "--advertised-address", "127.0.0.1", "--log-level", "WARNING",
        ]  # fmt: skip
        with open(f"{work}/server.log", "wb") as log:
            process = subprocess.Popen(command, cwd=checkout, stdout=log, stderr=subprocess.STDOUT)
        try:
            first_answer(port, time.monotonic() + 30, lambda: process.poll() is None)
            server = psutil.Process(process.pid)
            produce(port, min(messages, 20_000), window)  # warm up: topic creation, first commits
            before = server.cpu_times()
            elapsed = produce(port, messages, window)
            after = server.cpu_times()
        finally:
            process.terminate()
            process.wait(10)
    cpu = (after.user - before.user) + (after.system - before.system)
    return cpu * 1e6 / messages, messages / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="+", type=Path)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--window", type=int, default=10_000, help="unanswered SENDs at most (pulsar-perf -o)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results: dict[Path, list[tuple[float, float]]] = {checkout: [] for checkout in args.checkouts}
    for run in range(args.runs):
        for checkout in args.checkouts:
            cpu, rate = measure(checkout.resolve(), args.messages, args.window)
            results[checkout].append((cpu, rate))
            print(f"run {run + 1} {checkout}: {cpu:.2f} µs/msg server CPU, {rate:,.0f} msg/s", flush=True)
    for checkout, runs in results.items():
        cpus = [cpu for cpu, _ in runs]
        rates = [rate for _, rate in runs]
        print(
            f"{checkout}: server CPU {statistics.median(cpus):.2f} µs/msg ({min(cpus):.2f}-{max(cpus):.2f}),"
            f" {statistics.median(rates):,.0f} msg/s ({min(rates):,.0f}-{max(rates):,.0f})"
        )


if __name__ == "__main__":
    main()
