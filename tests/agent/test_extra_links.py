"""
Tests for L{nfltr.agent._extra_links}: when an agent dials extra data connections,
and when it retires them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from twisted.internet import defer
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent._extra_links import (
    BUSY_SESSIONS,
    CHECK_EVERY,
    COOLDOWN,
    IDLE_RETIRE,
    MAX_DATA_LINKS,
    DataLinks,
)
from nfltr.link import LinkConfig

TOKEN = "ab" * 16


class FakeLink:
    """
    A link with a session count, recording drains.
    """

    def __init__(self, sessions: int = 0) -> None:
        self.connection = SimpleNamespace(session_count=sessions, goaway_received=False)
        self.drained = False
        self.drainedWithin: float | None = None

    def drain(self, timeout: float = 0) -> defer.Deferred[None]:
        self.drained = True
        self.drainedWithin = timeout
        return defer.succeed(None)


class FakeEndpoint:
    """
    Records the factories it is asked to connect; connects nothing.
    """

    def __init__(self) -> None:
        self.factories: list[Any] = []
        self.pending: list[defer.Deferred[Any]] = []

    def connect(self, factory: Any) -> defer.Deferred[Any]:
        self.factories.append(factory)
        d: defer.Deferred[Any] = defer.Deferred()
        self.pending.append(d)
        return d


class DataLinksTests(SynchronousTestCase):
    """
    The dialling policy and the retirement of idle data connections.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.endpoint = FakeEndpoint()
        self.data = DataLinks(self.endpoint, self.clock, "KEY", LinkConfig(), lambda s: None)
        self.primary = FakeLink()
        self.data.welcomed(self.primary, TOKEN)  # type: ignore[arg-type]

    def test_dialsWhenBusy(self) -> None:
        """
        Below BUSY_SESSIONS sessions nothing is dialled; at it, one data
        connection, whose hello carries the key and the token.
        """
        self.primary.connection.session_count = BUSY_SESSIONS - 1
        self.data.sessionStarted()
        self.assertEqual(self.endpoint.factories, [])
        self.primary.connection.session_count = BUSY_SESSIONS
        self.data.sessionStarted()
        [factory] = self.endpoint.factories
        self.assertEqual(factory.appHello["role"], "data")
        self.assertEqual((factory.appHello["key"], factory.appHello["token"]), ("KEY", TOKEN))
        # Dialling counts: no second one for the same load.
        self.data.sessionStarted()
        self.assertEqual(len(self.endpoint.factories), 1)

    def test_atMostMax(self) -> None:
        """
        However busy, at most MAX_DATA_LINKS data connections.
        """
        self.primary.connection.session_count = 10_000
        for _ in range(10):
            self.data.sessionStarted()
        self.assertEqual(len(self.endpoint.factories), MAX_DATA_LINKS)

    def test_noTokenNoDial(self) -> None:
        """
        A relay that sent no token gets no data connection.
        """
        self.data.welcomed(self.primary, None)  # type: ignore[arg-type]
        self.primary.connection.session_count = 10_000
        self.data.sessionStarted()
        self.assertEqual(self.endpoint.factories, [])

    def test_cooldownAfterFailure(self) -> None:
        """
        A failed dial is not retried within COOLDOWN seconds.
        """
        self.primary.connection.session_count = 10_000
        self.data.sessionStarted()
        self.endpoint.pending[0].errback(ConnectionRefusedError("no"))
        self.data.sessionStarted()
        self.assertEqual(len(self.endpoint.factories), 1)
        self.clock.advance(COOLDOWN)
        self.data.sessionStarted()
        self.assertEqual(len(self.endpoint.factories), 2)

    def test_retireIdle(self) -> None:
        """
        A welcomed data connection without sessions for IDLE_RETIRE seconds
        is drained; a busy one is kept.
        """
        idle, busy = FakeLink(0), FakeLink(3)
        self.data._welcomed(idle)  # type: ignore[arg-type]
        self.data._welcomed(busy)  # type: ignore[arg-type]
        self.clock.advance(CHECK_EVERY)
        self.clock.advance(IDLE_RETIRE)
        self.assertTrue(idle.drained)
        self.assertFalse(busy.drained)
        self.assertEqual(self.data.links, [busy])

    def test_primaryDown(self) -> None:
        """
        When the first link goes, the data connections are drained.
        """
        link = FakeLink(2)
        self.data._welcomed(link)  # type: ignore[arg-type]
        self.data.primaryDown()
        self.assertTrue(link.drained)

    def test_primaryLostOrGoingAway(self) -> None:
        """
        A first link lost resets the data connections' sessions at once (a
        drain of 0 s); one going away (the relay's GOAWAY) lets them finish
        within the agent's drain timeout, as its own do.
        """
        lost = FakeLink(2)
        self.data._welcomed(lost)  # type: ignore[arg-type]
        self.data.primaryDown(30.0)
        self.assertEqual(lost.drainedWithin, 0)
        self.data.welcomed(self.primary, TOKEN)  # type: ignore[arg-type]
        going = FakeLink(2)
        self.data._welcomed(going)  # type: ignore[arg-type]
        self.primary.connection.goaway_received = True
        self.data.primaryDown(30.0)
        self.assertEqual(going.drainedWithin, 30.0)
