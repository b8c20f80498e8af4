# -*- test-case-name: tests.http.test_exchange -*-
"""
What the proxy's sans-I/O core (L{nfltr.http._exchange}) shares with the
I/O around it: the phases of an exchange and the L{ExchangeIO} calls it
makes; and the messages it writes: requests and responses rewritten for the
other side, error responses.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from http import HTTPStatus
from typing import Protocol, TypeVar

import h11

from ._checks import absoluteForm
from ._headers import requestHeaders, responseHeaders, setHeader

_Response = TypeVar("_Response", h11.Response, h11.InformationalResponse)


class Phase(enum.Enum):
    """
    Where an L{nfltr.http._exchange.Exchange} is.
    """

    #: Waiting for a request head (the idle timer runs).
    IDLE = "idle"
    #: A request head is in; a backend connection is being found.
    CONNECTING = "connecting"
    #: Request and response are flowing.
    FORWARDING = "forwarding"
    #: Upgraded: raw bytes flow both ways, outside the exchange.
    SWITCHED = "switched"
    #: The visitor connection is being closed after what was written.
    CLOSING = "closing"
    #: The visitor connection is gone (or aborted).
    CLOSED = "closed"


class ExchangeIO(Protocol):
    """
    What an L{nfltr.http._exchange.Exchange} asks of the I/O around it.
    """

    def writeVisitor(self, data: bytes) -> None:
        """
        Write to the visitor.
        """

    def closeVisitor(self) -> None:
        """
        Close the visitor connection once what was written is out.
        """

    def abortVisitor(self) -> None:
        """
        Abort the visitor connection: what it got must not look complete.
        """

    def readVisitor(self, reading: bool) -> None:
        """
        Resume (C{True}) or pause (C{False}) reading from the visitor.
        """

    def connectBackend(self, fresh: bool) -> None:
        """
        Find a backend connection (a new one if C{fresh}), then call
        C{Exchange.backendConnected} or C{Exchange.backendFailed}.
        """

    def writeBackend(self, data: bytes) -> None:
        """
        Write to the current backend connection.
        """

    def releaseBackend(self, reusable: bool) -> None:
        """
        Done with the current backend connection: pool it if C{reusable},
        close it otherwise.
        """

    def abortBackend(self) -> None:
        """
        Abort the current backend connection (if it is still there).
        """

    def idleTimer(self, running: bool) -> None:
        """
        Start (again) or stop the idle timer, which calls
        C{Exchange.idleTimeout}.
        """

    def switchProtocols(
        self, toBackend: bytes, toVisitor: bytes, visitorEnded: bool, backendEnded: bool
    ) -> None:
        """
        From now on, join the visitor and the backend connection as raw byte
        streams, after writing C{toBackend} (what the visitor sent after its
        request) and C{toVisitor} (what the backend sent after its C{101});
        a side whose end of input was already read is marked by its flag.
        """

    def problem(self, what: str) -> None:
        """
        Something went wrong with a request: C{what}, fixed text without
        any of the peers' bytes, fit for a debug log.
        """


def errorParts(
    status: HTTPStatus | int, extra: Sequence[tuple[bytes, bytes]] = (),
) -> tuple[HTTPStatus, list[tuple[bytes, bytes]], bytes]:
    """
    A short C{text/plain} error response that closes the connection: its
    status, headers and body.

    @param extra: more headers (a C{WWW-Authenticate} challenge, say).
    """
    status = HTTPStatus(status)
    body = f"{status.value} {status.phrase}\n".encode("ascii")
    headers = [
        (b"Content-Type", b"text/plain; charset=utf-8"),
        (b"Content-Length", str(len(body)).encode("ascii")),
        (b"Connection", b"close"),
        *extra,
    ]
    return status, headers, body


def errorResponse(
    status: HTTPStatus | int, head: bool = False,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> list[h11.Response | h11.Data | h11.EndOfMessage]:
    """
    The events of L{errorParts}' response.

    @param head: the request was a C{HEAD}: no body.
    """
    status, headers, body = errorParts(status, extra)
    events: list[h11.Response | h11.Data | h11.EndOfMessage] = [
        h11.Response(status_code=status.value, headers=headers, reason=status.phrase)
    ]
    if not head:
        events.append(h11.Data(data=body))
    events.append(h11.EndOfMessage())
    return events


def errorBytes(status: HTTPStatus | int, extra: Sequence[tuple[bytes, bytes]] = ()) -> bytes:
    """
    The bytes of L{errorParts}' response, for the stream path.
    """
    status, headers, body = errorParts(status, extra)
    lines = [b"HTTP/1.1 %d %s\r\n" % (status.value, status.phrase.encode("ascii"))]
    lines += [b"%s: %s\r\n" % field for field in headers]
    return b"".join([*lines, b"\r\n", body])


def forwardedRequest(
    request: h11.Request,
    *,
    visitor: str | None = None,
    host: bytes | None = None,
    forwarded: bool = True,
    scheme: bytes = b"https",
) -> h11.Request:
    """
    A visitor's request head as it goes to the backend (see
    L{nfltr.http._headers.requestHeaders} for the parameters); an
    absolute-form target goes in origin-form, its authority as the C{Host}.

    @raise h11.LocalProtocolError: it cannot be sent (an HTTP/1.0 request
        without C{Host} and no host to give it).
    """
    raw, target = request.headers.raw_items(), request.target
    absolute = absoluteForm(target)
    if absolute is not None:
        authority, target = absolute
        raw = setHeader(raw, b"Host", authority)
    headers = requestHeaders(raw, visitor=visitor, host=host, forwarded=forwarded, scheme=scheme)
    return h11.Request(method=request.method, target=target, headers=headers)


def forwardedResponse(response: _Response, switching: bool = False,
                      closes: bool = False) -> _Response:
    """
    A backend's response head (final or informational) as it goes to the
    visitor: same status and reason phrase, headers rewritten.

    @param switching: the C{101} of an upgrade.
    @param closes: the visitor's connection closes after it (C{Connection: close}).
    """
    fields: list[tuple[bytes, bytes]] = responseHeaders(response.headers.raw_items(), switching)
    if closes:
        fields.append((b"Connection", b"close"))
    return type(response)(
        status_code=response.status_code,
        headers=fields,
        reason=response.reason,
    )
