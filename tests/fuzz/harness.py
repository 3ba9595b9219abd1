"""The fuzz run: mutated frames from raw sockets while an official-client witness produces and consumes.

Raw sessions (each: CONNECT, producers and consumers on a few fuzz topics, then fuzzed frames from
:class:`tests.fuzz.mutator.Mutator`) run beside a witness (official Python client, its own topic): it sends, waits
for its message to come back, acknowledges it, and records each round trip. The figures: frames the server read
and frames/s, tracebacks in the server log, failed group commits (some client's bytes failing every write of a
commit), witness sends that failed, stalls (a witness round trip over 1 s), blocked topics (a fuzz topic whose new
consumer does not get a message sent after it subscribed), the server's peak RSS, the witness's latency, and witness
messages lost: at the end the server is killed (SIGKILL) and started again, and every message whose send was
acknowledged must be there (the server keeps what was acknowledged, :data:`KEEP_ACKNOWLEDGED`: by default it deletes
it once the topic loads again, as Pulsar does).

``python -m tests.fuzz.harness --frames 1000000`` runs it on a fresh local server and prints the figures
(``make fuzz``); ``tests/fuzz/test_fuzz.py`` runs a short budget in the default test run.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import random
import re
import socket
import statistics
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pulsar

from tests.conftest import make_client
from tests.fuzz.mutator import Mutator
from tests.server_process import KEEP_ACKNOWLEDGED, ServerProcess
from wire.commands import frame, payload_of
from wire.framing import FrameDecoder, ProtocolError
from wire.pulsar_api_pb2 import BaseCommand

T = BaseCommand
#: A witness round trip longer than this is a stall.
STALL_SECONDS = 1.0
#: Frames written to a socket together, before the answers are read.
BURST = 16
#: Bursts a session may have sent before their PONG is back.
MAX_BURSTS_IN_FLIGHT = 4
_PING = frame(T.PING)


@dataclass
class Figures:
    """What a fuzz run measured."""

    frames: int = 0
    seconds: float = 0.0
    sessions: int = 0
    tracebacks: int = 0
    #: Group commits that failed (the disk is fine, so some client's bytes failed every write in them).
    failed_commits: int = 0
    witness_sent: int = 0
    witness_failed_sends: int = 0
    witness_lost: int = 0
    stalls: int = 0
    #: When each stall began (wall clock, as the server's log lines show it) and how long its send and its receive
    #: took, to find what the server was doing then.
    stall_details: list[str] = field(default_factory=list)
    blocked_topics: list[str] = field(default_factory=list)
    rss_peak_mib: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    #: The server's answers to the fuzzed sessions by command type (``/error`` when failed).
    answers: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def frames_per_second(self) -> float:
        return self.frames / self.seconds if self.seconds else 0.0

    def report(self) -> str:
        lat = sorted(self.latencies_ms) or [0.0]
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        return "\n".join(
            [
                f"frames                 {self.frames} in {self.seconds:.1f} s ({self.frames_per_second:.0f} frames/s,"
                f" {self.sessions} sessions)",
                f"tracebacks             {self.tracebacks}",
                f"failed group commits   {self.failed_commits}",
                f"failed witness sends   {self.witness_failed_sends} of {self.witness_sent}",
                f"stalls > {STALL_SECONDS:g} s          {self.stalls} {'; '.join(self.stall_details)}".rstrip(),
                f"blocked topics         {len(self.blocked_topics)} {self.blocked_topics or ''}",
                f"server RSS peak        {self.rss_peak_mib:.0f} MiB",
                f"witness latency        median {statistics.median(lat):.1f} ms, p99 {p99:.1f} ms,"
                f" max {lat[-1]:.1f} ms",
                f"witness messages lost  {self.witness_lost}",
            ]
        )


class Witness(threading.Thread):
    """Sends a message, receives it back and acknowledges it, in a loop; records round trips and what was acked."""

    def __init__(self, url: str, figures: Figures) -> None:
        super().__init__(daemon=True, name="fuzz-witness")
        self.figures = figures
        self.client = make_client(url, operation_timeout_seconds=30)
        self.topic = f"persistent://public/default/fuzz-witness-{uuid.uuid4().hex[:8]}"
        self.producer = self.client.create_producer(self.topic, batching_enabled=False, send_timeout_millis=30000)
        self.consumer = self.client.subscribe(self.topic, "witness")
        self.acknowledged: list[bytes] = []
        self.stop = threading.Event()

    def run(self) -> None:
        count = 0
        while not self.stop.is_set():
            payload = f"witness-{count}".encode()
            count += 1
            started, wall = time.monotonic(), time.time()
            self.figures.witness_sent += 1
            try:
                self.producer.send(payload)
            except pulsar.PulsarException:
                self.figures.witness_failed_sends += 1
                continue
            self.acknowledged.append(payload)
            sent = time.monotonic()
            try:
                message = self.consumer.receive(30000)
            except pulsar.Timeout:
                self._stall(wall, sent - started, None)
                continue
            self.consumer.acknowledge(message)
            took = time.monotonic() - started
            self.figures.latencies_ms.append(took * 1000)
            if took > STALL_SECONDS:
                self._stall(wall, sent - started, time.monotonic() - sent)
            time.sleep(0.005)

    def _stall(self, wall: float, send: float, receive: float | None) -> None:
        self.figures.stalls += 1
        at = time.strftime("%H:%M:%S", time.localtime(wall)) + f".{int(wall * 1000) % 1000:03d}"
        received = "no message in 30 s" if receive is None else f"receive {receive * 1000:.0f} ms"
        self.figures.stall_details.append(f"{at} send {send * 1000:.0f} ms, {received}")

    def close(self) -> None:
        self.stop.set()
        self.join(60)
        self.client.close()


class Session:
    """One raw connection sending fuzzed frames; reconnects when the server closes it.

    Each burst ends with a PING: its PONG says the server has read every frame of the burst, which is when they
    are counted (frames after one that closes the connection are never read, so never counted). At most
    ``MAX_BURSTS_IN_FLIGHT`` bursts wait for their PONG, so the frames sent are the frames the server reads.
    """

    def __init__(self, port: int, mutator: Mutator) -> None:
        self.port = port
        self.mutator = mutator
        self.sock: socket.socket | None = None
        self.decoder = FrameDecoder()
        self.opened = 0
        #: Frames in each burst sent whose PONG has not come back yet, oldest first.
        self.in_flight: collections.deque[int] = collections.deque()
        #: Frames the server has read.
        self.handled = 0

    def open(self) -> None:
        self.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.decoder = FrameDecoder()
        self.mutator.ready.clear()
        self.opened += 1
        setup = [frame(T.CONNECT, client_version="fuzz", protocol_version=20)]
        for index, topic in enumerate(self.mutator.topics):
            setup.append(frame(T.PRODUCER, topic=topic, producer_id=index, request_id=1000 + index))
            setup.append(
                frame(
                    T.SUBSCRIBE,
                    topic=topic,
                    subscription=f"fz-{index % 2}",
                    subType=index % 4,
                    consumer_id=index,
                    request_id=2000 + index,
                    initialPosition=index % 2,
                )
            )
            setup.append(frame(T.FLOW, consumer_id=index, messagePermits=20))
        setup.append(frame(T.TC_CLIENT_CONNECT_REQUEST, request_id=3000, tc_id=0))
        setup.append(frame(T.NEW_TXN, request_id=3001, tc_id=0, txn_ttl_millis=30000))
        self.sock.sendall(b"".join(setup))
        # The producers' answers first: the mutator sends to the producers that are ready (another session's
        # exclusive producer, a fuzzed one, may hold a topic).
        producers = set(range(1000, 1000 + len(self.mutator.topics)))
        while producers:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionResetError("closed by the server while the session was set up")
            for item in self.decoder.feed(data):
                self.mutator.learn(item.command)
                request_id = getattr(payload_of(item.command), "request_id", None)
                if item.command.type in (T.PRODUCER_SUCCESS, T.ERROR):
                    producers.discard(request_id)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.in_flight.clear()

    def burst(self) -> None:
        """Send a burst of fuzzed frames, then read what came back (waiting while too many bursts are unread)."""
        frames: list[bytes] = []
        while len(frames) < BURST:
            frames += self.mutator.frames()
        try:
            if self.sock is None:
                self.open()
            self.sock.sendall(b"".join(frames) + _PING)  # type: ignore[union-attr]
            self.in_flight.append(len(frames))
            self.drain(wait=len(self.in_flight) > MAX_BURSTS_IN_FLIGHT)
        except (OSError, ProtocolError):
            self.close()

    def drain(self, wait: bool) -> None:
        """Read the answers that arrived; with ``wait``, until a burst is answered (or ``STALL_SECONDS`` pass)."""
        assert self.sock is not None
        outstanding = len(self.in_flight)
        self.sock.settimeout(STALL_SECONDS if wait else 0.0)
        try:
            while True:
                try:
                    data = self.sock.recv(1 << 20)
                except (BlockingIOError, TimeoutError):
                    return
                if not data:
                    raise ConnectionResetError("closed by the server")
                for item in self.decoder.feed(data):
                    if item.command.type == T.PONG and self.in_flight:
                        self.handled += self.in_flight.popleft()
                    self.mutator.learn(item.command)
                if wait and len(self.in_flight) < outstanding:
                    wait = False
                    self.sock.settimeout(0.0)
        finally:
            if self.sock is not None:
                self.sock.settimeout(10)


def rss_peak_mib(pid: int) -> float:
    """The peak resident set size of a process (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def blocked_topics(url: str, topics: list[str]) -> list[str]:
    """Fuzz topics where a new consumer does not get a message sent after it subscribed (within 10 s)."""
    blocked = []
    client = make_client(url)
    try:
        for topic in topics:
            consumer = client.subscribe(topic, f"check-{uuid.uuid4().hex[:6]}")
            producer = client.create_producer(topic, batching_enabled=False)
            producer.send(b"check")
            try:
                while consumer.receive(10000).data() != b"check":
                    pass
            except pulsar.Timeout:
                blocked.append(topic)
    finally:
        client.close()
    return blocked


def stored_witness(url: str, topic: str) -> set[bytes]:
    """Every message of the witness topic, read from the start."""
    client = make_client(url)
    found: set[bytes] = set()
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        while True:
            try:
                found.add(reader.read_next(3000).data())
            except pulsar.Timeout:
                return found
    finally:
        client.close()


def abort_transactions(port: int, txns: list[tuple[int, int]], timeout: float = 60.0) -> None:
    """Abort the transactions the sessions opened, so that none holds a topic back when the topics are checked."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        parts = [frame(T.CONNECT, client_version="fuzz", protocol_version=20)]
        parts += [frame(T.TC_CLIENT_CONNECT_REQUEST, request_id=1, tc_id=tc) for tc in sorted({m for m, _ in txns})]
        parts += [
            frame(T.END_TXN, request_id=10 + i, txnid_most_bits=most, txnid_least_bits=least, txn_action=1)
            for i, (most, least) in enumerate(txns)
        ]
        sock.sendall(b"".join(parts))
        decoder = FrameDecoder()
        answered = 0
        while answered < len(txns):
            data = sock.recv(1 << 20)
            if not data:
                raise RuntimeError("the server closed the connection that aborts the fuzzer's transactions")
            answered += sum(item.command.type == T.END_TXN_RESPONSE for item in decoder.feed(data))


def run(server: ServerProcess, frames: int, seed: int, sessions: int = 4, seconds: float | None = None) -> Figures:
    """Fuzz a running server with ``frames`` frames (or for ``seconds``) and measure; the server is restarted at the
    end (SIGKILL, then start) to check the witness's messages."""
    assert server.process is not None
    figures = Figures()
    rng = random.Random(seed)
    topics = [f"persistent://public/default/fuzz-{seed}-{i}" for i in range(4)]
    pool = [Session(server.port, Mutator(random.Random(rng.random()), topics)) for _ in range(sessions)]
    witness = Witness(server.url, figures)
    witness.start()
    started = time.monotonic()
    deadline = started + seconds if seconds else None
    try:
        while figures.frames < frames and (deadline is None or time.monotonic() < deadline):
            for session in pool:
                session.burst()
            figures.frames = sum(session.handled for session in pool)
            if witness.stop.is_set() or not witness.is_alive():
                break
    finally:
        figures.seconds = time.monotonic() - started
        for session in pool:
            session.close()
        witness.close()
    figures.sessions = sum(session.opened for session in pool)
    for session in pool:
        figures.answers.update(session.mutator.answers)
    figures.rss_peak_mib = rss_peak_mib(server.process.pid)
    abort_transactions(server.port, sorted({txn for session in pool for txn in session.mutator.opened}))
    figures.blocked_topics = blocked_topics(server.url, topics)
    log = server.log()
    figures.tracebacks = log.count("Traceback")
    figures.failed_commits = log.count("commit failed")
    server.kill()
    server.start()
    stored = stored_witness(server.url, witness.topic)
    figures.witness_lost = sum(payload not in stored for payload in witness.acknowledged)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long even if frames remain")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        server = ServerProcess(Path(tmp) / "data", *KEEP_ACKNOWLEDGED).start()
        try:
            figures = run(server, args.frames, args.seed, args.sessions, args.seconds)
            print(figures.report())
            reasons = collections.Counter(
                re.sub(r"\d+|'.*'", "N", line.split("closing connection: ", 1)[1])
                for line in server.log().splitlines()
                if "closing connection: " in line
            )
            print("\nanswers to the fuzzed sessions, by type:")
            for name, count in sorted(figures.answers.items()):
                print(f"  {count:7d}  {name}")
            print("\nconnections closed by the server, by reason:")
            for reason, count in reasons.most_common(15):
                print(f"  {count:7d}  {reason[:150]}")
            if figures.tracebacks:
                log = server.log()
                first = log.index("Traceback")
                print("\nfirst traceback:\n" + log[max(0, log.rfind("\n", 0, first - 200)) : first + 3000])
        finally:
            with contextlib.suppress(Exception):
                server.kill()


if __name__ == "__main__":
    main()
