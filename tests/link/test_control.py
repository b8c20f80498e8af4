"""
Tests for L{nfltr.link._control}: control messages, refusals and hello.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import (
    DEFAULT_KEEPALIVE,
    VERSION,
    ErrorCode,
    Hello,
    Keepalive,
    RefusalReason,
    RemoteProtocolError,
    refusal,
)
from nfltr.link._config import MAX_SESSIONS_LIMIT, MAX_WINDOW, MIN_WINDOW
from nfltr.link._control import decode_message, encode_message, hello_message, parse_hello


def dialer_hello(**overrides: Any) -> dict[str, Any]:
    """
    A valid dialer hello, as decoded JSON, with fields overridden.
    """
    message = hello_message("dialer", 65536, 1 << 20, 16, DEFAULT_KEEPALIVE, {"key": "k"})
    message.update(overrides)
    return message


class MessageTests(SynchronousTestCase):
    """
    Control messages are compact UTF-8 JSON objects with a type.
    """

    def test_encode(self) -> None:
        """
        Encoding is compact JSON, UTF-8, keys in the order given.
        """
        self.assertEqual(
            encode_message({"type": "share", "name": "blög", "n": [1, 2]}),
            b'{"type":"share","name":"bl\\u00f6g","n":[1,2]}',
        )

    def test_round_trip(self) -> None:
        """
        What is encoded decodes to an equal object.
        """
        message = {"type": "a.b-c_9", "x": {"y": [None, True, 1.5, "é"]}}
        self.assertEqual(decode_message(encode_message(message)), message)

    def test_type_names(self) -> None:
        """
        A type is 1 to 32 characters: a lowercase letter, then lowercase
        letters, digits, C{_ . -}.
        """
        for good in ["a", "hello", "share.declare", "x-1_y", "a" * 32]:
            self.assertEqual(decode_message(encode_message({"type": good}))["type"], good)
        for bad in ["", "A", "1a", "a" * 33, "a b", "é", "auth\n", "\nauth", None, 5, ["a"]]:
            self.assertRaises(ValueError, encode_message, {"type": bad})
            raw = b'{"type":' + json.dumps(bad).encode() + b"}"
            e = self.assertRaises(RemoteProtocolError, decode_message, raw)
            self.assertEqual(e.code, ErrorCode.PROTOCOL_ERROR, repr(bad))

    def test_missing_type(self) -> None:
        """
        A message without a type is refused both ways.
        """
        self.assertRaises(ValueError, encode_message, {"name": "x"})
        self.assertRaises(RemoteProtocolError, decode_message, b'{"name":"x"}')

    def test_not_serialisable(self) -> None:
        """
        NaN, infinities and objects JSON cannot hold are a ValueError, as
        documented.
        """
        for value in [float("nan"), float("inf"), object(), {1, 2}, b"bytes"]:
            self.assertRaises(ValueError, encode_message, {"type": "x", "v": value})

    def test_decode_garbage(self) -> None:
        """
        Not UTF-8, not JSON, not an object, nested too deep, or a number too
        long to read: all C{PROTOCOL_ERROR}, never another exception.
        """
        for payload in [
            b"\xff\xfe", b"", b"{", b"[]", b'"hello"', b"null", b"[" * 100000,
            b'{"type":"x","n":' + b"9" * 5000 + b"}", b'{"type":"x"} trailing',
        ]:
            e = self.assertRaises(RemoteProtocolError, decode_message, payload)
            self.assertEqual(e.code, ErrorCode.PROTOCOL_ERROR, payload[:20])


class RefusalTests(SynchronousTestCase):
    """
    Refusals have one shape and a typed reason.
    """

    def test_reasons(self) -> None:
        """
        The reasons and their wire values.
        """
        self.assertEqual(
            {r.name: r.value for r in RefusalReason},
            {
                "UNAUTHORIZED": "unauthorized", "REVOKED": "revoked", "NOT_FOUND": "not_found",
                "LIMIT": "limit", "INVALID": "invalid", "CONFLICT": "conflict",
                "VERSION": "version", "UNAVAILABLE": "unavailable",
            },
        )

    def test_shape(self) -> None:
        """
        C{refusal} builds a C{refused} message with the reason's value, the
        message, and extra fields, and it encodes.
        """
        message = refusal(RefusalReason.LIMIT, "too many agents", limit=5)
        self.assertEqual(
            message,
            {"type": "refused", "reason": "limit", "message": "too many agents", "limit": 5},
        )
        self.assertEqual(
            encode_message(message),
            b'{"type":"refused","reason":"limit","message":"too many agents","limit":5}',
        )


class HelloTests(SynchronousTestCase):
    """
    The hello each side sends first, and its validation.
    """

    def test_dialer_message(self) -> None:
        """
        A dialer's hello holds the version, role, limits, app fields and the
        keepalive with its preset name.
        """
        self.assertEqual(
            hello_message("dialer", 4096, 8192, 3, Keepalive(2, 4, "x"), {"k": 1}),
            {
                "type": "hello", "version": VERSION, "role": "dialer", "window": 4096,
                "budget": 8192, "max_sessions": 3, "app": {"k": 1},
                "keepalive": {"interval": 2, "timeout": 4, "preset": "x"},
            },
        )

    def test_listener_message(self) -> None:
        """
        A listener's hello has no keepalive.
        """
        self.assertNotIn("keepalive", hello_message("listener", 4096, 8192, 3, None, {}))

    def test_parse(self) -> None:
        """
        A valid hello parses into L{Hello}.
        """
        self.assertEqual(
            parse_hello(dialer_hello(), "dialer"),
            Hello("dialer", 65536, 1 << 20, 16, DEFAULT_KEEPALIVE, {"key": "k"}),
        )
        listener = hello_message("listener", 4096, 4096, 1, None, {})
        self.assertEqual(parse_hello(listener, "listener"),
                         Hello("listener", 4096, 4096, 1, None, {}))

    def test_listener_keepalive_ignored(self) -> None:
        """
        A keepalive in a listener's hello is ignored, not adopted.
        """
        message = hello_message("listener", 4096, 4096, 1, Keepalive(1, 1), {})
        self.assertIsNone(parse_hello(message, "listener").keepalive)

    def test_app_defaults_empty(self) -> None:
        """
        A hello without app fields has an empty C{app}.
        """
        message = dialer_hello()
        del message["app"]
        self.assertEqual(parse_hello(message, "dialer").app, {})

    def test_bounds(self) -> None:
        """
        The integer fields accept their bounds: window MIN_WINDOW..MAX_WINDOW,
        budget window..MAX_WINDOW, max_sessions 1..MAX_SESSIONS_LIMIT.
        """
        for fields in [
            {"window": MIN_WINDOW, "budget": MIN_WINDOW},
            {"window": MAX_WINDOW, "budget": MAX_WINDOW},
            {"max_sessions": 1}, {"max_sessions": MAX_SESSIONS_LIMIT},
        ]:
            parse_hello(dialer_hello(**fields), "dialer")

    def test_bad_fields(self) -> None:
        """
        Every malformed field is C{PROTOCOL_ERROR}, naming the problem.
        """
        cases: list[tuple[dict[str, Any], str]] = [
            ({"type": "auth"}, "expected hello"),
            ({"role": "listener"}, "expected a dialer"),
            ({"role": None}, "expected a dialer"),
            ({"window": MIN_WINDOW - 1}, "window"),
            ({"window": MAX_WINDOW + 1, "budget": MAX_WINDOW + 1}, "window"),
            ({"window": 65536.0}, "window"),
            ({"window": True}, "window"),
            ({"window": "65536"}, "window"),
            ({"budget": 65535}, "budget"),
            ({"budget": MAX_WINDOW + 1}, "budget"),
            ({"max_sessions": 0}, "max_sessions"),
            ({"max_sessions": MAX_SESSIONS_LIMIT + 1}, "max_sessions"),
            ({"max_sessions": None}, "max_sessions"),
            ({"app": []}, "app"),
            ({"keepalive": None}, "keepalive"),
            ({"keepalive": "fast"}, "keepalive"),
            ({"keepalive": {"interval": "5", "timeout": 10}}, "keepalive"),
            ({"keepalive": {"interval": 5, "timeout": 10, "preset": 3}}, "keepalive"),
            ({"keepalive": {"interval": 0.1, "timeout": 10}}, "keepalive"),
            ({"keepalive": {"interval": 10, "timeout": 5}}, "keepalive"),
            ({"keepalive": {"interval": 10**400, "timeout": 10**400}}, "keepalive"),
            ({"keepalive": {"interval": 5, "timeout": float("nan")}}, "keepalive"),
        ]
        for fields, needle in cases:
            e = self.assertRaises(
                RemoteProtocolError, parse_hello, dialer_hello(**fields), "dialer"
            )
            self.assertEqual(e.code, ErrorCode.PROTOCOL_ERROR, fields)
            self.assertIn(needle, e.reason, fields)

    def test_secrets_not_in_errors(self) -> None:
        """
        An error about a hello never quotes its application fields.
        """
        e = self.assertRaises(
            RemoteProtocolError, parse_hello, dialer_hello(window=1, app={"key": "s3cr3t"}),
            "dialer",
        )
        self.assertNotIn("s3cr3t", str(e))
