# -*- test-case-name: tests.http.test_h2response -*-
"""
The HTTP/1.1 response to one HTTP/2 stream's request, read sans I/O for
L{nfltr.http._h2}: L{ResponseReader} turns the service's bytes into the
events an HTTP/2 stream sends (informational heads, the head, body bytes,
the end with its trailers).

Heads are read by the stream path's reader (L{nfltr.http._heads}: bare LF
line ends and obs-fold read, as RFC 9112 section 2.2 lets a recipient) and
framed by RFC 9112 section 6.3 (L{responseFraming}); a head larger than
C{maxHead} bytes, or one that cannot be read, is a L{ResponseError}.  A
body of a C{Content-Length} is counted, one that runs to the connection's
end is taken as it comes: neither is parsed.  A chunked body (and its
trailers, what gRPC's C{grpc-status} needs) is decoded by h11, given the
body alone behind a head of our own.  A C{101} is an error: there is no
upgrade on HTTP/2.

The connection may carry another request (L{ResponseReader.reusable}) only
after a response that ended by its framing, did not say C{close}, and was
followed by nothing: a service that sends more than it announced is not
asked again.  L{forVisitor} makes its headers HTTP/2's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from http import HTTPStatus

import h11

from ._headers import commaValues
from ._heads import CHUNKED, NONE, UNTIL_CLOSE, HeadError, parseResponseHead, responseFraming

Headers = list[tuple[bytes, bytes]]

#: Event kinds, each event a C{(kind, status, headers, data)}:
#: C{INFORMATIONAL} and C{HEAD} (a status and headers), C{DATA} (body bytes),
#: C{END} (the trailers as headers); header names lowercase.
INFORMATIONAL, HEAD, DATA, END = range(4)
Event = tuple[int, int, Headers, bytes]
_NO_HEADERS: Headers = []

#: The end of a response head: CRLF or bare LF line ends.
_HEAD_END = re.compile(rb"\r?\n\r?\n")
#: The head h11 is given in front of a chunked body.
_CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
_FINAL = 200

#: Response headers that only mean something on one HTTP/1.1 connection.
CONNECTION_SPECIFIC = frozenset({
    b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade", b"te",
})


class ResponseError(Exception):
    """
    The service's response cannot be read (or ended before it was whole).
    """


class ResponseReader:
    """
    Reads one response; see the module.

    @ivar ended: the response is complete.
    @ivar reusable: the connection may carry another request (once
        L{ended}).
    """

    def __init__(self, method: bytes, maxHead: int) -> None:
        self._method, self._maxHead = method, maxHead
        self._head = b""
        self._reading = True  # a head
        self._left = 0  # body bytes by Content-Length
        self._untilClose = False
        self._chunks: h11.Connection | None = None
        self.ended = False
        self.reusable = False

    def feed(self, data: bytes) -> list[Event]:
        """
        What C{data}, the next bytes from the service (C{b""}: its end),
        makes of the response.

        @raise ResponseError: see the module.
        """
        events: list[Event] = []
        if not data:
            self._eof(events)
        elif self.ended:
            self.reusable = False  # more than the response: out of turn
        elif self._reading:
            self._readHead(data, events)
        else:
            self._readBody(data, events)
        return events

    def _eof(self, events: list[Event]) -> None:
        if self.ended:
            return
        if self._untilClose:
            self._end(events, _NO_HEADERS, False)
        else:
            raise ResponseError("the service closed before its response ended")

    def _readHead(self, data: bytes, events: list[Event]) -> None:
        while self._reading:
            self._head += data
            data = b""
            match = _HEAD_END.search(self._head)
            if match is None or match.end() > self._maxHead:
                if match is not None or len(self._head) > self._maxHead:
                    raise ResponseError("a response head too large")
                return
            raw, rest = self._head[:match.end()], self._head[match.end():]
            self._head = b""
            try:
                response = parseResponseHead(raw)
                responseFraming(response, self._method)
            except HeadError as e:
                raise ResponseError(e.why) from None
            headers = [(n.lower(), v) for n, v in response.headers]
            if response.status < _FINAL:
                if response.status == HTTPStatus.SWITCHING_PROTOCOLS:
                    raise ResponseError("101 on HTTP/2")
                # 100 Continue, 103 Early Hints: another head follows.
                events.append((INFORMATIONAL, response.status, headers, b""))
                data = rest
                continue
            self._reading = False
            self.reusable = response.reusable
            events.append((HEAD, response.status, headers, b""))
            if response.length == NONE:
                self._end(events, _NO_HEADERS, bool(rest))
            elif response.length == UNTIL_CLOSE:
                self._untilClose = True
            elif response.length == CHUNKED:
                self._chunks = h11.Connection(h11.CLIENT, max_incomplete_event_size=self._maxHead)
                self._chunks.send(h11.Request(method=b"GET", target=b"/",
                                              headers=[(b"host", b"service")]))
                self._chunks.send(h11.EndOfMessage())
                rest = _CHUNKED_HEAD + rest
            else:
                self._left = response.length
                if not self._left:
                    self._end(events, _NO_HEADERS, bool(rest))
            if rest and not self.ended:
                self._readBody(rest, events)

    def _readBody(self, data: bytes, events: list[Event]) -> None:
        if self._untilClose:
            events.append((DATA, 0, _NO_HEADERS, data))
        elif self._chunks is not None:
            self._decode(data, events)
        else:
            left = self._left
            if len(data) < left:
                self._left -= len(data)
                events.append((DATA, 0, _NO_HEADERS, data))
                return
            events.append((DATA, 0, _NO_HEADERS, data[:left] if len(data) > left else data))
            self._left = 0
            self._end(events, _NO_HEADERS, len(data) > left)

    def _decode(self, data: bytes, events: list[Event]) -> None:
        chunks = self._chunks
        assert chunks is not None
        try:
            chunks.receive_data(data)
            while True:
                event = chunks.next_event()
                if event is h11.NEED_DATA:
                    return
                if isinstance(event, h11.Data):
                    events.append((DATA, 0, _NO_HEADERS, bytes(event.data)))
                elif isinstance(event, h11.EndOfMessage):
                    self._end(events, list(event.headers), bool(chunks.trailing_data[0]))
                    return
                elif not isinstance(event, h11.Response):
                    raise ResponseError("a chunked body that does not end")
        except h11.RemoteProtocolError as e:
            raise ResponseError(f"a malformed chunked body: {e}") from None

    def _end(self, events: list[Event], trailers: Headers, more: bool) -> None:
        """
        The response is complete (C{more}: bytes came after it).
        """
        self.ended = True
        self._chunks = None
        if more:
            self.reusable = False
        events.append((END, 0, trailers, b""))


def forVisitor(headers: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """
    Response headers (names lowercase) as they go on HTTP/2: without those
    of the HTTP/1.1 connection (RFC 9113 section 8.2.2).
    """
    named = set(commaValues(headers, b"connection"))
    return [(name, value) for name, value in headers
            if name not in CONNECTION_SPECIFIC and name not in named]
