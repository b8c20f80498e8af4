# -*- test-case-name: tests.integration.test_websocket -*-
"""
The autobahn side of L{nfltr.ws.client}: the client's WebSocket protocol and
its factory, imported by L{nfltr.ws.client.WebSocketLinkEndpoint.connect},
so that an agent or connector that never uses the WebSocket transport never
loads autobahn.
"""

from __future__ import annotations

from typing import Any

from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
from twisted.internet import defer, error
from txaio.tx import make_logger

from .transport import LinkOverWebSocket


class ClientWebSocket(WebSocketClientProtocol):
    """
    The client's WebSocket connection: starts the link once open.
    """

    log = make_logger(level="info")

    def __init__(self) -> None:
        super().__init__()
        self.glue = LinkOverWebSocket(self)

    def onOpen(self) -> None:
        """
        Start the link; hand it to whoever connected.
        """
        factory = self.factory
        link = factory.links.buildProtocol(self.transport.getPeer())  # type: ignore[union-attr]
        self.glue.opened(link)
        if not factory.ready.called:
            factory.ready.callback(link)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        """
        Link bytes.
        """
        self.glue.message(payload, isBinary)

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        """
        A WebSocket that never opened fails the connect; an open one ends
        its link.
        """
        ready = self.factory.ready
        if not ready.called:
            ready.errback(error.ConnectError(
                f"the relay refused the WebSocket upgrade: {reason or code}"
            ))
        self.glue.closed(wasClean, code, reason)


class ClientFactory(WebSocketClientFactory):
    """
    Carries the link factory and the result to the protocol.
    """

    protocol = ClientWebSocket
    noisy = False
    links: Any = None
    ready: defer.Deferred[Any]
