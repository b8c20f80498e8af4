# -*- test-case-name: tests.inspect.test_ring -*-
"""
What the agent's inspector keeps: L{Ring}, the tap on a share's proxy
(L{nfltr.http.IExchangeTap}), holds the last L{RING_SIZE} exchanges as
L{Exchange} records, each body kept up to L{BODY_CAP} bytes (the rest
counted, not kept), so its memory is bounded whatever passes.

Secrets are redacted as they are recorded, never kept: the values of
C{Authorization}, C{Proxy-Authorization}, C{Cookie}, C{Set-Cookie}, and of
the share's own required headers (L{REDACTED}).  A replay
(L{nfltr.inspect._replay}) therefore goes without them unless they are
added back in its edits.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from zope.interface import implementer

from nfltr.http import ICapture, IExchangeTap

from ._ws import FrameHeads

#: Exchanges kept (the oldest dropped first).
RING_SIZE = 100
#: Bytes of each body kept.
BODY_CAP = 16 * 1024
#: Headers whose values are never kept.
REDACTED = frozenset({b"authorization", b"proxy-authorization", b"cookie", b"set-cookie"})
REDACTION = b"[redacted]"
#: Headers kept per message.
MAX_HEADERS = 100
#: WebSocket frames listed per switched exchange (the last ones; all are counted).
MAX_FRAMES = 50


@dataclass(slots=True)
class Body:
    """
    A body as kept: its first L{BODY_CAP} bytes and its whole size.
    """

    kept: bytearray = field(default_factory=bytearray)
    size: int = 0

    def add(self, data: bytes, cap: int) -> None:
        room = cap - len(self.kept)
        if room > 0:
            self.kept += data[:room]
        self.size += len(data)

    def json(self) -> dict[str, Any]:
        return {"text": self.kept.decode("utf-8", "replace"), "size": self.size,
                "truncated": self.size > len(self.kept)}


@dataclass(slots=True)
class Exchange:
    """
    One request and its response, as kept.

    Headers are kept as they came (names in lowercase, secret values
    already replaced) and decoded only when read: a request costs the tap
    no more than it must (L{headers}, L{responseHeaders}).

    @ivar started: when its head came (wall clock, seconds).
    @ivar took: seconds from its head to the response's head, and to its end.
    @ivar outcome: L{None} while in flight; then C{complete}, C{aborted}
        or C{switched}.
    @ivar frames: the last WebSocket frames after a switch (L{None} until
        the first).
    """

    ident: int
    started: float
    visitor: str | None
    method: str
    target: str
    rawHeaders: list[tuple[bytes, bytes]]
    body: Body = field(default_factory=Body)
    status: int | None = None
    rawResponseHeaders: list[tuple[bytes, bytes]] = field(default_factory=list)
    responseBody: Body = field(default_factory=Body)
    firstByte: float | None = None
    took: float | None = None
    outcome: str | None = None
    replay: bool = False
    frames: deque[dict[str, Any]] | None = None
    frameCount: dict[str, int] | None = None

    @property
    def headers(self) -> list[tuple[str, str]]:
        """
        The request's headers, as text.
        """
        return _text(self.rawHeaders)

    @property
    def responseHeaders(self) -> list[tuple[str, str]]:
        """
        The response's headers, as text.
        """
        return _text(self.rawResponseHeaders)

    def frame(self, side: str, opcode: str, size: int, at: float) -> None:
        """
        Count and list one WebSocket frame from C{side}.
        """
        if self.frames is None or self.frameCount is None:
            self.frames = deque(maxlen=MAX_FRAMES)
            self.frameCount = {"visitor": 0, "service": 0}
        self.frameCount[side] += 1
        self.frames.append({"from": side, "opcode": opcode, "size": size, "at": at})

    def summary(self) -> dict[str, Any]:
        """
        The exchange for a list: no headers, no bodies.
        """
        return {"id": self.ident, "started": self.started, "visitor": self.visitor,
                "method": self.method, "target": self.target, "status": self.status,
                "first_byte": self.firstByte, "took": self.took, "outcome": self.outcome,
                "request_size": self.body.size, "response_size": self.responseBody.size,
                "replay": self.replay}

    def json(self) -> dict[str, Any]:
        """
        The whole exchange.
        """
        return {**self.summary(),
                "headers": [list(h) for h in self.headers], "body": self.body.json(),
                "response_headers": [list(h) for h in self.responseHeaders],
                "response_body": self.responseBody.json(),
                "frames": list(self.frames or ()),
                "frame_count": dict(self.frameCount or {"visitor": 0, "service": 0})}

    def matches(self, query: str) -> bool:
        """
        Whether C{query} (lower case) is in its method, target, status or
        visitor.
        """
        text = f"{self.method} {self.target} {self.status} {self.visitor}".lower()
        return query in text


def _text(headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in headers]


def kept_headers(headers: Iterable[tuple[bytes, bytes]], secret: frozenset[bytes]
                 ) -> list[tuple[bytes, bytes]]:
    """
    Headers as kept: at most L{MAX_HEADERS}, secret values redacted (their
    names in lowercase); names are lowered when read (L{_text}), not here:
    most requests carry no secret, and their headers are kept as a copy of
    the list, the pairs shared.
    """
    kept = list(islice(headers, MAX_HEADERS))
    for name, _ in kept:
        if name.lower() in secret:
            return [(lower, REDACTION) if (lower := n.lower()) in secret else (n, v)
                    for n, v in kept]
    return kept


@implementer(ICapture)
class _Capture:
    __slots__ = ("heads", "record", "ring")

    def __init__(self, ring: Ring, record: Exchange) -> None:
        self.ring = ring
        self.record = record
        self.heads: dict[str, FrameHeads] | None = None  # after a switch only

    def requestBody(self, data: bytes) -> None:
        self.record.body.add(data, self.ring.bodyCap)

    def response(self, status: int, headers: Sequence[tuple[bytes, bytes]]) -> None:
        record = self.record
        record.status = status
        record.rawResponseHeaders = kept_headers(headers, self.ring.secret)
        record.firstByte = self.ring.clock() - record.started

    def responseBody(self, data: bytes) -> None:
        self.record.responseBody.add(data, self.ring.bodyCap)

    def ended(self, outcome: str) -> None:
        self.record.outcome = outcome
        self.record.took = self.ring.clock() - self.record.started

    def switchedData(self, fromVisitor: bool, data: bytes) -> None:
        """
        Count and list the WebSocket frames that pass (L{nfltr.inspect._ws}).
        """
        side = "visitor" if fromVisitor else "service"
        if self.heads is None:
            self.heads = {}
        heads = self.heads.setdefault(side, FrameHeads())
        record = self.record
        for opcode, size in heads.feed(data):
            record.frame(side, opcode, size, self.ring.clock() - record.started)


@implementer(IExchangeTap)
class Ring:
    """
    The exchanges of one share; see the module.

    @ivar secret: the header names whose values are redacted.
    """

    def __init__(
        self, clock: Callable[[], float], size: int = RING_SIZE, bodyCap: int = BODY_CAP,
        secretHeaders: Iterable[bytes] = (),
    ) -> None:
        self.clock = clock
        self.bodyCap = bodyCap
        self.secret = REDACTED | {n.lower() for n in secretHeaders}
        self.exchanges: deque[Exchange] = deque(maxlen=size)
        self._next = 1

    def opened(
        self, method: bytes, target: bytes, headers: Sequence[tuple[bytes, bytes]],
        visitor: str | None,
    ) -> _Capture:
        """
        A request started: keep it (see L{IExchangeTap.opened}).
        """
        return _Capture(self, self.record(method, target, headers, visitor))

    def record(self, method: bytes, target: bytes, headers: Sequence[tuple[bytes, bytes]],
               visitor: str | None, replay: bool = False) -> Exchange:
        """
        Keep a new exchange (the oldest goes when the ring is full).
        """
        record = Exchange(self._next, self.clock(), visitor, method.decode("latin-1"),
                          target.decode("latin-1"), kept_headers(headers, self.secret),
                          replay=replay)
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
