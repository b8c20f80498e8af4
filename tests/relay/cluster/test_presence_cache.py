"""
Tests for L{nfltr.relay.cluster.presence_cache} and its use by
L{nfltr.relay.cluster.presence.RedisPresence}: look-ups answered by the
records last known while the directory cannot answer (an in-memory table
that can be switched off, a L{Clock}).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.relay.cluster.presence import AGENT, REPLICA, SHARE, AgentPresence, RedisPresence
from nfltr.relay.cluster.presence_cache import PresenceCache
from nfltr.relay.directory import AgentEntry
from nfltr.relay.store_health import StoreHealth
from nfltr.store import IPresenceTable, StoreUnavailable
from tests.relay.cluster.test_presence import _Holder

LIMIT = 60.0


@implementer(IPresenceTable)
class _Table:
    """
    Presence records in memory; C{down}: every call fails with
    L{StoreUnavailable}, as a Redis that is away does.
    """

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], dict[str, str]] = {}
        self.down = False
        self.lookups = 0

    def _gone(self) -> Deferred[Any]:
        return fail(StoreUnavailable("Redis at the test is not reachable"))

    def announce(self, kind: str, name: str, fields: dict[str, str], ttl: float,
                 replica: str, take: bool) -> Deferred[bool]:
        if self.down:
            return self._gone()
        holder = self.records.get((kind, name), {}).get("replica")
        if holder not in (None, replica) and not take:
            return succeed(False)
        self.records[kind, name] = {**fields, "replica": replica}
        return succeed(True)

    def withdraw(self, kind: str, name: str, replica: str) -> Deferred[bool]:
        if self.down:
            return self._gone()
        if self.records.get((kind, name), {}).get("replica") != replica:
            return succeed(False)
        del self.records[kind, name]
        return succeed(True)

    def lookup(self, kind: str, name: str) -> Deferred[dict[str, str] | None]:
        self.lookups += 1
        if self.down:
            return self._gone()
        return succeed(self.records.get((kind, name)))


def _web(replica: str = "r2") -> dict[str, str]:
    return {"replica": replica, "account": "acme", "ports": "3000", "plain": "",
            "shares": ""}


class PresenceCacheTests(SynchronousTestCase):
    """
    L{PresenceCache} alone.
    """

    def setUp(self) -> None:
        self.clock = Clock()

    def test_recall(self) -> None:
        """
        A record remembered is recalled (the last one for its name), counted;
        a name never remembered is not.
        """
        cache = PresenceCache(self.clock, limit=LIMIT)
        cache.remember(AGENT, "web", _web("r1"))
        cache.remember(AGENT, "web", _web("r2"))
        self.assertEqual(cache.recall(AGENT, "web"), _web("r2"))
        self.assertIsNone(cache.recall(AGENT, "api"))
        self.assertIsNone(cache.recall(SHARE, "web"))
        self.assertEqual(cache.recalled, 1)

    def test_bound(self) -> None:
        """
        At most C{entries} records are kept: the least recently used (a
        recall counts as a use) goes first.
        """
        cache = PresenceCache(self.clock, entries=2, limit=LIMIT)
        cache.remember(AGENT, "a", _web())
        cache.remember(AGENT, "b", _web())
        cache.recall(AGENT, "a")
        cache.remember(AGENT, "c", _web())
        self.assertEqual(len(cache), 2)
        self.assertIsNone(cache.recall(AGENT, "b"))
        self.assertIsNotNone(cache.recall(AGENT, "a"))
        self.assertIsNotNone(cache.recall(AGENT, "c"))

    def test_ageLimit(self) -> None:
        """
        A record is recalled for C{limit} seconds after it was remembered,
        then dropped; remembering it again starts over.
        """
        cache = PresenceCache(self.clock, limit=LIMIT)
        cache.remember(AGENT, "web", _web())
        self.clock.advance(LIMIT)
        self.assertIsNotNone(cache.recall(AGENT, "web"))
        cache.remember(AGENT, "web", _web())
        self.clock.advance(LIMIT + 0.5)
        self.assertIsNone(cache.recall(AGENT, "web"))
        self.assertEqual(len(cache), 0)

    def test_forget(self) -> None:
        """
        A record forgotten is not recalled; forgetting a name not kept is
        nothing.
        """
        cache = PresenceCache(self.clock, limit=LIMIT)
        cache.remember(AGENT, "web", _web())
        cache.forget(AGENT, "web")
        cache.forget(AGENT, "api")
        self.assertIsNone(cache.recall(AGENT, "web"))

    def test_off(self) -> None:
        """
        A limit of 0 turns the cache off: nothing is kept.  Bounds below
        one entry or a negative limit are refused.
        """
        cache = PresenceCache(self.clock, limit=0)
        cache.remember(AGENT, "web", _web())
        self.assertEqual(len(cache), 0)
        self.assertIsNone(cache.recall(AGENT, "web"))
        with self.assertRaises(ValueError):
            PresenceCache(self.clock, entries=0)
        with self.assertRaises(ValueError):
            PresenceCache(self.clock, limit=-1)


class StalePresenceTests(SynchronousTestCase):
    """
    L{RedisPresence} look-ups while the directory is up and while it is
    away.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.table = _Table()
        self.table.records[AGENT, "web"] = _web()
        self.table.records[SHARE, "blog"] = {"replica": "r2", "account": "acme",
                                              "mode": "e2ee"}
        self.table.records[REPLICA, "r2"] = {"replica": "r2", "address": "10.0.0.2:7000"}
        self.health = StoreHealth("the test directory", self.clock)
        self.health.log = Logger(observer=lambda event: None)
        self.events: list[dict[str, Any]] = []
        self.presence = self.make()

    def make(self, limit: float = LIMIT) -> RedisPresence:
        presence = RedisPresence(self.table, "r1", self.clock, health=self.health,
                                 cache=PresenceCache(self.clock, limit=limit))
        presence.log = Logger(observer=self.events.append)
        return presence

    def away(self) -> None:
        self.table.down = True

    def back(self) -> None:
        self.table.down = False
        self.health.answered()

    def lookAll(self) -> list[Any]:
        return [self.successResultOf(self.presence.agent("web")),
                self.successResultOf(self.presence.share("blog")),
                self.successResultOf(self.presence.replicaAddress("r2"))]

    def test_interface(self) -> None:
        """
        The in-memory table of these tests is an L{IPresenceTable}.
        """
        self.assertTrue(verifyObject(IPresenceTable, self.table))

    def test_outage(self) -> None:
        """
        Records looked up before the directory went away answer while it is
        away (an agent, a share, a replica's address), whether the store is
        found down by the look-up or known down already; a name never looked
        up fails with L{StoreUnavailable}, as before.
        """
        before = self.lookAll()
        self.away()
        self.assertEqual(self.lookAll(), before)  # found down by these look-ups
        self.assertFalse(self.health.available)
        lookups = self.table.lookups
        self.assertEqual(self.lookAll(), before)  # known down: the table is not asked
        self.assertEqual(self.table.lookups, lookups)
        self.failureResultOf(self.presence.agent("api"), StoreUnavailable)
        self.assertEqual(self.presence.cache.recalled, 6)

    def test_normal(self) -> None:
        """
        With the directory up every look-up reads it: a move to another
        replica is followed at once, and a record gone is gone (and not
        served by the next outage).
        """
        self.lookAll()
        self.table.records[AGENT, "web"] = _web("r3")
        record = self.successResultOf(self.presence.agent("web"))
        self.assertEqual(record.replica, "r3")
        del self.table.records[SHARE, "blog"]
        self.assertIsNone(self.successResultOf(self.presence.share("blog")))
        self.away()
        self.assertEqual(self.successResultOf(self.presence.agent("web")).replica, "r3")
        self.failureResultOf(self.presence.share("blog"), StoreUnavailable)

    def test_backWithoutRecords(self) -> None:
        """
        A directory that comes back without the records (they outlived their
        TTL while it was away, as a Redis restarted after a longer outage
        does) is taken to miss them until the holders' next refresh can have
        written them again: the remembered record answers meanwhile; after
        that interval, "no record" means no record again.
        """
        before = self.lookAll()
        self.away()
        self.lookAll()
        self.clock.advance(20)
        self.table.records.clear()
        self.back()
        self.assertEqual(self.lookAll(), before)
        self.clock.advance(self.presence.refresh)
        self.assertEqual(self.lookAll(), before)
        self.clock.advance(0.5)
        self.assertIsNone(self.successResultOf(self.presence.agent("web")))
        self.away()
        self.failureResultOf(self.presence.agent("web"), StoreUnavailable)

    def test_ageLimit(self) -> None:
        """
        A record is served for at most the stale limit after the directory
        last said it; then the look-up fails as before.
        """
        self.lookAll()
        self.away()
        self.clock.advance(LIMIT)
        self.assertIsInstance(self.successResultOf(self.presence.agent("web")), AgentPresence)
        self.clock.advance(1)
        self.failureResultOf(self.presence.agent("web"), StoreUnavailable)

    def test_off(self) -> None:
        """
        With a stale limit of 0, a look-up the directory cannot answer fails
        as before, whatever was looked up.
        """
        self.presence = self.make(limit=0)
        self.lookAll()
        self.away()
        self.failureResultOf(self.presence.agent("web"), StoreUnavailable)
        self.failureResultOf(self.presence.share("blog"), StoreUnavailable)

    def test_writesAndRemovals(self) -> None:
        """
        What this replica writes is remembered (with its id, so that routing
        finds the name here); a release or a share withdrawn is forgotten; a
        record another replica took over is forgotten when the refresh finds
        it out.
        """
        entry = AgentEntry("db", "acme", "", frozenset({5432}), _Holder())
        self.presence.agentClaimed(entry, [])
        self.presence.sharesPublished("acme", [("wiki", "inspect")])
        self.presence.agentClaimed(AgentEntry("web", "acme", "", frozenset({80}), _Holder()), [])
        self.table.records[AGENT, "web"] = _web("r9")  # taken over by r9
        self.successResultOf(self.presence.refreshNow())
        self.presence.sharesWithdrawn(["wiki"])
        self.away()
        self.assertEqual(self.successResultOf(self.presence.agent("db")).replica, "r1")
        self.failureResultOf(self.presence.share("wiki"), StoreUnavailable)
        self.failureResultOf(self.presence.agent("web"), StoreUnavailable)
        self.back()
        self.presence.agentReleased(entry)
        self.away()
        self.failureResultOf(self.presence.agent("db"), StoreUnavailable)

    def test_logOncePerOutage(self) -> None:
        """
        Serving remembered records is logged once per outage, at info, with
        the limit; nothing per look-up.
        """
        self.lookAll()
        for _ in range(2):
            self.away()
            for _ in range(3):
                self.lookAll()
            self.back()
            self.lookAll()
        infos = [e for e in self.events if e["log_level"].name == "info"]
        self.assertEqual(len(infos), 2)
        text = infos[0]["log_format"].format(**infos[0])
        self.assertIn("routing by the records last read, at most 60 s old", text)

    def test_garbageForgotten(self) -> None:
        """
        A record the directory answers that does not parse is read as absent
        and forgets the one remembered: it is not served at the next outage.
        """
        self.lookAll()
        self.table.records[AGENT, "web"] = {"replica": "r2", "ports": "http"}
        self.assertIsNone(self.successResultOf(self.presence.agent("web")))
        self.away()
        self.failureResultOf(self.presence.agent("web"), StoreUnavailable)
