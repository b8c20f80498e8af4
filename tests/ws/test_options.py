"""
Tests for L{nfltr.ws.options}: every autobahn limit is set, none left to
autobahn's defaults or to "0 means unlimited".
"""

from __future__ import annotations

from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketServerFactory
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.ws.options import (
    CLIENT_OPTIONS,
    MAX_MESSAGE,
    SERVER_OPTIONS,
    configure_client,
    configure_server,
)


class OptionsTests(SynchronousTestCase):
    """
    The factories carry the options.
    """

    def test_server(self) -> None:
        """
        Message and frame caps are 1 MiB, handshakes are timed, web status,
        compression, Flash policy and browser origins are off, connections
        are capped.
        """
        factory = configure_server(WebSocketServerFactory(reactor=Clock()))
        self.assertEqual(factory.maxMessagePayloadSize, MAX_MESSAGE)
        self.assertEqual(factory.maxFramePayloadSize, MAX_MESSAGE)
        self.assertFalse(factory.webStatus)
        self.assertFalse(factory.serveFlashSocketPolicy)
        self.assertEqual(factory.allowedOrigins, [])
        self.assertGreater(factory.openHandshakeTimeout, 0)
        self.assertGreater(factory.closeHandshakeTimeout, 0)
        self.assertGreater(factory.maxConnections, 0)
        self.assertIsNone(factory.perMessageCompressionAccept([object()]))
        for name, value in SERVER_OPTIONS.items():
            if not callable(value):
                self.assertEqual(getattr(factory, name), value, name)

    def test_client(self) -> None:
        """
        The client's caps and timeouts, and no compression offered.
        """
        factory = configure_client(WebSocketClientFactory("wss://r:1/link", reactor=Clock()))
        self.assertEqual(factory.maxMessagePayloadSize, MAX_MESSAGE)
        self.assertEqual(factory.perMessageCompressionOffers, [])
        for name, value in CLIENT_OPTIONS.items():
            self.assertEqual(getattr(factory, name), value, name)

    def test_noZeroLimits(self) -> None:
        """
        No size or time limit is 0 (autobahn reads 0 as unlimited), except
        the fragment size, where 0 means "one frame per message".
        """
        for options in (SERVER_OPTIONS, CLIENT_OPTIONS):
            for name, value in options.items():
                if name.startswith("max") or name.endswith("Timeout"):
                    self.assertGreater(value, 0, name)
