# -*- test-case-name: tests.link.test_connection -*-
"""
The events a L{LinkConnection} reports to its application.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from ._control import Hello

Event = Any
# Builds a named tuple without the Python-level __new__ of calling its class.
_tuple_new = tuple.__new__


@dataclass(frozen=True, slots=True)
class LinkEstablished:
    """
    The peer's hello arrived; sessions may now be opened.
    """

    hello: Hello


@dataclass(frozen=True, slots=True)
class SessionOpened:
    """
    The peer opened a session towards C{target}; C{first_bytes} count as
    received data (report them to L{LinkConnection.consumed}).  If
    C{want_accept}, the peer waits for L{LinkConnection.accept_session} (or
    a reset); this side's first DATA or FIN accepts it otherwise.
    """

    session_id: int
    target: str
    first_bytes: bytes
    want_accept: bool = False


@dataclass(frozen=True, slots=True)
class SessionAccepted:
    """
    The peer accepted a session this side opened with C{want_accept}.
    """

    session_id: int


class DataReceived(NamedTuple):
    """
    Bytes for a session; report them consumed when they leave its queue.

    One per DATA frame, except that when one input brings a large one
    (see L{nfltr.link._frames.VIEW_MIN}) each run of consecutive DATA frames
    of one session in it is one event (L{coalesce_data}).  Built for every
    frame, so a (frozen, immutable) named tuple: the receiver builds it
    without a Python-level constructor call.
    """

    session_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class FinReceived:
    """
    The peer will send no more data on this session.
    """

    session_id: int


@dataclass(frozen=True, slots=True)
class SessionClosed:
    """
    Both directions of a session ended cleanly; it is gone.
    """

    session_id: int


@dataclass(frozen=True, slots=True)
class SessionReset:
    """
    A session ended abnormally and is gone.

    @ivar remote: C{True} if the peer sent the RESET, C{False} if this side
        reset it because the peer broke the protocol on it (a RESET has then
        been queued for the peer).
    """

    session_id: int
    code: int
    reason: str
    remote: bool


@dataclass(frozen=True, slots=True)
class SessionWritable:
    """
    A session's send queue fell below its low-water mark after it had been
    above the high-water mark: resume its producer.
    """

    session_id: int


@dataclass(frozen=True, slots=True)
class ControlReceived:
    """
    An application control message (never logged whole: may hold secrets).
    """

    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PongReceived:
    """
    Our PING was answered after C{rtt} seconds.
    """

    rtt: float


@dataclass(frozen=True, slots=True)
class GoAwayReceived:
    """
    The peer is going away: it accepted sessions we opened up to
    C{last_session_id}; those above were reset.
    """

    last_session_id: int
    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class LinkTimedOut:
    """
    Nothing arrived in time (handshake or keepalive): the link is dead.
    """

    reason: str


def coalesce_data(events: list[Event]) -> list[Event]:
    """
    C{events} with each run of consecutive L{DataReceived} of one session
    made one, whose data is the run's payloads joined, as C{bytes}: the
    decoder's views of its chunk (L{nfltr.link._frames.FrameDecoder}) are
    copied here, once.
    A session's consumer then gets what one read brought in one call, and
    a socket behind it one write.
    """
    out: list[Event] = []
    run: list[Any] = []
    sid = -1
    for event in events:
        if type(event) is DataReceived:
            if event[0] == sid:
                run.append(event[1])
                continue
            if run:
                out.append(_joined(sid, run))
            sid, run = event[0], [event[1]]
        else:
            if run:
                out.append(_joined(sid, run))
                sid, run = -1, []
            out.append(event)
    if run:
        out.append(_joined(sid, run))
    return out


def _joined(sid: int, run: list[Any]) -> DataReceived:
    data = run[0] if len(run) == 1 else b"".join(run)
    return _tuple_new(DataReceived, (sid, data if type(data) is bytes else bytes(data)))
