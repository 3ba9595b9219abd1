"""The Spark/transaction client's connection answers a broker's keepalive PING as Pulsar's brokers require."""

from __future__ import annotations

import socket
import threading

from spark.protocol import Connection
from wire.commands import frame
from wire.framing import FrameDecoder
from wire.pulsar_api_pb2 import BaseCommand


def test_a_ping_is_answered_with_a_pong_carrying_its_command() -> None:
    """Pulsar's decoder rejects a PONG without its (empty) ``pong`` field and closes the connection."""
    answers: list[BaseCommand] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def broker() -> None:
            sock, _ = listener.accept()
            with sock:
                decoder = FrameDecoder()
                while not answers:
                    data = sock.recv(65536)
                    if not data:
                        return
                    for item in decoder.feed(data):
                        if item.command.type == BaseCommand.CONNECT:
                            sock.sendall(frame(BaseCommand.CONNECTED, server_version="fake", protocol_version=20))
                            sock.sendall(frame(BaseCommand.PING))
                        else:
                            answers.append(item.command)

        thread = threading.Thread(target=broker, daemon=True)
        thread.start()
        conn = Connection(f"pulsar://127.0.0.1:{port}", timeout=5.0)
        try:
            while thread.is_alive() and not answers:
                conn.pump(None)
                thread.join(0.05)
        finally:
            conn.close()
    assert [a.type for a in answers] == [BaseCommand.PONG]
    assert answers[0].HasField("pong")
