# -*- test-case-name: tests.ws.test_options -*-
"""
Every autobahn option nfltr's WebSocket factories run with, set explicitly
(autobahn's defaults include "0 means unlimited"; nfltr sets every limit).
"""

from __future__ import annotations

from typing import Any

#: The path the relay answers WebSocket links on.
LINK_PATH = "/link"
#: The subprotocol naming the link protocol's version.
SUBPROTOCOL = "nfltr.link.v1"
#: The largest WebSocket message and frame: a link frame is at most 64 KiB
#: plus its header, and writes are batched, so 1 MiB bounds one read.
MAX_MESSAGE = 1024 * 1024
#: Seconds for the opening and the closing handshake.
OPEN_HANDSHAKE_TIMEOUT = 10.0
CLOSE_HANDSHAKE_TIMEOUT = 5.0
#: WebSocket pings keep proxies from closing idle connections; the link's
#: own liveness decides when the peer is dead.
AUTO_PING_INTERVAL = 20.0
AUTO_PING_TIMEOUT = 20.0
#: WebSocket connections one relay holds at once.
MAX_CONNECTIONS = 10_000

SERVER_OPTIONS: dict[str, Any] = {
    "versions": [13],
    "webStatus": False,
    "utf8validateIncoming": True,
    "maskServerFrames": False,
    "requireMaskedClientFrames": True,
    "applyMask": True,
    "maxFramePayloadSize": MAX_MESSAGE,
    "maxMessagePayloadSize": MAX_MESSAGE,
    "autoFragmentSize": 0,  # send each message as one frame (it is at most MAX_MESSAGE)
    "failByDrop": False,
    "echoCloseCodeReason": False,
    "openHandshakeTimeout": OPEN_HANDSHAKE_TIMEOUT,
    "closeHandshakeTimeout": CLOSE_HANDSHAKE_TIMEOUT,
    "tcpNoDelay": True,
    "perMessageCompressionAccept": lambda offers: None,  # no permessage-deflate
    "autoPingInterval": AUTO_PING_INTERVAL,
    "autoPingTimeout": AUTO_PING_TIMEOUT,
    "autoPingSize": 12,
    "serveFlashSocketPolicy": False,
    "allowedOrigins": [],  # browsers have no business on the link endpoint
    "allowNullOrigin": False,
    "maxConnections": MAX_CONNECTIONS,
    "trustXForwardedFor": 0,
}
#: What the relay's 101 answer names as its server (autobahn's default
#: names itself and its version).
SERVER_NAME = "nfltr"

CLIENT_OPTIONS: dict[str, Any] = {
    "version": 13,
    "utf8validateIncoming": True,
    "acceptMaskedServerFrames": False,
    "maskClientFrames": True,
    "applyMask": True,
    "maxFramePayloadSize": MAX_MESSAGE,
    "maxMessagePayloadSize": MAX_MESSAGE,
    "autoFragmentSize": 0,
    "failByDrop": False,
    "echoCloseCodeReason": False,
    "serverConnectionDropTimeout": CLOSE_HANDSHAKE_TIMEOUT,
    "openHandshakeTimeout": OPEN_HANDSHAKE_TIMEOUT,
    "closeHandshakeTimeout": CLOSE_HANDSHAKE_TIMEOUT,
    "tcpNoDelay": True,
    "perMessageCompressionOffers": [],
    "autoPingInterval": AUTO_PING_INTERVAL,
    "autoPingTimeout": AUTO_PING_TIMEOUT,
    "autoPingSize": 12,
}


def configure_server(factory: Any) -> Any:
    """
    Set L{SERVER_OPTIONS} on an autobahn server factory; return it.
    """
    factory.setProtocolOptions(**SERVER_OPTIONS)
    factory.server = SERVER_NAME
    return factory


def configure_client(factory: Any) -> Any:
    """
    Set L{CLIENT_OPTIONS} on an autobahn client factory; return it.
    """
    factory.setProtocolOptions(**CLIENT_OPTIONS)
    factory.useragent = SERVER_NAME
    return factory
