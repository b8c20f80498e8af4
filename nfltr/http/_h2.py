# -*- test-case-name: tests.http.test_h2,tests.http.test_h2limits -*-
"""
HTTP/2 to a visitor, HTTP/1.1 to the service, sans I/O (for operators:
docs/shares.md).  L{H2Exchange} runs one visitor connection's
C{H2Connection} (the C{h2} library): each stream is one request, sent to
the service on a service connection of its own (L{H2IO.openService}), its
head checked and rewritten by the same rules as HTTP/1.1's
(L{nfltr.http._rules}: target, host, the share's gate), its body copied
(chunked when the visitor gave no length, its trailers and C{te: trailers}
passed on, as gRPC needs), the response read by L{ResponseReader} (the
stream path's head reader; h11 only for a chunked body) and sent back as
HEADERS, DATA and trailers.

Flow control: each stream's window for request bytes is
L{H2Limits.initial_window}, the connection's L{H2Limits.connection_window}
(so one stream or many move more than HTTP/2's 65,535 bytes per round
trip); request bytes are acknowledged to h2 (opening the visitor's windows
again) only once written to a service connection that is not full, so the
connection's window bounds what services that do not read make us hold;
response bytes wait for the stream's window, and past
L{H2Limits.max_stream_buffer} of them the stream's service connection is
paused (L{H2IO.pauseService}).  Attacks: L{nfltr.http._h2frames} watches
the frames before h2 reads them; a broken limit, or a protocol error h2
finds, ends the connection with C{GOAWAY}.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    RemoteSettingsChanged,
    RequestReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from h2.exceptions import H2Error, ProtocolError, StreamClosedError
from h2.settings import SettingCodes
from hyperframe.frame import GoAwayFrame

from ._exchange import Gate
from ._h2frames import FrameWatch, Rate
from ._h2io import H2IO
from ._h2request import streamRequest
from ._h2response import DATA, END, HEAD, ResponseError, ResponseReader, forVisitor
from ._h2response import Event as ResponseEvent
from ._heads import CHUNKED, RequestHead
from ._io import errorParts
from ._limits import DEFAULT_H2_LIMITS, DEFAULT_LIMITS, H2Limits, HTTPLimits
from ._rules import RequestRules
from ._tap import ABORTED, COMPLETE, ICapture, IExchangeTap


class _Guard:
    """
    C{with exchange._guard:} an h2 error where none was expected ends the
    exchange's connection alone (L{H2Exchange.unexpected}).  A class, not
    a C{contextlib} generator: it is entered several times per request,
    and this costs two calls where that costs seven.
    """

    def __init__(self, exchange: H2Exchange) -> None:
        self.exchange = exchange

    def __enter__(self) -> None:
        """
        Nothing.
        """

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> bool:
        """
        Take an h2 error; let others pass.
        """
        if isinstance(error, H2Error):
            self.exchange.unexpected(error)
            return True
        return False


@dataclass
class _Stream:
    """
    One stream's request and response.
    """

    id: int
    #: Reads the response (L{None}: the service speaks HTTP/2, L{nfltr.http._h2c}).
    reader: ResponseReader | None
    chunked: bool
    queued: list[bytes] = field(default_factory=list)
    attached: bool = False
    full: bool = False
    unacked: int = 0
    trailers: list[tuple[bytes, bytes]] = field(default_factory=list)
    requestEnded: bool = False
    responded: bool = False
    out: bytearray = field(default_factory=bytearray)
    outEnded: bool = False
    outTrailers: list[tuple[bytes, bytes]] = field(default_factory=list)
    paused: bool = False
    capture: ICapture | None = None


class H2Exchange:
    """
    One HTTP/2 visitor connection; see the module.

    @ivar streams: the streams whose request goes to the service.
    @ivar closed: the connection is over (C{GOAWAY} sent or received).
    """

    def __init__(  # noqa: PLR0913 -- settings, keyword-only, each with a default
        self,
        io: H2IO,
        now: Callable[[], float],
        *,
        visitor: str | None = None,
        host: bytes | None = None,
        forwarded: bool = True,
        scheme: bytes = b"https",
        limits: HTTPLimits = DEFAULT_LIMITS,
        h2limits: H2Limits = DEFAULT_H2_LIMITS,
        gate: Gate | None = None,
        hosts: Sequence[str] | None = None,
        tap: IExchangeTap | None = None,
    ) -> None:
        self.io = io
        self._tap, self._visitor = tap, visitor
        self._limits, self._h2limits = limits, h2limits
        self._rules = RequestRules(visitor=visitor, host=host, forwarded=forwarded,
                                   scheme=scheme, gate=gate, hosts=hosts)
        # What we send is not checked again by h2 (a dozen generator steps per
        # header): every head we send is made HTTP/2's by forVisitor, names
        # lowercase, the values read by a parser that refuses controls (the
        # stream path's, h11's for trailers, or h2's from an h2c service).
        self.conn = H2Connection(H2Configuration(
            client_side=False, header_encoding=None,
            validate_outbound_headers=False, normalize_outbound_headers=False,
            # _request joins the cookie headers itself.
            normalize_inbound_headers=False))
        self.conn.decoder.max_header_list_size = h2limits.max_header_list_size
        self._watch = FrameWatch(h2limits, now)
        self._resets = Rate(h2limits.max_resets, h2limits.rate_window, now)
        self.streams: dict[int, _Stream] = {}
        self.closed = False
        self._guard = _Guard(self)
        # Once drained: the last stream taken (the GOAWAY's).
        self._lastStream: int | None = None

    @property
    def idle(self) -> bool:
        """
        No stream is open.
        """
        return not self.streams

    def start(self) -> None:
        """
        Send the server's preface: our settings (each stream's window
        L{H2Limits.initial_window}), and the connection's window raised to
        L{H2Limits.connection_window}.
        """
        self.conn.initiate_connection()
        limits = self._h2limits
        self.conn.update_settings({
            SettingCodes.MAX_CONCURRENT_STREAMS: limits.max_concurrent_streams,
            SettingCodes.MAX_HEADER_LIST_SIZE: limits.max_header_list_size,
            SettingCodes.INITIAL_WINDOW_SIZE: limits.initial_window,
            SettingCodes.ENABLE_PUSH: 0,
        })
        more = limits.connection_window - self.conn.inbound_flow_control_window
        if more > 0:
            self.conn.increment_flow_control_window(more)
        self._flush()

    # The visitor.

    def visitorData(self, data: bytes) -> None:
        """
        Bytes from the visitor.
        """
        if self.closed:
            return
        broken = self._watch.feed(data)
        if broken is not None:
            self.goAway(ErrorCodes.ENHANCE_YOUR_CALM, broken)
            return
        try:
            events = self.conn.receive_data(data)
        except ProtocolError as e:
            # h2 queued its GOAWAY.
            self._end(f"HTTP/2 protocol error: {e}")
            return
        with self._guard:
            for event in events:
                if self.closed:
                    return
                self._event(event)
            self._flush()

    def visitorLost(self) -> None:
        """
        The visitor connection is gone: drop every stream's service connection.
        """
        self.closed = True
        for stream in list(self.streams):
            self._drop(stream)

    def goAway(self, code: ErrorCodes, why: str) -> None:
        """
        End the connection with C{GOAWAY}, C{code}.
        """
        if self.closed:
            return
        self.conn.close_connection(error_code=code)
        self._end(why)

    def drain(self) -> None:
        """
        Send C{GOAWAY} (no error) naming the last stream taken, refuse any
        after it, and close once the open streams are done (an idle
        connection is the visitor's to close: it opens nothing more).  The
        frame is written here: h2's C{close_connection} would stop the open
        streams too.
        """
        if self.closed or self._lastStream is not None:
            return
        self._lastStream = self.conn.highest_inbound_stream_id
        self._flush()
        self.io.toVisitor(GoAwayFrame(0, last_stream_id=self._lastStream).serialize())

    def _closeIfDrained(self) -> None:
        if self._lastStream is not None and not self.streams and not self.closed:
            self._flush()
            self.closed = True
            self.io.closeVisitor()

    def unexpected(self, error: H2Error) -> None:
        """
        An h2 error where none was expected (L{_Guard}): this connection
        alone ends.
        """
        if not self.closed:
            with suppress(H2Error):
                self.conn.close_connection(error_code=ErrorCodes.INTERNAL_ERROR)
            self._end(f"HTTP/2 error: {error}")

    def _end(self, why: str) -> None:
        self.io.problem(why)
        self._flush()
        self.closed = True
        for stream in list(self.streams):
            self._drop(stream)
        self.io.closeVisitor()

    def _event(self, event: Event) -> None:
        if isinstance(event, RequestReceived):
            self._request(event.stream_id, event.headers or [], bool(event.stream_ended))
        elif isinstance(event, DataReceived):
            self._data(event.stream_id or 0, event.data or b"", event.flow_controlled_length or 0)
        elif isinstance(event, TrailersReceived):
            given = self.streams.get(event.stream_id or 0)
            if given is not None:
                given.trailers = list(event.headers or [])
        elif isinstance(event, StreamEnded):
            self._requestEnd(event.stream_id or 0)
        elif isinstance(event, StreamReset):
            # Rapid reset: requests cancelled while they are in flight.
            if (event.stream_id or 0) in self.streams and not self._resets.add():
                self.goAway(ErrorCodes.ENHANCE_YOUR_CALM, "too many streams reset")
                return
            self._drop(event.stream_id or 0)
        elif isinstance(event, WindowUpdated):
            ids = list(self.streams) if not event.stream_id else [event.stream_id]
            for sid in ids:
                self._send(sid)
        elif isinstance(event, RemoteSettingsChanged):
            for sid in list(self.streams):
                self._send(sid)
        elif isinstance(event, ConnectionTerminated):
            self._end("the visitor said GOAWAY")

    def _request(self, sid: int, given: Sequence[tuple[bytes, bytes]], ended: bool) -> None:
        if self._lastStream is not None and sid > self._lastStream:
            self._reset(sid, ErrorCodes.REFUSED_STREAM)  # after our GOAWAY: never processed
            return
        head, trailers = streamRequest(given, ended)
        if head is None:
            self._answer(sid, HTTPStatus.BAD_REQUEST, (), ended)
            return
        method, target, headers = head.method, head.target, head.headers
        if len(self.streams) >= self._h2limits.max_concurrent_streams:
            self._reset(sid, ErrorCodes.REFUSED_STREAM)
            return
        capture = None if self._tap is None else self._tap.opened(
            method, target, [(n.lower(), v) for n, v in headers], self._visitor)
        refusal = self._rules.refusal(head)
        if refusal is not None:
            self._answer(sid, refusal[0], refusal[1], ended)
            if capture is not None:
                capture.response(refusal[0], [(n.lower(), v) for n, v in refusal[1]])
                capture.ended(COMPLETE)
            return
        self._forward(sid, head, trailers, ended, capture)

    def _forward(self, sid: int, head: RequestHead, trailers: bool, ended: bool,
                 capture: ICapture | None) -> None:
        """
        Send stream C{sid}'s request C{head}, checked, on to the service
        (C{trailers}: the visitor takes trailers).
        """
        method, chunked = head.method, head.length == CHUNKED
        out, target = self._rules.headersFor(head)
        if trailers:
            out += [(b"TE", b"trailers"), (b"Connection", b"TE")]
        reader = ResponseReader(method, self._limits.responseHeadSize)
        stream = self.streams[sid] = _Stream(sid, reader, chunked, capture=capture)
        stream.queued.append(head.serialize(out, target))
        self.io.openService(sid)
        if ended:
            self._requestEnd(sid)

    def _answer(self, sid: int, status: int, extra: Sequence[tuple[bytes, bytes]],
                ended: bool) -> None:
        """
        Answer stream C{sid} ourselves (nothing of it went on).
        """
        code, headers, body = errorParts(status, extra)
        self.conn.send_headers(sid, [(b":status", b"%d" % code),
                                     *forVisitor([(n.lower(), v) for n, v in headers])])
        self.conn.send_data(sid, body, end_stream=True)
        if not ended:
            self._reset(sid, ErrorCodes.NO_ERROR)

    def _data(self, sid: int, data: bytes, counted: int) -> None:
        stream = self.streams.get(sid)
        if stream is None:
            self._ack(sid, counted)
            return
        if stream.capture is not None and data:
            stream.capture.requestBody(data)
        if stream.chunked and data:
            data = b"%x\r\n%s\r\n" % (len(data), data)
        self._toService(stream, data, counted)

    def _requestEnd(self, sid: int) -> None:
        stream = self.streams.get(sid)
        if stream is None or stream.requestEnded:
            return
        stream.requestEnded = True
        if stream.chunked:
            lines = b"".join(b"%s: %s\r\n" % pair for pair in stream.trailers)
            self._toService(stream, b"0\r\n" + lines + b"\r\n", 0)
        self._maybeDone(stream)

    def _toService(self, stream: _Stream, data: bytes, counted: int) -> None:
        if not stream.attached:
            stream.queued.append(data)
            stream.unacked += counted
            return
        if data:
            self.io.toService(stream.id, data)
        if stream.full:
            stream.unacked += counted
        else:
            self._ack(stream.id, counted)

    def _ack(self, sid: int, counted: int) -> None:
        if counted and not self.closed:
            self.conn.acknowledge_received_data(counted, sid)

    # The service.

    def serviceReady(self, sid: int) -> None:
        """
        Stream C{sid} has its service connection: send its request.
        """
        with self._guard:
            stream = self.streams.get(sid)
            if stream is None:
                self.io.releaseService(sid, True)
                return
            stream.attached = True
            queued, stream.queued = stream.queued, []
            for data in queued:
                self.io.toService(sid, data)
            self.serviceFull(sid, stream.full)

    def serviceFull(self, sid: int, full: bool) -> None:
        """
        C{sid}'s service connection takes no more for now (or again):
        acknowledge what went to it once it does.
        """
        with self._guard:
            stream = self.streams.get(sid)
            if stream is None:
                return
            stream.full = full
            if not full and stream.attached and stream.unacked:
                counted, stream.unacked = stream.unacked, 0
                self._ack(sid, counted)
                self._flush()

    def serviceFailed(self, sid: int) -> None:
        """
        No service connection for C{sid}: 502.
        """
        with self._guard:
            stream = self.streams.pop(sid, None)
            if stream is None or self.closed:
                return
            self._answer(sid, HTTPStatus.BAD_GATEWAY, (), stream.requestEnded)
            if stream.capture is not None:
                stream.capture.response(HTTPStatus.BAD_GATEWAY, [])
                stream.capture.ended(COMPLETE)
            self._flush()

    def serviceData(self, sid: int, data: bytes) -> None:
        """
        Bytes of C{sid}'s response.
        """
        with self._guard:
            stream = self.streams.get(sid)
            if stream is None:
                return
            try:
                events = _reader(stream).feed(data)
            except ResponseError as e:
                self._failed(stream, f"unreadable response: {e}")
            else:
                self._readResponse(stream, events)
            self._flush()

    def serviceLost(self, sid: int) -> None:
        """
        C{sid}'s service connection closed.
        """
        self.serviceData(sid, b"")
        with self._guard:
            stream = self.streams.get(sid)
            if stream is not None and not stream.outEnded:
                self._failed(stream, "the service closed before its response was out")
                self._flush()

    def _readResponse(self, stream: _Stream, events: list[ResponseEvent]) -> None:
        """
        Send what C{events} say of C{stream}'s response on; its body as its
        window allows, once they are all read.
        """
        capture = stream.capture
        for kind, status, headers, data in events:
            if stream.id not in self.streams:
                return
            if kind == DATA:
                stream.out += data
                if capture is not None:
                    capture.responseBody(data)
            elif kind == END:
                stream.outEnded = True
                stream.outTrailers = forVisitor(headers)
                if capture is not None:
                    capture.ended(COMPLETE)
                    stream.capture = capture = None
            else:
                if kind == HEAD:
                    stream.responded = True
                    if capture is not None:
                        capture.response(status, headers)
                # 100 Continue, 103 Early Hints: informational HEADERS (RFC 9113 section 8.1).
                self.conn.send_headers(stream.id, [(b":status", b"%d" % status),
                                                   *forVisitor(headers)])
        self._send(stream.id)

    def _send(self, sid: int) -> None:
        """
        What of C{sid}'s response its window lets through; pause or resume
        its service connection by what is left.
        """
        stream = self.streams.get(sid)
        if stream is None or self.closed:
            return
        out, ended = stream.out, False
        while out:
            size = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size,
                       len(out))
            if size <= 0:
                break
            if size < len(out):
                self.conn.send_data(sid, bytes(out[:size]))
                del out[:size]
            else:  # the last of it: with END_STREAM if nothing follows
                ended = stream.outEnded and not stream.outTrailers
                self.conn.send_data(sid, bytes(out), end_stream=ended)
                out.clear()
        paused = len(out) > self._h2limits.max_stream_buffer
        if paused != stream.paused and stream.attached:
            stream.paused = paused
            self.io.pauseService(sid, paused)
        if not out and stream.outEnded:
            if stream.outTrailers:
                self.conn.send_headers(sid, stream.outTrailers, end_stream=True)
            elif not ended:
                self.conn.end_stream(sid)
            if not stream.requestEnded:
                self._reset(sid, ErrorCodes.NO_ERROR)
            self._maybeDone(stream)

    def _maybeDone(self, stream: _Stream) -> None:
        if not (stream.requestEnded and stream.outEnded and not stream.out):
            if stream.outEnded and not stream.out:
                self._drop(stream.id)
            return
        del self.streams[stream.id]
        self._giveBackUnacked(stream)
        self.io.releaseService(stream.id, _reader(stream).reusable and stream.attached)
        self._closeIfDrained()

    def _failed(self, stream: _Stream, why: str) -> None:
        self.io.problem(why)
        sid = stream.id
        self._drop(sid)
        if self.closed:
            return
        if stream.responded:
            self._reset(sid, ErrorCodes.INTERNAL_ERROR)
        else:
            self._answer(sid, HTTPStatus.BAD_GATEWAY, (), stream.requestEnded)

    def _reset(self, sid: int, code: ErrorCodes) -> None:
        """
        Reset C{sid} if it is still open (the rest of its request may have
        come already).
        """
        with suppress(StreamClosedError):
            self.conn.reset_stream(sid, code)

    def _drop(self, sid: int) -> None:
        """
        Forget C{sid}; its service connection is aborted.
        """
        stream = self.streams.pop(sid, None)
        if stream is not None:
            self._giveBackUnacked(stream)
            if stream.capture is not None:
                stream.capture.ended(ABORTED)
            self.io.releaseService(sid, False)
            self._closeIfDrained()

    def _giveBackUnacked(self, stream: _Stream) -> None:
        """
        A stream is over with request bytes never acknowledged (its service
        connection was full): the connection's window gets them back, or
        each such stream would shrink it for good.
        """
        counted, stream.unacked = stream.unacked, 0
        self._ack(stream.id, counted)

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.io.toVisitor(data)


def _reader(stream: _Stream) -> ResponseReader:
    """
    The response reader of a stream whose service speaks HTTP/1.1.
    """
    assert stream.reader is not None
    return stream.reader
