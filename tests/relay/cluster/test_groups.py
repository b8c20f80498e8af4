"""
Tests for load-balancing groups across replicas: a group's presence record,
held by every replica that holds a member (L{nfltr.relay.cluster.presence},
the Redis table of L{nfltr.store.IPresenceTable}, on a real C{redis-server},
skipped with the reason without one), and the forwarding side's choice of a
member's replica (L{nfltr.relay.cluster.routes.RemoteRoutes.link}).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.trial import unittest

from nfltr.link import RefusalReason
from nfltr.relay.agents import Relay
from nfltr.relay.cluster.node import replaced_elsewhere
from nfltr.relay.cluster.peers import PeerUnreachable
from nfltr.relay.cluster.presence import (
    AGENT,
    SHARE,
    AgentPresence,
    RedisPresence,
    SharePresence,
    parse_agent,
    parse_share,
)
from nfltr.relay.cluster.routes import TURNS_KEPT, RemoteRoutes
from nfltr.relay.directory import AgentEntry
from nfltr.relay.names import REPLACED
from nfltr.store._redis_presence import MAX_MEMBERS
from tests.redis_helpers import redis_command
from tests.relay.cluster.test_presence import RedisPresenceCase, _Holder
from tests.relay.helpers import FakeStore

KEY = "nfltr:presence:agent:web"


class RecordTests(unittest.SynchronousTestCase):
    """
    Reading a record: a group's names its members' replicas; one written
    before groups reads as before.
    """

    def test_group(self) -> None:
        """
        A group's record names every replica with a member field, sorted;
        its C{replica} field (the last writer) is not one of them by itself.
        """
        record = parse_agent("web", {"replica": "r2", "account": "acme", "ports": "22",
                                     "group": "blue", "member:r2": "9", "member:r1": "9"})
        self.assertEqual((record.group, record.members, record.replicas()),
                         ("blue", ("r1", "r2"), ("r1", "r2")))
        share = parse_share("web", {"replica": "r1", "account": "acme", "mode": "e2ee",
                                    "group": "blue", "member:r1": "9"})
        self.assertEqual(share, SharePresence("web", "r1", "acme", "e2ee", False, "blue",
                                              ("r1",)))

    def test_withdrawnLeftOut(self) -> None:
        """
        A replica whose every member withdrew its service (its member's
        state) is not one the group is reached through; the record names
        it apart.
        """
        record = parse_agent("web", {"replica": "r2", "account": "acme", "group": "blue",
                                     "member:r1": "9 withdrawn", "member:r2": "9"})
        self.assertEqual((record.replicas(), record.withdrawn), (("r2",), ("r1",)))
        share = parse_share("web", {"replica": "r1", "account": "acme", "mode": "inspect",
                                    "group": "blue", "member:r3": "9 withdrawn",
                                    "member:r1": "9 withdrawn"})
        self.assertEqual((share.replicas(), share.withdrawn), ((), ("r1", "r3")))

    def test_olderRecord(self) -> None:
        """
        A record an older replica wrote (no group, no member) names its one
        replica, as before.
        """
        record = parse_agent("web", {"replica": "r1", "account": "acme", "ports": "22"})
        self.assertEqual(record, AgentPresence("web", "r1", "acme", frozenset({22}),
                                               frozenset(), ()))
        self.assertEqual(record.replicas(), ("r1",))
        self.assertEqual(parse_share("blog", {"replica": "r1", "account": "a", "mode": "e2ee"})
                         .replicas(), ("r1",))

    def test_badGroup(self) -> None:
        """
        A group name that is not a name makes the record one nfltr did not
        write.
        """
        for parse, fields in ((parse_agent, {"replica": "r1", "account": "a"}),
                              (parse_share, {"replica": "r1", "account": "a", "mode": "e2ee"})):
            with self.assertRaises(ValueError):
                parse("web", {**fields, "group": "Not A Name"})

    def test_servesHere(self) -> None:
        """
        A relay serves a name's clients itself while one of its agents holds
        it and not every one withdrew: else the cluster's routes are asked.
        """
        relay = Relay(FakeStore(), Clock())
        holder = _Holder()
        self.assertFalse(relay.servesHere("web"))
        relay.claimAgent(AgentEntry("web", "acme", "k", frozenset({22}), holder, group="blue"))
        self.assertTrue(relay.servesHere("web"))
        relay.directory.health.withdraw(holder)
        self.assertFalse(relay.servesHere("web"))


class _Peers:
    """
    Links to the replicas named in C{up}; the others unreachable.
    """

    def __init__(self, up: set[str]) -> None:
        self.up = up
        self.asked: list[str] = []

    def link(self, replica: str) -> Deferred[Any]:
        self.asked.append(replica)
        if replica in self.up:
            return succeed(f"link to {replica}")
        return fail(PeerUnreachable(f"replica {replica} did not answer"))


class TurnTests(unittest.SynchronousTestCase):
    """
    L{RemoteRoutes.link}: a group's members' replicas in turn, per name; an
    unreachable one passed over.
    """

    def routes(self, up: set[str]) -> tuple[RemoteRoutes, _Peers]:
        peers = _Peers(up)
        presence = RedisPresence(None, "me", Clock())  # type: ignore[arg-type]
        return RemoteRoutes(Relay(FakeStore(), Clock()), presence, peers, Clock()), peers  # type: ignore[arg-type]

    def test_inTurnPerName(self) -> None:
        """
        Each name's visitors go to its replicas in turn, whatever the other
        names' visitors do between them.
        """
        routes, _ = self.routes({"a", "b"})
        chosen = []
        for _ in range(4):
            chosen.append(self.successResultOf(routes.link(AGENT, "web", ["a", "b"])))
            self.successResultOf(routes.link(SHARE, "web", ["a", "b"]))
        self.assertEqual(chosen, ["link to a", "link to b"] * 2)

    def test_unreachablePassedOver(self) -> None:
        """
        A replica that cannot be reached (killed) is passed over for the
        next; with none reachable, the last one's failure.
        """
        routes, peers = self.routes({"b"})
        for _ in range(3):
            self.assertEqual(self.successResultOf(routes.link(AGENT, "web", ["a", "b"])),
                             "link to b")
        self.assertIn("a", peers.asked)
        peers.up.clear()
        self.failureResultOf(routes.link(AGENT, "web", ["a", "b"]), PeerUnreachable)
        self.failureResultOf(routes.link(AGENT, "web", []), PeerUnreachable)

    def test_othersLeaveThisReplicaOut(self) -> None:
        """
        The replicas a record names but this one are the candidates.
        """
        routes, _ = self.routes(set())
        record = parse_agent("web", {"replica": "me", "account": "a", "group": "g",
                                     "member:me": "9", "member:b": "9"})
        self.assertEqual(routes.others(record), ["b"])
        self.assertEqual(routes.others(parse_agent("web", {"replica": "me", "account": "a"})),
                         [])

    def test_turnsBounded(self) -> None:
        """
        The turns of at most L{TURNS_KEPT} names are kept.
        """
        routes, _ = self.routes({"a", "b"})
        for n in range(TURNS_KEPT + 5):
            routes.link(AGENT, f"n{n}", ["a", "b"])
        self.assertEqual(len(routes._turns), TURNS_KEPT)


class GroupRecordTests(RedisPresenceCase):
    """
    A group's record in a real Redis directory (each replica's presence
    with a L{Clock}: nothing here waits for time).
    """

    def presence(self, replica: str, ttl: float = 15.0, refresh: float = 5.0,
                 clock: Any = None) -> RedisPresence:
        return super().presence(replica, ttl, refresh, clock or Clock())

    async def members(self) -> set[str]:
        fields = await redis_command(self.server, "HKEYS", KEY)
        return {f.decode()[len("member:"):] for f in fields if f.startswith(b"member:")}

    def twoHere(self, here: RedisPresence, other: RedisPresence) -> tuple[Relay, list[_Holder]]:
        """
        A relay whose presence is C{here}, with two members of group blue
        holding C{web}; C{other} holds one more.
        """
        relay = Relay(FakeStore(), Clock())
        relay.presence = here
        holders = [_Holder(), _Holder()]
        for holder in holders:
            relay.claimAgent(AgentEntry("web", "acme", "k", frozenset({22}), holder,
                                        group="blue"))
        other.agentClaimed(self.entry(), [])
        return relay, holders

    def entry(self, group: str | None = "blue", account: str = "acme") -> AgentEntry:
        return AgentEntry("web", account, "k", frozenset({22}), _Holder(), group=group)

    async def test_joinAndLeave(self) -> None:
        """
        Two replicas' members of one group hold one record that names both;
        each refresh keeps its own; a release takes one out (the record's
        C{replica} then names one that is left), the last one the record.
        """
        first, second = self.presence("r1"), self.presence("r2")
        second.agentClaimed(self.entry(), [])
        await self.settle(second)
        first.agentClaimed(self.entry(), [])
        await self.settle(first)
        self.assertEqual(await redis_command(self.server, "HGET", KEY, "replica"), b"r1")
        record = await first.agent("web")
        assert record is not None
        self.assertEqual(record.replicas(), ("r1", "r2"))
        lost: list[tuple[str, str]] = []
        first.lost = second.lost = lambda kind, name: lost.append((kind, name))
        await first.refreshNow()
        await second.refreshNow()
        self.assertEqual(lost, [])
        first.agentReleased(self.entry())
        await self.settle(first)
        self.assertEqual(await self.members(), {"r2"})
        self.assertEqual(await redis_command(self.server, "HGET", KEY, "replica"), b"r2")
        second.agentReleased(self.entry())
        await self.settle(second)
        self.assertEqual(await redis_command(self.server, "EXISTS", KEY), 0)

    async def test_otherGroupOrNoneReplaces(self) -> None:
        """
        A claim of the same account with another group, or none, replaces
        every member: their replicas' refreshes give the record up, and
        their holders are turned away as replaced.  Another group's claim
        without taking (a refresh) changes nothing.
        """
        first, second, third = self.presence("r1"), self.presence("r2"), self.presence("r3")
        relay, holders = self.twoHere(first, second)
        await self.settle(first)
        await self.settle(second)
        table = first.table
        self.assertFalse(await table.announce(AGENT, "web", {"account": "acme", "group": "red"},
                                              15, "r3", False))
        self.assertEqual(await self.members(), {"r1", "r2"})
        third.agentClaimed(self.entry(group=None), [])
        await self.settle(third)
        first.lost = replaced_elsewhere(relay)
        lost: list[str] = []
        second.lost = lambda kind, name: lost.append(name)
        await first.refreshNow()
        await second.refreshNow()
        self.assertEqual([h.refused for h in holders],
                         [[(RefusalReason.CONFLICT, REPLACED)]] * 2)
        self.assertEqual(lost, ["web"])
        record = await third.agent("web")
        assert record is not None
        self.assertEqual((record.group, record.replicas()), (None, ("r3",)))

    async def test_otherAccountDoesNotJoin(self) -> None:
        """
        Another account's record of the same group is no member's: written
        over only with C{take} (the leases keep other accounts out before
        any claim gets here).
        """
        table = self.table()
        self.assertTrue(await table.announce(AGENT, "web", {"account": "acme", "group": "blue"},
                                             15, "r1", False))
        self.assertFalse(await table.announce(AGENT, "web", {"account": "evil", "group": "blue"},
                                              15, "r2", False))
        self.assertEqual(await self.members(), {"r1"})

    async def test_deadMemberLeftOut(self) -> None:
        """
        A member whose deadline passed (its replica died) is left out of a
        look-up, and dropped by the next write; a group with no live member
        reads as no record.
        """
        presence = self.presence("r1")
        presence.agentClaimed(self.entry(), [])
        await self.settle(presence)
        await redis_command(self.server, "HSET", KEY, "member:dead", "1")
        record = await presence.agent("web")
        assert record is not None
        self.assertEqual(record.replicas(), ("r1",))
        presence.agentClaimed(self.entry(), [])
        await self.settle(presence)
        self.assertEqual(await self.members(), {"r1"})
        await redis_command(self.server, "HSET", KEY, "member:r1", "1")
        self.assertIsNone(await presence.table.lookup(AGENT, "web"))

    async def test_ttlNeverShortened(self) -> None:
        """
        A member written with a shorter TTL than the record's does not
        shorten the record's: another member's deadline outlives it.
        """
        table = self.table()
        fields = {"account": "acme", "group": "blue"}
        self.assertTrue(await table.announce(AGENT, "web", fields, 60, "r1", True))
        self.assertTrue(await table.announce(AGENT, "web", fields, 5, "r2", True))
        self.assertGreater(await redis_command(self.server, "PTTL", KEY), 50000)

    async def test_full(self) -> None:
        """
        At most L{MAX_MEMBERS} replicas hold members: one more is not
        written (and not told it lost the record: its members serve its
        own visitors).
        """
        table = self.table()
        fields = {"account": "acme", "group": "blue"}
        for n in range(MAX_MEMBERS):
            self.assertTrue(await table.announce(AGENT, "web", fields, 15, f"r{n}", True))
        self.assertTrue(await table.announce(AGENT, "web", fields, 15, "extra", True))
        self.assertEqual(len(await self.members()), MAX_MEMBERS)
        self.assertNotIn("extra", await self.members())

    async def test_sharesOfAGroup(self) -> None:
        """
        A group's shares are held by every member's replica too.
        """
        first, second = self.presence("r1"), self.presence("r2")
        first.sharesPublished("acme", [("blog", "inspect")], (), "blue")
        second.sharesPublished("acme", [("blog", "inspect")], (), "blue")
        await self.settle(first)
        await self.settle(second)
        record = await first.share("blog")
        assert record is not None
        self.assertEqual((record.group, record.replicas()), ("blue", ("r1", "r2")))
        second.sharesWithdrawn(["blog"])
        await self.settle(second)
        record = await first.share("blog")
        assert record is not None
        self.assertEqual(record.replicas(), ("r1",))

    async def test_memberHealth(self) -> None:
        """
        When every member on a replica withdrew its service, the replica's
        member says so at once and look-ups leave it out; when one is back,
        it is in again.  Names without a group, or not held, are not
        written.
        """
        first, second = self.presence("r1"), self.presence("r2")
        relay, holders = self.twoHere(first, second)
        health = relay.directory.health
        health.withdraw(holders[0])
        relay.memberHealth(["web"])
        await self.settle(first)
        self.assertEqual((await second.agent("web")).replicas(), ("r1", "r2"))  # type: ignore[union-attr]
        health.withdraw(holders[1])
        relay.memberHealth(["web"])
        await self.settle(first)
        self.assertEqual((await second.agent("web")).replicas(), ("r2",))  # type: ignore[union-attr]
        self.assertIsNone(await redis_command(self.server, "HGET", KEY, "state"))
        await first.refreshNow()  # a refresh keeps the state
        self.assertEqual((await second.agent("web")).replicas(), ("r2",))  # type: ignore[union-attr]
        health.restore(holders[1])
        relay.memberHealth(["web"])
        await self.settle(first)
        self.assertEqual((await second.agent("web")).replicas(), ("r1", "r2"))  # type: ignore[union-attr]
        first.memberHealth(AGENT, "other", True)
        first.agentClaimed(AgentEntry("solo", "acme", "k", frozenset({22}), _Holder()), [])
        first.memberHealth(AGENT, "solo", True)
        await self.settle(first)
        self.assertEqual(await redis_command(self.server, "EXISTS", "nfltr:presence:agent:other"),
                         0)
        self.assertEqual(await first.table.lookup(AGENT, "solo"),
                         {"replica": "r1", "account": "acme", "ports": "22", "plain": "",
                          "shares": ""})
