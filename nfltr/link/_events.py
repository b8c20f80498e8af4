# -*- test-case-name: tests.link.test_connection -*-
"""
The events a L{LinkConnection} reports to its application.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from ._control import Hello


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
    received data (report them to L{LinkConnection.consumed}).
    """

    session_id: int
    target: str
    first_bytes: bytes


class DataReceived(NamedTuple):
    """
    Bytes for a session; report them consumed when they leave its queue.

    The one event per DATA frame, so a (frozen, immutable) named tuple: the
    receiver builds it without a Python-level constructor call.
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
