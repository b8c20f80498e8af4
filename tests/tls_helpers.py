# -*- test-case-name: tests.test_pki -*-
"""
An in-memory TLS connection for tests: real OpenSSL on both ends, joined by
L{twisted.test.iosim}, on a L{Clock}.
"""

from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.interfaces import (
    IHandshakeListener,
    IOpenSSLClientConnectionCreator,
    IOpenSSLServerConnectionCreator,
)
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.protocols.tls import TLSMemoryBIOFactory, TLSMemoryBIOProtocol
from twisted.python.failure import Failure
from twisted.test.iosim import IOPump, connectedServerAndClient
from zope.interface import implementer


@implementer(IHandshakeListener)
class Recorder(Protocol):
    """
    An application protocol that records what happens to it.
    """

    def __init__(self) -> None:
        self.received = b""
        self.handshook = False
        self.lost: Failure | None = None

    def handshakeCompleted(self) -> None:
        self.handshook = True

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Failure | None = None) -> None:
        self.lost = reason


class Pair:
    """
    A TLS client and server joined in memory by L{twisted.test.iosim}.
    """

    def __init__(
        self, server: IOpenSSLServerConnectionCreator, client: IOpenSSLClientConnectionCreator
    ) -> None:
        self.server_app = Recorder()
        self.client_app = Recorder()
        # TLS transports batch small writes until the next tick of this clock;
        # the pump advances it.
        self.clock = Clock()
        server_factory = TLSMemoryBIOFactory(
            server, False, Factory.forProtocol(lambda: self.server_app), clock=self.clock
        )
        client_factory = TLSMemoryBIOFactory(
            client, True, Factory.forProtocol(lambda: self.client_app), clock=self.clock
        )
        address = IPv4Address("TCP", "127.0.0.1", 8443)
        self.client: TLSMemoryBIOProtocol
        self.server: TLSMemoryBIOProtocol
        self.pump: IOPump
        self.client, self.server, self.pump = connectedServerAndClient(
            lambda: server_factory.buildProtocol(address),
            lambda: client_factory.buildProtocol(address),
            clock=self.clock,
        )
        self.pump.flush()
