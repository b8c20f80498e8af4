"""
Tests for L{nfltr.http.proxy} behind end-to-end TLS, as on the agent: the
visitor speaks HTTP inside L{nfltr.tls.E2EETLSProtocol} TLS (real OpenSSL) ended in front
of the proxy, over the in-memory network.
"""

from __future__ import annotations

import hashlib
from typing import Any

from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from nfltr.tls import E2EETLSFactory, client_creator, ensure_self_signed, server_context_factory

from .helpers import Harness, Visitor, fixed, parseResponses, request
from .test_upgrade import UPGRADE, UpgradeServer


@implementer(IHalfCloseableProtocol)
class Farewell(Visitor):
    """
    A visitor that, at the end of its input, writes a last word and closes.
    """

    def readConnectionLost(self) -> None:
        self.eof = True
        self.transport.write(b"bye")
        self.transport.loseConnection()


def visitOverTLS(directory: str, h: Harness, visitor: Visitor) -> Any:
    """
    Connect C{visitor} over TLS (an agent's identity made in C{directory})
    to a new proxy of C{h}; run; the proxy.
    """
    identity = ensure_self_signed(directory, "agent")
    server = E2EETLSFactory(server_context_factory(identity.cert, identity.key), False, h.clock)
    client = E2EETLSFactory(
        client_creator("agent", pin=identity.fingerprint, role="agent"), True, h.clock
    )
    proxy = h.factory.proxyFor("[2001:db8::1]:443")
    h.network.connect(server.wrap(proxy), client.wrap(visitor))
    h.network.run()
    return proxy


class TLSVisitorTests(SynchronousTestCase):
    """
    The proxy as the application of an end-to-end TLS server.
    """

    def visit(self, h: Harness, visitor: Visitor) -> object:
        """
        Connect C{visitor} over TLS to a new proxy of C{h}; run.
        """
        return visitOverTLS(self.mktemp(), h, visitor)

    def test_largeResponse(self) -> None:
        """
        A 1 MiB response reaches the visitor whole through TLS, and the
        connection closes cleanly after it when asked to.
        """
        body = hashlib.sha256(b"tls").digest() * 32768
        h = Harness(fixed(body))
        visitor = Visitor(request(headers=b"Connection: close\r\n"))
        self.visit(h, visitor)
        [(response, received, _)] = parseResponses(bytes(visitor.received))
        self.assertEqual(response.status_code, 200)
        self.assertEqual(hashlib.sha256(received).digest(), hashlib.sha256(body).digest())
        self.assertTrue(visitor.cleanlyClosed)
        sent = h.backend.servers[0].requests[0][0]
        self.assertIn((b"x-forwarded-for", b"2001:db8::1"), list(sent.headers))

    def test_upgradeHalfClose(self) -> None:
        """
        After an upgrade, the backend's half-close reaches the visitor as a
        TLS half-close: it reads to the end, and its answer still reaches
        the backend.
        """
        h = Harness(serve=UpgradeServer)
        visitor = Farewell(UPGRADE)
        self.visit(h, visitor)
        server = h.backend.servers[0]
        server.transport.write(b"last words")
        server.transport.loseWriteConnection()
        h.network.run()
        self.assertTrue(bytes(visitor.received).endswith(b"last words"))
        self.assertTrue(visitor.eof)
        self.assertTrue(server.raw.endswith(b"bye"))
