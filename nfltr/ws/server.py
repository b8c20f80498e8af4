# -*- test-case-name: tests.ws.test_server -*-
"""
The relay's WebSocket endpoint, on its own name after TLS (the link sniffer
hands it every connection that is not a raw link): C{GET /link} with the
subprotocol L{SUBPROTOCOL} and C{Authorization: Bearer KEY} upgrades to a
link carried in binary messages, handled like any other link.  The key is
checked before the upgrade (401 otherwise; 503 with L{KEY_CHECK_UNAVAILABLE}
while the relay's store does not answer), then again by the link's hello.

With C{--ws-echo PATH} the same stack also serves a WebSocket echo on PATH,
for the Autobahn TestSuite (off by default: never in production).

autobahn's protocol logs the whole HTTP request, the C{Authorization} header
included, at debug level: its logger here is fixed at info, so no key ever
reaches a log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autobahn.twisted.websocket import WebSocketServerFactory, WebSocketServerProtocol
from autobahn.websocket.types import ConnectionDeny
from twisted.internet import defer
from txaio.tx import make_logger

from nfltr.store import StoreError

from .options import LINK_PATH, SUBPROTOCOL, configure_server
from .transport import LinkOverWebSocket

#: Checks an API key: fires with whether it is valid and not revoked.
KeyCheck = Callable[[str], "defer.Deferred[bool]"]
#: Why an upgrade is refused (503) while the key cannot be checked: the words
#: a link's hello gets then.
KEY_CHECK_UNAVAILABLE = "the relay cannot check API keys now; try again later"


def bearer(value: str | None) -> str | None:
    """
    The token of an C{Authorization: Bearer TOKEN} header.
    """
    scheme, _, token = (value or "").strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class RelayWebSocket(WebSocketServerProtocol):
    """
    One WebSocket connection to the relay: a link, or the echo.
    """

    log = make_logger(level="info")

    def __init__(self) -> None:
        super().__init__()
        self.glue = LinkOverWebSocket(self)
        self.echo = False

    def onConnect(self, request: Any) -> Any:
        """
        Accept C{/link} with the subprotocol and a valid key (or the echo
        path, if it is on); deny anything else.
        """
        factory = self.factory
        if factory.echoPath is not None and request.path == factory.echoPath:
            self.echo = True
            return None
        if request.path != LINK_PATH:
            raise ConnectionDeny(ConnectionDeny.NOT_FOUND, "no such path")
        if SUBPROTOCOL not in request.protocols:
            raise ConnectionDeny(ConnectionDeny.BAD_REQUEST, f"use the subprotocol {SUBPROTOCOL}")
        key = bearer(request.headers.get("authorization"))
        if key is None:
            raise ConnectionDeny(401, "an API key is required: Authorization: Bearer KEY")

        def checked(valid: bool) -> str:
            if not valid:
                raise ConnectionDeny(401, "invalid API key")
            return SUBPROTOCOL

        def unchecked(failure: Any) -> Any:
            if failure.check(StoreError):
                raise ConnectionDeny(503, KEY_CHECK_UNAVAILABLE)
            return failure

        return factory.checkKey(key).addCallbacks(checked, unchecked)

    def onOpen(self) -> None:
        """
        Start the link (not for the echo).
        """
        if not self.echo:
            peer = self.transport.getPeer()  # type: ignore[union-attr]
            self.glue.opened(self.factory.links.buildProtocol(peer))

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        """
        Link bytes, or the echo's message.
        """
        if self.echo:
            self.sendMessage(payload, isBinary)
        else:
            self.glue.message(payload, isBinary)

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        """
        End the link.
        """
        self.glue.closed(wasClean, code, reason)


class _ServerFactory(WebSocketServerFactory):
    """
    Carries the relay's link factory, key check and echo path.
    """

    protocol = RelayWebSocket
    noisy = False
    links: Any = None
    checkKey: KeyCheck
    echoPath: str | None = None


def relay_websocket_factory(
    links: Any, checkKey: KeyCheck, reactor: Any, echoPath: str | None = None
) -> WebSocketServerFactory:
    """
    The relay's WebSocket factory: links built by C{links} (a link factory),
    keys checked with C{checkKey}, and the echo on C{echoPath} if given.
    """
    factory = _ServerFactory(reactor=reactor)
    factory.links = links
    factory.checkKey = checkKey
    factory.echoPath = echoPath
    return configure_server(factory)
