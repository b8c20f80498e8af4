# -*- test-case-name: tests.ws.test_lazy -*-
"""
The relay's WebSocket factory, built when the first connection needs it:
autobahn and txaio are loaded by the first WebSocket upgrade, not when the
relay starts, so a relay whose agents all speak the raw link never holds
them (resident memory: docs/benchmarks.md, "Memory").  The first upgrade
pays for the import once, in the reactor thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.interfaces import IProtocolFactory
from zope.interface import implementer


@implementer(IProtocolFactory)
class FirstUseFactory:
    """
    Stands in for the factory C{make} returns, which it calls on the first
    C{buildProtocol} and keeps.  Like the factories it stands in for behind
    the link sniffer (L{nfltr.relay._sniff}), it is never started: only its
    C{buildProtocol} is called.

    @ivar built: the factory, once made.
    """

    noisy = False

    def __init__(self, make: Callable[[], IProtocolFactory]) -> None:
        self._make = make
        self.built: IProtocolFactory | None = None

    def buildProtocol(self, addr: Any) -> Any:
        """
        A protocol of the real factory (made now if it is the first).
        """
        if self.built is None:
            self.built = self._make()
        return self.built.buildProtocol(addr)

    def doStart(self) -> None:
        """
        Nothing: see the class.
        """

    def doStop(self) -> None:
        """
        Nothing: see the class.
        """


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
