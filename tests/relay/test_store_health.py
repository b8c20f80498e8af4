"""
Tests for L{nfltr.relay.store_health}, and for what the relay does while its
store is down: hellos refused at once with C{STORE_UNAVAILABLE}, one warning
per outage, established links untouched.  On a L{Clock}, with the
in-memory store of L{tests.relay.helpers}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.logger import Logger, LogLevel
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.relay.link_handler import STORE_UNAVAILABLE
from nfltr.relay.store_health import StoreHealth
from nfltr.store import IStore, StoreError, StoreUnavailable

from .helpers import FakeStore, RelayHarness

A_KEY, B_KEY, C_KEY = "aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"
UNAVAILABLE = {"type": "refused", "reason": "unavailable", "message": STORE_UNAVAILABLE}


def health_on(clock: Clock) -> tuple[StoreHealth, list[dict[str, Any]]]:
    """
    A L{StoreHealth} whose log lines are kept in the list returned with it.
    """
    logged: list[dict[str, Any]] = []
    health = StoreHealth("redis://redis.internal:6379/0", clock)
    health.log = Logger(observer=logged.append)
    return health, logged


class StoreHealthTests(SynchronousTestCase):
    """
    L{StoreHealth} follows outages and logs each once.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.health, self.logged = health_on(self.clock)

    def test_upAtFirst(self) -> None:
        """
        A store is taken to be up until a call says otherwise.
        """
        self.assertTrue(self.health.available)
        self.assertIsNone(self.health.since)

    def test_oneWarningPerOutage(self) -> None:
        """
        Calls that find the store unavailable mark it down; only the first
        of an outage logs, a warning naming the store and the first reason.
        """
        self.clock.advance(5)
        self.assertTrue(self.health.failed(StoreUnavailable("Redis did not answer within 5 s")))
        self.assertTrue(self.health.failed(StoreUnavailable("again")))
        self.assertFalse(self.health.available)
        self.assertEqual(self.health.since, 5)
        self.assertEqual(len(self.logged), 1)
        [line] = self.logged
        self.assertEqual(line["log_level"], LogLevel.warn)
        self.assertEqual(line["where"], "redis://redis.internal:6379/0")
        self.assertEqual(line["error"], "Redis did not answer within 5 s")

    def test_otherErrors(self) -> None:
        """
        Other store errors (a corrupt record, a refusal) are not an outage:
        left to the caller, nothing logged.
        """
        self.assertFalse(self.health.failed(StoreError("refused")))
        self.assertTrue(self.health.available)
        self.assertEqual(self.logged, [])

    def test_answered(self) -> None:
        """
        Once the store answers, it is up: one line with the outage's length;
        the next outage warns again.
        """
        self.health.failed(StoreUnavailable("gone"))
        self.clock.advance(3)
        self.health.answered()
        self.health.answered()
        self.assertTrue(self.health.available)
        self.assertEqual([line["log_level"] for line in self.logged],
                         [LogLevel.warn, LogLevel.info])
        self.assertEqual(self.logged[1]["seconds"], 3.0)
        self.health.failed(StoreUnavailable("gone again"))
        self.assertEqual(self.health.outages, 2)
        self.assertEqual(len(self.logged), 3)


class StoreDownTests(SynchronousTestCase):
    """
    The relay while its store is down.
    """

    def setUp(self) -> None:
        self.h = RelayHarness()
        self.key = self.h.store.addKey(A_KEY, "acme")
        self.health, self.logged = health_on(self.h.clock)
        self.h.relay.storeHealth = self.health

    def test_testStore(self) -> None:
        """
        The in-memory store these tests use is an L{IStore}.
        """
        self.assertTrue(verifyObject(IStore, FakeStore()))

    def test_refusedAtOnce(self) -> None:
        """
        While the store is down, an agent's hello is refused with
        C{unavailable} and the message that says to try later, without
        asking the store.
        """
        self.health.failed(StoreUnavailable("gone"))
        self.h.store.hold = True
        agent = self.h.agent(self.key)
        self.assertEqual(agent.controls, [UNAVAILABLE])
        self.assertEqual(self.h.store.held, [])

    def test_unavailableMarksDown(self) -> None:
        """
        A key check that finds the store unavailable refuses the hello and
        marks the store down: one warning, no line per hello, and the next
        hello is refused without asking the store.
        """
        self.h.store.error = StoreUnavailable("Redis did not answer within 5 s")
        first = self.h.agent(self.key)
        self.h.store.error = None
        self.h.store.hold = True
        second = self.h.agent(self.key)
        self.assertEqual(first.controls, [UNAVAILABLE])
        self.assertEqual(second.controls, [UNAVAILABLE])
        self.assertEqual(self.h.store.held, [])
        self.assertFalse(self.health.available)
        self.assertEqual(len(self.logged), 1)
        self.assertEqual(
            [e for e in self.h.logged if "cannot check" in (e.get("log_format") or "")], []
        )

    def test_establishedStay(self) -> None:
        """
        Links welcomed before the outage stay, and stay routable; once the
        store answers again, new hellos are checked again.
        """
        client = self.h.store.addKey(B_KEY, "acme")
        agent = self.h.agent(self.key)
        self.health.failed(StoreUnavailable("gone"))
        for _ in range(60):
            self.h.clock.advance(1)
            self.h.run()
        self.assertFalse(agent.closed)
        self.assertIsNotNone(self.h.relay.directory.reachable("web", "acme", 3000))
        self.health.answered()
        later = self.h.client(client)
        self.assertEqual(later.controls[0]["type"], "welcome")

    def test_checkKey(self) -> None:
        """
        The WebSocket upgrade's key check fails at once, with
        L{StoreUnavailable}, while the store is down.
        """
        self.health.failed(StoreUnavailable("gone"))
        self.failureResultOf(self.h.relay.checkKey(self.key), StoreUnavailable)
