# -*- test-case-name: tests.link -*-
"""
link: many byte streams ("sessions") over one connection, with per-session
credit, liveness and drain.

The private modules are sans-I/O (no Twisted import); L{nfltr.link.twisted}
adapts them to Twisted transports.  The wire format is specified in
C{docs/link-protocol.md}.
"""

from ._config import LinkConfig
from ._connection import DIALER, LISTENER, LinkConnection
from ._control import Hello, RefusalReason, refusal
from ._errors import ErrorCode, LinkError, LocalProtocolError, RemoteProtocolError, code_name
from ._events import (
    ControlReceived,
    DataReceived,
    FinReceived,
    GoAwayReceived,
    LinkEstablished,
    LinkTimedOut,
    PongReceived,
    SessionAccepted,
    SessionClosed,
    SessionOpened,
    SessionReset,
    SessionWritable,
)
from ._frames import MAGIC, MAX_PAYLOAD, MAX_TARGET, PREAMBLE, VERSION, FrameType, classify_prefix
from ._liveness import DEFAULT_KEEPALIVE, PRESETS, Keepalive, parse_duration, parse_keepalive
from ._state import State

__all__ = [
    "DEFAULT_KEEPALIVE", "DIALER", "LISTENER", "MAGIC", "MAX_PAYLOAD", "MAX_TARGET", "PREAMBLE",
    "PRESETS",
    "VERSION", "ControlReceived", "DataReceived", "ErrorCode", "FinReceived", "FrameType",
    "GoAwayReceived", "Hello", "Keepalive", "LinkConfig", "LinkConnection", "LinkError",
    "LinkEstablished", "LinkTimedOut", "LocalProtocolError", "PongReceived", "RefusalReason",
    "RemoteProtocolError", "SessionAccepted", "SessionClosed", "SessionOpened", "SessionReset",
    "SessionWritable",
    "State", "classify_prefix", "code_name", "parse_duration", "parse_keepalive", "refusal",
]
