# -*- test-case-name: tests.http.test_h2c -*-
"""
One h2c connection to the service (HTTP/2 over cleartext TCP, with prior
knowledge: RFC 9113 section 3.3), sans I/O.  L{ServiceH2} carries the
streams of visitors' HTTP/2 requests (L{nfltr.http._h2c}): each stream
opened with L{ServiceH2.open} tells its L{ServiceStream} what the service
answers (informational and final heads, body, trailers, end, reset).

Flow control, per stream both ways:
  - request bytes wait in the stream's own buffer until the service's
    window for the stream takes them; each stream's user is told how many
    went (L{ServiceStream.sent}) and opens the visitor's window by as much,
    so what waits is bounded by the window the visitor was given;
  - the service may send each stream L{H2Limits.max_stream_buffer} bytes
    (our C{SETTINGS_INITIAL_WINDOW_SIZE}), and as many more as its user
    gives it (L{ServiceH2.widen}, up to L{H2Limits.initial_window} in all),
    before the user says they left for the visitor (L{ServiceH2.consumed});
    the connection's window is as large as all streams' windows together
    (C{service_streams} of the larger of the two), so one stalled stream
    never holds the others.
A C{GOAWAY} from the service refuses the streams it did not take
(C{REFUSED_STREAM}: a visitor may retry them) and takes no new ones;
the others finish.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Protocol

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    InformationalResponseReceived,
    RemoteSettingsChanged,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from h2.exceptions import H2Error, ProtocolError, StreamClosedError
from h2.settings import SettingCodes

from ._limits import DEFAULT_H2_LIMITS, H2Limits

Headers = Sequence[tuple[bytes, bytes]]


class ServiceStream(Protocol):
    """
    Told what happens to one stream on a service connection.
    """

    def head(self, headers: Headers, informational: bool, ended: bool) -> None:
        """
        The service's response head (with C{:status}), or a 1xx one;
        C{ended}: the response is only this head (gRPC's Trailers-Only),
        L{ended} follows.
        """

    def body(self, data: bytes, counted: int) -> None:
        """
        Response bytes (C{counted} against the window: padding too); give
        them back with L{ServiceH2.consumed} once they left.
        """

    def trailers(self, headers: Headers) -> None:
        """
        The response's trailers.
        """

    def ended(self) -> None:
        """
        The response is complete.
        """

    def reset(self, code: int) -> None:
        """
        The stream is over before its end: reset by the service (C{code}),
        refused by its C{GOAWAY}, or the connection is gone.
        """

    def sent(self, counted: int) -> None:
        """
        C{counted} request bytes went to the service.
        """


class ServiceIO(Protocol):
    """
    What L{ServiceH2} asks of its I/O.
    """

    def toService(self, data: bytes) -> None:
        """
        Write to the service connection.
        """

    def closeService(self) -> None:
        """
        Close the service connection after what was written.
        """

    def idle(self) -> None:
        """
        The last stream on the connection is over (it may wait for the next).
        """


@dataclass
class _Out:
    """
    One stream's request bytes waiting for the service's window.
    """

    user: ServiceStream
    pending: bytearray = field(default_factory=bytearray)
    ending: bool = False
    trailers: list[tuple[bytes, bytes]] | None = None
    done: bool = False


class GoAwayFilter:
    """
    Takes the C{GOAWAY} frames out of what the service sends (h2 would
    close its connection at once, the streams the service still finishes
    included: RFC 9113 section 6.8 lets them finish).  The other frames'
    bytes pass as they came; a C{GOAWAY}'s debug data is skipped, not held.
    """

    def __init__(self) -> None:
        self._head = bytearray()
        self._pass = 0
        self._goAway: bytearray | None = None
        self._left = 0

    def feed(self, data: bytes) -> tuple[bytes, list[int]]:
        """
        The bytes for h2, and the last stream ids of the C{GOAWAY}s found.
        """
        out, found, view = bytearray(), [], memoryview(data)
        while view:
            if self._pass:
                taken = min(self._pass, len(view))
                out += view[:taken]
                self._pass -= taken
            elif self._goAway is not None:
                taken = min(self._left, len(view))
                self._goAway += view[:max(0, min(taken, 8 - len(self._goAway)))]
                self._left -= taken
                if not self._left:
                    found.append(int.from_bytes(self._goAway[:4], "big") & 0x7FFFFFFF)
                    self._goAway = None
            else:
                taken = min(_FRAME_HEAD - len(self._head), len(view))
                self._head += view[:taken]
                if len(self._head) == _FRAME_HEAD:
                    self._frame(out, found)
            view = view[taken:]
        return bytes(out), found

    def _frame(self, out: bytearray, found: list[int]) -> None:
        head, self._head = bytes(self._head), bytearray()
        length = int.from_bytes(head[:3], "big")
        if head[3] != _GOAWAY:
            out += head
            self._pass = length
        elif length < _GOAWAY_SIZE:
            found.append(0)  # malformed: nothing was taken
            self._pass, self._goAway = 0, None
        else:
            self._goAway, self._left = bytearray(), length


_FRAME_HEAD, _GOAWAY, _GOAWAY_SIZE = 9, 0x7, 8


def streamWindow(limits: H2Limits) -> int:
    """
    The most one stream's window for response bytes may be:
    C{initial_window}, or C{max_stream_buffer} if that is larger (streams
    start with it).
    """
    return max(limits.initial_window, limits.max_stream_buffer)


class ServiceH2:
    """
    One h2c connection to the service; see the module.

    @ivar draining: the service said C{GOAWAY} (or the connection broke):
        no new stream.
    """

    def __init__(self, io: ServiceIO, limits: H2Limits = DEFAULT_H2_LIMITS) -> None:
        self.io, self.limits = io, limits
        self.conn = H2Connection(H2Configuration(client_side=True, header_encoding=None))
        self.conn.decoder.max_header_list_size = limits.max_header_list_size
        self.streams: dict[int, _Out] = {}
        self.draining = False
        self._goAways = GoAwayFilter()
        # A stream was open since the last L{ServiceIO.idle}.
        self._busy = False

    @property
    def room(self) -> int:
        """
        Streams this connection may still open.
        """
        if self.draining:
            return 0
        most = min(self.limits.service_streams, self.conn.remote_settings.max_concurrent_streams)
        return max(0, most - len(self.streams))

    def start(self) -> None:
        """
        Send the client's preface and settings; widen the connection's window
        to all streams' windows together.
        """
        limits = self.limits
        self.conn.initiate_connection()
        self.conn.update_settings({
            SettingCodes.ENABLE_PUSH: 0,
            SettingCodes.INITIAL_WINDOW_SIZE: limits.max_stream_buffer,
            SettingCodes.MAX_HEADER_LIST_SIZE: limits.max_header_list_size,
        })
        whole = min(streamWindow(limits) * limits.service_streams, 2**31 - 1)
        if whole > self.conn.inbound_flow_control_window:
            self.conn.increment_flow_control_window(whole - self.conn.inbound_flow_control_window)
        self._flush()

    def open(self, headers: Headers, ended: bool, user: ServiceStream, wider: int = 0) -> int:
        """
        A new stream with the request C{headers} (its body ends with them if
        C{ended}), its window widened by C{wider} (as L{widen}, in the same
        write); its id.
        """
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(sid, headers, end_stream=ended)
        if wider > 0:
            self.conn.increment_flow_control_window(wider, stream_id=sid)
        self.streams[sid] = _Out(user, ending=ended, done=ended)
        self._busy = True
        self._flush()
        return sid

    def send(self, sid: int, data: bytes) -> None:
        """
        Request bytes for C{sid}, sent as its window allows.
        """
        out = self.streams.get(sid)
        if out is not None and not out.ending:
            out.pending += data
            self._pump(sid)
            self._flush()

    def finish(self, sid: int, trailers: Headers = ()) -> None:
        """
        C{sid}'s request ends (with C{trailers}) once its bytes are out.
        """
        out = self.streams.get(sid)
        if out is not None and not out.ending:
            out.ending, out.trailers = True, list(trailers) or None
            self._pump(sid)
            self._flush()

    def reset(self, sid: int, code: int = ErrorCodes.CANCEL) -> None:
        """
        Cancel C{sid} (the visitor reset it or went away).
        """
        if self.streams.pop(sid, None) is not None:
            with suppress(StreamClosedError, ProtocolError):
                self.conn.reset_stream(sid, code)
            self._flush()

    def widen(self, sid: int, more: int) -> None:
        """
        The service may send C{sid} C{more} bytes beyond its window for
        good: its window is that much larger until it ends (the caller keeps
        each stream within L{streamWindow}).
        """
        if more > 0 and sid in self.streams:
            with suppress(StreamClosedError, ProtocolError):
                self.conn.increment_flow_control_window(more, stream_id=sid)
            self._flush()

    def consumed(self, sid: int, counted: int) -> None:
        """
        C{counted} response bytes of C{sid} left: the service may send more.
        """
        if counted > 0:
            with suppress(StreamClosedError, ProtocolError):
                self.conn.acknowledge_received_data(counted, sid)
            self._flush()

    def receive(self, data: bytes) -> None:
        """
        Bytes from the service (C{b""}: its end).
        """
        if not data:
            self.lost()
            return
        data, goAways = self._goAways.feed(data)
        try:
            events = self.conn.receive_data(data) if data else []
        except H2Error:
            self._flush()
            self.lost()
            self.io.closeService()
            return
        for event in events:
            self._event(event)
        for last in goAways:
            self._goAway(last)
        if self.draining and not self.streams:
            self.io.closeService()
        self._flush()

    def close(self) -> None:
        """
        Say C{GOAWAY} (no error) and take no new stream: the connection is
        to be closed.
        """
        self.draining = True
        with suppress(H2Error):
            self.conn.close_connection()
        self._flush()

    def lost(self) -> None:
        """
        The connection is gone: every stream on it is reset.
        """
        self.draining = True
        streams, self.streams = self.streams, {}
        for out in streams.values():
            out.user.reset(ErrorCodes.CONNECT_ERROR)

    def _event(self, event: Event) -> None:
        if isinstance(event, WindowUpdated | RemoteSettingsChanged):
            sid = getattr(event, "stream_id", None) or 0
            for each in [sid] if sid else list(self.streams):
                self._pump(each)
        elif isinstance(event, ConnectionTerminated):  # h2 found the service broken
            self._goAway(0)
        elif isinstance(event, DataReceived):
            sid, counted = event.stream_id or 0, event.flow_controlled_length or 0
            out = self.streams.get(sid)
            if out is None:
                self.consumed(sid, counted)
            else:
                out.user.body(event.data or b"", counted)
        else:
            sid = getattr(event, "stream_id", None) or 0
            out = self.streams.get(sid)
            if out is not None:
                self._streamEvent(sid, out, event)

    def _streamEvent(self, sid: int, out: _Out, event: Event) -> None:
        if isinstance(event, InformationalResponseReceived | ResponseReceived):
            out.user.head(event.headers or [], isinstance(event, InformationalResponseReceived),
                          getattr(event, "stream_ended", None) is not None)
        elif isinstance(event, TrailersReceived):
            out.user.trailers(event.headers or [])
        elif isinstance(event, StreamEnded):
            if out.done:
                del self.streams[sid]
            out.user.ended()
        elif isinstance(event, StreamReset):
            del self.streams[sid]
            out.user.reset(event.error_code or ErrorCodes.CANCEL)

    def _goAway(self, last: int) -> None:
        self.draining = True
        for sid in [s for s in self.streams if s > last]:
            self.streams.pop(sid).user.reset(ErrorCodes.REFUSED_STREAM)

    def _pump(self, sid: int) -> None:
        """
        What of C{sid}'s request its window lets through; its end after.
        """
        out = self.streams.get(sid)
        if out is None or out.done:
            return
        sent = 0
        while out.pending:
            size = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size,
                       len(out.pending))
            if size <= 0:
                break
            self.conn.send_data(sid, bytes(out.pending[:size]))
            del out.pending[:size]
            sent += size
        if out.ending and not out.pending:
            out.done = True
            if out.trailers:
                self.conn.send_headers(sid, out.trailers, end_stream=True)
            else:
                self.conn.end_stream(sid)
            if self.conn.streams.get(sid) is None or self.conn.streams[sid].closed:
                self.streams.pop(sid, None)
        if sent:
            out.user.sent(sent)

    def _flush(self) -> None:
        """
        Write what h2 has to send; tell the I/O once the last stream is
        over (every call that may end a stream flushes).
        """
        data = self.conn.data_to_send()
        if data:
            self.io.toService(data)
        if self._busy and not self.streams:
            self._busy = False
            self.io.idle()
