# -*- test-case-name: tests.client.test_connector,tests.client.test_probe -*-
"""
C{nfltr tcp-connect}: a local listener whose connections become sessions,
through the relay, to an agent's service.

One link to the relay (L{RelayDialler}) carries every accepted connection as
a session with target C{tcp:AGENT:PORT}.  The listener opens only once the
relay welcomed us and one probe session reached the agent (L{Probe}: an
agent that does not exist or a wrong C{--pin} ends the command with one
line, unless C{--wait}), and prints C{listening on HOST:PORT} with the port
it got.  End to end by default: each session carries TLS to the agent, pinned
to the agent's key, whose ClientHello travels in the session's OPEN.

A connection accepted while the link is down (reconnecting) waits, paused,
up to L{PENDING_TIMEOUT} seconds for it (at most L{MAX_PENDING} of them),
then is closed.  A session that fails is one line in the log (a burst of
the same failure is one line), and its local connection is closed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from OpenSSL import SSL
from twisted.application.service import Service
from twisted.internet import defer, error
from twisted.internet.endpoints import TCP4ServerEndpoint, TCP6ServerEndpoint
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.agent import DiallerObserver, Quiet, RelayDialler, TcpEnd, splice_local
from nfltr.link import DIALER, ErrorCode, LinkConfig
from nfltr.link.twisted import (
    LinkFactory,
    LinkHandler,
    LinkProtocol,
    LinkUnavailable,
    SessionResetError,
)
from nfltr.resume.twisted import RecordsBroken
from nfltr.streams import SpliceEnd
from nfltr.tls import E2EETLSFactory, TunnelTLSBroken, VerificationFailed, ssl_words
from nfltr.wire.messages import NOT_FOUND_CODE, WELCOME, client_hello, client_target
from nfltr.wire.resume import RESUME_UNSUPPORTED, offers_resume

from ._options import ConnectOptions
from ._probe import Probe
from ._resume import ConnectorResumer

# Seconds an accepted connection waits for a link to the relay.
PENDING_TIMEOUT = 10.0
# Accepted connections that may wait at once; more are closed at once.
MAX_PENDING = 256

_log = Logger()


def explain(reason: Failure, where: str) -> str | None:
    """
    One line for the user about a session to C{where} (C{AGENT:PORT}) that
    ended with C{reason}, or L{None} when there is nothing to tell (a clean
    close, the local side going away, the link's loss, which the dialler
    reports).
    """
    tls = _explainTLS(reason, where)
    if tls is not None:
        return tls
    reset = reason.value
    if isinstance(reset, SessionResetError):
        code, why = reset.code, reset.reason
        if code == NOT_FOUND_CODE:
            return f"{where}: no such agent or port (or not yours)"
        if code == ErrorCode.CONNECT_FAILED:
            return f"{where}: the agent's service refused the connection"
        if code != ErrorCode.CANCEL:
            return f"{where}: the session was reset ({why})"
    return None


def _explainTLS(reason: Failure, where: str) -> str | None:
    """
    L{explain} for a pin refused, a handshake failed, or a session's bytes
    altered on the way (its TLS broken after its handshake,
    L{TunnelTLSBroken}, or its resumable records, L{RecordsBroken});
    L{None} for any other C{reason}.
    """
    if reason.check(VerificationFailed):
        return f"{where}: {reason.value}"
    if reason.check(TunnelTLSBroken):
        return (
            f"{where}: a session's end-to-end TLS failed ({_sslWords(reason.value)}): its "
            "bytes were altered between here and the agent; the session was reset"
        )
    if reason.check(RecordsBroken):
        return f"{where}: {reason.value}: altered on the way; the session was reset"
    if reason.check(SSL.Error):
        return (
            f"{where}: TLS with the agent failed ({_sslWords(reason.value)}); an agent run "
            "with --e2ee false needs --e2ee false here"
        )
    return None


def _sslWords(e: BaseException | None) -> str:
    """
    OpenSSL's reasons in an C{SSL.Error} (a list of C{(library, function,
    reason)}), as words rather than a Python list.
    """
    return ssl_words(e)


class _LocalFactory(Factory):
    """
    Turns each accepted local connection over to the connector.
    """

    noisy = False

    def __init__(self, connector: TcpConnector) -> None:
        self.connector = connector

    def logPrefix(self) -> str:
        """
        How the listening port names itself in the log.
        """
        return f"tcp-connect {self.connector.where}"

    def buildProtocol(self, addr: Any) -> TcpEnd:
        """
        A splice end for the new connection.
        """
        return self.connector._accepted()


#: Links tcp-connect opens beside its first when that one is at the relay's
#: session limit.
MAX_EXTRA_LINKS = 3


class _ExtraHandler(LinkHandler):
    """
    One extra link of a connector.
    """

    def __init__(self, connector: TcpConnector) -> None:
        self.connector = connector
        self.welcomed = False

    def controlReceived(self, link: LinkProtocol, message: dict[str, Any]) -> None:
        if message.get("type") == WELCOME and not self.welcomed:
            self.welcomed = True
            self.connector._extraUp(link)
        else:
            link.transport.loseConnection()

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        self.connector._extraLost(link, self.welcomed)


class TcpConnector(Service, DiallerObserver):
    """
    Runs C{tcp-connect}.

    @ivar link: the welcomed link to the relay, or L{None}.
    @ivar extra: links opened beside it while it was at the relay's session
        limit (at most L{MAX_EXTRA_LINKS}); they end with it.
    @ivar port: the listening port, once listening.
    @ivar localFactory: builds the protocol of each accepted connection.
    """

    log = Logger()

    def __init__(
        self, reactor: Any, options: ConnectOptions,
        announce: Callable[[str], None] | None = None,
        onFatal: Callable[[str], None] | None = None,
        endpoint: Any = None, listen: Callable[[Factory], Any] | None = None,
    ) -> None:
        """
        @param announce: shows a line to the user (default: log it).
        @param onFatal: told the one line the connector stopped with.
        @param endpoint: connects to the relay (default: from the options).
        @param listen: starts listening with a factory (default: on the
            C{--listen} address).
        """
        self.reactor = reactor
        self.options = options
        self.announce = announce or (lambda line: _log.info("{line}", line=line))
        self.onFatal = onFatal or (lambda message: None)
        self.target = client_target(options.agent, options.port)
        self.where = f"{options.agent}:{options.port}"
        self.tls = None
        if options.agent_tls is not None:
            self.tls = E2EETLSFactory(options.agent_tls, True, reactor)
        self.link: LinkProtocol | None = None
        self.port: Any = None
        self.localFactory = _LocalFactory(self)
        self.quiet = Quiet(reactor)
        self._listen = listen or self._listenOnAddress
        self._listening: defer.Deferred[Any] | None = None
        self._waiting: dict[TcpEnd, tuple[SpliceEnd, Any]] = {}
        relay = options.relay
        self.endpoint = endpoint or relay.endpoint(reactor)
        self.config = LinkConfig(keepalive=relay.keepalive)
        self.dialler = RelayDialler(
            self.endpoint, reactor, client_hello(relay.key), self, relay.address, self.config
        )
        self.extra: list[LinkProtocol] = []
        self._extraDialling = 0
        self._probe: Probe | None = None
        self._checked = False
        #: Resumable sessions, once the relay offered them (L{offers_resume}).
        self.resumer = ConnectorResumer(reactor, options.agent, options.port,
                                        options.resume_timeout, self._pick)
        self.resumable = False

    # -- service --------------------------------------------------------------

    def startService(self) -> None:
        """
        Dial the relay; listening starts once it welcomed us.
        """
        super().startService()
        self.dialler.start()

    def stopService(self) -> defer.Deferred[Any]:
        """
        Stop listening, close waiting connections and the link.
        """
        super().stopService()
        self._closeWaiting()
        if self._probe is not None:
            self._probe.cancel()
            self._probe = None
        stops = [self.dialler.stop()]
        extra, self.extra = self.extra, []
        stops.extend(link.drain(0) for link in extra)
        if self._listening is not None:
            self._listening.cancel()
        if self.port is not None:
            stops.append(defer.maybeDeferred(self.port.stopListening))
            self.port = None
        return defer.gatherResults(stops)

    def _listenOnAddress(self, factory: Factory) -> Any:
        options = self.options
        if ":" in options.listen_host:
            endpoint: Any = TCP6ServerEndpoint(
                self.reactor, options.listen_port, interface=options.listen_host
            )
        else:
            endpoint = TCP4ServerEndpoint(
                self.reactor, options.listen_port, interface=options.listen_host
            )
        return endpoint.listen(factory)

    def _listened(self, port: Any) -> None:
        self._listening = None
        if not self.running:
            port.stopListening()
            return
        self.port = port
        host = self.options.listen_host
        shown = f"[{host}]" if ":" in host else host
        self.announce(f"listening on {shown}:{port.getHost().port}")

    def _listenFailed(self, failure: Failure) -> None:
        self._listening = None
        if failure.check(defer.CancelledError):
            return
        self._stop(f"cannot listen on {self.options.listen_address}: {failure.getErrorMessage()}")

    def _stop(self, message: str) -> None:
        self.onFatal(message)
        self._closeWaiting()
        self.dialler.stop()

    # -- the relay --------------------------------------------------------------

    def relayUp(self, link: LinkProtocol, welcome: dict[str, Any]) -> None:
        """
        The first time, probe the agent (then listen); start the
        connections that waited.
        """
        self.link = link
        self.resumable = offers_resume(welcome) and self.options.resume_timeout > 0
        self.resumer.relayUp()
        if not self._checked:
            if self._probe is None and self.running:
                self._startProbe(link)
            return
        self._startListening()
        self._openWaiting()

    def _startListening(self) -> None:
        if self.port is None and self._listening is None and self.running:
            self._listening = defer.maybeDeferred(self._listen, self.localFactory)
            self._listening.addCallbacks(self._listened, self._listenFailed)

    def _startProbe(self, link: LinkProtocol) -> None:
        probe = self._probe = Probe(
            self.reactor, self.tls is not None, lambda outcome: self._probed(link, outcome)
        )
        wrapped = self.tls.wrap(probe) if self.tls is not None else probe
        try:
            if self.resumable:
                self.resumer.open(link, wrapped, None)
            else:
                link.openSession(self.target, wrapped)
        except LinkUnavailable as e:  # the next welcome probes again
            self._probe = None
            self.log.debug("cannot probe {where} yet: {why}", where=self.where, why=str(e))

    def _probed(self, link: LinkProtocol, outcome: Failure | None) -> None:
        """
        The probe passed (C{outcome} L{None}): listen.  Or it failed: stop
        with the reason, or, with C{--wait}, say it and listen anyway.  A
        probe cut by the link's loss is made again on the next link.
        """
        self._probe = None
        if outcome is not None and getattr(outcome.value, "reason", None) == RESUME_UNSUPPORTED:
            # An agent without resumption: plain sessions from now on, this probe's included.
            self.resumable = False
            if self.running:
                self._startProbe(link)
            return
        message = None if outcome is None else explain(outcome, self.where)
        if outcome is not None and message is None:
            if not link.canOpen():
                if self.link is not link and self.link is not None and self.running:
                    self._startProbe(self.link)
                return
            message = f"{self.where}: {outcome.getErrorMessage()}"
        self._checked = outcome is None or self.options.wait
        if message is None:
            self._startListening()
        elif self.options.wait:
            self.log.warn("{text}; listening anyway (--wait)", text=message)
            self._startListening()
        else:
            assert outcome is not None
            if not outcome.check(VerificationFailed, SSL.Error):  # waiting cannot fix these
                message += " (--wait listens anyway, until the agent is up)"
            self._stop(message)

    def _openWaiting(self) -> None:
        for local, (remote, timer) in list(self._waiting.items()):
            if not self._open(local, remote):
                break
            del self._waiting[local]
            timer.cancel()

    def relayDown(self) -> None:
        """
        Sessions end with the link; new connections wait for the next one.
        """
        self.link = None
        extra, self.extra = self.extra, []
        for link in extra:
            link.drain(0)

    def _extraUp(self, link: LinkProtocol) -> None:
        self._extraDialling -= 1
        if self.link is None or not self.running:
            link.drain(0)
            return
        self.extra.append(link)
        self.log.debug("extra link {count} to the relay up", count=len(self.extra))
        self._openWaiting()

    def _extraLost(self, link: LinkProtocol, welcomed: bool) -> None:
        if not welcomed:
            self._extraDialling -= 1
        if link in self.extra:
            self.extra.remove(link)

    def _dialExtra(self) -> None:
        """
        The welcomed link is at the relay's session limit: open another, if
        there is room for one.
        """
        link = self.link
        if (
            link is None or not self.running or link.connection is None
            or link.connection.goaway_received or link.connection.goaway_sent
            or len(self.extra) + self._extraDialling >= MAX_EXTRA_LINKS
        ):
            return
        self._extraDialling += 1
        handler = _ExtraHandler(self)
        factory = LinkFactory(
            DIALER, lambda: handler, self.reactor, self.config,
            client_hello(self.options.relay.key),
        )
        factory.noisy = False

        def failed(failure: Failure) -> None:
            self._extraDialling -= 1
            self.log.debug("extra link failed: {why}", why=failure.getErrorMessage())

        defer.maybeDeferred(self.endpoint.connect, factory).addErrback(failed)

    def relayFatal(self, message: str) -> None:
        """
        The relay turned us away for good.
        """
        self.onFatal(message)
        self._closeWaiting()

    # -- local connections --------------------------------------------------

    def _accepted(self) -> TcpEnd:
        local, remote = splice_local()
        local.onLost = lambda reason: self._forget(local)
        if not self._open(local, remote):
            self._wait(local, remote)
        return local

    def _pick(self) -> LinkProtocol | None:
        link = self.link
        if not self.extra:
            return link if link is not None and link.canOpen() else None
        usable = [link for link in (link, *self.extra) if link is not None and link.canOpen()]
        if not usable:
            return None
        return min(usable, key=lambda link: link.connection.session_count)  # type: ignore[union-attr]

    def _open(self, local: TcpEnd, remote: SpliceEnd) -> bool:
        link = self._pick()
        if link is None:
            if self.link is not None:
                self._dialExtra()
            return False
        remote.onLost = self._sessionEnded
        upper = self.tls.wrap(remote) if self.tls is not None else remote
        if self.resumable:
            self.resumer.open(link, upper, local)
        else:
            link.openSession(self.target, upper)
        return True

    def _wait(self, local: TcpEnd, remote: SpliceEnd) -> None:
        if len(self._waiting) >= MAX_PENDING or not self.running:
            remote.closed = True  # the local connection is aborted once made
            self._say(f"{MAX_PENDING} local connections already wait for the relay: closed one")
            return
        timer = self.reactor.callLater(PENDING_TIMEOUT, self._expire, local)
        self._waiting[local] = (remote, timer)

    def _expire(self, local: TcpEnd) -> None:
        self._waiting.pop(local, None)
        self._say(f"no link to the relay after {PENDING_TIMEOUT:g}s: closed a local connection")
        local.abort()

    def _forget(self, local: TcpEnd) -> None:
        entry = self._waiting.pop(local, None)
        if entry is not None and entry[1].active():
            entry[1].cancel()

    def _closeWaiting(self) -> None:
        waiting, self._waiting = self._waiting, {}
        for local, (_, timer) in waiting.items():
            if timer.active():
                timer.cancel()
            local.abort()

    def _sessionEnded(self, reason: Failure) -> None:
        if getattr(reason.value, "reason", None) == RESUME_UNSUPPORTED:
            # An agent without resumption: its next sessions are plain ones.
            self.resumable = False
        if self._waiting:
            self.reactor.callLater(0, self._openWaiting)
        message = explain(reason, self.where)
        if message is not None:
            self._say(message)
        if not reason.check(error.ConnectionDone):
            self.log.debug(
                "{where}: session ended: {why}", where=self.where, why=reason.getErrorMessage()
            )

    def _say(self, message: str) -> None:
        text = self.quiet.admit(message)
        if text is not None:
            self.log.warn("{text}", text=text)
