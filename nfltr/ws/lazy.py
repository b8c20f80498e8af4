# -*- test-case-name: tests.ws.test_lazy -*-
"""
The relay's WebSocket factory, built when the first connection needs it:
autobahn and txaio are loaded by the first WebSocket upgrade, not when the
relay starts, so a relay whose agents all speak the raw link never holds
them (resident memory: docs/benchmarks.md, "Memory").  The first upgrade
pays for the import once, in the reactor thread.  Like the factories behind
the link sniffer (L{nfltr.relay._sniff}), it is never started: only its
C{buildProtocol} is called.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IProtocolFactory

from nfltr.streams import FirstUseFactory


def relay_websocket_factory(
    links: Any, checkKey: Any, reactor: Any, echoPath: str | None = None
) -> FirstUseFactory:
    """
    L{nfltr.ws.server.relay_websocket_factory} with the same arguments,
    made (and autobahn imported) on the first connection.
    """

    def make() -> IProtocolFactory:
        from nfltr.ws.server import relay_websocket_factory as build

        factory: IProtocolFactory = build(links, checkKey, reactor, echoPath)
        return factory

    return FirstUseFactory(make)
