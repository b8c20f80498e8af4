# -*- test-case-name: tests.relay.test_public_ports -*-
"""
The visitors of one public port (L{nfltr.relay.public_ports}): each
connection is admitted by its source address (the per-source limits of
L{nfltr.streams.Admission}, shared by every public port) and by the
share's allow list, before a byte is read; then it is spliced to a session
C{public:PORT@VISITOR} on the agent's link, through the one TCP route
(L{nfltr.relay.tcp_route.TCPRoute.openOn}).  A refused connection is
closed at once.  The visitor speaks to the service directly: nothing is
read or added on the way, and there is no end-to-end TLS.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error
from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.streams import Admission, source_of
from nfltr.wire import format_address
from nfltr.wire.messages import public_target
from nfltr.wire.policy import SharePolicy

from .counters import NOT_ALLOWED, TCP
from .interfaces import ISessionOpener
from .proxy_front import proxy_front
from .public_ports import PublicPorts
from .tcp_route import RouteRefused, SessionEnd

_log = Logger()

#: The reason an agent's session is reset with when its visitor left.
VISITOR_LOST = "visitor connection lost"


class VisitorEnd(SessionEnd):
    """
    The visitor's end of a public port's splice; gives its admission back
    when it closes.
    """

    def __init__(self, admission: Admission | None, source: str, clock: IReactorTime) -> None:
        super().__init__(VISITOR_LOST)
        self.admission = admission
        self.source = source
        self.clock = clock

    def connectionMade(self) -> None:
        """
        Send without Nagle's delay, then join.
        """
        setNoDelay = getattr(self.transport, "setTcpNoDelay", None)
        if setNoDelay is not None:
            setNoDelay(True)
        super().connectionMade()

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        Close as a session end does, and count the source's connection
        closed.
        """
        super().connectionLost(reason)
        admission, self.admission = self.admission, None
        if admission is not None:
            admission.closed(self.source, self.clock.seconds(), False)


class PublicPortFactory(Factory):
    """
    Builds the visitor's end of each admitted connection to one public
    port; declines (L{None}: the connection is closed) the others.
    """

    noisy = False
    log = Logger()

    def __init__(
        self, port: int, ports: PublicPorts, route: ISessionOpener,
        admission: Admission | None, clock: IReactorTime, counters: Any = None,
    ) -> None:
        self.port = port
        self.ports = ports
        self.route = route
        self.admission = admission
        self.clock = clock
        self.counters = counters

    def buildProtocol(self, addr: Any) -> VisitorEnd | None:
        """
        The visitor's end, spliced to a new session on the agent's link;
        L{None} for a visitor refused by its source's limits or the allow
        list, or when the agent cannot open a session now.
        """
        entry = self.ports.entry(self.port)
        if entry is None:
            return None
        source, admission = source_of(addr), self.admission
        if admission is not None:
            reason = admission.admit(source, self.clock.seconds())
            if reason is not None:
                self.log.debug("public port {port}: refused {peer}: {reason}",
                               port=self.port, peer=format_address(addr), reason=reason)
                return None
            admission.routed()
        end = VisitorEnd(admission, source, self.clock)
        if entry.allow and not SharePolicy(entry.allow).allows(getattr(addr, "host", None)):
            if self.counters is not None:
                self.counters.session(TCP, NOT_ALLOWED)
            end.connectionLost(Failure(error.ConnectionDone()))
            return None
        holder = entry.pick()
        if holder is None:  # every member withdrew its service (health checks)
            end.connectionLost(Failure(error.ConnectionDone()))
            return None
        try:
            self.route.openOn(holder, public_target(entry.service, format_address(addr)), end)
        except RouteRefused:
            end.connectionLost(Failure(error.ConnectionDone()))
            return None
        return end



def public_ports(
    relay: Any, config: Any, reactor: Any, proxyRefused: dict[str, int] | None = None,
) -> PublicPorts:
    """
    The public ports of a relay (its L{nfltr.relay.agents.Relay}) run with
    C{config} (a L{nfltr.relay.config.RelayConfig}): bound with the
    reactor's C{listenTCP} on C{config.public_ports_interface}, with the
    relay's listen backlog, behind the PROXY protocol front of
    C{config.proxy_from} (L{nfltr.relay.proxy_front}), their visitors
    admitted under one L{Admission} of C{config.admission}.

    @param proxyRefused: where the PROXY front counts its refusals.
    """
    admission = Admission(config.admission)

    def listen(port: int, factory: Any) -> Any:
        front = proxy_front(factory, config.proxy_from, reactor, config.handshake_timeout,
                            proxyRefused)
        return reactor.listenTCP(port, front, backlog=config.backlog,
                                 interface=config.public_ports_interface)

    def factory(port: int) -> PublicPortFactory:
        return PublicPortFactory(port, ports, relay.tcp, admission, reactor, relay.counters)

    ports = PublicPorts(config.public_ports, config.public_ports_per_account,
                        relay.directory.leases, reactor, listen, factory)
    ports.admission = admission
    ports.health = relay.directory.health
    _log.info(
        "public ports {ranges} on {interface}, at most {count} per account: visitors reach "
        "agents' TCP shares straight, not end-to-end encrypted",
        ranges=str(config.public_ports), interface=config.public_ports_interface,
        count=ports.perAccount,
    )
    return ports
