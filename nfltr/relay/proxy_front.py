# -*- test-case-name: tests.relay.test_proxy_front -*-
"""
The PROXY protocol from a load balancer in front of the relay
(C{--proxy-protocol-from CIDR,...}): L{ProxyFrontFactory} wraps a
listener's factory (the TLS port, the HTTP port, the SSH port, the public
ports).

  - A connection from a trusted network must start with a PROXY header
    (v1 or v2, L{nfltr.wire.proxy_protocol}) within the handshake timeout;
    the connection is then the client's the header names: the wrapped
    factory builds its protocol for that address (so the per-source limits
    count it), and its transport's C{getPeer} answers it (so allow lists,
    logs and C{X-Forwarded-For} use it).  A header naming nobody (the
    balancer's own health check) leaves the balancer's address.  A
    connection without a good header is closed.
  - A connection from anywhere else goes to the wrapped factory as it is;
    if its first bytes are a PROXY header, it is closed
    (L{ProxyHeaderGuard}): nobody outside the trusted networks may say whose
    connection it is.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

from twisted.internet import interfaces
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from zope.interface import directlyProvides, implementer, providedBy

from nfltr.streams import PrefixReader
from nfltr.wire import format_address
from nfltr.wire.policy import Network
from nfltr.wire.proxy_protocol import (
    V1_PREFIX,
    V2_SIGNATURE,
    Address,
    ProxyHeaderError,
    ProxyHeaderParser,
    may_be_header,
)

#: Why connections were refused, the keys of L{ProxyFrontFactory.refused}.
BAD_HEADER, TIMEOUT, UNTRUSTED = "bad_header", "timeout", "untrusted_header"
REFUSALS = (BAD_HEADER, TIMEOUT, UNTRUSTED)


@implementer(interfaces.ITransport)
class PeerTransport:
    """
    A connection's transport, with the peer a PROXY header named: every
    attribute but C{getPeer} is the transport's own, and so are the
    interfaces it provides.
    """

    def __init__(self, transport: Any, peer: Any) -> None:
        directlyProvides(self, providedBy(transport))
        self._transport = transport
        self._peer = peer
        self.write = transport.write
        self.writeSequence = transport.writeSequence

    def getPeer(self) -> Any:
        """
        The client the header named.
        """
        return self._peer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def client_address(address: Address) -> IPv4Address | IPv6Address:
    """
    The L{IAddress} of a header's source.
    """
    host, port = address
    if ipaddress.ip_address(host).version == 6:  # noqa: PLR2004
        return IPv6Address("TCP", host, port)
    return IPv4Address("TCP", host, port)


@implementer(interfaces.IHalfCloseableProtocol)
class _Forwarding(PrefixReader):
    """
    Passes half-closes on to the protocol that took over.
    """

    factory: ProxyFrontFactory
    log = Logger()

    def readConnectionLost(self) -> None:
        """
        EOF: for the protocol that took over, a half-close if it takes one;
        otherwise, or before it took over, the end.
        """
        halfCloseable = interfaces.IHalfCloseableProtocol(self.inner, None)
        if halfCloseable is not None:
            halfCloseable.readConnectionLost()
        else:
            self.transport.loseConnection()

    def refuse(self, reason: str, why: str) -> None:
        """
        Count and log a refusal, and abort the connection.
        """
        self.factory.refused[reason] += 1
        self.log.debug("PROXY protocol: {peer} refused: {why}",
                       peer=format_address(self.addr), why=why)
        self.transport.abortConnection()


class ProxyHeaderReader(_Forwarding):
    """
    Reads the PROXY header of a trusted connection, then hands it over;
    see the module.
    """

    def __init__(self, factory: ProxyFrontFactory, addr: Any) -> None:
        super().__init__(factory, addr)
        self.parser: ProxyHeaderParser | None = ProxyHeaderParser()

    def prefixReceived(self, data: bytes) -> None:
        """
        Feed the parser; once the header is read, hand the connection to
        the wrapped factory's protocol for the client it names.
        """
        parser = self.parser
        if parser is None:
            return
        try:
            header = parser.feed(data)
        except ProxyHeaderError as e:
            self.parser = None
            self.refuse(BAD_HEADER, str(e))
            return
        if header is None:
            return
        self.parser = None
        self.cancelTimer()
        if header.source is not None:
            self.addr = client_address(header.source)
        inner = self.factory.wrapped.buildProtocol(self.addr)
        if inner is None:
            self.transport.loseConnection()
            return
        self.takeOver(inner)
        inner.makeConnection(PeerTransport(self.transport, self.addr))
        if parser.rest:
            inner.dataReceived(parser.rest)

    def timedOut(self) -> None:
        """
        No header in time.
        """
        self.parser = None
        self.refuse(TIMEOUT, f"no PROXY header within {self.factory.timeout:g}s")


class ProxyHeaderGuard(_Forwarding):
    """
    An untrusted connection: handed over at once to the wrapped factory's
    protocol; its first bytes are held only while they could still be the
    start of a PROXY header, and it is closed if they are one.
    """

    def __init__(self, factory: ProxyFrontFactory, addr: Any, inner: Any) -> None:
        super().__init__(factory, addr)
        self.held: bytes | None = b""
        self.innerProtocol = inner

    def connectionMade(self) -> None:
        """
        Hand over at once (no timer): a service that speaks first is not
        kept waiting.
        """
        self.takeOver(self.innerProtocol)
        self.innerProtocol.makeConnection(self.transport)

    def dataReceived(self, data: bytes) -> None:
        """
        The first bytes are checked; then every byte goes on.
        """
        held = self.held
        if held is None:
            self.inner.dataReceived(data)
            return
        data = held + data
        if may_be_header(data[:len(V2_SIGNATURE)]):
            if data.startswith(V1_PREFIX) or data.startswith(V2_SIGNATURE):
                self.held = None
                self.refuse(UNTRUSTED, "a PROXY header from outside --proxy-protocol-from")
            else:
                self.held = data  # the start of one, perhaps: wait for more
            return
        self.held = None
        self.inner.dataReceived(data)

    def readConnectionLost(self) -> None:
        """
        Pass on what was held, then the half-close.
        """
        held, self.held = self.held, None
        if held:
            self.inner.dataReceived(held)
        super().readConnectionLost()


class ProxyFrontFactory(Factory):
    """
    Wraps C{wrapped}: see the module.

    @ivar trusted: the networks whose connections carry a PROXY header.
    @ivar refused: connections refused, by reason (every key of
        L{REFUSALS}).
    """

    noisy = False

    def __init__(
        self, wrapped: interfaces.IProtocolFactory, trusted: Sequence[Network],
        clock: interfaces.IReactorTime, timeout: float, refused: dict[str, int] | None = None,
    ) -> None:
        """
        @param refused: where refusals are counted (shared by the relay's
            listeners, for its metrics); a new count by default.
        """
        self.wrapped = wrapped
        self.trusted = tuple(trusted)
        self.clock = clock
        self.timeout = timeout
        self.refused = refused if refused is not None else dict.fromkeys(REFUSALS, 0)

    def doStart(self) -> None:
        """
        Start the wrapped factory too.
        """
        self.wrapped.doStart()

    def doStop(self) -> None:
        """
        Stop the wrapped factory too.
        """
        self.wrapped.doStop()

    def isTrusted(self, addr: Any) -> bool:
        """
        Whether C{addr} is in a trusted network.
        """
        try:
            ip = ipaddress.ip_address(getattr(addr, "host", ""))
        except ValueError:
            return False
        return any(ip in network for network in self.trusted)

    def buildProtocol(self, addr: Any) -> Any:
        """
        A header reader for a trusted source; the wrapped protocol, behind
        a guard, for others.
        """
        if self.isTrusted(addr):
            return ProxyHeaderReader(self, addr)
        inner = self.wrapped.buildProtocol(addr)
        return None if inner is None else ProxyHeaderGuard(self, addr, inner)


def proxy_front(
    factory: interfaces.IProtocolFactory, trusted: Sequence[Network],
    clock: interfaces.IReactorTime, timeout: float, refused: dict[str, int] | None = None,
) -> interfaces.IProtocolFactory:
    """
    C{factory} behind a L{ProxyFrontFactory} (counting its refusals in
    C{refused}) when C{trusted} names networks; as it is otherwise.
    """
    if not trusted:
        return factory
    return ProxyFrontFactory(factory, trusted, clock, timeout, refused)


def describe_trusted(trusted: Sequence[Network]) -> str:
    """
    The trusted networks, for the relay's start-up line.
    """
    return ", ".join(str(network) for network in trusted)
