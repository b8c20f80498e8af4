# -*- test-case-name: tests.http.test_h2c -*-
"""
HTTP/2 to a visitor, h2c to the service (C{--service-protocol h2c}), sans
I/O: L{H2CExchange} is L{nfltr.http._h2.H2Exchange} (the same checks,
limits and rewriting of each request) with each visitor stream sent as one
stream on an h2c connection to the service (L{nfltr.http._h2service}),
instead of as an HTTP/1.1 request.  What gRPC needs passes both ways:
trailers (C{grpc-status}), C{te: trailers}, bodies as they come, and
resets (a visitor's C{RST_STREAM} cancels the service's stream; the
service's reaches the visitor with its code, or as C{502} before a
response began).  1xx heads (C{100 Continue}, C{103 Early Hints}) go to
the visitor as informational HEADERS.

Flow control is per stream both ways: request bytes open the visitor's
window only once the service's window took them; response bytes open the
service's window only once the visitor's took them.  A slow visitor stream
holds its own service stream, nothing else.  Each service stream starts
with L{H2Limits.max_stream_buffer} and is widened to
L{H2Limits.initial_window} (so a response moves more than that per round
trip to the service) as the visitor connection's
L{H2Limits.connection_window} allows: what its streams widened together
stays within it, and is given back as they end; a stream that found none
left is widened by its next response bytes, once others gave some back.
So a visitor that reads nothing makes the share hold at most its
C{connection_window} and C{max_stream_buffer} per stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any

from h2.errors import ErrorCodes
from h2.exceptions import H2Error

from ._h2 import H2Exchange, _Stream
from ._h2io import H2IO
from ._h2response import CONNECTION_SPECIFIC, forVisitor
from ._h2service import ServiceH2, streamWindow
from ._heads import RequestHead
from ._tap import ABORTED, COMPLETE, ICapture

Headers = Sequence[tuple[bytes, bytes]]

#: The least a service stream is widened by at once (a frame's worth), unless
#: that is all it lacks: no WINDOW_UPDATE for a few bytes of room.
_LEAST_WIDENING = 16 * 1024


class _Up:
    """
    The L{nfltr.http._h2service.ServiceStream} of one visitor stream.
    """

    def __init__(self, exchange: H2CExchange, sid: int) -> None:
        self.exchange, self.sid = exchange, sid

    def head(self, headers: Headers, informational: bool, ended: bool) -> None:
        """
        To the visitor.
        """
        self.exchange.upHead(self.sid, headers, informational, ended)

    def body(self, data: bytes, counted: int) -> None:
        """
        To the visitor, as its window allows.
        """
        self.exchange.upBody(self.sid, data, counted)

    def trailers(self, headers: Headers) -> None:
        """
        Sent after the body.
        """
        self.exchange.upTrailers(self.sid, headers)

    def ended(self) -> None:
        """
        The response ends once its body is out.
        """
        self.exchange.upEnded(self.sid)

    def reset(self, code: int) -> None:
        """
        The service's stream is over.
        """
        self.exchange.upReset(self.sid, code)

    def sent(self, counted: int) -> None:
        """
        Request bytes went on: open the visitor's window.
        """
        self.exchange.upSent(self.sid, counted)


class H2CExchange(H2Exchange):
    """
    One HTTP/2 visitor connection whose streams go to h2c service
    connections; see the module.  Its I/O answers C{openService} with
    L{serviceAttached} (or C{serviceFailed}), and C{pauseService} means
    nothing to it (the service's windows hold what it may send).

    @ivar held: the visitor's transport is full: no response byte moves
        (nor opens the service's window) until it drains.
    """

    held = False

    def __init__(self, io: H2IO, now: Callable[[], float], **settings: Any) -> None:
        """
        @param settings: those of L{H2Exchange}.
        """
        super().__init__(io, now, **settings)
        #: Each attached stream's service connection and stream id there.
        self.up: dict[int, tuple[ServiceH2, int]] = {}
        #: Each stream's request head for the service (until attached).
        self._heads: dict[int, list[tuple[bytes, bytes]]] = {}
        #: How much each attached stream's service window was widened, and
        #: all of them together (within C{connection_window}).
        self._widened: dict[int, int] = {}
        self._lent = 0

    # The visitor's side.

    def _forward(self, sid: int, head: RequestHead, trailers: bool, ended: bool,
                 capture: ICapture | None) -> None:
        out, target = self._rules.headersFor(head)
        authority = next((v for n, v in out if n.lower() == b"host"), b"")
        headers = [(b":method", head.method), (b":scheme", b"http"),
                   (b":authority", authority), (b":path", target)]
        headers += [(n.lower(), v) for n, v in out
                    if n.lower() != b"host" and n.lower() not in CONNECTION_SPECIFIC]
        if trailers:
            headers.append((b"te", b"trailers"))
        self.streams[sid] = _Stream(sid, None, False, capture=capture)
        self._heads[sid] = headers
        self.io.openService(sid)
        if ended:
            self._requestEnd(sid)

    def _data(self, sid: int, data: bytes, counted: int) -> None:
        stream = self.streams.get(sid)
        if stream is None:
            self._ack(sid, counted)
            return
        if stream.capture is not None and data:
            stream.capture.requestBody(data)
        self._ack(sid, counted - len(data))  # padding: nothing to wait for
        stream.unacked += len(data)  # until the service's window took it
        up = self.up.get(sid)
        if up is None:
            stream.queued.append(data)
        elif data:
            up[0].send(up[1], data)

    def _requestEnd(self, sid: int) -> None:
        stream = self.streams.get(sid)
        if stream is None or stream.requestEnded:
            return
        stream.requestEnded = True
        up = self.up.get(sid)
        if up is not None:
            up[0].finish(up[1], stream.trailers)
        self._maybeDone(stream)

    def _maybeDone(self, stream: _Stream) -> None:
        if stream.outEnded and not stream.out:
            if stream.requestEnded:
                del self.streams[stream.id]
                self._unattach(stream.id)
                self.io.releaseService(stream.id, True)
            else:
                self._drop(stream.id)

    def _drop(self, sid: int) -> None:
        self._heads.pop(sid, None)
        up = self._unattach(sid)
        stream = self.streams.get(sid)
        if stream is not None:
            self._giveBack(stream, up)
        if up is not None:
            up[0].reset(up[1])
        super()._drop(sid)

    def _giveBack(self, stream: _Stream, up: tuple[ServiceH2, int] | None) -> None:
        """
        A stream ends before its bytes went on: the connections' windows
        (the visitor's, the service's) get back what it held, or each
        stream cut short would shrink them for good.
        """
        self._giveBackUnacked(stream)
        if up is not None and stream.out:
            up[0].consumed(up[1], len(stream.out))
        stream.out.clear()

    def visitorFull(self, full: bool) -> None:
        """
        The visitor's transport is full (or drained): hold (or move)
        response bytes.
        """
        self.held = full
        if not full:
            with self._guard:
                for sid in list(self.streams):
                    self._send(sid)
                self._flush()

    def serviceFailed(self, sid: int) -> None:
        """
        No service connection for C{sid}: 502.
        """
        self._heads.pop(sid, None)
        super().serviceFailed(sid)

    def _send(self, sid: int) -> None:
        stream = self.streams.get(sid)
        if stream is None or self.held:
            return
        before = len(stream.out)
        up = self.up.get(sid)
        super()._send(sid)
        if up is not None and before > len(stream.out):
            up[0].consumed(up[1], before - len(stream.out))

    # The service's side.

    def serviceAttached(self, sid: int, service: ServiceH2) -> None:
        """
        Stream C{sid} goes on C{service} (a connection with room): open its
        stream there and send what the visitor sent so far.
        """
        with self._guard:
            stream, headers = self.streams.get(sid), self._heads.pop(sid, None)
            if stream is None or headers is None or self.closed:
                return
            queued, stream.queued = stream.queued, []
            alone = stream.requestEnded and not any(queued) and not stream.trailers
            wider = self._room(sid)
            try:
                usid = service.open(headers, alone, _Up(self, sid), wider)
            except H2Error:  # the service takes no more streams there
                self.streams.pop(sid)
                self.io.releaseService(sid, False)
                self._reset(sid, ErrorCodes.REFUSED_STREAM)
                self._flush()
                return
            self.up[sid] = (service, usid)
            stream.attached = True
            self._lend(sid, wider)
            for data in queued:
                if data:
                    service.send(usid, data)
            if stream.requestEnded and not alone:
                service.finish(usid, stream.trailers)
            self._flush()

    def upSent(self, sid: int, counted: int) -> None:
        """
        C{counted} request bytes of C{sid} went to the service.
        """
        with self._guard:
            stream = self.streams.get(sid)
            if stream is not None:
                stream.unacked -= counted
            self._ack(sid, counted)
            self._flush()

    def upHead(self, sid: int, headers: Headers, informational: bool, ended: bool) -> None:
        """
        The service's response head (or a 1xx one) for C{sid}; C{ended}:
        the whole response (one HEADERS frame that ends the stream, as
        gRPC's Trailers-Only must stay).
        """
        with self._guard:
            stream = self.streams.get(sid)
            if stream is None or self.closed:
                return
            status = next((v for n, v in headers if n == b":status"), b"")
            rest = forVisitor([(n, v) for n, v in headers if not n.startswith(b":")])
            if status == b"%d" % HTTPStatus.SWITCHING_PROTOCOLS or not status.isdigit():
                self._failed(stream, "a response head HTTP/2 cannot carry")
            else:
                if not informational:
                    stream.responded = True
                    if stream.capture is not None:
                        stream.capture.response(int(status), rest)
                self.conn.send_headers(sid, [(b":status", status), *rest],
                                       end_stream=ended and not informational)
                if ended and not informational:
                    self._endedWithHead(stream)
            self._flush()

    def _endedWithHead(self, stream: _Stream) -> None:
        stream.outEnded = True
        if stream.capture is not None:
            stream.capture.ended(COMPLETE)
            stream.capture = None
        if not stream.requestEnded:
            self._reset(stream.id, ErrorCodes.NO_ERROR)
        self._maybeDone(stream)

    def upBody(self, sid: int, data: bytes, counted: int) -> None:
        """
        Response bytes of C{sid}: to the visitor as its window allows.
        """
        with self._guard:
            stream, up = self.streams.get(sid), self.up.get(sid)
            if up is not None:
                up[0].consumed(up[1], counted - len(data))
            if stream is None or up is None:
                return
            if stream.capture is not None and data:
                stream.capture.responseBody(data)
            stream.out += data
            self._send(sid)
            more = self._room(sid)
            if more and sid in self.up:  # widened at its attach by less than it wants
                self._lend(sid, more)
                service, usid = self.up[sid]
                service.widen(usid, more)
            self._flush()

    def _room(self, sid: int) -> int:
        """
        What C{sid}'s service window may be widened by now: towards
        L{streamWindow}, within what the visitor connection's
        C{connection_window} has left (nothing below a frame's worth, unless
        that is all it lacks).
        """
        limits = self._h2limits
        want = streamWindow(limits) - limits.max_stream_buffer - self._widened.get(sid, 0)
        more = min(want, limits.connection_window - self._lent)
        return 0 if more <= 0 or more < min(want, _LEAST_WIDENING) else more

    def _lend(self, sid: int, more: int) -> None:
        """
        C{sid}'s service window was widened by C{more}.
        """
        if more:
            self._widened[sid] = self._widened.get(sid, 0) + more
            self._lent += more

    def _unattach(self, sid: int) -> tuple[ServiceH2, int] | None:
        """
        C{sid} is done with its service stream: what widened it is given
        back to the visitor connection.
        """
        self._lent -= self._widened.pop(sid, 0)
        return self.up.pop(sid, None)

    def upTrailers(self, sid: int, headers: Headers) -> None:
        """
        The response's trailers of C{sid} (C{grpc-status}, say).
        """
        stream = self.streams.get(sid)
        if stream is not None:
            stream.outTrailers = forVisitor([(n, v) for n, v in headers
                                              if not n.startswith(b":")])

    def upEnded(self, sid: int) -> None:
        """
        C{sid}'s response is complete.
        """
        with self._guard:
            stream = self.streams.get(sid)
            if stream is None:
                return
            stream.outEnded = True
            if stream.capture is not None:
                stream.capture.ended(COMPLETE)
                stream.capture = None
            self._send(sid)
            self._flush()

    def upReset(self, sid: int, code: int) -> None:
        """
        The service's stream for C{sid} is over before its end: the
        visitor's is reset with the same code (C{502} before a response).
        """
        with self._guard:
            up = self._unattach(sid)
            stream = self.streams.pop(sid, None)
            if stream is None or self.closed:
                return
            self._giveBack(stream, up)
            if stream.capture is not None:
                stream.capture.ended(ABORTED)
            self.io.releaseService(sid, False)
            if stream.responded or code == ErrorCodes.REFUSED_STREAM:
                self._reset(sid, _errorCode(code))
            else:
                self._answer(sid, HTTPStatus.BAD_GATEWAY, (), stream.requestEnded)
            self._flush()


def _errorCode(code: int) -> ErrorCodes:
    """
    C{code} as h2 sends it (an unknown one: C{INTERNAL_ERROR}).
    """
    try:
        return ErrorCodes(code)
    except ValueError:
        return ErrorCodes.INTERNAL_ERROR
