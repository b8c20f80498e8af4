# -*- test-case-name: tests.relay.api.test_events -*-
"""
C{GET /api/v1/events}: server-sent events (C{text/event-stream}) for the
dashboard.  Every L{EVENT_INTERVAL} seconds each stream gets one
C{snapshot} event whose data is a JSON object: C{relay} (as C{GET
/api/v1/relay}), C{agents}, C{shares} and C{sessions} (as their routes).  A snapshot is
made once per tick for all streams.

Memory stays bounded: at most L{MAX_STREAMS} streams at once (more get
C{503}), and a stream whose client does not read (its transport paused
us, as a producer) skips ticks instead of queueing them: the next snapshot
it gets is whole anyway.  A stream ends when its session does (logout,
expiry, its token revoked here).
"""

from __future__ import annotations

import json

from twisted.internet.interfaces import IPushProducer, IReactorTime
from twisted.internet.task import LoopingCall
from twisted.web.server import Request
from zope.interface import implementer

from nfltr.relay.config import ApiLimits

from ._auth import Principal, Sessions
from ._view import RelayView

#: Seconds between snapshots.
EVENT_INTERVAL = ApiLimits.interval
#: Streams open at once.
MAX_STREAMS = ApiLimits.streams
#: What a client waits before reconnecting, in milliseconds (the C{retry} field).
RETRY_MS = 2000


@implementer(IPushProducer)
class _Stream:
    """
    One client's stream; its request's producer, so it knows when the
    client lags.
    """

    def __init__(self, request: Request, principal: Principal) -> None:
        self.request = request
        self.principal = principal
        self.paused = False

    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False

    def stopProducing(self) -> None:
        self.paused = True


class EventStreams:
    """
    The open streams and their clock; see the module.
    """

    def __init__(
        self, view: RelayView, sessions: Sessions, clock: IReactorTime,
        interval: float = EVENT_INTERVAL, maxStreams: int = MAX_STREAMS,
    ) -> None:
        self.view = view
        self.sessions = sessions
        self.clock = clock
        self.interval = interval
        self.maxStreams = maxStreams
        self.streams: list[_Stream] = []
        self._loop: LoopingCall | None = None

    def serve(self, request: Request, principal: Principal) -> None:
        """
        Start streaming to C{request} (authenticated as C{principal}), or
        refuse it with C{503} when L{maxStreams} are open.
        """
        if len(self.streams) >= self.maxStreams:
            request.setResponseCode(503)
            request.setHeader(b"content-type", b"application/json")
            request.write(b'{"error":"too many event streams are open"}\n')
            request.finish()
            return
        stream = _Stream(request, principal)
        self.streams.append(stream)
        request.setHeader(b"content-type", b"text/event-stream")
        request.registerProducer(stream, True)
        request.notifyFinish().addBoth(lambda _: self._forget(stream))
        request.write(f"retry: {RETRY_MS}\n\n".encode("ascii"))
        self._send(stream, self.snapshot())
        if self._loop is None:
            self._loop = LoopingCall(self.tick)
            self._loop.clock = self.clock
            self._loop.start(self.interval, now=False)

    def snapshot(self) -> bytes:
        """
        One C{snapshot} event, now.
        """
        view = self.view
        data = {"relay": view.status(), "agents": view.listAgents(),
                "shares": view.listShares(), "sessions": view.listSessions()["sessions"]}
        text = json.dumps(data, separators=(",", ":"), allow_nan=False)
        return f"event: snapshot\ndata: {text}\n\n".encode()

    def tick(self) -> None:
        """
        Send a snapshot to every stream that keeps up; end the streams whose
        session ended.
        """
        event: bytes | None = None
        for stream in list(self.streams):
            session = stream.principal.session
            if session is not None and not self.sessions.live(session):
                stream.request.unregisterProducer()
                stream.request.finish()
                continue
            if stream.paused:
                continue
            if event is None:
                event = self.snapshot()
            self._send(stream, event)

    def _send(self, stream: _Stream, event: bytes) -> None:
        stream.request.write(event)

    def _forget(self, stream: _Stream) -> None:
        if stream in self.streams:
            self.streams.remove(stream)
        if not self.streams and self._loop is not None:
            self._loop.stop()
            self._loop = None

    def close(self) -> None:
        """
        End every stream (the admin listener closes).
        """
        for stream in list(self.streams):
            stream.request.unregisterProducer()
            stream.request.finish()

