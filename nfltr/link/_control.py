# -*- test-case-name: tests.link.test_control -*-
"""
Control messages: the typed messages carried by CONTROL frames.

A control message is a UTF-8 JSON object with a C{"type"} string.  The link
itself defines C{hello} (the first frame each side sends, carrying its
limits and, from the dialer, the keepalive); C{refused} is the one shape for
refusals, with a reason from L{RefusalReason}.  Every other type belongs to
the application, which validates its own fields.

Control messages may carry secrets (an API key in the dialer's hello):
never log a message's fields, only its type.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ._config import MAX_SESSIONS_LIMIT, MAX_WINDOW, MIN_WINDOW
from ._errors import ErrorCode, RemoteProtocolError
from ._frames import VERSION
from ._liveness import Keepalive, check_keepalive

HELLO = "hello"
REFUSED = "refused"

_TYPE = re.compile(r"[a-z][a-z0-9_.-]{0,31}\Z")


class RefusalReason(StrEnum):
    """
    Why a peer refused a request; the value travels on the wire.
    """

    UNAUTHORIZED = "unauthorized"
    REVOKED = "revoked"
    NOT_FOUND = "not_found"
    LIMIT = "limit"
    INVALID = "invalid"
    CONFLICT = "conflict"
    VERSION = "version"
    UNAVAILABLE = "unavailable"


def encode_message(message: dict[str, Any]) -> bytes:
    """
    Serialise one control message.

    @raise ValueError: no valid C{"type"}, or not JSON-serialisable.
    """
    kind = message.get("type")
    if not isinstance(kind, str) or not _TYPE.fullmatch(kind):
        raise ValueError(f"control message type {kind!r} is not a valid type name")
    try:
        return json.dumps(message, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except TypeError as e:
        raise ValueError(f"control message is not JSON-serialisable: {e}") from None


def _bad(reason: str) -> RemoteProtocolError:
    return RemoteProtocolError(ErrorCode.PROTOCOL_ERROR, reason)


def decode_message(payload: bytes) -> dict[str, Any]:
    """
    Parse one control message.

    @raise RemoteProtocolError: C{PROTOCOL_ERROR}, for anything but a JSON
        object with a valid type.
    """
    try:
        message = json.loads(bytes(payload).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _bad("control message is not UTF-8 JSON") from None
    if not isinstance(message, dict):
        raise _bad("control message is not a JSON object")
    kind = message.get("type")
    if not isinstance(kind, str) or not _TYPE.fullmatch(kind):
        raise _bad("control message has no valid type")
    return message


def refusal(reason: RefusalReason, message: str, **fields: Any) -> dict[str, Any]:
    """
    Build a C{refused} message.
    """
    return {"type": REFUSED, "reason": reason.value, "message": message, **fields}


@dataclass(frozen=True)
class Hello:
    """
    What a peer announced in its hello.

    @ivar role: C{"dialer"} or C{"listener"}.
    @ivar window: its per-session receive window.
    @ivar budget: its connection budget.
    @ivar max_sessions: how many sessions it accepts at once.
    @ivar keepalive: the dialer's keepalive (C{None} from a listener).
    @ivar app: the application's fields (may hold secrets; never logged).
    @ivar accepts: it answers each OPEN flagged C{WANT_ACCEPT} with ACCEPT
        or RESET before its DATA or FIN (an older peer does not say so).
    """

    role: str
    window: int
    budget: int
    max_sessions: int
    keepalive: Keepalive | None
    app: dict[str, Any]
    accepts: bool = False


def hello_message(
    role: str, window: int, budget: int, max_sessions: int,
    keepalive: Keepalive | None, app: dict[str, Any], accepts: bool = False,
) -> dict[str, Any]:
    """
    Build a hello message (with C{accepts} only if true, as older peers
    send none).
    """
    message: dict[str, Any] = {
        "type": HELLO, "version": VERSION, "role": role, "window": window,
        "budget": budget, "max_sessions": max_sessions,
    }
    if accepts:
        message["accepts"] = True
    message["app"] = app
    if keepalive is not None:
        message["keepalive"] = {
            "interval": keepalive.interval, "timeout": keepalive.timeout,
            "preset": keepalive.preset,
        }
    return message


def _int_field(message: dict[str, Any], name: str, low: int, high: int) -> int:
    value = message.get(name)
    if type(value) is not int or not low <= value <= high:
        raise _bad(f"hello field {name} must be an integer in {low}..{high}")
    return value


def parse_hello(message: dict[str, Any], expect_role: str) -> Hello:
    """
    Validate a peer's hello.

    @raise RemoteProtocolError: C{PROTOCOL_ERROR} naming the bad field.
    """
    if message.get("type") != HELLO:
        raise _bad(f"expected hello, got {message.get('type')!r}")
    if message.get("role") != expect_role:
        raise _bad(f"hello from a {message.get('role')!r}, expected a {expect_role}")
    window = _int_field(message, "window", MIN_WINDOW, MAX_WINDOW)
    budget = _int_field(message, "budget", window, MAX_WINDOW)
    max_sessions = _int_field(message, "max_sessions", 1, MAX_SESSIONS_LIMIT)
    app = message.get("app", {})
    if not isinstance(app, dict):
        raise _bad("hello field app must be an object")
    keepalive = _parse_keepalive(message.get("keepalive")) if expect_role == "dialer" else None
    accepts = message.get("accepts", False)
    if type(accepts) is not bool:
        raise _bad("hello field accepts must be true or false")
    return Hello(expect_role, window, budget, max_sessions, keepalive, app, accepts)


def _parse_keepalive(raw: Any) -> Keepalive:
    if not isinstance(raw, dict):
        raise _bad("a dialer's hello must state its keepalive")
    interval, timeout, preset = raw.get("interval"), raw.get("timeout"), raw.get("preset")
    if not isinstance(interval, int | float) or not isinstance(timeout, int | float) \
            or isinstance(interval, bool) or isinstance(timeout, bool) \
            or not (preset is None or isinstance(preset, str)):
        raise _bad("hello keepalive must have numeric interval and timeout")
    try:
        check_keepalive(float(interval), float(timeout))
    except (ValueError, OverflowError) as e:
        raise _bad(f"hello keepalive rejected: {e}") from None
    return Keepalive(float(interval), float(timeout), preset)
