"""The event loop: Twisted's epoll reactor on monotonic time, dispatching ready sockets without a logging context
per event."""

from __future__ import annotations

import time

from twisted.internet.epollreactor import EPollReactor
from twisted.internet.main import installReactor


class DirectEPollReactor(EPollReactor):
    """An epoll reactor whose timers run on monotonic time and that hands each ready socket straight to its handler.

    Twisted's reactors schedule ``callLater`` on the wall clock: a step of the system clock back would hold every
    timer (group commits, transaction timeouts, keepalives) for as long as the step, and a step forward would fire
    them all at once. ``seconds`` is the reactor's time source for its timers, ``LoopingCall`` and the web server.

    Twisted's own wraps every event in ``log.callWithLogger``, which builds a context for its legacy logging
    system: a few microseconds per event, on the order of a tenth of a small request's cost. This server logs with
    :mod:`logging`, which does not read that context.
    """

    def doPoll(self, timeout: float | None) -> None:  # noqa: N802 (Twisted's name)
        """Wait up to ``timeout`` seconds (forever if None) and handle the sockets that became ready."""
        # Python retries a poll that a signal interrupts (PEP 475).
        ready = self._poller.poll(-1 if timeout is None else timeout, len(self._selectables))
        selectables = self._selectables
        for fd, event in ready:
            selectable = selectables.get(fd)
            if selectable is not None:
                self._doReadOrWrite(selectable, fd, event)

    doIteration = doPoll  # noqa: N815 (Twisted's name)

    seconds = staticmethod(time.monotonic)


def install() -> DirectEPollReactor:
    """Install :class:`DirectEPollReactor` as Twisted's global reactor (before anything imports the reactor)."""
    reactor = DirectEPollReactor()
    installReactor(reactor)
    return reactor
