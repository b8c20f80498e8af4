# -*- test-case-name: tests.inspect.test_site -*-
"""
Replay: send a kept request (L{nfltr.inspect._ring.Exchange}) to the
share's local service again, optionally edited (method, target, headers,
body), straight to the service (not through the relay nor the share's
policy), and keep the exchange in the ring, marked as a replay.

The request goes as the share's proxy sends it: to C{127.0.0.1:PORT},
with the share's C{Host} (C{--host-header}); hop-by-hop headers and
framing are the HTTP client's.  Redacted values are not sent (they were
never kept): add them back in the edits if the service needs them.  A body
that was cut when it was kept cannot be replayed as it was: give one.
"""

from __future__ import annotations

from io import BytesIO
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from twisted.web.client import Agent, FileBodyProducer, ResponseDone
from twisted.web.http_headers import Headers

from ._ring import REDACTION, Capture, Exchange, Ring

#: The largest body an edit may give.
MAX_REPLAY_BODY = 1024 * 1024
#: Seconds a replay may take.
REPLAY_TIMEOUT = 30.0
_PAIR = 2
_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade",
                  "te", "trailer", "proxy-connection", "host"})


class ReplayError(Exception):
    """
    The replay cannot be sent as asked; the text says why.
    """


class _Collect(Protocol):
    """
    Reads a response body into a kept exchange's body, bounded.
    """

    def __init__(self, capture: Capture, done: Deferred[None]) -> None:
        self.capture, self.done = capture, done

    def dataReceived(self, data: bytes) -> None:
        self.capture.responseBody(data)

    def connectionLost(self, reason: Failure = Failure(ResponseDone())) -> None:  # noqa: B008
        self.done.callback(None)


def edited(record: Exchange, edits: dict[str, Any]) -> tuple[bytes, bytes, list[tuple[str, str]],
                                                              bytes]:
    """
    The method, target, headers and body to send: C{record}'s, with
    C{edits} (C{method}, C{target}, C{headers} as C{[[name, value], ...]},
    C{body} as text) in their place.

    @raise ReplayError: an edit is malformed, or the body was cut.
    """
    method = edits.get("method", record.method)
    target = edits.get("target", record.target)
    headers = edits.get("headers", [list(h) for h in record.headers])
    if not (isinstance(method, str) and method.isalpha() and method.isascii()):
        raise ReplayError("method: letters only")
    if not (isinstance(target, str) and target.startswith("/") and target.isascii()
            and " " not in target):
        raise ReplayError("target: a path starting with /, no spaces")
    if not isinstance(headers, list) or not all(
        isinstance(h, list) and len(h) == _PAIR and all(isinstance(x, str) for x in h)
        for h in headers
    ):
        raise ReplayError("headers: a list of [name, value] pairs of text")
    if "body" in edits:
        if not isinstance(edits["body"], str):
            raise ReplayError("body: text")
        body = edits["body"].encode("utf-8")
        if len(body) > MAX_REPLAY_BODY:
            raise ReplayError(f"body: at most {MAX_REPLAY_BODY} bytes")
    elif record.body.size > len(record.body.kept):
        raise ReplayError("the request's body was cut when it was kept: give a body to send")
    else:
        body = bytes(record.body.kept)
    kept = [(n, v) for n, v in headers
            if n.lower() not in _HOP and v.encode("latin-1", "replace") != REDACTION]
    return method.upper().encode("ascii"), target.encode("ascii"), kept, body


async def replay(
    reactor: Any, ring: Ring, record: Exchange, edits: dict[str, Any], port: int,
    host: bytes | None,
) -> Exchange:
    """
    Send C{record} again to the service on C{port}; the new exchange, kept
    in C{ring} (its status L{None} and outcome C{aborted} if the service
    did not answer).

    @param host: the C{Host} to send (L{None}: the request's own).
    """
    method, target, headers, body = edited(record, edits)
    original = next((v for n, v in record.headers if n == "host"), None)
    hostValue = host if host is not None else (
        original or f"127.0.0.1:{port}").encode("latin-1", "replace")
    raw = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers]
    new = ring.record(method, target, [(b"host", hostValue), *raw], "replay", replay=True)
    capture = Capture(new)
    capture.requestBody(body)
    sent = Headers()
    sent.addRawHeader(b"host", hostValue)
    for name, value in raw:
        sent.addRawHeader(name, value)
    producer = FileBodyProducer(BytesIO(body)) if body else None
    request = Agent(reactor).request(method, f"http://127.0.0.1:{port}".encode() + target,
                                     sent, producer)
    request.addTimeout(REPLAY_TIMEOUT, reactor)
    try:
        response = await request
    except Exception:  # noqa: BLE001 - any failure to reach the service ends the replay
        capture.ended("aborted")
        return new
    capture.response(response.code, [(name, value) for name, values
                                 in response.headers.getAllRawHeaders() for value in values])
    done: Deferred[None] = Deferred()
    response.deliverBody(_Collect(capture, done))
    await done
    capture.ended("complete")
    return new
