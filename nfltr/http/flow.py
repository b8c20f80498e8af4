# -*- test-case-name: tests.http.test_flow,tests.test_e2ee -*-
"""
Flow control for the HTTP proxy: a L{Valve} pauses a transport for several
reasons at once, a L{ValveProducer} lets a transport pause another through
its valve, L{PausesBackend} pauses the backend connection in use while the
visitor reads too slowly, and after an upgrade a L{BackendSpliceEnd} joins the backend
connection to the visitor as L{nfltr.streams.splice} does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

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


#: Why a backend connection's transport is paused: the visitor is full.
PEER_FULL = "peer full"


class UsesBackend(Protocol):
    """
    A visitor connection's proxy, as L{PausesBackend} sees it.
    """

    @property
    def backend(self) -> Any:
        """
        The backend connection in use (with a C{valve}), or L{None}.
        """

    def moved(self) -> None:
        """
        A byte moved.
        """


@implementer(interfaces.IPushProducer)
class PausesBackend:
    """
    Registered on the visitor's transport: pauses the backend connection in
    use through its valve (one taken while the visitor is still full is
    paused by its taker, who reads L{paused}).

    @ivar paused: the visitor is full now.
    """

    def __init__(self, proxy: UsesBackend) -> None:
        self.proxy = proxy
        self.paused = False

    def pauseProducing(self) -> None:
        """
        The visitor reads too slowly.
        """
        self.paused = True
        backend = self.proxy.backend
        if backend is not None and backend.valve is not None:
            backend.valve.pause(PEER_FULL)

    def resumeProducing(self) -> None:
        """
        The visitor caught up.
        """
        self.proxy.moved()
        self.paused = False
        backend = self.proxy.backend
        if backend is not None and backend.valve is not None:
            backend.valve.resume(PEER_FULL)

    def stopProducing(self) -> None:
        """
        Nothing: the visitor's C{connectionLost} follows.
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
        EOF from the backend: half-close the visitor's side (no longer its
        producer: see L{SpliceEnd.leaveOther}).
        """
        self.leaveOther()
        if not half_close_other(self.other):
            super().readConnectionLost()
