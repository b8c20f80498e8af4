# -*- test-case-name: tests.ws.test_client -*-
"""
The agent's and connector's side: L{WebSocketLinkEndpoint} is a client
endpoint like the raw-link one, whose C{connect(linkFactory)} opens a
WebSocket (C{wss://RELAY/link}, subprotocol and key in the upgrade) over the
given stream endpoint (TLS to the relay, possibly through an HTTP CONNECT
proxy) and runs the link inside it; it fires with the link protocol once the
WebSocket is open, or fails with why the upgrade did not happen.
"""

from __future__ import annotations

from typing import Any

import txaio
from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
from twisted.internet import defer, error
from twisted.internet.interfaces import IStreamClientEndpoint
from zope.interface import implementer

from .options import LINK_PATH, SUBPROTOCOL, configure_client
from .transport import LinkOverWebSocket


class ClientWebSocket(WebSocketClientProtocol):
    """
    The client's WebSocket connection: starts the link once open.
    """

    log = txaio.make_logger(level="info")  # type: ignore[attr-defined]

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


class _ClientFactory(WebSocketClientFactory):
    """
    Carries the link factory and the result to the protocol.
    """

    protocol = ClientWebSocket
    noisy = False
    links: Any = None
    ready: defer.Deferred[Any]


@implementer(IStreamClientEndpoint)
class WebSocketLinkEndpoint:
    """
    Links to the relay inside WebSocket connections.
    """

    def __init__(self, stream: Any, host: str, port: int, key: str, reactor: Any) -> None:
        """
        @param stream: connects to the relay's TLS port, TLS included.
        @param host: the relay's name (the URL's and C{Host}'s).
        @param key: the API key, sent in C{Authorization}.
        """
        self.stream = stream
        self.url = f"wss://{host}:{port}{LINK_PATH}"
        self.key = key
        self.reactor = reactor

    def connect(self, linkFactory: Any) -> defer.Deferred[Any]:
        """
        Open the WebSocket and run a link of C{linkFactory} in it.
        """
        factory = _ClientFactory(
            self.url, protocols=[SUBPROTOCOL],
            headers={"Authorization": f"Bearer {self.key}"}, reactor=self.reactor,
        )
        configure_client(factory)
        factory.links = linkFactory
        ready: defer.Deferred[Any] = defer.Deferred()
        factory.ready = ready
        connecting = self.stream.connect(factory)

        def failed(failure: Any) -> None:
            if not ready.called:
                ready.errback(failure)

        connecting.addErrback(failed)
        return ready
