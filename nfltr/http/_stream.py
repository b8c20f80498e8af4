# -*- test-case-name: tests.http.test_stream -*-
"""
The stream path's logic for one visitor connection, sans I/O (the whole
behaviour, for operators: docs/shares.md).  Request heads are read strictly
(L{nfltr.http._heads}) and checked and rewritten (L{nfltr.http._rules}) on
every request; every other byte is copied as it came, request bodies to
the service (chunked ones framed by L{nfltr.http._chunked}) and responses
back, their framing followed so the path knows where each ends: to answer
a refused request in its turn, switch to copying after a C{101}, and give a
service connection back to its pool at a boundary.  One service connection
serves the visitor connection while both keep it; one that closes between
responses is replaced at the next request (a safe bodiless request it took
unanswered is sent once more).  Response heads go as they came unless they
would mislead the visitor about its connection (L{forwardedHead}).

Errors: a refused request is answered (400, 405, 421, 431, the gate's)
after the responses before it, nothing of it forwarded, and the visitor's
connection closed; a body malformed or cut midway aborts both connections;
a service unreachable, closing early or unreadable gets the visitor a 502,
or an abort once some of the response went out.  At most
L{HTTPLimits.max_pipelined} requests wait for their responses (none after
a C{HEAD} or an upgrade until it is answered); beyond that, or with more
than a head's worth of bytes waiting, the visitor is not read.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from http import HTTPStatus

from ._chunked import ChunkedBody, ChunkError
from ._exchange import RETRYABLE, Gate
from ._headers import isUpgrade
from ._heads import (
    CHUNKED,
    HEAD_END,
    NONE,
    UNTIL_CLOSE,
    HeadError,
    ResponseHead,
    forwardedHead,
    parseRequestHead,
    parseResponseHead,
    responseFraming,
)
from ._io import errorBytes, errorParts
from ._limits import DEFAULT_LIMITS, HTTPLimits
from ._rules import RequestRules
from ._streamio import SentRequest, StreamIO
from ._streamtap import NoTap, StreamTap
from ._tap import COMPLETE, SWITCHED, IExchangeTap

_RESPONSE_END = re.compile(rb"\r?\n\r?\n")
#: The first status of a final response.
FINAL = 200

# Where the service connection is.
FINDING, ATTACHED = "finding", "attached"
# The request side's states.
HEAD, BODY, WAIT, AFTER_LAST, REFUSED, RAW, GONE = (
    "head", "body", "wait", "after last", "refused", "raw", "gone")


class StreamExchange:
    """
    One visitor connection on the stream path; see the module.

    @ivar state: the request side's state.
    @ivar pending: requests sent whose responses are not all out.
    """

    def __init__(  # noqa: PLR0913 -- settings, keyword-only, each with a default
        self,
        io: StreamIO,
        *,
        visitor: str | None = None,
        host: bytes | None = None,
        forwarded: bool = True,
        scheme: bytes = b"https",
        limits: HTTPLimits = DEFAULT_LIMITS,
        gate: Gate | None = None,
        hosts: Sequence[str] | None = None,
        tap: IExchangeTap | None = None,
    ) -> None:
        self.io = io
        self.state = HEAD
        self.pending: deque[SentRequest] = deque()
        self._tap = NoTap() if tap is None else StreamTap(tap)
        self._visitor = visitor
        self._rules = RequestRules(visitor=visitor, host=host, forwarded=forwarded,
                                   scheme=scheme, gate=gate, hosts=hosts)
        self._limits = limits
        self._in = b""
        self._left = 0
        self._chunks: ChunkedBody | None = None
        self._refusal: bytes | None = None
        # The service connection: none, being found, or attached.
        self._service: str | None = None
        self._queued: list[bytes] = []
        # What went to a reused service connection before any answer, while
        # all of it may be sent again (safe requests without a body).
        self._unanswered: list[bytes] | None = None
        # The response side.
        self._out = b""
        self._held = b""
        self._response: ResponseHead | None = None
        self._responseLeft = 0
        self._responseChunks: ChunkedBody | None = None
        self._started = False
        self._reading = True
        self._visitorEnded = False
        self._visitorCloses = False
        self._busy = False
        self._draining = False

    @property
    def idle(self) -> bool:
        """
        Waiting for a request head (some of it may be in), no response
        awaited: the service connection is at a boundary.
        """
        return self.state == HEAD and not self.pending

    @property
    def raw(self) -> bool:
        """Switched: bytes are copied both ways."""
        return self.state == RAW

    def visitorLost(self) -> None:
        """
        The visitor connection is gone: nothing more happens here (the
        I/O gives back or drops the service connection).
        """
        self._tap.abortAll()
        self.state = GONE
        self._service = None

    def timedOut(self) -> None:
        """
        No byte moved for the timeout of the state: close a connection
        between requests, answer C{504} to one waiting for its response, or
        cut one whose response began.
        """
        if self.state == GONE:
            return
        if self.idle and self._in.strip(b"\r\n"):
            self.io.toVisitor(errorBytes(HTTPStatus.REQUEST_TIMEOUT))
            self._finish()
        elif self.idle or not self.pending:
            self._finish()
        elif self._started:
            self._fail()
        else:
            self._answerError(HTTPStatus.GATEWAY_TIMEOUT)
            self._finish(reusable=False)

    def drain(self) -> None:
        """
        Close at the next response boundary: the next response head to go
        out says C{Connection: close} (an idle connection waits for its next
        request: closing it would race one the visitor may be sending).
        """
        self._draining = True

    # The visitor's side.

    def visitorData(self, data: bytes) -> None:
        """Bytes from the visitor."""
        if self.state == RAW:
            self._tap.switchedData(True, data)
            self._send(data)
        elif self.state in (HEAD, BODY, WAIT):
            self._in += data
            self._readRequests()
        # After the last request, a refusal, or gone: dropped.
        self._flow()

    def visitorEOF(self) -> None:
        """The visitor's end of input."""
        self._visitorEnded = True
        if self.state == RAW:
            self.io.halfCloseService()
        elif self.state == BODY or (self.state == WAIT and self._in):
            self._fail()
        elif self.state in (GONE, REFUSED, WAIT):
            pass  # a refusal waits for the responses before it; WAIT for its answer
        elif self.pending:
            self.state = AFTER_LAST
        else:
            self._finish()
        self._flow()

    def _readRequests(self) -> None:
        if self._busy:
            return  # called back from within (a service connection found at once)
        self._busy = True
        try:
            while self._in and self.state in (HEAD, BODY):
                if self.state == HEAD:
                    if len(self.pending) >= self._limits.max_pipelined or self._service == FINDING:
                        return
                    if self._draining and self.pending:
                        return  # the response awaited closes the connection
                    if not self._readHead():
                        return
                elif not self._readBody():
                    return
        finally:
            self._busy = False

    def _readHead(self) -> bool:
        """Read the next request head, if it is all there: whether one was."""
        data = self._in
        if data.startswith(b"\r\n"):
            self._in = data = data.lstrip(b"\r\n")
        end = data.find(HEAD_END)
        size = self._limits.requestHeadSize
        if end < 0:
            if len(data) > size:
                self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
            elif b"\n" in data.replace(b"\r\n", b""):
                self._refuse(HTTPStatus.BAD_REQUEST)
            return False
        if end + 4 > size:
            self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
            return False
        try:
            head = parseRequestHead(data[:end + 4])
        except HeadError as e:
            self._refuse(e.status)
            return False
        self._tap.opened(head, self._visitor)
        refusal = self._rules.refusal(head)
        if refusal is not None:
            self._tap.refused(refusal[0], errorParts(*refusal)[1])
            self._refuse(*refusal)
            return False
        self._in = data[end + 4:]
        if head.method not in RETRYABLE or head.length != 0:
            self._unanswered = None
        self.pending.append(SentRequest(
            head.method, isUpgrade(head.headers), not head.keepAlive or self._draining,
            head.version))
        self._left = head.length if head.length != CHUNKED else 0
        self._chunks = ChunkedBody() if head.length == CHUNKED else None
        self.state = BODY
        self._send(self._rules.forwarded(head))
        if not self._left and self._chunks is None and self.state == BODY:
            self._requestEnded()
        return True

    def _readBody(self) -> bool:
        """
        Send on what of the body is there: whether it all went (else the
        start of a chunk line waits for the rest).
        """
        data = self._in
        if self._chunks is not None:
            try:
                end = self._chunks.feed(data)
            except ChunkError:
                self._fail()
                return False
            done = self._chunks.done
        else:
            end = min(self._left, len(data))
            self._left -= end
            done = not self._left
        if end:
            piece = data[:end] if end < len(data) else data
            self._tap.requestBody(piece)
            self._send(piece)
        self._in = data[end:]
        if done:
            self._requestEnded()
        return done or not self._in

    def _requestEnded(self) -> None:
        request = self.pending[-1]
        self._chunks = None
        if request.waits:
            self.state = WAIT
        elif request.last:
            self.state, self._in = AFTER_LAST, b""
        else:
            self.state = HEAD

    def _refuse(self, status: int, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        self.state = REFUSED
        self._in = b""
        self._refusal = errorBytes(status, headers)
        if not self.pending:
            self._answerRefusal()

    def _answerRefusal(self) -> None:
        if self._refusal is not None:
            self.io.toVisitor(self._refusal)
            self._refusal = None
        self._finish()

    # The service connection.

    def _send(self, data: bytes) -> None:
        if self._unanswered is not None:
            self._unanswered.append(data)
        if self._service == ATTACHED:
            self.io.toService(data)
            return
        self._queued.append(data)
        if self._service is None:
            self._service = FINDING
            self._unanswered = []
            self.io.needService(fresh=False)

    def serviceReady(self, reused: bool = False) -> None:
        """
        The service connection asked for is there; C{reused}: it served
        before (it may have been closed by the service meanwhile).
        """
        self._service = ATTACHED
        queued, self._queued = b"".join(self._queued), []
        if not reused:
            self._unanswered = None
        self.io.toService(queued)
        if self.state == GONE:
            return
        if self._visitorEnded and self.state == RAW:
            self.io.halfCloseService()
        self._readRequests()
        self._flow()

    def serviceFailed(self) -> None:
        """No service connection could be had."""
        self._service = None
        self._queued = []
        self._badGateway()

    def serviceData(self, data: bytes) -> None:
        """Bytes from the service."""
        if self.state == RAW:
            self._tap.switchedData(False, data)
            self.io.toVisitor(data)
            return
        self._unanswered = None
        if self._held:
            data, self._held = self._held + data, b""
        while data and self.state != GONE:
            if not self.pending:
                # Nothing was asked: a service that talks out of turn.
                self._service = None
                self.io.abortService()
                return
            if self._response is None:
                data = self._readResponseHead(data)
            else:
                data = self._readResponseBody(data)
        self._flow()

    def serviceEOF(self) -> None:
        """
        The service connection ended (its end of input, or lost): it is
        not used again.
        """
        if self.state == RAW:
            self.io.halfCloseVisitor()
            return
        self._service = None
        if self.state == GONE:
            return
        if self._unanswered is not None and self.pending and not self._out:
            # A pooled connection the service had closed: once more, on a new one.
            self._queued, self._unanswered = self._unanswered, None
            self._service = FINDING
            self.io.needService(fresh=True)
        elif self._response is not None and self._response.length == UNTIL_CLOSE:
            self._response = None
            self._tap.ended(COMPLETE)
            self.pending.clear()
            self._finish()
        elif self.pending or self._out:
            self._badGateway()
        self._flow()

    def _readResponseHead(self, data: bytes) -> bytes:
        """
        Read a response head (from C{data} and what came before it); what
        follows it.
        """
        self._out += data
        match = _RESPONSE_END.search(self._out)
        if match is None or match.end() > self._limits.responseHeadSize:
            if match is not None or len(self._out) > self._limits.responseHeadSize:
                self._badGateway()
            return b""
        raw, rest = self._out[:match.end()], self._out[match.end():]
        self._out = b""
        request = self.pending[0]
        try:
            response = parseResponseHead(raw)
            responseFraming(response, request.method)
        except HeadError:
            self._badGateway()
            return b""
        if response.status < FINAL:
            return self._interim(request, response, raw, rest)
        self._started = True
        if self.state == BODY and len(self.pending) == 1:
            # An answer before the request's body was all sent: the service
            # connection cannot be told where that body ends.
            response.reusable = False
        self._visitorCloses = (
            request.last or self._draining or response.length == UNTIL_CLOSE
            or (not response.reusable and (len(self.pending) > 1 or self.state == BODY))
        )
        self.io.toVisitor(sent := forwardedHead(response, raw, self._visitorCloses))
        self._tap.responseHead(response.status, sent)
        self._response = response
        if response.length == CHUNKED:
            self._responseChunks = ChunkedBody()
        elif response.length in (NONE, 0):
            self._responseEnded()
        else:
            self._responseLeft = response.length
        return rest

    def _interim(
        self, request: SentRequest, response: ResponseHead, raw: bytes, rest: bytes,
    ) -> bytes:
        """
        An informational response: a C{101} to an upgrade switches to
        copying (any other is a service error), others go to an HTTP/1.1
        visitor (an HTTP/1.0 one knows none).
        """
        head = raw if response.clean else response.serialize()
        if response.status == HTTPStatus.SWITCHING_PROTOCOLS:
            if not request.upgrade:
                self._badGateway()
                return b""
            self._started = True
            self.io.toVisitor(head)
            self._tap.responseHead(response.status, head)
            self._tap.ended(SWITCHED)
            self._switch(rest)
            return b""
        if request.version == b"1.1":
            self.io.toVisitor(head)
        return rest

    def _readResponseBody(self, data: bytes) -> bytes:
        response = self._response
        assert response is not None
        if response.length == UNTIL_CLOSE:
            self._tap.responseBody(data)
            self.io.toVisitor(data)
            return b""
        if self._responseChunks is not None:
            try:
                end = self._responseChunks.feed(data)
            except ChunkError:
                self._fail()
                return b""
            done = self._responseChunks.done
            if not done and end < len(data):
                self._held = data[end:]  # a chunk line not yet whole
                data = data[:end]
        else:
            end = min(self._responseLeft, len(data))
            self._responseLeft -= end
            done = not self._responseLeft
        if end:
            piece = data[:end] if end < len(data) else data
            self._tap.responseBody(piece)
            self.io.toVisitor(piece)
        if done:
            self._responseEnded()
        return data[end:]

    def _responseEnded(self) -> None:
        response = self._response
        assert response is not None
        self.pending.popleft()
        self._tap.ended(COMPLETE)
        self._response, self._responseChunks, self._started = None, None, False
        if self._visitorCloses:
            self.pending.clear()
            self._finish(reusable=response.reusable)
            return
        if not response.reusable:
            self._dropService()
        if not self.pending:
            if self.state == WAIT:
                self.state = HEAD  # the request waited for was answered
            # The connection served: what goes on it next may meet its close.
            self._unanswered = []
            if self.state == REFUSED:
                self._answerRefusal()
                return
            if self.state == AFTER_LAST or (self._visitorEnded and self.state == HEAD):
                self._finish()
                return
        self._readRequests()

    def _switch(self, rest: bytes) -> None:
        self.state = RAW
        self.pending.clear()
        held, self._in = self._in, b""
        self._tap.switchedData(False, rest)
        self._tap.switchedData(True, held)
        if rest:
            self.io.toVisitor(rest)
        if held:
            self._send(held)
        if self._visitorEnded:
            self.io.halfCloseService()

    def _dropService(self) -> None:
        """
        Close the service connection (its framing is in doubt); the next
        request gets another.
        """
        if self._service == ATTACHED:
            self._service = None
            self.io.releaseService(False)

    # Endings.

    def _badGateway(self) -> None:
        """
        The service failed a request: 502, unless some of its response went
        out (then abort).
        """
        if self._started:
            self._fail()
            return
        self._answerError(HTTPStatus.BAD_GATEWAY)
        self._finish(reusable=False)

    def _answerError(self, status: HTTPStatus) -> None:
        """
        Answer the oldest request in flight C{status} ourselves; the others
        are lost.
        """
        self._tap.response(status, errorParts(status)[1])
        self._tap.ended(COMPLETE)
        self.io.toVisitor(errorBytes(status))
        self.pending.clear()

    def _fail(self) -> None:
        """Abort both connections: something was cut or malformed midway."""
        self._tap.abortAll()
        self.state = GONE
        if self._service == ATTACHED:
            self.io.abortService()
        self._service = None
        self.io.closeVisitor(abort=True)

    def _finish(self, reusable: bool = True) -> None:
        """
        Close the visitor connection after what was written; the service
        connection goes back to its pool if it is at a boundary.
        """
        atBoundary = (not self.pending and self._response is None
                      and not self._out and not self._held)
        self._tap.abortAll()
        self.state = GONE
        if self._service == ATTACHED:
            self.io.releaseService(reusable and atBoundary)
        elif self._service == FINDING:
            self.io.abortService()
        self._service = None
        self.io.closeVisitor(abort=False)

    # Reading the visitor.

    def _flow(self) -> None:
        """
        Read the visitor or not, as the state wants: not beyond the
        pipelining limit, nor with more than a head's worth of bytes waiting
        (for a service connection, for the answer to a request that waits);
        not after a refusal.
        """
        state = self.state
        if state in (GONE, REFUSED):
            reading = False
        elif self._service == FINDING:
            # Read on (so a visitor that goes away is noticed) while little waits.
            waiting = len(self._in) + sum(len(data) for data in self._queued)
            reading = waiting <= self._limits.requestHeadSize
        elif state in (HEAD, WAIT):
            reading = (len(self.pending) < self._limits.max_pipelined
                       and len(self._in) <= self._limits.requestHeadSize)
        else:
            reading = True
        if reading != self._reading:
            self._reading = reading
            self.io.readVisitor(reading)
