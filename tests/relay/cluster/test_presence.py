"""
Tests for L{nfltr.relay.cluster.presence} and the directory's presence
table (L{nfltr.store.IPresenceTable}), on a real C{redis-server} (a unix
socket, the real reactor; skipped, with the reason, without one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock, deferLater
from twisted.logger import Logger
from twisted.trial import unittest
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.link import RefusalReason
from nfltr.relay.agents import Relay
from nfltr.relay.cluster.config import ReplicaConfig
from nfltr.relay.cluster.node import Replica, replaced_elsewhere
from nfltr.relay.cluster.presence import (
    AGENT,
    SHARE,
    AgentPresence,
    NoPresence,
    RedisPresence,
    SharePresence,
)
from nfltr.relay.directory import AgentEntry
from nfltr.relay.interfaces import HolderFigures, IAgentHolder, IPresence
from nfltr.relay.names import REPLACED
from nfltr.relay.store_health import StoreHealth
from nfltr.store import (
    IPresenceTable,
    RedisStore,
    StoreError,
    StoreUnavailable,
    parse_redis_url,
)
from nfltr.store._redis_presence import MAX_FIELD
from tests.redis_helpers import REDIS_SERVER, SKIP_REASON, redis_command, start_redis
from tests.relay.helpers import FakeStore

TIMEOUT = 1.0


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


@implementer(IAgentHolder)
class _Holder:
    """
    A holder that only records how it was turned away.
    """

    kind = "link"

    def __init__(self) -> None:
        self.refused: list[tuple[RefusalReason, str]] = []

    def canOpen(self) -> bool:
        return True

    def openSession(self, target: str, protocol: Any, firstBytes: bytes = b"",
                    wantAccept: bool = False) -> Any:
        raise NotImplementedError

    def refuse(self, reason: RefusalReason, message: str) -> None:
        self.refused.append((reason, message))

    def figures(self) -> HolderFigures:
        return HolderFigures("link", 0, 0, 0, None, 0.0)


class NoPresenceTests(unittest.SynchronousTestCase):
    """
    A relay of its own tells nobody.
    """

    def test_interface(self) -> None:
        """
        L{NoPresence} provides L{IPresence}, and is what a L{Relay} starts
        with.
        """
        self.assertTrue(verifyObject(IPresence, NoPresence()))
        self.assertIsInstance(Relay(FakeStore(), Clock()).presence, NoPresence)

    def test_refreshBelowTTL(self) -> None:
        """
        A refresh interval that is not shorter than the TTL is refused: the
        records would run out between two refreshes.
        """
        with self.assertRaises(ValueError):
            RedisPresence(_Table(), "r1", Clock(), ttl=5, refresh=5)


class _Table:
    def announce(self, *args: Any) -> Deferred[bool]:
        raise NotImplementedError


class RedisPresenceCase(unittest.TestCase):
    """
    A real Redis directory (C{self.server}), its presence table and
    replicas' presence in it.
    """

    if REDIS_SERVER is None:
        skip = SKIP_REASON

    async def setUp(self) -> None:  # type: ignore[override]
        self.server = await start_redis(self)

    def table(self) -> IPresenceTable:
        store = RedisStore(_reactor(), parse_redis_url(self.server.url),
                           command_timeout=TIMEOUT)
        self.addCleanup(store.close)
        return store.presence_table()

    def presence(self, replica: str, ttl: float = 15.0, refresh: float = 5.0,
                 clock: Any = None) -> RedisPresence:
        """
        Replica C{replica}'s presence; its time is C{clock}'s (default: the reactor's).
        """
        presence = RedisPresence(self.table(), replica, clock or _reactor(), ttl=ttl,
                                 refresh=refresh)
        self.addCleanup(presence.stop)
        return presence

    async def settle(self, presence: RedisPresence) -> None:
        # Writes go out in the background, in order on one connection: a read on the same
        # connection comes after them.
        await presence.table.lookup(AGENT, "-")


class PresenceTests(RedisPresenceCase):
    """
    Presence records in a real Redis directory.
    """

    def test_interfaces(self) -> None:
        """
        The Redis table provides L{IPresenceTable}; L{RedisPresence}
        provides L{IPresence}.
        """
        self.assertTrue(verifyObject(IPresenceTable, self.table()))
        self.assertTrue(verifyObject(IPresence, self.presence("r1")))

    async def test_table(self) -> None:
        """
        A record is written with its TTL; another replica cannot overwrite it
        unless it takes it, nor withdraw it; its own replica withdraws it.
        """
        table = self.table()
        self.assertTrue(await table.announce(AGENT, "web", {"account": "acme"}, 15, "r1", False))
        ttl = await redis_command(self.server, "PTTL", "nfltr:presence:agent:web")
        self.assertTrue(14000 < ttl <= 15000, ttl)
        self.assertFalse(await table.announce(AGENT, "web", {"account": "x"}, 15, "r2", False))
        self.assertEqual(await table.lookup(AGENT, "web"), {"replica": "r1", "account": "acme"})
        self.assertFalse(await table.withdraw(AGENT, "web", "r2"))
        self.assertTrue(await table.announce(AGENT, "web", {"account": "acme"}, 15, "r2", True))
        self.assertTrue(await table.withdraw(AGENT, "web", "r2"))
        self.assertIsNone(await table.lookup(AGENT, "web"))

    async def test_tooLong(self) -> None:
        """
        A record over the table's bounds is refused with a L{StoreError}
        (never raised at the caller), and nothing is written.
        """
        table = self.table()
        with self.assertRaises(StoreError):
            await table.announce(SHARE, "big", {"x": "y" * (MAX_FIELD + 1)}, 15, "r1", True)
        self.assertIsNone(await table.lookup(SHARE, "big"))

    async def test_claimPlace(self) -> None:
        """
        The relay's claim place writes an agent's record when it is claimed
        (replica, account, ports, plain ports) and removes it when it is
        released.
        """
        presence = self.presence("r1")
        relay = Relay(FakeStore(), Clock())
        relay.presence = presence
        entry = AgentEntry("web", "acme", "k1", frozenset({22, 80}), _Holder(),
                           plain=frozenset({80}))
        relay.claimAgent(entry)
        await self.settle(presence)
        self.assertEqual(
            await presence.agent("web"),
            AgentPresence("web", "r1", "acme", frozenset({22, 80}), frozenset({80}), ()),
        )
        self.assertTrue(relay.releaseAgent(entry))
        await self.settle(presence)
        self.assertIsNone(await presence.agent("web"))

    async def test_shares(self) -> None:
        """
        Published shares are announced (with whether they are served in
        plain HTTP too), withdrawn ones removed.
        """
        presence = self.presence("r1")
        presence.sharesPublished("acme", [("blog", "e2ee"), ("raw", "passthrough")], ["blog"])
        await self.settle(presence)
        self.assertEqual(await presence.share("raw"),
                         SharePresence("raw", "r1", "acme", "passthrough"))
        self.assertEqual(await presence.share("blog"),
                         SharePresence("blog", "r1", "acme", "e2ee", plain=True))
        presence.sharesWithdrawn(["raw"])
        await self.settle(presence)
        self.assertIsNone(await presence.share("raw"))
        self.assertIsNotNone(await presence.share("blog"))

    async def test_deadReplica(self) -> None:
        """
        A replica that stops refreshing (it died) is not routed to once its
        TTL ran out.
        """
        presence = self.presence("r1", ttl=0.5, refresh=0.2)
        presence.sharesPublished("acme", [("blog", "e2ee")])
        await self.settle(presence)
        self.assertIsNotNone(await presence.share("blog"))
        await deferLater(_reactor(), 0.7, lambda: None)
        self.assertIsNone(await presence.share("blog"))

    async def test_refreshKeepsAndReannounces(self) -> None:
        """
        A live replica's refreshes keep its records past their TTL, and write
        them again after Redis came back empty (restarted).
        """
        presence = self.presence("r1", ttl=0.6, refresh=0.2)
        presence.health = StoreHealth("the test directory", _reactor())
        presence.health.log = Logger(observer=lambda event: None)
        presence.start()
        presence.sharesPublished("acme", [("blog", "e2ee")])
        await deferLater(_reactor(), 1.0, lambda: None)
        self.assertIsNotNone(await presence.share("blog"))
        await self.server.stop()
        await self.server.start()
        self.assertIsNone(await redis_command(self.server, "HGET",
                                              "nfltr:presence:share:blog", "replica"))
        await deferLater(_reactor(), 1.5, lambda: None)
        self.assertEqual(await presence.share("blog"),
                         SharePresence("blog", "r1", "acme", "e2ee"))

    async def test_takenOver(self) -> None:
        """
        A record another replica took (the agent reconnected there) is given
        up at the next refresh: the relay is told, and its holder is turned
        away as replaced.
        """
        first, second = self.presence("r1"), self.presence("r2")
        relay = Relay(FakeStore(), Clock())
        relay.presence = first
        holder = _Holder()
        verifyObject(IAgentHolder, holder)
        relay.claimAgent(AgentEntry("web", "acme", "k1", frozenset({22}), holder))
        await self.settle(first)
        second.agentClaimed(AgentEntry("web", "acme", "k2", frozenset({22}), _Holder()), [])
        await self.settle(second)
        lost: list[tuple[str, str]] = []
        turnAway = replaced_elsewhere(relay)

        def record(kind: str, name: str) -> None:
            lost.append((kind, name))
            turnAway(kind, name)

        first.lost = record
        await first.refreshNow()
        self.assertEqual(lost, [(AGENT, "web")])
        self.assertEqual(holder.refused, [(RefusalReason.CONFLICT, REPLACED)])
        self.assertEqual((await first.agent("web")).replica, "r2")  # type: ignore[union-attr]

    async def test_movedDuringHandOver(self) -> None:
        """
        Once a replica hands its agents over (L{Replica.handOver}), a record
        another replica took at the next refresh is given up, and its holder
        here is not turned away: the agent that moved drains that link
        itself, with the sessions in flight on it.
        """
        relay = Relay(FakeStore(), Clock())
        replica = Replica(ReplicaConfig("tcp:0", Path("unused")), relay, self.table(),
                          StoreHealth("test", Clock()), _reactor())
        first, second = replica.presence, self.presence("r2")
        self.addCleanup(first.stop)
        relay.presence = first
        holder = _Holder()
        relay.claimAgent(AgentEntry("web", "acme", "k1", frozenset({22}), holder))
        await self.settle(first)
        second.agentClaimed(AgentEntry("web", "acme", "k2", frozenset({22}), _Holder()), [])
        await self.settle(second)
        await replica.handOver()  # no agent link here to ask: at once
        await first.refreshNow()
        self.assertEqual(holder.refused, [])
        self.assertEqual(first.held, {})

    async def test_knownDown(self) -> None:
        """
        While the store is known to be down, a look-up fails at once with
        L{StoreUnavailable} (nothing waits for Redis); once it is up again,
        look-ups are made.
        """
        presence = self.presence("r1")
        presence.health = StoreHealth("the test directory", _reactor())
        presence.health.log = Logger(observer=lambda event: None)
        presence.health.failed(StoreUnavailable("gone"))
        self.failureResultOf(presence.agent("web"), StoreUnavailable)
        presence.health.answered()
        self.assertIsNone(await presence.agent("web"))

    async def test_slowRedis(self) -> None:
        """
        A Redis that does not answer (frozen) fails a look-up within the
        command timeout with L{StoreUnavailable}, which marks the store down
        (one warning); nothing waits longer.
        """
        presence = self.presence("r1")
        presence.health = StoreHealth("the test directory", _reactor())
        warnings: list[dict[str, Any]] = []
        presence.health.log = Logger(observer=warnings.append)
        self.server.signal("STOP")
        self.addCleanup(self.server.signal, "CONT")
        started = _reactor().seconds()
        with self.assertRaises(StoreUnavailable):
            await presence.agent("web")
        self.assertLess(_reactor().seconds() - started, TIMEOUT + 1)
        self.assertFalse(presence.health.available)
        self.assertEqual(len(warnings), 1)

    async def test_garbage(self) -> None:
        """
        A record that is not nfltr's (another program wrote it) is logged and
        read as absent; the table itself says what is wrong.
        """
        presence = self.presence("r1")
        events: list[dict[str, Any]] = []
        presence.log = Logger(observer=events.append)
        await redis_command(self.server, "HSET", "nfltr:presence:agent:web", "replica", "r9",
                            "account", "acme", "ports", "http")
        await redis_command(self.server, "HSET", "nfltr:presence:share:blog", "x", "y")
        self.assertIsNone(await presence.agent("web"))
        self.assertIsNone(await presence.share("blog"))
        with self.assertRaises(StoreError):
            await presence.table.lookup(SHARE, "blog")
        self.assertEqual(len(events), 2)
        self.assertIn("presence record agent:web ignored", events[0]["log_format"].format(
            **events[0]))
