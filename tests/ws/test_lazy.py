"""
Tests for L{nfltr.ws.lazy}: the relay's WebSocket factory, built on first
use.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.ws.lazy import relay_websocket_factory

from ..test_import_effects import run_python

PEER = IPv4Address("TCP", "127.0.0.1", 40000)


class RelayFactoryTests(SynchronousTestCase):
    """
    The relay's WebSocket factory, made on first use.
    """

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
