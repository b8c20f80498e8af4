# -*- test-case-name: tests.inspect.test_ring -*-
"""
What the agent's inspector keeps: L{Ring}, the tap on a share's proxy
(L{nfltr.http.IExchangeTap}), holds the last L{RING_SIZE} exchanges as
L{Exchange} records, each body kept up to L{BODY_CAP} bytes (the rest
counted, not kept) and each head up to L{HEAD_CAP}, so its memory is
bounded whatever passes.

A record costs the request as little as it can: it is its own capture
(L{nfltr.http.ICapture}), keeps each head as it came (the stream path's
bytes, or the header list a parser made), and each body piece that fits
as the same bytes object; heads are parsed, decoded and redacted only
when read (L{nfltr.inspect._redact}).

Secrets are kept only where they came in, and never shown: the values of
C{Authorization}, C{Proxy-Authorization}, C{Cookie}, C{Set-Cookie}, and of
the share's own required headers read as L{REDACTION} in every view of a
record (L{Exchange.headers}, L{Exchange.responseHeaders}, L{Exchange.json},
its C{repr}).  A replay (L{nfltr.inspect._replay}) is made from those views,
so it goes without them unless they are added back in its edits.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Any

from zope.interface import implementer

from nfltr.http import ICapture, IExchangeTap

from ._redact import (
    HEAD_CAP,
    MAX_HEADERS,
    REDACTED,
    REDACTION,
    cut_head,
    head_fields,
    secret_names,
    shown,
)
from ._ws import FrameHeads

__all__ = ["BODY_CAP", "HEAD_CAP", "MAX_FRAMES", "MAX_HEADERS", "REDACTED", "REDACTION",
           "RING_SIZE", "Body", "Capture", "Exchange", "Ring"]

#: Exchanges kept (the oldest dropped first).
RING_SIZE = 100
#: Bytes of each body kept.
BODY_CAP = 16 * 1024
#: WebSocket frames listed per switched exchange (the last ones; all are counted).
MAX_FRAMES = 50

#: A head as kept: its bytes as they came, or the fields a parser gave.
Head = bytes | list[tuple[bytes, bytes]]


class Body:
    """
    A body as shown: its first bytes (at most the cap) and its whole size.
    """

    __slots__ = ("kept", "size")

    def __init__(self, kept: bytes | bytearray, size: int) -> None:
        self.kept = kept
        self.size = size

    def json(self) -> dict[str, Any]:
        """
        The body for the API: as text, its size, whether it was cut.
        """
        return {"text": self.kept.decode("utf-8", "replace"), "size": self.size,
                "truncated": self.size > len(self.kept)}


def _keep(kept: bytes | bytearray, data: bytes, room: int) -> bytes | bytearray:
    """
    C{kept} and what of C{data} fits in C{room} bytes: the first piece that
    fits is kept as it is (bytes are never changed), later ones are
    appended to one bytearray.
    """
    if not kept:
        return data if len(data) <= room and type(data) is bytes else bytes(data[:room])
    if type(kept) is bytes:
        kept = bytearray(kept)
    kept += data[:room]
    return kept


class _Frames:
    """
    The WebSocket frames of a switched exchange, made on its first bytes.
    """

    __slots__ = ("count", "heads", "listed")

    def __init__(self) -> None:
        self.heads = {"visitor": FrameHeads(), "service": FrameHeads()}
        self.count = {"visitor": 0, "service": 0}
        self.listed: deque[dict[str, Any]] = deque(maxlen=MAX_FRAMES)


class Exchange:
    """
    One request and its response, as kept (see the module); its
    L{Capture} keeps them.

    @ivar started: when its head came (wall clock, seconds).
    @ivar firstByte: seconds from its head to the response's head.
    @ivar took: seconds from its head to its end.
    @ivar outcome: L{None} while in flight; then C{complete}, C{aborted}
        or C{switched}.
    @ivar requestSize: bytes of the request's body, all counted.
    @ivar responseSize: bytes of the response's body, all counted.

    The heads and bodies as kept are private (C{_head}, C{_responseHead},
    C{_body}, C{_responseBody}): written by its L{Capture} only, read only
    through the views below, which redact.
    """

    __slots__ = ("_body", "_frames", "_head", "_method", "_responseBody", "_responseHead",
                 "_ring", "_target", "firstByte", "ident", "outcome", "replay", "requestSize",
                 "responseSize", "started", "status", "took", "visitor")

    def __init__(self, ring: Ring, ident: int, method: bytes, target: bytes, head: Head,
                 visitor: str | None, replay: bool = False) -> None:
        self._ring = ring
        self.ident = ident
        self.started = ring.clock()
        self.visitor = visitor
        self._method = method
        self._target = target
        self._head = head
        self.replay = replay
        self.status: int | None = None
        self._responseHead: Head = b""
        self._body: bytes | bytearray = b""
        self._responseBody: bytes | bytearray = b""
        self.requestSize = self.responseSize = 0
        self.firstByte: float | None = None
        self.took: float | None = None
        self.outcome: str | None = None
        self._frames: _Frames | None = None

    # What is read (the page, the API, a replay): decoded and redacted here.

    @property
    def method(self) -> str:
        return self._method.decode("latin-1")

    @property
    def target(self) -> str:
        return self._target.decode("latin-1")

    @property
    def headers(self) -> list[tuple[str, str]]:
        """
        The request's headers, as text, secrets redacted.
        """
        return _shown(self._head, self._ring.secret)

    @property
    def responseHeaders(self) -> list[tuple[str, str]]:
        """
        The response's headers, as text, secrets redacted.
        """
        return _shown(self._responseHead, self._ring.secret)

    @property
    def body(self) -> Body:
        return Body(self._body, self.requestSize)

    @property
    def responseBody(self) -> Body:
        return Body(self._responseBody, self.responseSize)

    @property
    def frames(self) -> list[dict[str, Any]]:
        """
        The last WebSocket frames after a switch.
        """
        return [] if self._frames is None else list(self._frames.listed)

    @property
    def frameCount(self) -> dict[str, int]:
        """
        The WebSocket frames after a switch, counted each way.
        """
        return {"visitor": 0, "service": 0} if self._frames is None else dict(self._frames.count)

    def summary(self) -> dict[str, Any]:
        """
        The exchange for a list: no headers, no bodies.
        """
        return {"id": self.ident, "started": self.started, "visitor": self.visitor,
                "method": self.method, "target": self.target, "status": self.status,
                "first_byte": self.firstByte, "took": self.took, "outcome": self.outcome,
                "request_size": self.requestSize, "response_size": self.responseSize,
                "replay": self.replay}

    def json(self) -> dict[str, Any]:
        """
        The whole exchange.
        """
        return {**self.summary(),
                "headers": [list(h) for h in self.headers], "body": self.body.json(),
                "response_headers": [list(h) for h in self.responseHeaders],
                "response_body": self.responseBody.json(),
                "frames": self.frames, "frame_count": self.frameCount}

    def matches(self, query: str) -> bool:
        """
        Whether C{query} (lower case) is in its method, target, status or
        visitor.
        """
        text = f"{self.method} {self.target} {self.status} {self.visitor}".lower()
        return query in text

    def __repr__(self) -> str:
        """
        Its number, method, target and status: no header, no body.
        """
        return f"<Exchange {self.ident} {self.method} {self.target!r} {self.status}>"


@implementer(ICapture)
class Capture:
    """
    What the proxy tells of one exchange, kept in its L{record}: nothing
    but assignments and, for a body piece that fits, one reference.
    """

    __slots__ = ("record",)

    def __init__(self, record: Exchange) -> None:
        self.record = record

    def requestBody(self, data: bytes) -> None:
        r = self.record
        size = r.requestSize
        r.requestSize = size + len(data)
        room = r._ring.bodyCap - size
        if room > 0:
            r._body = _keep(r._body, data, room)

    def response(self, status: int, headers: Sequence[tuple[bytes, bytes]]) -> None:
        self._responded(status, _fields(headers, self.record._ring.headCap))

    def responseHead(self, status: int, head: bytes) -> None:
        r = self.record
        ring = r._ring
        r.status = status
        r._responseHead = head if len(head) <= ring.headCap else cut_head(head, ring.headCap)
        r.firstByte = ring.clock() - r.started

    def _responded(self, status: int, head: Head) -> None:
        r = self.record
        r.status = status
        r._responseHead = head
        r.firstByte = r._ring.clock() - r.started

    def responseBody(self, data: bytes) -> None:
        r = self.record
        size = r.responseSize
        r.responseSize = size + len(data)
        room = r._ring.bodyCap - size
        if room > 0:
            if not size and len(data) <= room and type(data) is bytes:
                r._responseBody = data  # the usual case: one piece, kept as it is
            else:
                r._responseBody = _keep(r._responseBody, data, room)

    def ended(self, outcome: str) -> None:
        r = self.record
        r.outcome = outcome
        r.took = r._ring.clock() - r.started

    def switchedData(self, fromVisitor: bool, data: bytes) -> None:
        """
        Count and list the WebSocket frames that pass (L{nfltr.inspect._ws}).
        """
        r = self.record
        frames = r._frames
        if frames is None:
            frames = r._frames = _Frames()
        side = "visitor" if fromVisitor else "service"
        for opcode, size in frames.heads[side].feed(data):
            frames.count[side] += 1
            frames.listed.append({"from": side, "opcode": opcode, "size": size,
                                  "at": r._ring.clock() - r.started})


def _fields(headers: Iterable[tuple[bytes, bytes]], cap: int) -> list[tuple[bytes, bytes]]:
    """
    At most L{MAX_HEADERS} of C{headers}, those that fit in C{cap} bytes
    as header lines.
    """
    kept = list(islice(headers, MAX_HEADERS))
    room = cap
    for i, (name, value) in enumerate(kept):
        room -= len(name) + len(value) + 4  # ": " and CRLF
        if room < 0:
            return kept[:i]
    return kept


def _shown(head: Head, secret: frozenset[bytes]) -> list[tuple[str, str]]:
    return shown(head_fields(head) if isinstance(head, bytes) else head, secret)


@implementer(IExchangeTap)
class Ring:
    """
    The exchanges of one share; see the module.

    @ivar secret: the header names whose values are redacted (lowercase).
    @ivar headCap: bytes of each head kept.
    """

    def __init__(
        self, clock: Callable[[], float], size: int = RING_SIZE, bodyCap: int = BODY_CAP,
        secretHeaders: Iterable[bytes] = (), headCap: int = HEAD_CAP,
    ) -> None:
        self.clock = clock
        self.bodyCap = bodyCap
        self.headCap = headCap
        self.secret = secret_names(secretHeaders)
        self.exchanges: deque[Exchange] = deque(maxlen=size)
        self._next = 1

    def opened(
        self, method: bytes, target: bytes, headers: Sequence[tuple[bytes, bytes]],
        visitor: str | None,
    ) -> Capture:
        """
        A request started: keep it (see L{IExchangeTap.opened}).
        """
        return Capture(self.record(method, target, headers, visitor))

    def openedHead(self, method: bytes, target: bytes, head: bytes,
                   visitor: str | None) -> Capture:
        """
        A request started, its head as it came: keep it (see
        L{IExchangeTap.openedHead}).
        """
        record = Exchange(self, self._next, method, target,
                          head if len(head) <= self.headCap else cut_head(head, self.headCap),
                          visitor)
        self._next += 1
        self.exchanges.append(record)
        return Capture(record)

    def record(self, method: bytes, target: bytes, headers: Iterable[tuple[bytes, bytes]],
               visitor: str | None, replay: bool = False) -> Exchange:
        """
        Keep a new exchange (the oldest goes when the ring is full).
        """
        record = Exchange(self, self._next, method, target, _fields(headers, self.headCap),
                          visitor, replay)
        self._next += 1
        self.exchanges.append(record)
        return record

    def find(self, ident: int) -> Exchange | None:
        """
        The exchange numbered C{ident}, if still kept.
        """
        return next((e for e in self.exchanges if e.ident == ident), None)

    def listing(self, query: str | None = None) -> list[dict[str, Any]]:
        """
        The kept exchanges, newest first, those that match C{query} if given.
        """
        wanted = (query or "").lower()
        return [e.summary() for e in reversed(self.exchanges)
                if not wanted or e.matches(wanted)]
