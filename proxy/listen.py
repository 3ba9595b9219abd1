"""The Pulsar port, bound before anything heavy is imported.

The command binds and listens first, then imports Twisted, the protocol schema and the engine and opens the store
(a few hundred milliseconds). A client that connects meanwhile is not refused: its connection waits in the
kernel's backlog and its CONNECT is answered as soon as the event loop runs, as with socket activation.
"""

from __future__ import annotations

import socket


class ListenError(OSError):
    """The port cannot be bound (in use, no permission, unknown host)."""


def bind(host: str, port: int, backlog: int) -> socket.socket:
    """A non-blocking listening TCP socket on ``host``:``port`` (port 0: any free port) whose kernel queue holds
    ``backlog`` connections not accepted yet (the kernel caps it at ``net.core.somaxconn``)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ListenError(f"cannot listen on {host}:{port}: {exc}") from None
    try:
        # As Twisted does for its TCP ports: a restart may bind while old connections are in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock
