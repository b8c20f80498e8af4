# -*- test-case-name: tests.link.test_frames -*-
"""
Errors of the link protocol.

Two exception classes, after h11: L{LocalProtocolError} when our own caller
misuses the API (a bug on this side), L{RemoteProtocolError} when the peer
broke the protocol.  Each wire error carries an L{ErrorCode}; the numbers are
part of the wire format (see C{docs/link-protocol.md}).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Any


class ErrorCode(IntEnum):
    """
    Error codes carried by RESET and GOAWAY frames.

    Codes up to C{SESSION_LIMIT} name protocol violations or link states;
    the rest name why one session ended.
    """

    NO_ERROR = 0
    PROTOCOL_ERROR = 1
    INTERNAL_ERROR = 2
    FLOW_CONTROL_ERROR = 3
    FRAME_SIZE_ERROR = 4
    UNKNOWN_FRAME_TYPE = 5
    UNKNOWN_SESSION = 6
    SESSION_CLOSED = 7
    BAD_MAGIC = 8
    UNSUPPORTED_VERSION = 9
    TIMEOUT = 10
    ENHANCE_YOUR_CALM = 11
    SESSION_LIMIT = 12
    REFUSED = 13
    CANCEL = 14
    CONNECT_FAILED = 15
    GOING_AWAY = 16
    OVERLOADED = 17


def code_name(code: int) -> str:
    """
    Name a wire error code, including codes this build does not know.
    """
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_CODE_{code}"


class LinkError(Exception):
    """
    Base class of the link protocol's errors.
    """


class LocalProtocolError(LinkError):
    """
    Our caller used the connection in a way the protocol forbids (writing to
    a closed session, opening one after GOAWAY, ...).  The connection's
    state is unchanged.
    """


class RemoteProtocolError(LinkError):
    """
    The peer broke the protocol.  When raised by
    L{LinkConnection.receive_data}, a GOAWAY naming C{code} has been queued
    for the peer and the connection is in its sticky error state.

    @ivar code: the wire error code.
    @ivar reason: a human readable explanation, safe to log.
    @ivar events: the events decoded from the same input before the error,
        which the caller should still process.
    """

    def __init__(self, code: ErrorCode, reason: str, events: Sequence[Any] = ()) -> None:
        super().__init__(f"{code.name}: {reason}")
        self.code = code
        self.reason = reason
        self.events = list(events)
