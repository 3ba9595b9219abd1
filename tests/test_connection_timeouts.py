"""Peers that hold a connection without using it: no CONNECT, a frame begun and never finished, silence. Each is
dropped after its timeout with a logged reason, and a connected official client is not affected."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

from tests.conftest import Server, Witness
from tests.server_process import ServerProcess
from tests.test_bad_input import RawConnection, assert_logged_close
from wire.commands import frame
from wire.pulsar_api_pb2 import BaseCommand

T = BaseCommand
FAST = ("--handshake-timeout-seconds", "1", "--frame-timeout-seconds", "1", "--keep-alive-interval-seconds", "1")


def _closed_within(conn: RawConnection, seconds: float) -> float:
    """Seconds until the server closed the connection (reading and answering what it sends meanwhile)."""
    began = time.monotonic()
    conn.sock.settimeout(seconds)
    try:
        while conn.sock.recv(65536):
            pass
    except TimeoutError:
        raise AssertionError(f"the connection was still open after {seconds} s") from None
    return time.monotonic() - began


def _server(server_factory: Callable[..., Server]) -> tuple[ServerProcess, Witness]:
    server = server_factory(*FAST)
    assert isinstance(server, ServerProcess)
    witness = Witness(server.url)
    witness.check()
    return server, witness


def test_a_connection_without_connect_is_dropped(server_factory: Callable[..., Server]) -> None:
    server, witness = _server(server_factory)
    silent = RawConnection(server.port)
    assert _closed_within(silent, 5) < 3
    assert_logged_close(server, silent, "no CONNECT within 1 s")
    witness.check()
    witness.client.close()


def test_a_frame_begun_and_never_finished_is_dropped(server_factory: Callable[..., Server]) -> None:
    server, witness = _server(server_factory)
    loris = RawConnection(server.port)
    loris.handshake()
    # Half a frame, then one more byte now and then, never the whole of it.
    loris.send_raw(struct.pack(">II", 100, 96) + b"\x08")
    for _ in range(4):
        time.sleep(0.4)
        try:
            loris.send_raw(b"\x02")
        except OSError:
            break
    assert _closed_within(loris, 5) < 3
    assert_logged_close(server, loris, "a frame begun 1 s ago is still unfinished")
    witness.check()
    witness.client.close()


def test_a_peer_that_does_not_answer_pings_is_dropped(server_factory: Callable[..., Server]) -> None:
    server, witness = _server(server_factory)
    mute = RawConnection(server.port)
    mute.handshake()
    began = time.monotonic()
    mute.sock.settimeout(5)
    pings = 0
    while data := mute.sock.recv(65536):
        pings += sum(1 for frame in mute.decoder.feed(data) if frame.command.type == T.PING)
    assert pings >= 1 and time.monotonic() - began < 4.5
    assert_logged_close(server, mute, "keepalive timeout")
    # The official client answers PINGs: over the same seconds it stayed connected.
    witness.check()
    witness.client.close()


def test_a_busy_peer_whose_reads_all_end_inside_a_frame_is_not_dropped(
    server_factory: Callable[..., Server],
) -> None:
    """Each write finishes the frame the last one began and begins the next: no frame is unfinished for long, though
    some frame always is; the connection stays open past several frame timeouts."""
    server, witness = _server(server_factory)
    busy = RawConnection(server.port)
    busy.handshake()
    size = len(frame(T.PING))
    stream = frame(T.PING) * 12
    cuts = [0] + [size // 2 + i * size for i in range(12)]  # every cut inside a frame, until the last
    for start, end in zip(cuts, [*cuts[1:], len(stream)], strict=True):
        piece = stream[start:end]
        busy.send_raw(piece)
        time.sleep(0.3)
    busy.sock.settimeout(2)
    pongs = sum(1 for item in busy.decoder.feed(busy.sock.recv(65536)) if item.command.type == T.PONG)
    assert pongs >= 1
    busy.assert_open()
    assert "still unfinished" not in server.log()
    witness.check()
    witness.client.close()
