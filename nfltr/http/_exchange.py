# -*- test-case-name: tests.http.test_exchange -*-
"""
The proxy's logic for one visitor connection, sans I/O: L{Exchange} holds
the visitor's h11 server connection and, while a request is in flight, the
h11 client connection of the backend connection serving it, and turns what
happens on either side into calls on an L{ExchangeIO} (write, close, find
a backend, release it, pause reading, switch to raw bytes).

One request at a time: a request head is read (under the idle timeout),
then a backend connection is found; the request then streams to it and
its response streams back, h11 choosing the framing on each side.  At the
end of the response the backend connection is released (reusable when
both its sides ended cleanly with keep-alive) and, when the visitor's side
allows it, the next cycle starts.  What the visitor sends meanwhile (the
start of a body while a backend connection is found, pipelined requests)
waits in h11, and visitor reads stop while more than
L{HTTPLimits.max_request_head_size} bytes wait: reading goes on otherwise,
so a visitor that goes away is noticed.

Requests whose framing or target is in doubt are answered before they go
anywhere (L{nfltr.http._checks}: 400, or 421 for a host the proxy does not
serve), then the gate decides.  Errors: a request h11 cannot parse gets 400
(431 for a head too large); a backend that cannot be reached, closes
without a response or sends a malformed head gets a 502 if nothing of the
response went out yet, and otherwise the visitor connection is aborted, so
a cut response never looks complete.  A reused (pooled) backend connection that closes before any
byte of a response is retried once on a new connection if the request is
safe (GET, HEAD, OPTIONS, TRACE) and none of its body went out.

A backend connection is released as reusable only when its request and
response both ended cleanly and were framed without doubt, with nothing
read past the response: not after a response delimited by the close, one
that came before the request's body was all sent, one with both
C{Content-Length} and C{Transfer-Encoding} (RFC 9112 section 6.3: "A
client MUST close the connection after processing such a response"), one
that has no body by rule (to a C{HEAD}, a 204, a 304) but announces one
(a server that sends it anyway would answer the next request with it), a
request cut or malformed mid-body, or a C{101} gone wrong (those abort it).
Another visitor's request never follows bytes whose framing is in doubt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from http import HTTPStatus
from typing import Any, Protocol

import h11

from ._checks import parseErrorStatus, requestRefusal
from ._io import ExchangeIO, Phase, errorResponse, forwardedRequest, forwardedResponse
from ._limits import DEFAULT_LIMITS, HTTPLimits
from ._tap import ABORTED, COMPLETE, SWITCHED, ICapture, IExchangeTap


class Refusal(Protocol):
    """
    What a gate answers a request it turns away with.
    """

    @property
    def status(self) -> int:
        """
        The response status.
        """

    @property
    def headers(self) -> tuple[tuple[bytes, bytes], ...]:
        """
        Extra response headers.
        """


#: Decides whether a request (its headers, the visitor's address) passes.
Gate = Callable[[Sequence[tuple[bytes, bytes]], "str | None"], "Refusal | None"]

#: Statuses whose responses carry no body (RFC 9112 section 6.3, item 1).
BODILESS = frozenset({HTTPStatus.NO_CONTENT, HTTPStatus.NOT_MODIFIED})

#: Methods whose request may be sent again on a new backend connection when
#: a reused one closed before answering.
RETRYABLE = frozenset({b"GET", b"HEAD", b"OPTIONS", b"TRACE"})


class Exchange:
    """
    One visitor connection's requests and responses; see the module.

    @ivar server: the h11 connection to the visitor.
    @ivar client: the h11 connection of the backend connection in use, if any.
    @ivar phase: where the exchange is (L{Phase}).
    """

    def __init__(  # noqa: PLR0913 -- settings, keyword-only, each with a default
        self,
        io: ExchangeIO,
        *,
        visitor: str | None = None,
        host: bytes | None = None,
        forwarded: bool = True,
        scheme: bytes = b"https",
        limits: HTTPLimits = DEFAULT_LIMITS,
        gate: Gate | None = None,
        hosts: Iterable[str] | None = None,
        tap: IExchangeTap | None = None,
    ) -> None:
        """
        @param gate: decides, from each request's headers and the visitor's
            address, whether it may pass (L{None}) or is answered at once
            (a L{Refusal}) without reaching the backend.
        @param hosts: the host names requests may name (a share's); a
            request for another gets 421.  L{None}: any.
        @param tap: told of each request and response as they pass
            (L{nfltr.http._tap}: the agent's inspector).
        """
        self.io = io
        self._tap = tap
        self._capture: ICapture | None = None
        #: The capture of the request that switched protocols, told the raw bytes after.
        self.switchedCapture: ICapture | None = None
        self._gate = gate
        self._hosts = None if hosts is None else frozenset(
            host.lower().removesuffix(".") for host in hosts
        )
        self._visitor = visitor
        self.server = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.requestHeadSize)
        self.client: h11.Connection | None = None
        self.phase = Phase.IDLE
        self._rewrite: dict[str, Any] = {
            "visitor": visitor, "host": host, "forwarded": forwarded, "scheme": scheme
        }
        self._requestHeadLimit = limits.requestHeadSize
        self._responseHeadLimit = limits.responseHeadSize
        self._reading = True
        self._draining = False
        self._newCycle()

    def _newCycle(self) -> None:
        self._request: h11.Request | None = None
        self._method: bytes | None = None
        self._reused = False
        self._bodySent = False
        self._requestEnded = False
        self._answered = False
        self._doubt = False
        self._ahead = 0
        # Bytes read since the cycle began, to measure the request head (h11
        # only limits heads that are incomplete after a read).
        self._headRead = len(self.server.trailing_data[0])
        self._responseRead = 0

    def start(self) -> None:
        """
        The visitor connection is up: wait for a request head.
        """
        self.io.idleTimer(True)

    def drain(self) -> None:
        """
        Close at the next response boundary: the next response head to go
        out says C{Connection: close} (an idle connection waits for its next
        request: closing it would race one the visitor may be sending).
        """
        self._draining = True

    # The visitor side.

    def visitorData(self, data: bytes) -> None:
        """
        Bytes from the visitor.
        """
        if self.phase in (Phase.IDLE, Phase.CONNECTING, Phase.FORWARDING):
            if self.phase is Phase.IDLE:
                self._headRead += len(data)
            self.server.receive_data(data)
            if self.phase is Phase.CONNECTING:
                self._ahead = len(self.server.trailing_data[0])
                self._updateReading()
            else:
                self._pumpVisitor()

    def visitorEOF(self) -> None:
        """
        The visitor's end of input (a half-close): what it sent before still
        counts, and a response in progress still goes out.
        """
        self.visitorData(b"")

    def visitorLost(self) -> None:
        """
        The visitor connection is gone; the I/O drops the backend connection.
        """
        self.phase = Phase.CLOSED
        self.client = None

    def idleTimeout(self) -> None:
        """
        No complete request head within the idle timeout: C{408} if part of
        one came, a quiet close otherwise.
        """
        if self.phase is not Phase.IDLE:
            return
        if self.server.trailing_data[0]:
            self.io.problem("request head timed out")
            self._respondError(HTTPStatus.REQUEST_TIMEOUT)
        else:
            self._close()

    def stalled(self) -> None:
        """
        Nothing moved either way for the exchange timeout while a request
        was in flight: the backend connection goes, and the visitor gets
        C{504}, or its connection is cut if its response had begun.
        """
        if self.phase not in (Phase.CONNECTING, Phase.FORWARDING):
            return
        self.io.problem("exchange timed out: nothing moved")
        if self.client is not None:
            self.client = None
            self.io.abortBackend()
        if self.server.our_state is h11.SEND_RESPONSE:
            self._respondError(HTTPStatus.GATEWAY_TIMEOUT)
        else:
            self._abort()

    def _pumpVisitor(self) -> None:
        while self.phase in (Phase.IDLE, Phase.FORWARDING):
            try:
                event = self.server.next_event()
            except h11.RemoteProtocolError as e:
                self._badRequest(parseErrorStatus(e.error_status_hint))
                return
            if event is h11.NEED_DATA:
                self._ahead = 0
                break
            if event is h11.PAUSED:
                self._ahead = len(self.server.trailing_data[0])
                break
            if isinstance(event, h11.ConnectionClosed):
                # Before a request: done.  After one: its response still
                # goes out, then h11 says the connection must close.
                if self.phase is Phase.IDLE:
                    self._close()
                break
            if isinstance(event, h11.Request):
                self._onRequest(event)
            elif isinstance(event, h11.Data):
                self._bodySent = True
                if self._capture is not None:
                    self._capture.requestBody(event.data)
                self._toBackend(h11.Data(data=event.data))
            elif isinstance(event, h11.EndOfMessage):
                self._requestEnded = True
                self._toBackend(h11.EndOfMessage())
        self._updateReading()

    def _onRequest(self, request: h11.Request) -> None:
        self.io.idleTimer(False)
        self._method = request.method
        if self._tap is not None:
            self._capture = self._tap.opened(request.method, request.target,
                                             list(request.headers), self._visitor)
        if self._headRead - len(self.server.trailing_data[0]) > self._requestHeadLimit:
            self.io.problem("request head too large")
            self._respondError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
            return
        if request.method == b"CONNECT":
            self._respondError(HTTPStatus.METHOD_NOT_ALLOWED)
            return
        refused = requestRefusal(request, self._hosts)
        if refused is not None:
            self.io.problem("request refused: framing or target in doubt")
            self._respondError(refused)
            return
        if self._gate is not None:
            refusal = self._gate(request.headers, self._visitor)
            if refusal is not None:
                self._respondError(refusal.status, refusal.headers)
                return
        try:
            self._request = forwardedRequest(request, **self._rewrite)
        except h11.LocalProtocolError:
            self.io.problem("request not fit to forward")
            self._respondError(HTTPStatus.BAD_REQUEST)
            return
        self._connect(fresh=False)

    def _connect(self, fresh: bool) -> None:
        self.phase = Phase.CONNECTING
        self._ahead = len(self.server.trailing_data[0])
        self._updateReading()
        self.io.connectBackend(fresh)

    def _toBackend(self, event: h11.Data | h11.EndOfMessage) -> None:
        client = self.client
        # After an early response the rest of the request body is dropped.
        if client is None or client.our_state is not h11.SEND_BODY:
            return
        try:
            data = client.send(event)
        except h11.LocalProtocolError:
            self._backendFailed("request body not fit to forward")
            return
        self.io.writeBackend(data)

    def _badRequest(self, status: HTTPStatus) -> None:
        self.io.problem("malformed request")
        if self.client is not None:
            self.client = None
            self.io.abortBackend()
        if self.server.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            self._respondError(status)
        else:
            self._abort()

    def _updateReading(self) -> None:
        reading = self._ahead <= self._requestHeadLimit
        if reading != self._reading:
            self._reading = reading
            self.io.readVisitor(reading)

    # The backend side.

    def backendConnected(self, client: h11.Connection, reused: bool) -> bool:
        """
        A backend connection is there for the request waiting: send it.

        @param client: the connection's h11 state, idle.
        @param reused: the connection served requests before (a failure
            before any response is then worth one retry).
        @return: whether the connection was taken (not if the exchange no
            longer waits for one).
        """
        if self.phase is not Phase.CONNECTING or self._request is None:
            return False
        self.client, self._reused, self.phase = client, reused, Phase.FORWARDING
        self._responseRead = 0
        try:
            data = client.send(self._request)
            if self._requestEnded:
                data += client.send(h11.EndOfMessage())
        except h11.LocalProtocolError:
            self._backendFailed("backend connection not idle")
            return True
        self.io.writeBackend(data)
        self._updateReading()
        self._pumpVisitor()
        return True

    def backendFailed(self) -> None:
        """
        No backend connection could be had.
        """
        if self.phase is Phase.CONNECTING:
            self._backendFailed("backend unreachable", retry=False)

    def backendData(self, data: bytes) -> None:
        """
        Bytes from the backend connection in use.
        """
        if self.phase is Phase.FORWARDING and self.client is not None:
            self._answered = True
            self._responseRead += len(data)
            self.client.receive_data(data)
            self._pumpBackend()

    def backendEOF(self) -> None:
        """
        The backend connection's end of input: ends a response delimited
        by the close, or cuts one.
        """
        if self.phase is Phase.FORWARDING and self.client is not None:
            self.client.receive_data(b"")
            self._pumpBackend()

    def backendLost(self, clean: bool) -> None:
        """
        The backend connection in use is gone; if C{clean}, after an end of
        input like any other (which may end the response).
        """
        client = self.client
        if self.phase is not Phase.FORWARDING or client is None:
            return
        if clean:
            self.backendEOF()
        if self.phase is Phase.FORWARDING and self.client is client:
            self._backendFailed("backend connection lost")

    def _pumpBackend(self) -> None:
        client = self.client
        while self.phase is Phase.FORWARDING and client is not None and self.client is client:
            try:
                event = client.next_event()
            except h11.RemoteProtocolError:
                if self._answered:
                    self._backendFailed("malformed or cut response")
                else:
                    self._backendFailed("backend closed without a response")
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.ConnectionClosed):
                self._backendFailed("backend closed without a response")
            elif isinstance(event, h11.InformationalResponse | h11.Response) and (
                self._responseRead - len(client.trailing_data[0]) > self._responseHeadLimit
            ):
                self._backendFailed("response head too large")
            elif isinstance(event, h11.InformationalResponse):
                self._onInformational(event)
            elif isinstance(event, h11.Response):
                self._doubt = self._framingInDoubt(event)
                self._send(forwardedResponse(event, closes=self._draining))
            elif isinstance(event, h11.Data):
                self._send(h11.Data(data=event.data))
            elif isinstance(event, h11.EndOfMessage):
                self._onResponseEnd()

    def _framingInDoubt(self, response: h11.Response) -> bool:
        """
        Whether another parser could read C{response}'s end elsewhere than
        h11 did: it has both lengths, or it carries no body by rule (to a
        C{HEAD}, a 204, a 304) but its headers announce one.
        """
        lengths = {name: value for name, value in response.headers
                   if name in (b"content-length", b"transfer-encoding")}
        if len(lengths) > 1:
            return True
        bodiless = self._method == b"HEAD" or response.status_code in BODILESS
        announced = b"transfer-encoding" in lengths or lengths.get(b"content-length", b"0") != b"0"
        return bodiless and announced

    def _onInformational(self, event: h11.InformationalResponse) -> None:
        if event.status_code == HTTPStatus.SWITCHING_PROTOCOLS:
            self._switch(event)
        elif self.server.their_http_version != b"1.0":
            self._send(forwardedResponse(event))

    def _switch(self, event: h11.InformationalResponse) -> None:
        client = self.client
        if client is None or self.server.their_state is not h11.MIGHT_SWITCH_PROTOCOL:
            self.io.problem("switching protocols before the request's end")
            self._abort()
            return
        if not self._send(forwardedResponse(event, switching=True)):
            return
        self.phase, self.client = Phase.SWITCHED, None
        toBackend, visitorEnded = self.server.trailing_data
        toVisitor, backendEnded = client.trailing_data
        self.io.switchProtocols(toBackend, toVisitor, visitorEnded, backendEnded)

    def _onResponseEnd(self) -> None:
        if not self._send(h11.EndOfMessage()):
            return
        client, self.client = self.client, None
        assert client is not None
        reusable = (
            not self._doubt
            and client.our_state is h11.DONE
            and client.their_state is h11.DONE
            and client.trailing_data == (b"", False)
        )
        if reusable:
            client.start_next_cycle()
        server = self.server
        again = server.our_state is h11.DONE and server.their_state is h11.DONE
        self.phase = Phase.IDLE if again else Phase.CLOSING
        self.io.releaseBackend(reusable)
        if not again:
            self.io.closeVisitor()
            return
        server.start_next_cycle()
        self._newCycle()
        self.io.idleTimer(True)
        self._pumpVisitor()

    def _backendFailed(self, what: str, retry: bool = True) -> None:
        if self.client is not None:
            self.client = None
            self.io.abortBackend()
        responded = self.server.our_state is not h11.SEND_RESPONSE
        if retry and self._reused and not (self._answered or self._bodySent or responded) and (
            self._method in RETRYABLE
        ):
            self._reused = False
            self._connect(fresh=True)
            return
        self.io.problem(what)
        if responded:
            self._abort()
        else:
            self._respondError(HTTPStatus.BAD_GATEWAY)

    # Ending.

    def _observe(self, event: h11.Event) -> None:
        """
        Tell the capture, if any, of an event that goes to the visitor.
        """
        capture = self._capture
        if capture is None:
            return
        if isinstance(event, h11.Response):
            capture.response(event.status_code, list(event.headers))
        elif isinstance(event, h11.InformationalResponse) and (
            event.status_code == HTTPStatus.SWITCHING_PROTOCOLS
        ):
            capture.response(event.status_code, list(event.headers))
            self._capture = None
            self.switchedCapture = capture
            capture.ended(SWITCHED)
        elif isinstance(event, h11.Data):
            capture.responseBody(event.data)
        elif isinstance(event, h11.EndOfMessage):
            self._capture = None
            capture.ended(COMPLETE)

    def _send(self, event: h11.Event) -> bool:
        self._observe(event)
        try:
            data = self.server.send(event)
        except h11.LocalProtocolError:
            self.io.problem("response not fit to forward")
            self._abort()
            return False
        if data:
            self.io.writeVisitor(data)
        return True

    def _respondError(
        self, status: HTTPStatus | int, headers: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        server = self.server
        events = errorResponse(status, self._method == b"HEAD", headers)
        for event in events:
            self._observe(event)
        try:
            data = b"".join(server.send(event) for event in events)
        except h11.LocalProtocolError:
            self._abort()
            return
        self.io.writeVisitor(data)
        self._close()

    def _close(self) -> None:
        self.phase = Phase.CLOSING
        self.io.idleTimer(False)
        self.io.closeVisitor()

    def _abort(self) -> None:
        capture, self._capture = self._capture, None
        if capture is not None:
            capture.ended(ABORTED)
        self.phase = Phase.CLOSED
        self.io.idleTimer(False)
        if self.client is not None:
            self.client = None
            self.io.abortBackend()
        self.io.abortVisitor()
