# -*- test-case-name: tests.streams.test_lazy -*-
"""
A protocol factory made when its first connection comes: what a listener
serves rarely (the relay's admin site, its WebSocket endpoint) loads its
libraries (twisted.web, autobahn) on first use, not when the process starts
(resident memory: docs/benchmarks.md, "Memory").  The first connection pays
for the imports once, in the reactor thread.
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
    C{buildProtocol} and keeps.  It is started and stopped as the real one
    would be: a factory made while this one is started is started then, and
    stopped with it.

    @ivar built: the factory, once made.
    """

    noisy = False

    def __init__(self, make: Callable[[], IProtocolFactory]) -> None:
        self._make = make
        self._starts = 0
        self.built: IProtocolFactory | None = None

    def buildProtocol(self, addr: Any) -> Any:
        """
        A protocol of the real factory (made, and started if this one is,
        now if it is the first).
        """
        if self.built is None:
            self.built = self._make()
            for _ in range(self._starts):
                self.built.doStart()
        return self.built.buildProtocol(addr)

    def doStart(self) -> None:
        """
        A port started using it: so does the real factory, if made.
        """
        self._starts += 1
        if self.built is not None:
            self.built.doStart()

    def doStop(self) -> None:
        """
        A port stopped using it: so does the real factory, if made.
        """
        self._starts -= 1
        if self.built is not None:
            self.built.doStop()
