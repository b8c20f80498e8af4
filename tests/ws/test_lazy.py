"""
Tests for L{nfltr.ws.lazy}: the relay's WebSocket factory, built on first
use.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.interfaces import IProtocolFactory
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.ws.lazy import FirstUseFactory, relay_websocket_factory

from ..test_import_effects import run_python

PEER = IPv4Address("TCP", "127.0.0.1", 40000)


class FirstUseFactoryTests(SynchronousTestCase):
    """
    The real factory is made on the first connection, once.
    """

    def test_madeOnFirstConnection(self) -> None:
        """
        Nothing is made until a protocol is asked for; then the real
        factory builds every protocol, and is made only once.
        """
        made: list[Factory] = []

        def make() -> Factory:
            made.append(Factory.forProtocol(Protocol))
            return made[-1]

        lazy = FirstUseFactory(make)
        self.assertTrue(verifyObject(IProtocolFactory, lazy))
        self.assertEqual(made, [])
        first, second = lazy.buildProtocol(PEER), lazy.buildProtocol(PEER)
        self.assertEqual(len(made), 1)
        self.assertIs(lazy.built, made[0])
        self.assertIs(first.factory, made[0])
        self.assertIs(second.factory, made[0])

    def test_relayFactory(self) -> None:
        """
        The relay's factory, once made, is the WebSocket factory of
        L{nfltr.ws.server} with the arguments given.
        """
        from nfltr.ws.server import RelayWebSocket

        def check(key: str) -> Any:
            raise AssertionError("not called")

        links = object()
        lazy = relay_websocket_factory(links, check, Clock(), "/echo")
        protocol = lazy.buildProtocol(PEER)
        self.assertIsInstance(protocol, RelayWebSocket)
        built: Any = lazy.built
        self.assertEqual((built.links, built.checkKey, built.echoPath), (links, check, "/echo"))


class NotImportedTests(SynchronousTestCase):
    """
    Making the lazy factory loads no autobahn.
    """

    def test_noAutobahn(self) -> None:
        """
        Until its first connection, neither autobahn nor txaio is imported.
        """
        code = (
            "import sys\n"
            "from nfltr.ws.lazy import relay_websocket_factory\n"
            "relay_websocket_factory(None, None, None)\n"
            "print(sorted({n.split('.')[0] for n in sys.modules} & {'autobahn', 'txaio'}))"
        )
        self.assertEqual(run_python(code), "[]")
