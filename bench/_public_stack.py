# -*- test-case-name: tests.test_bench_public_path -*-
"""
The relay's and the agent's objects of a public port's data path, wired in
one process for L{bench.public_path}: a link over loopback TLS (the relay
listens, the agent dials, with the library's link configuration and the
relay's memory account), a public port whose visitors are spliced to
sessions on the relay's end as L{nfltr.relay.tcp_route.TCPRoute.openOn}
splices them, and the agent's sessions router serving the port as a public
port's (plain, the visitor's address in the target).  No authentication,
directory or admission: they cost nothing per byte.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.protocol import Factory
from twisted.python.failure import Failure

from nfltr.agent import AgentSessions, ServiceConnector
from nfltr.link import DIALER, LISTENER, LinkConfig
from nfltr.link.memory import LinkMemory
from nfltr.link.twisted import LinkFactory, LinkHandler, LinkProtocol, LinkSession
from nfltr.relay.public_listener import VisitorEnd
from nfltr.relay.tcp_route import SessionEnd
from nfltr.streams import source_of
from nfltr.tls import (
    TLSClientEndpoint,
    client_creator,
    ensure_self_signed,
    server_context_factory,
    tls_factory,
)
from nfltr.wire import format_address
from nfltr.wire.messages import public_target


class _RelayEnd(LinkHandler):
    """
    The relay's side of the link: fires C{established} with it.
    """

    def __init__(self, established: defer.Deferred[LinkProtocol]) -> None:
        self.established = established

    def linkEstablished(self, link: LinkProtocol) -> None:
        if not self.established.called:
            self.established.callback(link)

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        if not self.established.called:
            self.established.errback(reason)


class _AgentEnd(LinkHandler):
    """
    The agent's side of the link: its sessions go to the router.
    """

    def __init__(self, sessions: AgentSessions) -> None:
        self.sessions = sessions

    def sessionRequested(self, session: LinkSession) -> None:
        self.sessions.sessionRequested(session)


class _PublicPort(Factory):
    """
    A public port's visitors, each spliced to a new session on C{link}
    towards the agent's port C{service}.
    """

    noisy = False

    def __init__(self, link: LinkProtocol, service: int, clock: Any) -> None:
        self.link = link
        self.service = service
        self.clock = clock

    def buildProtocol(self, addr: Any) -> VisitorEnd:
        end = VisitorEnd(None, source_of(addr), self.clock)
        agentEnd = SessionEnd("agent link lost")
        end.other, agentEnd.other = agentEnd, end
        self.link.openSession(public_target(self.service, format_address(addr)), agentEnd)
        return end


class PublicStack:
    """
    The relay's and the agent's objects; see the module.

    @ivar reactor: the (tuned) reactor they run on.
    @ivar directory: where the relay's certificate is made.
    @ivar service: the service's TCP port on 127.0.0.1.
    @ivar window: the links' session window, or L{None} for the default.
    """

    def __init__(self, reactor: Any, directory: str, service: int, window: int | None) -> None:
        self.reactor = reactor
        self.directory = directory
        self.service = service
        self.config = LinkConfig() if window is None else LinkConfig(session_window=window)
        self.listening: list[Any] = []
        self.links: list[LinkProtocol] = []

    def start(self) -> defer.Deferred[int]:
        """
        Listen, connect the agent, and fire with the public port's number
        once the link is established.
        """
        identity = ensure_self_signed(self.directory, "relay")
        established: defer.Deferred[LinkProtocol] = defer.Deferred()
        relayLinks = LinkFactory(LISTENER, lambda: _RelayEnd(established), self.reactor,
                                 self.config, memory=LinkMemory())
        tls = tls_factory(server_context_factory(identity.cert, identity.key), False,
                          relayLinks, self.reactor)
        port = self.reactor.listenTCP(0, tls, interface="127.0.0.1")
        self.listening.append(port)
        sessions = AgentSessions(self.reactor, [self.service], ServiceConnector(self.reactor),
                                 None, publicPorts=[self.service])
        agentLinks = LinkFactory(DIALER, lambda: _AgentEnd(sessions), self.reactor,
                                 self.config)
        endpoint = TLSClientEndpoint(
            client_creator("relay", pin=identity.fingerprint),
            TCP4ClientEndpoint(self.reactor, "127.0.0.1", port.getHost().port), self.reactor,
        )
        agent = endpoint.connect(agentLinks)
        agent.addCallback(self.links.append)
        agent.addErrback(lambda f: None if established.called else established.errback(f))

        def serve(link: LinkProtocol) -> int:
            self.links.append(link)
            public = self.reactor.listenTCP(0, _PublicPort(link, self.service, self.reactor),
                                            interface="127.0.0.1")
            self.listening.append(public)
            return int(public.getHost().port)

        return established.addCallback(serve)

    def stop(self) -> None:
        """
        Stop listening and drop the links.
        """
        for port in self.listening:
            port.stopListening()
        for link in self.links:
            link.transport.abortConnection()
