# -*- test-case-name: tests.http.test_h2 -*-
"""
What the HTTP/2 exchange (L{nfltr.http._h2.H2Exchange}) asks of its I/O.
"""

from __future__ import annotations

from typing import Protocol


class H2IO(Protocol):
    """
    What L{H2Exchange} asks of its I/O.
    """

    def toVisitor(self, data: bytes) -> None:
        """
        Write to the visitor.
        """

    def closeVisitor(self) -> None:
        """
        Close the visitor connection after what was written.
        """

    def openService(self, stream: int) -> None:
        """
        Find a service connection for C{stream}; answer with
        L{H2Exchange.serviceReady} or L{H2Exchange.serviceFailed}.
        """

    def toService(self, stream: int, data: bytes) -> None:
        """
        Write to C{stream}'s service connection.
        """

    def releaseService(self, stream: int, reusable: bool) -> None:
        """
        Done with C{stream}'s service connection (or the attempt at one):
        back to its pool if C{reusable}, aborted otherwise.
        """

    def pauseService(self, stream: int, paused: bool) -> None:
        """
        Stop (or go back to) reading C{stream}'s service connection.
        """

    def problem(self, what: str) -> None:
        """
        Something went wrong with the visitor connection (for the log).
        """
