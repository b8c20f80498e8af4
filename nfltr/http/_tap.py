# -*- test-case-name: tests.http.test_tap -*-
"""
A tap on the proxy's exchanges (L{nfltr.http._exchange.Exchange}): what
the agent's request inspector (L{nfltr.inspect}) is told of each request
and its response, as they pass, without being able to change them.

The tap is told of a request once h11 parsed its head (before the proxy's
checks: a request the share's policy refuses is seen with its 401 or 403),
then of each piece of its body, of the response head that went back (the
service's, or the proxy's own error), of each piece of the response's body,
and of its end: complete, aborted (the connection cut mid-way), or switched
(a C{101}: what follows is no longer HTTP, and the raw bytes each way are
told as they pass).  The tap owns what it keeps:
it must bound it.

The stream path (L{nfltr.http._stream}) has each head as one bytes object
already: it tells the tap of it as it is (L{IExchangeTap.openedHead},
L{ICapture.responseHead}), and the tap reads its fields only if it needs
them; the other paths tell the fields their parser made.  What is told may
be kept as it is: bytes and the sequences given are not changed afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

from zope.interface import Interface


class ICapture(Interface):
    """
    What is told of one request and its response.
    """

    def requestBody(data: bytes) -> None:
        """
        A piece of the request's body, as the visitor sent it.
        """

    def response(status: int, headers: Sequence[tuple[bytes, bytes]]) -> None:
        """
        The head of the response that went to the visitor.
        """

    def responseHead(status: int, head: bytes) -> None:
        """
        The head of the response that went to the visitor, as it went: its
        status line, header lines and the empty line.
        """

    def responseBody(data: bytes) -> None:
        """
        A piece of the response's body.
        """

    def ended(outcome: str) -> None:
        """
        The exchange ended: C{complete}, C{aborted} or C{switched}.  Nothing
        more is told, but after C{switched} the raw bytes that pass
        (L{switchedData}).
        """

    def switchedData(fromVisitor: bool, data: bytes) -> None:
        """
        After a switch of protocols (a WebSocket, say): bytes that passed
        one way, from the visitor or to it.
        """


class IExchangeTap(Interface):
    """
    Told of every request of a proxy's visitor connections.
    """

    def opened(
        method: bytes, target: bytes, headers: list[tuple[bytes, bytes]],
        visitor: str | None,
    ) -> ICapture | None:
        """
        A request's head, as the visitor sent it; the capture to tell the
        rest to, or L{None} to hear no more of it.
        """

    def openedHead(
        method: bytes, target: bytes, head: bytes, visitor: str | None,
    ) -> ICapture | None:
        """
        A request's head as the visitor sent it (its request line, header
        lines and the empty line), with the method and target read from it;
        as L{opened}.
        """


#: How an exchange ended.
COMPLETE, ABORTED, SWITCHED = "complete", "aborted", "switched"
