"""Errors the engine raises, each carrying the Pulsar ``ServerError`` code a client expects."""

from __future__ import annotations

from wire.pulsar_api_pb2 import ServerError


class BrokerError(Exception):
    """A request failed; ``code`` is a ``ServerError`` value and ``message`` Pulsar-style text."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"BrokerError({ServerError.Name(self.code)}, {self.message!r})"
