# -*- test-case-name: tests.agent.test_service -*-
"""
The agent's sessions router (L{AgentSessions}): for each session the relay
opens on the agent's link, a connection to the local service (TCP ports,
share URLs, public ports' visitors, resumable and datagram sessions),
spliced to the session with backpressure both ways.  L{agent_sessions}
builds the one of a set of options: the agent's first, and each one a
reload installs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from twisted.internet import error
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.link import ErrorCode
from nfltr.link.twisted import LinkSession
from nfltr.tls import (
    E2EETLSFactory,
)
from nfltr.wire.messages import (
    NOT_FOUND_CODE,
    NOT_FOUND_REASON,
    MessageError,
    agent_target,
    parse_addressed_target,
    parse_agent_target,
    parse_http_visitor,
    parse_public_target,
    parse_share_target,
)
from nfltr.wire.resume import RESUMING, parse_agent_resume_target

from ._attempt import SessionAttempt
from ._local import splice_local
from ._log_limit import Quiet
from ._options import AgentOptions
from ._proxy import header_writer
from ._resume import AgentResumer
from ._shares import ShareServer
from ._udp import UDPServices

if TYPE_CHECKING:
    pass

_log = Logger()


class AgentSessions:
    """
    Serves the sessions the relay opens: target C{tcp:PORT} for a shared
    port becomes a connection to the service on that port; any other
    target is refused as not found.

    A session for a shared port is the path every tunnelled connection
    takes, so it is kept lean: its target is looked up in a dict, the
    connection made by L{ServiceConnector.dial} (no Deferred), and nothing
    logged.
    """

    log = Logger()

    def __init__(
        self, clock: Any, ports: Collection[int], connector: Any, tls: E2EETLSFactory | None,
        shares: Mapping[str, ShareServer] | None = None, publicPorts: Collection[int] = (),
        plain: Collection[int] = (),
    ) -> None:
        """
        @param connector: has C{dial(attempt)} (L{ServiceConnector}).
        @param tls: ends each session's TLS, or L{None} for plain sessions.
        @param shares: the servers of the share URLs, by share name.
        @param publicPorts: the shared ports published on a relay port, whose
            visitors' sessions (C{public:PORT@VISITOR}) are plain.
        @param plain: the ports whose sessions are plain even so.
        """
        self.ports = frozenset(ports)
        self.publicPorts = frozenset(publicPorts)
        #: C{v1} or C{v2}: the PROXY header written first to the service.
        self.proxyProtocol: str | None = None
        self.connector = connector
        self.tls = tls
        self.shares = dict(shares or {})
        self.plain = frozenset(plain)
        self.quiet = Quiet(clock)
        self._targets = {agent_target(port): port for port in self.ports}
        #: Serves the datagram sessions of the shared UDP ports, if any.
        self.udp: UDPServices | None = None
        #: Serves resumable sessions (C{rtcp:}, C{resume:}), or L{None}: refused as unknown.
        self.resumer: AgentResumer | None = None

    def sessionRequested(self, session: LinkSession) -> None:
        """
        Accept C{session} and connect to its service, or refuse it.
        """
        port = self._targets.get(session.target)
        if port is None:
            port = self._otherTarget(session)
            if port is None:
                return
        self._serve(session, port, self.tls)

    def _serve(
        self, session: LinkSession, port: int, tls: E2EETLSFactory | None,
        visitor: str | None = None,
    ) -> bool:
        """
        Accept C{session} (its TLS ended here with C{tls}, if given) and
        connect it to the service on C{port}, after a PROXY header naming
        C{visitor} if the agent writes them.

        @return: true (it is served).
        """
        local, remote = splice_local()
        if port in self.plain:
            tls = None
        local.header = header_writer(self.proxyProtocol, visitor)
        # Answered (link ACCEPT, if the relay asked) once the service takes the
        # connection (SessionAttempt), else reset CONNECT_FAILED.
        session.accept(tls.wrap(remote) if tls is not None else remote, confirm=False)
        attempt = SessionAttempt(port, local, session, self.serviceFailed, self.quiet)
        # The session ended before the service answered: give up on it.
        remote.onLost = attempt.lost
        self.connector.dial(attempt)
        return True

    def _otherTarget(self, session: LinkSession) -> int | None:
        """
        Serve or refuse a session whose target is not C{tcp:PORT} for a
        shared port as the relay writes it; return the port of a shared
        port spelt otherwise.
        """
        if self.udp is not None and self.udp.serve(session):
            return None
        try:
            resumable = parse_agent_resume_target(session.target)
            serve = self._server(session.target) if resumable is None else None
        except MessageError:
            resumable = serve = None
        if resumable is not None and self.resumer is not None and resumable[1] in self.ports:
            self._serveResumable(session, *resumable)
            return None
        if serve is not None:
            if not serve(session):
                session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)
            return None
        try:
            port: int | None = parse_agent_target(session.target)
        except MessageError:
            port = None
        if port in self.ports:
            return port
        self.log.debug("refused a session for {target!r}", target=session.target)
        session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)
        return None

    def _serveResumable(self, session: LinkSession, kind: str, port: int) -> None:
        """
        Serve a new resumable session as L{_serve} does a plain one, or resume one.
        """
        assert self.resumer is not None
        if kind == RESUMING:
            self.resumer.resume(session)
            return
        local, remote = splice_local()
        tls = None if port in self.plain else self.tls
        local.header = header_writer(self.proxyProtocol, None)
        self.resumer.serve(session, tls.wrap(remote) if tls is not None else remote, local)
        attempt = SessionAttempt(port, local, session, self.serviceFailed, self.quiet)
        remote.onLost = attempt.lost
        self.connector.dial(attempt)

    def _server(self, target: str) -> Callable[[LinkSession], bool] | None:
        """
        What serves a session of C{target} (a client's address, a public
        port's, a share's), returning whether it could; L{None} for a
        target of none of those kinds.

        @raise MessageError: a target of one of them, malformed.
        """
        client, public = parse_addressed_target(target), parse_public_target(target)
        share, relayed = parse_share_target(target), parse_http_visitor(target)
        if client is not None:
            port, address = client
            return lambda s: port in self.ports and self._serve(s, port, self.tls, address)
        if public is not None:
            # The visitor speaks to the service: no TLS here.
            port, address = public
            return lambda s: port in self.publicPorts and self._serve(s, port, None, address)
        if relayed is not None:
            server = self.shares.get(relayed[0])
            return lambda s: server is not None and _served(server.serveRelayed, s, relayed[1])
        if share is not None:
            name, visitor = share
            server = self.shares.get(name)
            return lambda s: server is not None and _served(server.serve, s, visitor)
        return None

    def serviceFailed(self, session: LinkSession, port: int, failure: Failure) -> None:
        """
        The service on C{port} could not be reached for C{session}: reset
        the session with C{CONNECT_FAILED}, saying why, and warn (one line
        for a burst, see L{Quiet}).
        """
        if failure.check(error.ConnectionRefusedError):
            why = f"service on port {port} refused the connection"
        elif failure.check(error.TimeoutError):
            why = f"service on port {port} did not answer"
        else:
            why = f"cannot connect to the service on port {port}: {failure.getErrorMessage()}"
        session.abortWith(ErrorCode.CONNECT_FAILED, why)
        text = self.quiet.admit(why)
        if text is not None:
            self.log.warn("{text}", text=text)


def agent_sessions(
    reactor: Any, options: AgentOptions, connector: Any, tls: E2EETLSFactory | None,
    shares: Mapping[str, ShareServer],
) -> AgentSessions:
    """
    The router of the sessions of an agent run with C{options} (its first,
    and each one a reload installs): its TCP ports (plain ones, those
    published on a relay port), share URLs, PROXY protocol and UDP ports.
    """
    public = dict(zip(options.ports, options.public_ports, strict=False))
    sessions = AgentSessions(reactor, options.ports, connector, tls, shares, public,
                             options.plain)
    sessions.proxyProtocol = options.proxy_protocol
    sessions.udp = UDPServices(reactor, options.udp_shares()) if options.udp else None
    return sessions


def _served(serve: Callable[..., object], *args: Any) -> bool:
    """
    Call C{serve} with C{args}; true (it served the session).
    """
    serve(*args)
    return True
