# -*- test-case-name: tests.client.test_probe -*-
"""
The check C{tcp-connect} makes once at start, before it listens: one probe
session through the relay to C{AGENT:PORT}, so that an agent that does not
exist, a port it does not share, or a wrong C{--pin} is one line and a
non-zero exit instead of a listener that resets every connection.

What counts as an answer:

  - end to end (the default), the TLS handshake with the agent: it proves
    the relay routed the session to the agent and that the agent's key
    matches C{--pin} (a mismatch fails the handshake).  The agent ends TLS
    itself, so this holds whether or not its service is up; the probe then
    closes the session cleanly (the service sees one connection open and
    close, or none).
  - without end-to-end TLS there is no handshake to wait for, and the link
    protocol has no "accepted": a session the relay or the agent refuses is
    reset within a round trip, so one that is still open after
    L{PLAIN_SETTLE} seconds (or that the service closed cleanly) passes,
    and is cancelled.

The probe is only the mechanism: it reports C{None} (passed) or the
L{Failure} the session ended with, which the connector explains.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import error
from twisted.internet.interfaces import IHandshakeListener
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from zope.interface import implementer

#: Seconds the agent has to finish the TLS handshake of the probe.
PROBE_TIMEOUT = 15.0
#: Seconds a plain probe session must stay unrefused to pass.
PLAIN_SETTLE = 2.0


@implementer(IHandshakeListener)
class Probe(Protocol):
    """
    The protocol of the probe session (wrapped in the agent's TLS when end
    to end).

    @ivar decided: the outcome was reported.
    """

    transport: Any

    def __init__(
        self, clock: Any, e2ee: bool, done: Callable[[Failure | None], None]
    ) -> None:
        """
        @param done: told C{None} once the probe passed, or the L{Failure}
            that ended it first; once.
        """
        self.clock = clock
        self.e2ee = e2ee
        self.done = done
        self.decided = False
        self._timer: Any = None

    def connectionMade(self) -> None:
        """
        Start the clock: the handshake's timeout, or the plain settle time.
        """
        if self.e2ee:
            self._timer = self.clock.callLater(PROBE_TIMEOUT, self._timedOut)
        else:
            self._timer = self.clock.callLater(PLAIN_SETTLE, self._settled)

    def handshakeCompleted(self) -> None:
        """
        The agent's TLS answered with the pinned key: passed; close cleanly.
        """
        self._decide(None)
        self.transport.loseConnection()

    def _settled(self) -> None:
        self._timer = None
        self._decide(None)
        self.transport.abortConnection()

    def _timedOut(self) -> None:
        self._timer = None
        self._decide(Failure(error.TimeoutError(
            string=f"the agent did not answer within {PROBE_TIMEOUT:g}s"
        )))
        self.transport.abortConnection()

    def cancel(self) -> None:
        """
        Give up (the connector stops): report nothing, end the session.
        """
        self.decided = True
        self._stopTimer()
        if self.transport is not None:
            self.transport.abortConnection()

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        The session ended before the probe passed: a plain session the
        service closed cleanly passes; anything else is the outcome.
        """
        self._stopTimer()
        if not self.e2ee and reason.check(error.ConnectionDone):
            self._decide(None)
        else:
            self._decide(reason)

    def _stopTimer(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _decide(self, outcome: Failure | None) -> None:
        if self.decided:
            return
        self.decided = True
        self._stopTimer()
        self.done(outcome)
