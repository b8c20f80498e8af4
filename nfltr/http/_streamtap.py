# -*- test-case-name: tests.http.test_stream -*-
"""
The tap (L{nfltr.http._tap}: the agent's request inspector) on the stream
path (L{nfltr.http._stream}): L{StreamTap} keeps one capture per request
awaiting its response, in the order of the stream path's own, and tells
each what passes.  The stream path copies bytes as they came, so the bodies
a capture is told of are as they went: a chunked body with its chunk
lines.  Heads go as the bytes that came and went (the tap reads their
fields when it needs them); the proxy's own answers go as fields.
L{NoTap} does nothing, for a proxy nobody inspects.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from ._heads import RequestHead
from ._tap import ABORTED, COMPLETE, SWITCHED, ICapture, IExchangeTap


class NoTap:
    """
    Nobody listens.
    """

    def opened(self, head: RequestHead, visitor: str | None) -> None:
        """
        Nothing.
        """

    def refused(self, status: int, headers: Sequence[tuple[bytes, bytes]]) -> None:
        """
        Nothing.
        """

    def requestBody(self, data: bytes) -> None:
        """
        Nothing.
        """

    def response(self, status: int, headers: Sequence[tuple[bytes, bytes]]) -> None:
        """
        Nothing.
        """

    def responseHead(self, status: int, head: bytes) -> None:
        """
        Nothing.
        """

    def responseBody(self, data: bytes) -> None:
        """
        Nothing.
        """

    def ended(self, outcome: str) -> None:
        """
        Nothing.
        """

    def abortAll(self) -> None:
        """
        Nothing.
        """

    def switchedData(self, fromVisitor: bool, data: bytes) -> None:
        """
        Nothing.
        """


class StreamTap(NoTap):
    """
    Captures of the requests in flight, oldest first; see the module.
    """

    def __init__(self, tap: IExchangeTap) -> None:
        self._tap = tap
        self._captures: deque[ICapture | None] = deque()
        self._switched: ICapture | None = None

    def opened(self, head: RequestHead, visitor: str | None) -> None:
        """
        A request head was read: it awaits its response (or L{refused}).
        """
        self._captures.append(self._tap.openedHead(head.method, head.target, head.raw, visitor))

    def refused(self, status: int, headers: Sequence[tuple[bytes, bytes]]) -> None:
        """
        The request just opened is answered by the proxy and goes no further.
        """
        capture = self._captures.pop()
        if capture is not None:
            capture.response(status, headers)
            capture.ended(COMPLETE)

    def requestBody(self, data: bytes) -> None:
        """
        A piece of the newest request's body.
        """
        capture = self._captures[-1] if self._captures else None
        if capture is not None:
            capture.requestBody(data)

    def response(self, status: int, headers: Sequence[tuple[bytes, bytes]]) -> None:
        """
        The oldest request's response head went to the visitor.
        """
        capture = self._captures[0] if self._captures else None
        if capture is not None:
            capture.response(status, headers)

    def responseHead(self, status: int, head: bytes) -> None:
        """
        The oldest request's response head went to the visitor, as C{head}.
        """
        capture = self._captures[0] if self._captures else None
        if capture is not None:
            capture.responseHead(status, head)

    def responseBody(self, data: bytes) -> None:
        """
        A piece of the oldest request's response body.
        """
        capture = self._captures[0] if self._captures else None
        if capture is not None:
            capture.responseBody(data)

    def ended(self, outcome: str) -> None:
        """
        The oldest request's exchange ended so.
        """
        capture = self._captures.popleft() if self._captures else None
        if capture is not None:
            capture.ended(outcome)
            if outcome == SWITCHED:
                self._switched = capture

    def switchedData(self, fromVisitor: bool, data: bytes) -> None:
        """
        After a switch: bytes that passed one way.
        """
        if self._switched is not None and data:
            self._switched.switchedData(fromVisitor, data)

    def abortAll(self) -> None:
        """
        Every request in flight ended without its response.
        """
        while self._captures:
            self.ended(ABORTED)

