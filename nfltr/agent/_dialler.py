# -*- test-case-name: tests.agent.test_dialler -*-
"""
L{RelayDialler}: keep one link to the relay, for an agent or a client.

It connects, says hello (the application's part of the link hello carries
the API key), and waits for the relay's verdict: C{welcome}, or C{refused}
with a typed reason.  After a lost link or a failed attempt it tries again on
the one reconnect schedule (L{nfltr.backoff}).  It stops for good, once,
with one line for the user, when retrying cannot help: a refusal whose
reason is in L{NON_HEALING}, or a relay certificate that does not match
C{--ca} or C{--relay-pin}.  A GOAWAY from the relay (it is stopping) is not
a loss: the sessions in flight finish on that link while the dialler dials
again at once for a new one.  A C{moving} message (L{nfltr.wire.moving}: a
replica of a cluster that drains) is the same, except that the old link
still takes sessions until another relay welcomed us and L{MOVE_GRACE}
seconds more; then the dialler drains it itself, so no visitor meets a
moment when the agent is nowhere.  Stopping can drain the link first.  Given a
relay of several addresses (L{IRelayChoice}: replicas), the dialler moves
to the next address after a failed attempt, a lost link and a GOAWAY, so a
new link reaches another replica while the old one drains.

What happens is reported to a L{DiallerObserver}.  Logging: one line when
the link comes up (after an outage, saying how long it lasted); during an
outage, one warning for each new cause of failure (the same cause again is
logged at debug level only) and, every L{OUTAGE_SUMMARY_INTERVAL} seconds,
one line saying the relay is still unreachable, with the attempts and time
so far.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, error, interfaces
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.backoff import ReconnectSchedule
from nfltr.link import DIALER, LinkConfig, RefusalReason
from nfltr.link.twisted import LinkFactory, LinkHandler, LinkProtocol, LinkSession
from nfltr.tls import VerificationFailed
from nfltr.wire.messages import NOT_FOUND_CODE, NOT_FOUND_REASON, WELCOME, refusal_text
from nfltr.wire.moving import MOVE_GRACE, MOVING

from ._relays import IRelayChoice

# Refusals that retrying cannot cure: the dialler stops.
NON_HEALING = frozenset({
    RefusalReason.UNAUTHORIZED, RefusalReason.REVOKED, RefusalReason.CONFLICT,
    RefusalReason.INVALID, RefusalReason.VERSION, RefusalReason.LIMIT,
})
# Seconds the relay has, after the link hello, to welcome or refuse us.
WELCOME_TIMEOUT = 30.0
# Seconds a stopping dialler waits for a clean TLS close before aborting.
STOP_TIMEOUT = 2.0
#: Seconds between two "still unreachable" lines during an outage.
OUTAGE_SUMMARY_INTERVAL = 60.0


class DiallerObserver:
    """
    What a dialler's user hears; the defaults do nothing and refuse the
    relay's sessions.
    """

    def relayUp(self, link: LinkProtocol, welcome: dict[str, Any]) -> None:
        """
        The relay welcomed a new link.
        """

    def relayDown(self) -> None:
        """
        The welcomed link is gone; the dialler is reconnecting (unless it
        was stopped).
        """

    def relayFatal(self, message: str) -> None:
        """
        The dialler stopped for good; C{message} is one line for the user.
        """

    def relayControl(self, link: LinkProtocol, message: dict[str, Any]) -> None:
        """
        Another control message on the welcomed link (an C{updated}, say).
        """

    def sessionRequested(self, session: LinkSession) -> None:
        """
        The relay opened a session on the welcomed link.
        """
        session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)


class _Attempt(LinkHandler):
    """
    The link handler of one connection attempt.

    @ivar link: the link, once connected.
    @ivar refusal: why the relay turned this link away (a refusal, no
        answer), for the log.
    """

    def __init__(self, dialler: RelayDialler) -> None:
        self.dialler = dialler
        self.link: LinkProtocol | None = None
        self.refusal: str | None = None
        self.welcomeTimer: Any = None

    def sessionRequested(self, session: LinkSession) -> None:
        if self.dialler.link is session.link or session.link in self.dialler._moving:
            self.dialler.observer.sessionRequested(session)
        else:
            session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)

    def controlReceived(self, link: LinkProtocol, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == WELCOME:
            self.dialler._welcomed(self, link, message)
        elif kind == "refused":
            self.dialler._refused(self, link, message)
        elif kind == MOVING:
            self.dialler._moveAsked(self, link)
        elif self.dialler.link is link:
            self.dialler.observer.relayControl(link, message)
        else:
            self.dialler.log.debug("ignoring a {kind!r} message from the relay", kind=kind)

    def linkGoingAway(self, link: LinkProtocol) -> None:
        self.dialler._goingAway(self, link)

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        self.dialler._lost(self, link, reason)

    def cancelTimer(self) -> None:
        if self.welcomeTimer is not None and self.welcomeTimer.active():
            self.welcomeTimer.cancel()
        self.welcomeTimer = None


class RelayDialler:
    """
    Keeps one welcomed link to the relay.

    @ivar link: the welcomed link, or L{None}.
    @ivar welcome: the relay's last C{welcome} message.
    @ivar fatal: the message the dialler stopped with, if it did.
    @ivar moveGrace: seconds a link whose relay asked us to move still takes
        sessions after another relay welcomed us.
    """

    log = Logger()

    def __init__(
        self, endpoint: interfaces.IStreamClientEndpoint, clock: interfaces.IReactorTime,
        appHello: dict[str, Any], observer: DiallerObserver, where: str,
        config: LinkConfig | None = None, schedule: ReconnectSchedule | None = None,
    ) -> None:
        """
        @param endpoint: connects to the relay (TLS included).
        @param appHello: the application's part of our hello (holds the key:
            never logged).
        @param where: the relay's address, for messages.
        """
        self.endpoint = endpoint
        self.clock = clock
        self.observer = observer
        self._where = where
        self._choice = IRelayChoice(endpoint, None)
        self.schedule = schedule or ReconnectSchedule()
        self.link: LinkProtocol | None = None
        self.welcome: dict[str, Any] | None = None
        self.fatal: str | None = None
        self._running = False
        self._current: _Attempt | None = None
        self._connecting: defer.Deferred[Any] | None = None
        self._retryCall: Any = None
        self._lastCause: str | None = None
        # The outage: when its first attempt failed, attempts failed, when
        # the next summary line is due.
        self._outage: tuple[float, int, float] | None = None
        self._stopWaiters: list[defer.Deferred[None]] = []
        self._draining: set[LinkProtocol] = set()
        # Links whose relay asked us to move: they take sessions until the
        # call that drains them (set once another relay welcomed us) runs.
        self._moving: dict[LinkProtocol, Any] = {}
        self.moveGrace = MOVE_GRACE
        self._factory_args = (config or LinkConfig(), appHello)

    @property
    def where(self) -> str:
        """
        The relay's address, for messages: the current one of several.
        """
        return self._where if self._choice is None else self._choice.where

    def _nextRelay(self) -> None:
        """
        Dial the relay's next address from now on, if it has several.
        """
        if self._choice is not None and self._choice.count > 1:
            self._choice.advance()

    @property
    def appHello(self) -> dict[str, Any]:
        """
        The application's part of the hellos of the links to come.
        """
        return self._factory_args[1]

    def setHello(self, appHello: dict[str, Any]) -> None:
        """
        Say C{appHello} in the hellos of the links to come (an agent's new
        declaration, which it sent the relay in an C{update}).
        """
        self._factory_args = (self._factory_args[0], appHello)

    # -- life cycle -----------------------------------------------------------

    def start(self) -> None:
        """
        Connect now, and again whenever the link is lost.
        """
        if self._running or self.fatal is not None:
            return
        self._running = True
        self._attempt()

    def stop(self, drainTimeout: float = 0.0) -> defer.Deferred[None]:
        """
        Stop reconnecting and close the link, and the links the relay was
        draining; fires once they are closed.

        @param drainTimeout: if more than 0, welcomed links are drained
            first: a GOAWAY tells the relay to open no more sessions, and
            those in flight have up to this many seconds to finish (then
            they are reset; see L{LinkProtocol.drain}).
        """
        self._running = False
        self._cancelRetry()
        for link in list(self._moving):
            self._forgetMove(link)
        if self._connecting is not None:
            self._connecting.cancel()
        attempt = self._current
        current = attempt.link if attempt is not None else None
        draining = list(self._draining)
        welcomed = [*draining, current] if current and current is self.link else draining
        self._logDrain(welcomed, drainTimeout)
        closing = [self._drainLink(link, drainTimeout) for link in draining]
        if current is not None:
            d: defer.Deferred[None] = defer.Deferred()
            self._stopWaiters.append(d)
            if drainTimeout > 0 and current is self.link:
                current.drain(drainTimeout)
            else:
                drainTimeout = 0.0
                current.transport.loseConnection()
            d.addBoth(_cancelling(self._abortLater(current, drainTimeout)))
            closing.append(d)
        if not closing:
            return defer.succeed(None)
        return defer.gatherResults(closing).addCallback(lambda _: None)

    def _logDrain(self, links: list[LinkProtocol], drainTimeout: float) -> None:
        count = sum(link.connection.session_count for link in links if link.connection)
        if drainTimeout > 0 and count:
            self.log.info(
                "stopping: draining {count} session(s), up to {timeout:g}s",
                count=count, timeout=drainTimeout,
            )

    def _drainLink(self, link: LinkProtocol, drainTimeout: float) -> defer.Deferred[None]:
        d = link.drain(drainTimeout)
        d.addBoth(_cancelling(self._abortLater(link, drainTimeout)))
        return d

    def _abortLater(self, link: LinkProtocol, drainTimeout: float) -> Any:
        """
        Abort C{link} if its close has not finished C{STOP_TIMEOUT} seconds
        after the drain.
        """
        return self.clock.callLater(drainTimeout + STOP_TIMEOUT, link.transport.abortConnection)

    def _attempt(self) -> None:
        self._retryCall = None
        attempt = _Attempt(self)
        self._current = attempt
        config, appHello = self._factory_args
        factory = LinkFactory(DIALER, lambda: attempt, self.clock, config, appHello)
        factory.noisy = False  # no "Starting factory" line per attempt
        d = self._connecting = defer.maybeDeferred(self.endpoint.connect, factory)
        d.addCallbacks(
            self._connected, self._connectFailed, callbackArgs=(attempt,), errbackArgs=(attempt,)
        )

    def _connected(self, link: LinkProtocol, attempt: _Attempt) -> None:
        self._connecting = None
        attempt.link = link
        if (
            attempt is self._current and self._running and self.link is not link
            and attempt.refusal is None
        ):
            attempt.welcomeTimer = self.clock.callLater(
                WELCOME_TIMEOUT, self._noWelcome, attempt
            )

    def _connectFailed(self, failure: Failure, attempt: _Attempt) -> None:
        self._connecting = None
        if attempt is not self._current:
            return
        self._current = None
        if not self._running or failure.check(defer.CancelledError):
            return
        cause = f"cannot reach the relay at {self.where}: {_why(failure)}"
        self._nextRelay()
        self._retry(cause, wasUp=False)

    def _noWelcome(self, attempt: _Attempt) -> None:
        attempt.welcomeTimer = None
        attempt.refusal = (
            f"the relay at {self.where} did not answer our hello within {WELCOME_TIMEOUT:g}s"
        )
        if attempt.link is not None:
            attempt.link.transport.abortConnection()

    # -- the relay's verdict --------------------------------------------------

    def _welcomed(self, attempt: _Attempt, link: LinkProtocol, message: dict[str, Any]) -> None:
        if attempt is not self._current or self.link is not None:
            return
        attempt.cancelTimer()
        self.link, self.welcome = link, message
        now = self.clock.seconds()
        self.schedule.connected(now)
        outage, self._outage = self._outage, None
        lasted = "" if outage is None else (
            f" after {outage[1]} failed attempt(s) over {now - outage[0]:.0f}s"
        )
        self.log.info(
            "{again}connected to the relay at {where} (account {account}){lasted}",
            again="re" if self._lastCause is not None else "", where=self.where,
            account=message.get("account"), lasted=lasted,
        )
        self._lastCause = None
        for old, call in list(self._moving.items()):
            if call is None:
                self._moving[old] = self.clock.callLater(self.moveGrace, self._moved, old)
        self.observer.relayUp(link, message)

    def _refused(self, attempt: _Attempt, link: LinkProtocol, message: dict[str, Any]) -> None:
        if attempt is not self._current:
            return
        attempt.cancelTimer()
        reason, text = refusal_text(message)
        attempt.refusal = f"the relay at {self.where} refused the link: {text}"
        if reason in NON_HEALING:
            self._stopFor(f"relay refused: {text}")
        link.transport.loseConnection()

    def _goingAway(self, attempt: _Attempt, link: LinkProtocol) -> None:
        """
        The relay sent a GOAWAY on the welcomed link: the sessions in flight
        finish on it while we dial again at once, for a relay that takes new
        sessions (say, the one restarted on the same address).
        """
        if self._leaving(attempt, link):
            self._leave(link, "session(s) finish on its link")

    def _moveAsked(self, attempt: _Attempt, link: LinkProtocol) -> None:
        """
        The relay asks us to move (L{nfltr.wire.moving}): as for a GOAWAY,
        but the link still takes sessions until another relay welcomed us
        (then L{_moved}).
        """
        if self._leaving(attempt, link):
            self._moving[link] = None
            self._leave(link, "session(s) in flight; its link takes sessions until another "
                              "relay welcomes us")

    def _leaving(self, attempt: _Attempt, link: LinkProtocol) -> bool:
        return (
            attempt is self._current and link is self.link and self._running
            and attempt.refusal is None
        )

    def _leave(self, link: LinkProtocol, what: str) -> None:
        self._current = self.link = None
        self._draining.add(link)
        cause = f"the relay at {self.where} is going away"
        count = link.connection.session_count if link.connection is not None else 0
        self.log.info("{cause}: {count} {what}; dialling again", cause=cause, count=count,
                      what=what)
        self._lastCause = cause
        self.observer.relayDown()
        self._nextRelay()
        self._attempt()

    def _moved(self, link: LinkProtocol) -> None:
        """
        Another relay welcomed us L{moveGrace} seconds ago: drain the link
        we moved from (its relay's drain bounds what is left on it).
        """
        self._moving.pop(link, None)
        conn = link.connection
        if conn is not None and not (conn.goaway_sent or conn.goaway_received):
            link.drain()

    def _forgetMove(self, link: LinkProtocol) -> None:
        call = self._moving.pop(link, None)
        if call is not None and call.active():
            call.cancel()

    def _lost(self, attempt: _Attempt, link: LinkProtocol, reason: Failure) -> None:
        attempt.cancelTimer()
        self._draining.discard(link)
        self._forgetMove(link)
        if attempt is not self._current:
            return
        self._current = None
        wasUp = self.link is link
        if wasUp:
            self.link = None
            self.observer.relayDown()
        if not self._running:
            waiters, self._stopWaiters = self._stopWaiters, []
            for d in waiters:
                d.callback(None)
            return
        if reason.check(VerificationFailed):
            self._stopFor(str(reason.value))
            return
        if attempt.refusal is not None:
            cause = attempt.refusal
        else:
            why = _why(Failure(link.failure) if link.failure else reason)
            verb = "lost the link to" if wasUp else "cannot connect to"
            cause = f"{verb} the relay at {self.where}: {why}"
        self._nextRelay()
        self._retry(cause, wasUp)

    # -- retrying and stopping ----------------------------------------------

    def _retry(self, cause: str, wasUp: bool) -> None:
        now = self.clock.seconds()
        delay = self.schedule.next_delay(now)
        start, failed, due = self._outage or (now, 0, now + OUTAGE_SUMMARY_INTERVAL)
        failed += 1
        if cause != self._lastCause or wasUp:
            self.log.warn("{cause}; retrying", cause=cause)
        elif now >= due:
            due = now + OUTAGE_SUMMARY_INTERVAL
            self.log.info(
                "the relay at {where} is still unreachable after {failed} attempts / "
                "{seconds:.0f}s ({cause}); retrying",
                where=self.where, failed=failed, seconds=now - start, cause=cause,
            )
        else:
            self.log.debug("{cause}; retrying in {delay:.2f}s", cause=cause, delay=delay)
        self._outage = (start, failed, due)
        self._lastCause = cause
        self._retryCall = self.clock.callLater(delay, self._attempt)

    def _cancelRetry(self) -> None:
        if self._retryCall is not None and self._retryCall.active():
            self._retryCall.cancel()
        self._retryCall = None

    def _stopFor(self, message: str) -> None:
        if self.fatal is not None:
            return
        self.fatal = message
        self._running = False
        self._cancelRetry()
        self.observer.relayFatal(message)


def _why(failure: Failure) -> str:
    """
    A failure as a short phrase.
    """
    if failure.check(error.ConnectionRefusedError):
        return "connection refused"
    if failure.check(error.TimeoutError):
        return "timed out"
    if failure.check(error.DNSLookupError):
        return f"cannot resolve the name ({failure.getErrorMessage()})"
    return failure.getErrorMessage() or getattr(failure.type, "__name__", "error")


def _cancelling(call: Any) -> Any:
    def cancel(result: Any) -> Any:
        if call.active():
            call.cancel()
        return result

    return cancel
