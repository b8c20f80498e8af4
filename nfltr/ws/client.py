# -*- test-case-name: tests.ws.test_client -*-
"""
The agent's and connector's side: L{WebSocketLinkEndpoint} is a client
endpoint like the raw-link one, whose C{connect(linkFactory)} opens a
WebSocket (C{wss://RELAY/link}, subprotocol and key in the upgrade) over the
given stream endpoint (TLS to the relay, possibly through an HTTP CONNECT
proxy) and runs the link inside it; it fires with the link protocol once the
WebSocket is open, or fails with why the upgrade did not happen.  autobahn
is imported by the first C{connect} (the protocol is in
L{nfltr.ws._client_protocol}): an agent whose raw link works never loads it.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IStreamClientEndpoint
from zope.interface import implementer

from .options import LINK_PATH, SUBPROTOCOL, configure_client


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
        from ._client_protocol import ClientFactory

        factory = ClientFactory(
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
