"""
Tests for L{nfltr.relay.api._events}: the dashboard's server-sent events.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from twisted.internet.error import ConnectionDone
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.api._events import EVENT_INTERVAL, MAX_STREAMS

from .helpers import ApiFixture, parse


def snapshots(data: bytes) -> list[dict[str, Any]]:
    """
    The data of each C{snapshot} event in a stream's bytes.
    """
    body = data.partition(b"\r\n\r\n")[2].decode()
    return [json.loads(block.split("data: ", 1)[1]) for block in body.split("\n\n")
            if block.startswith("event: snapshot")]


class EventTests(SynchronousTestCase):
    """
    The event stream.
    """

    def setUp(self) -> None:
        self.f = ApiFixture(Path(self.mktemp()))

    def test_snapshots(self) -> None:
        """
        A stream starts with a snapshot, then one per interval; an agent
        that connects is in the next one, with its figures.
        """
        answer, transport = self.f.request("GET", "/api/v1/events", self.f.admin)
        self.assertEqual(answer.header("content-type"), "text/event-stream")
        self.assertIn(b"retry: ", answer.body)
        [first] = snapshots(transport.value())
        self.assertEqual(first["agents"], [])
        self.f.agent("acme", "web", share="blog")
        self.f.harness.clock.advance(EVENT_INTERVAL)
        second = snapshots(transport.value())[-1]
        self.assertEqual([a["name"] for a in second["agents"]], ["web"])
        self.assertEqual([s["name"] for s in second["shares"]], ["blog"])
        self.assertEqual(second["relay"]["agents"], 1)

    def test_refusals(self) -> None:
        """
        The stream wants a token like every route.
        """
        answer, _ = self.f.request("GET", "/api/v1/events")
        self.assertEqual(answer.status, 401)

    def test_streamLimit(self) -> None:
        """
        Past L{MAX_STREAMS} streams, another gets 503; one that closes
        makes room and is no longer written to.
        """
        opened = [self.f.request("GET", "/api/v1/events", self.f.admin)[1]
                  for _ in range(MAX_STREAMS)]
        answer, _ = self.f.request("GET", "/api/v1/events", self.f.admin)
        self.assertEqual(answer.status, 503)
        closed = opened[0]
        protocol = closed.protocol
        protocol.connectionLost(Failure(ConnectionDone()))
        size = len(closed.value())
        self.f.harness.clock.advance(EVENT_INTERVAL)
        self.assertEqual(len(closed.value()), size)
        answer, last = self.f.request("GET", "/api/v1/events", self.f.admin)
        self.assertEqual(answer.status, 200)
        for transport in [*opened[1:], last]:
            transport.protocol.connectionLost(Failure(ConnectionDone()))
        self.assertIsNone(self.f.api.events._loop)

    def test_slowClientSkips(self) -> None:
        """
        While its transport pauses the stream, it is sent nothing (no queue
        builds up); once resumed it gets the next snapshot.
        """
        _, transport = self.f.request("GET", "/api/v1/events", self.f.admin)
        [stream] = self.f.api.events.streams
        stream.pauseProducing()
        size = len(transport.value())
        for _ in range(5):
            self.f.harness.clock.advance(EVENT_INTERVAL)
        self.assertEqual(len(transport.value()), size)
        stream.resumeProducing()
        self.f.harness.clock.advance(EVENT_INTERVAL)
        self.assertEqual(len(snapshots(transport.value())), 2)

    def test_sessionEndsStream(self) -> None:
        """
        A session's stream ends at the next tick once the session ended.
        """
        from urllib.parse import urlencode

        login = self.f.call("POST", "/dashboard/login",
                            raw=urlencode({"token": self.f.admin}).encode(),
                            headers={"Content-Type": "application/x-www-form-urlencoded"})
        cookie = (login.header("set-cookie") or "").split(";")[0]
        answer, transport = self.f.request("GET", "/api/v1/events", headers={"Cookie": cookie})
        self.assertEqual(answer.status, 200)
        self.f.api.sessions.endToken(self.f.admin.split("_")[1])
        self.f.harness.clock.advance(EVENT_INTERVAL)
        self.assertEqual(self.f.api.events.streams, [])
        self.assertEqual(parse(transport.value()).status, 200)


class LimitsTests(SynchronousTestCase):
    """
    The API is built with the relay's L{ApiLimits} (C{--dashboard-...},
    C{--admin-failure-...}).
    """

    def test_applied(self) -> None:
        """
        Each limit reaches the part it bounds.
        """
        from twisted.internet.task import Clock

        from nfltr.relay.api import RelayView, api_resources
        from nfltr.relay.config import ApiLimits
        from nfltr.store import SQLiteStoreCore

        from .helpers import ImmediateStore

        clock = Clock()
        view = RelayView(lambda: None, lambda: None, clock, lambda: None, lambda: True, "x")
        store = ImmediateStore(SQLiteStoreCore(Path(self.mktemp())))
        api, _ = api_resources(view, store, clock, ApiLimits(3, 30.0, 8, 2, 5.0))
        self.assertEqual((api.limiter.burst, api.limiter.interval, api.sessions.maxSessions,
                          api.events.maxStreams, api.events.interval), (3, 30.0, 8, 2, 5.0))
