# -*- test-case-name: tests.http.test_stream -*-
"""
What the stream path's logic (L{nfltr.http._stream}) asks of its I/O
(L{StreamIO}, done by L{nfltr.http.stream}), and what it keeps of each
request sent on (L{SentRequest}).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class StreamIO(Protocol):
    """
    What the stream path asks of its I/O.
    """

    def toService(self, data: bytes) -> None:
        """
        Write to the service connection (there is one: L{needService} was
        answered).
        """

    def toVisitor(self, data: bytes) -> None:
        """
        Write to the visitor.
        """

    def needService(self, fresh: bool) -> None:
        """
        Find a service connection (a new one if C{fresh}, else perhaps a
        pooled one); answer with L{nfltr.http._stream.StreamExchange.serviceReady} or
        L{nfltr.http._stream.StreamExchange.serviceFailed}.
        """

    def releaseService(self, reusable: bool) -> None:
        """
        Done with the service connection: back to its pool if C{reusable},
        closed otherwise.
        """

    def abortService(self) -> None:
        """
        Abort the service connection.
        """

    def closeVisitor(self, abort: bool) -> None:
        """
        Close the visitor connection after what was written, or abort it.
        """

    def halfCloseService(self) -> None:
        """
        After a switch of protocols, the visitor's end of input: shut the
        service connection's write side.
        """

    def halfCloseVisitor(self) -> None:
        """
        After a switch of protocols, the service's end of input: shut the
        visitor connection's write side.
        """

    def readVisitor(self, reading: bool) -> None:
        """
        Read from the visitor, or stop.
        """


@dataclass
class SentRequest:
    """
    A request sent on, its response awaited.

    @ivar upgrade: it asks to switch protocols.
    @ivar last: the visitor's connection ends after it (it said so).
    @ivar version: the visitor's HTTP version.
    """

    method: bytes
    upgrade: bool
    last: bool
    version: bytes

    @property
    def waits(self) -> bool:
        """
        Nothing more goes to the service until its response is out: after
        an upgrade (the bytes that follow may not be HTTP), and after a
        C{HEAD} (whose response, announcing a body, leaves the service
        connection in doubt).
        """
        return self.upgrade or self.method == b"HEAD"
