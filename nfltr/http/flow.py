# -*- test-case-name: tests.http.test_flow -*-
"""
Flow control for the HTTP proxy: a L{Valve} pauses a transport for several
reasons at once, a L{ValveProducer} lets a transport pause another through
its valve, and after an upgrade a L{BackendSpliceEnd} joins the backend
connection to the visitor as L{nfltr.streams.splice} does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import interfaces
from zope.interface import implementer

from nfltr.streams import SpliceEnd
from nfltr.tls import half_close_other


class Valve:
    """
    Pauses and resumes a transport's reading for several reasons at once:
    it reads only while no reason holds it.
    """

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.reasons: set[str] = set()

    def pause(self, reason: str) -> None:
        """
        Hold reading for C{reason}.
        """
        if not self.reasons:
            self.transport.pauseProducing()
        self.reasons.add(reason)

    def resume(self, reason: str) -> None:
        """
        Drop C{reason}; read again if none is left.
        """
        if reason in self.reasons:
            self.reasons.discard(reason)
            if not self.reasons:
                self.transport.resumeProducing()


@implementer(interfaces.IPushProducer)
class ValveProducer:
    """
    Registered on one transport: pauses another through its valve, for
    C{reason}.
    """

    def __init__(self, valve: Valve, reason: str) -> None:
        self.valve = valve
        self.reason = reason

    def pauseProducing(self) -> None:
        """
        The consumer is full.
        """
        self.valve.pause(self.reason)

    def resumeProducing(self) -> None:
        """
        The consumer caught up.
        """
        self.valve.resume(self.reason)

    def stopProducing(self) -> None:
        """
        Nothing: the consumer's protocol gets C{connectionLost} next.
        """


class TapSpliceEnd(SpliceEnd):
    """
    A splice end that tells C{tap}, if there is one, each chunk before it
    goes on (the inspector's view of a switched connection).
    """

    def __init__(self, tap: Callable[[bytes], object] | None = None) -> None:
        super().__init__()
        self.tap = tap

    def dataReceived(self, data: bytes) -> None:
        """
        Tell, then forward.
        """
        if self.tap is not None:
            self.tap(data)
        super().dataReceived(data)


class BackendSpliceEnd(TapSpliceEnd):
    """
    The splice end on the backend connection: its end of input half-closes
    an end-to-end TLS layer on the visitor's side (which can), where a plain
    splice end would close TLS whole.
    """

    def readConnectionLost(self) -> None:
        """
        EOF from the backend: half-close the visitor's side.
        """
        if not half_close_other(self.other):
            super().readConnectionLost()
