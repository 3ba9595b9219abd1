"""Small helpers shared by the client-driven tests."""

from __future__ import annotations

import pulsar


def drain(source: pulsar.Consumer | pulsar.Reader, timeout_ms: int = 500) -> list[pulsar.Message]:
    """Every message a consumer or reader gets until ``timeout_ms`` passes with none."""
    receive = source.read_next if isinstance(source, pulsar.Reader) else source.receive
    received = []
    while True:
        try:
            received.append(receive(timeout_ms))
        except pulsar.Timeout:
            return received
