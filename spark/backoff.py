"""Reconnecting with exponential back-off: how the connector rides out a broker restart.

A unit of work (planning a micro-batch, reading a range, writing a task's rows, committing a batch) runs
again from a safe point while the broker cannot be reached; the waits between attempts double from
``initial`` up to ``maximum``, and after ``total`` seconds of trying the work fails with
:class:`ReconnectTimeoutError`, whose message says how long the broker was unreachable.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import pulsar_txn
from pulsar_txn._runtime import TlsVerificationError

log = logging.getLogger(__name__)

R = TypeVar("R")

#: Failures that a broker coming back cures: the work is run again after a wait (but a broker certificate that
#: fails verification, a :class:`TlsVerificationError`, fails the work at once; see :meth:`Retrier.failed`).
#: The failures as pulsar_txn (the connector's client) names them.
RETRYABLE: tuple[type[Exception], ...] = (
    pulsar_txn.ConnectError,
    pulsar_txn.NotConnected,
    pulsar_txn.Timeout,
    pulsar_txn.ServiceUnitNotReady,
)


class ReconnectTimeoutError(pulsar_txn.PulsarException):
    """The broker stayed unreachable for longer than the reconnect timeout."""


@dataclass(frozen=True)
class Backoff:
    """Waits between attempts: ``initial`` doubling up to ``maximum``; give up after ``total`` seconds."""

    initial: float = 0.1
    maximum: float = 5.0
    total: float = 120.0

    @property
    def attempt_seconds(self) -> int:
        """The client's operation timeout (whole seconds, as pulsar-client takes it): its default, 30 s, or the
        reconnect timeout when shorter, so that one attempt against a broker that is gone (the client tries to
        connect for that long) does not outlast the whole reconnect timeout."""
        return max(1, min(30, math.ceil(self.total)))

    def retrier(self, what: str) -> Retrier:
        """The attempts of one piece of work (for loops that resume rather than start over)."""
        return Retrier(self, what)

    def run(self, work: Callable[[], R], what: str, on_retry: Callable[[], None] | None = None) -> R:
        """``work()``, run again while it fails with a :data:`RETRYABLE` error, within ``total`` seconds.

        ``on_retry`` runs before each new attempt (to drop connections the failure left behind).
        """
        retrier = self.retrier(what)
        while True:
            try:
                return work()
            except RETRYABLE as exc:
                retrier.failed(exc)
                if on_retry is not None:
                    on_retry()


class Retrier:
    """Counts the failed attempts of one piece of work since its last progress."""

    def __init__(self, backoff: Backoff, what: str) -> None:
        self.backoff = backoff
        self.what = what
        self.progress()

    def progress(self) -> None:
        """The work moved on: a later outage gets the whole timeout again."""
        self.began = time.monotonic()
        self.delay = self.backoff.initial
        self.attempts = 0

    def failed(self, exc: Exception) -> None:
        """Wait before the next attempt, or raise :class:`ReconnectTimeoutError` when the time is up (``exc`` itself
        when no wait can cure it)."""
        if isinstance(exc, TlsVerificationError):
            raise exc
        self.attempts += 1
        waited = time.monotonic() - self.began
        if waited + self.delay > self.backoff.total:
            raise ReconnectTimeoutError(
                f"{self.what}: the broker was unreachable for {waited:.0f} s ({self.attempts} attempts), longer than "
                f"the reconnect timeout of {self.backoff.total:.0f} s (option reconnectTimeoutMs); last error: {exc}"
            ) from exc
        log.warning("%s: %s; trying again in %.1f s", self.what, exc, self.delay)
        time.sleep(self.delay)
        self.delay = min(self.delay * 2, self.backoff.maximum)
