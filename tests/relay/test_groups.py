"""
Tests for L{nfltr.relay.groups} (the choice, the members), the groups of
L{nfltr.relay.directory} and L{nfltr.relay.shares}, and
L{nfltr.relay.agent_health}.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec
from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.protocol import Factory
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.link import RefusalReason
from nfltr.relay.agents import Relay
from nfltr.relay.cluster.presence import SharePresence
from nfltr.relay.cluster.routes import ClusterShareRoutes, RemoteRoutes, RemoteShareBackend
from nfltr.relay.directory import AgentEntry, Directory
from nfltr.relay.groups import HolderGroup, HolderHealth, choose
from nfltr.relay.interfaces import HolderFigures, IAgentHolder
from nfltr.relay.leases import Leases, NameLeased
from nfltr.relay.shares import WITHDRAWN, ShareRefused, ShareRegistry, _gate
from nfltr.sni.twisted import Later, Splice
from nfltr.store import StoreUnavailable
from nfltr.tls import ShareCA, ensure_relay_pki, share_request
from nfltr.wire.messages import E2EE, INSPECT, HttpShare

from .helpers import FakeStore
from .test_shares import Lost


@implementer(IAgentHolder)
class Member:
    """
    A holder with a number of sessions open, that records the sessions
    opened on it.
    """

    kind = "link"

    def __init__(self, sessions: int = 0, name: str = "") -> None:
        self.sessions = sessions
        self.name = name
        self.open = True
        self.opened: list[str] = []
        self.refused: list[tuple[RefusalReason, str]] = []

    def canOpen(self) -> bool:
        return self.open

    def openSession(self, target: str, protocol: Any, firstBytes: bytes = b"",
                    wantAccept: bool = False) -> Any:
        self.opened.append(target)
        self.sessions += 1

    def refuse(self, reason: RefusalReason, message: str) -> None:
        self.refused.append((reason, message))

    def figures(self) -> HolderFigures:
        return HolderFigures("link", self.sessions, 0, 0, None, 0.0)


class ChooseTests(SynchronousTestCase):
    """
    L{choose}: fewest sessions first, ties in turn.
    """

    def test_fewestFirst(self) -> None:
        """
        The member with the fewest sessions is chosen, wherever the turn is.
        """
        counts = [3, 1, 2]
        for after in range(4):
            self.assertEqual(choose(counts, lambda c: c, lambda c: True, after), 1)

    def test_tiesInTurn(self) -> None:
        """
        Among members tied on sessions, the first at or after the turn is
        chosen, wrapping round.
        """
        counts = [1, 0, 5, 0, 0]
        self.assertEqual([choose(counts, lambda c: c, lambda c: True, after)
                          for after in range(6)], [1, 1, 3, 3, 4, 1])

    def test_unusableSkipped(self) -> None:
        """
        A member that cannot take a session is never chosen, however few
        sessions it has; with none usable, there is no choice.
        """
        members = [(0, False), (4, True), (2, True)]
        self.assertEqual(choose(members, lambda m: m[0], lambda m: m[1], 0), 2)
        self.assertIsNone(choose(members, lambda m: m[0], lambda m: False, 0))
        self.assertIsNone(choose([], lambda m: 0, lambda m: True, 0))


class HolderGroupTests(SynchronousTestCase):
    """
    L{HolderGroup}: members used in turn, withdrawn ones skipped.
    """

    def setUp(self) -> None:
        self.health = HolderHealth()
        self.a, self.b, self.c = Member(name="a"), Member(name="b"), Member(name="c")
        self.group: HolderGroup[Member] = HolderGroup("g", self.a, lambda m: m, self.health)
        self.group.add(self.b)
        self.group.add(self.c)

    def test_interface(self) -> None:
        """
        The test's members are holders.
        """
        self.assertTrue(verifyObject(IAgentHolder, self.a))

    def test_inTurn(self) -> None:
        """
        Members with equal sessions are picked in turn.
        """
        picked = [self.group.pick() for _ in range(6)]
        self.assertEqual([m.name for m in picked if m is not None], list("abcabc"))

    def test_fewestSessionsFirst(self) -> None:
        """
        A member with fewer sessions open is picked until it catches up.
        """
        self.a.sessions = self.b.sessions = 2
        picked = []
        for _ in range(4):
            member = self.group.pick()
            assert member is not None
            member.sessions += 1
            picked.append(member.name)
        self.assertEqual(picked, ["c", "c", "a", "b"])

    def test_withdrawnAndClosedSkipped(self) -> None:
        """
        A withdrawn member, and one that cannot open a session, get nobody;
        restored, a member is picked again.
        """
        self.health.withdraw(self.a)
        self.b.open = False
        self.assertEqual({self.group.pick() for _ in range(3)}, {self.c})
        self.health.restore(self.a)
        self.assertEqual({self.group.pick() for _ in range(4)}, {self.a, self.c})

    def test_allWithdrawn(self) -> None:
        """
        With every member withdrawn, nobody is picked and the group says so;
        with the others unable to open, the first not withdrawn is picked
        (its session fails in its own words).
        """
        for m in (self.a, self.b, self.c):
            self.health.withdraw(m)
        self.assertTrue(self.group.withdrawn())
        self.assertIsNone(self.group.pick())
        self.health.restore(self.b)
        self.b.open = False
        self.assertFalse(self.group.withdrawn())
        self.assertIs(self.group.pick(), self.b)

    def test_removeKeepsTheTurn(self) -> None:
        """
        Removing a member keeps the others in turn.
        """
        self.assertIs(self.group.pick(), self.a)
        self.assertIs(self.group.pick(), self.b)
        self.assertTrue(self.group.remove(self.a))
        self.assertFalse(self.group.remove(self.a))
        self.assertEqual([self.group.pick() for _ in range(3)], [self.c, self.b, self.c])


def entry(holder: Member, account: str = "acme", group: str | None = "g",
          name: str = "web") -> AgentEntry:
    return AgentEntry(name, account, "k-" + account, frozenset({22}), holder, group=group)


class DirectoryGroupTests(SynchronousTestCase):
    """
    Agents of one account under one name and group share it; others cannot.
    """

    def setUp(self) -> None:
        self.leases = Leases(60)
        self.d = Directory(self.leases)
        self.a, self.b = Member(name="a"), Member(name="b")
        self.ea, self.eb = entry(self.a), entry(self.b)
        self.d.claimAgent(self.ea, 0)

    def test_join(self) -> None:
        """
        The same account's agent in the same group joins: nobody is
        replaced, and a client reaches the members in turn.
        """
        self.assertIsNone(self.d.claimAgent(self.eb, 1))
        self.assertEqual(self.d.members("web"), [self.ea, self.eb])
        self.assertEqual(self.d.counts()[0], 2)
        reached = [self.d.reachable("web", "acme", 22) for _ in range(4)]
        self.assertEqual(reached, [self.ea, self.eb, self.ea, self.eb])
        self.assertIsNone(self.d.reachable("web", "other", 22))

    def test_otherAccountNeverJoins(self) -> None:
        """
        Another account's agent naming the same group is refused, as any
        claim on a name another account holds.
        """
        self.assertRaises(NameLeased, self.d.claimAgent, entry(Member(), account="evil"), 1)
        self.assertEqual(self.d.members("web"), [self.ea])

    def test_otherGroupOrNoneReplaces(self) -> None:
        """
        Without a group (or in another), the same account's agent replaces
        the name's agents, as today.
        """
        self.d.claimAgent(self.eb, 1)
        c = entry(Member(), group=None)
        self.assertIs(self.d.claimAgent(c, 2), self.ea)
        self.assertEqual(self.d.members("web"), [c])
        self.d.releaseAgent(c, 3)
        self.assertRaises(NameLeased, self.d.claimAgent, entry(Member(), account="x"), 4)

    def test_releaseOne(self) -> None:
        """
        A member that leaves leaves the name to the others; the last one's
        leaving frees it (its lease runs).
        """
        self.d.claimAgent(self.eb, 1)
        self.assertTrue(self.d.releaseAgent(self.ea, 2))
        self.assertIs(self.d.agent("web"), self.eb)
        self.assertEqual(self.d.reachable("web", "acme", 22), self.eb)
        self.assertTrue(self.d.releaseAgent(self.eb, 3))
        self.assertIsNone(self.d.agent("web"))
        self.assertEqual(self.leases.holder("web", 4), "acme")

    def test_withdrawn(self) -> None:
        """
        A withdrawn member gets no client; with every member withdrawn the
        name is not reachable (the TCP route refuses).
        """
        self.d.claimAgent(self.eb, 1)
        self.d.health.withdraw(self.a)
        self.assertEqual({self.d.reachable("web", "acme", 22) for _ in range(3)}, {self.eb})
        self.d.health.withdraw(self.b)
        self.assertIsNone(self.d.reachable("web", "acme", 22))


class _Presence:
    """
    This replica's (C{me}) look-ups of share records: the answers in C{records}.
    """

    replica = "me"

    def __init__(self) -> None:
        self.records: dict[str, Deferred[SharePresence | None]] = {}

    def share(self, name: str) -> Deferred[SharePresence | None]:
        return self.records.pop(name)


class ShareGroupTests(SynchronousTestCase):
    """
    Share URLs published by a group: its members' sessions in turn, 503
    when every one withdrew.
    """

    def setUp(self) -> None:
        pki = ensure_relay_pki(Path(self.mktemp()), [], share_domain="localhost")
        self.clock = Clock()
        self.registry = ShareRegistry(ShareCA.load(pki, "localhost"), self.clock,
                                      {"localhost"}, Leases(60))
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.a, self.b = Member(name="a"), Member(name="b")

    def publish(self, holder: Member, account: str = "acme", group: str | None = "g") -> Any:
        share = HttpShare("web", 3000, E2EE, share_request(self.key, "web"))
        return self.registry.publish(holder, account, [share], lambda: holder, group)

    def visit(self) -> None:
        route = self.registry.route("web")
        assert isinstance(route, Splice)
        route.backend.connect(Lost(), IPv4Address("TCP", "192.0.2.1", 1))

    def test_membersInTurn(self) -> None:
        """
        Two holders of one account and group publish one share; its
        visitors go to each in turn; one withdrawn, all go to the other.
        """
        self.publish(self.a)
        self.assertTrue(self.registry.joins("web", "acme", "g"))
        self.publish(self.b)
        self.assertEqual(self.registry.holdersOf("web"), [self.a, self.b])
        for _ in range(4):
            self.visit()
        self.assertEqual((len(self.a.opened), len(self.b.opened)), (2, 2))
        self.registry.health.withdraw(self.a)
        for _ in range(2):
            self.visit()
        self.assertEqual((len(self.a.opened), len(self.b.opened)), (2, 4))

    def test_otherAccountRefused(self) -> None:
        """
        Another account cannot join the group, nor take the share.
        """
        self.publish(self.a)
        self.assertFalse(self.registry.joins("web", "evil", "g"))
        self.assertRaises(ShareRefused, self.publish, self.b, "evil")
        self.assertEqual(self.registry.holdersOf("web"), [self.a])

    def test_withdrawOneMember(self) -> None:
        """
        A member that leaves leaves the share to the others.
        """
        self.publish(self.a)
        self.publish(self.b)
        self.assertEqual(self.registry.withdraw(self.a), ["web"])
        self.assertIs(self.registry.holderOf("web"), self.b)
        self.assertEqual(self.registry.heldBy(self.b), ["web"])
        self.registry.withdraw(self.b)
        self.assertIsNone(self.registry.route("web"))

    def test_clusterRoute(self) -> None:
        """
        On a replica (L{ClusterShareRoutes}), a group's share whose every
        member here withdrew its service goes to the cluster's routes (the
        other replicas' members) once the directory names one that serves;
        else (or with no answer) it stays here (its own answer: one
        relay's).  A share without a group stays here, withdrawn or not.
        """
        relay = Relay(FakeStore(), self.clock, shares=self.registry)
        presence = _Presence()
        routes = ClusterShareRoutes(self.registry, RemoteRoutes(relay, presence, None, self.clock))  # type: ignore[arg-type]
        self.publish(self.a)
        self.publish(self.b)
        local = self.registry.route("web")
        self.registry.health.withdraw(self.a)
        self.assertIs(routes.route("web"), local)
        self.registry.health.withdraw(self.b)
        self.assertTrue(self.registry.groupWithdrawn("web"))
        elsewhere = SharePresence("web", "r2", "acme", E2EE, False, "g", ("r2",), ("me",))
        presence.records["web"] = succeed(elsewhere)
        later = routes.route("web")
        assert isinstance(later, Later)
        remote = self.successResultOf(later.decision)
        assert isinstance(remote, Splice) and isinstance(remote.backend, RemoteShareBackend)
        self.assertEqual(remote.backend.record, elsewhere)
        for answer in (succeed(replace(elsewhere, members=(), withdrawn=("me", "r2"))),
                       fail(StoreUnavailable("down"))):
            presence.records["web"] = answer
            later = routes.route("web")
            assert isinstance(later, Later)
            self.assertIs(self.successResultOf(later.decision), local)
        self.registry.withdraw(self.a)
        self.registry.withdraw(self.b)
        self.publish(self.a, group=None)
        self.registry.health.withdraw(self.a)
        self.assertFalse(self.registry.groupWithdrawn("web"))
        self.assertIs(routes.route("web"), self.registry.route("web"))

    def test_allWithdrawn503(self) -> None:
        """
        The relay's proxy answers 503 (with Retry-After) while every member
        withdrew; then requests pass again.
        """
        health = HolderHealth()
        members: HolderGroup[Member] = HolderGroup("g", self.a, lambda m: m, health)
        gate = _gate(HttpShare("web", 1, INSPECT), None, self.clock, members)
        self.assertIsNone(gate([], None))
        health.withdraw(self.a)
        self.assertEqual(gate([], None), WITHDRAWN)
        self.assertEqual(WITHDRAWN.status, 503)
        health.restore(self.a)
        self.assertIsNone(gate([], None))


class AgentLimitTests(SynchronousTestCase):
    """
    Each member of a group is one agent under the relay's agent limit.
    """

    def test_memberCounts(self) -> None:
        """
        With room for one agent, a second member of the group is refused.
        """
        from nfltr.relay.names import ClaimRefused, check_agent_claim

        d = Directory(Leases(60))
        d.claimAgent(entry(Member()), 0)
        second = entry(Member())
        self.assertTrue(d.joins(second))
        self.assertRaises(ClaimRefused, check_agent_claim, d, second, 1, 1)
        check_agent_claim(d, second, 1, 2)


class PublicPortGroupTests(SynchronousTestCase):
    """
    A public port published by a group: one listener, its members in turn.
    """

    def setUp(self) -> None:
        from nfltr.relay.agents import Relay
        from nfltr.relay.port_ranges import parse_port_ranges
        from nfltr.relay.public_ports import PublicPorts

        from .helpers import FakeStore
        from .test_public_ports import Listening

        self.clock = Clock()
        self.relay = Relay(FakeStore(), self.clock)
        self.bound: list[Listening] = []

        def listen(port: int, factory: Any) -> Any:
            self.bound.append(Listening(port, factory))
            return self.bound[-1]

        self.ports = self.relay.publicPorts = PublicPorts(
            parse_port_ranges("2000-2004"), 2, self.relay.directory.leases, self.clock,
            listen, lambda port: Factory(),
        )
        self.ports.health = self.relay.directory.health
        self.a, self.b = Member(name="a"), Member(name="b")

    def publish(self, holder: Member, account: str = "acme") -> Any:
        from nfltr.relay.public_ports import PortRequest

        return self.relay.publishPorts(holder, account, [PortRequest(5432, 2000)], "g")

    def test_membersInTurn(self) -> None:
        """
        Two members of one account and group share the port and its one
        listener, nobody replaced; visitors go to each in turn, and to the
        other while one withdrew.
        """
        self.publish(self.a)
        self.publish(self.b)
        self.assertEqual((len(self.bound), self.a.refused, self.b.refused), (1, [], []))
        entry = self.ports.entry(2000)
        assert entry is not None
        self.assertEqual([entry.pick() for _ in range(4)], [self.a, self.b, self.a, self.b])
        self.relay.directory.health.withdraw(self.b)
        self.assertEqual({entry.pick() for _ in range(3)}, {self.a})
        self.relay.directory.health.withdraw(self.a)
        self.assertIsNone(entry.pick())

    def test_otherAccountAndLeaving(self) -> None:
        """
        Another account cannot take or join the port; a member that leaves
        leaves it listening for the other; the last one's leaving stops it.
        """
        from nfltr.relay.public_ports import PublicPortRefused

        self.publish(self.a)
        self.publish(self.b)
        self.assertRaises(PublicPortRefused, self.publish, Member(), "evil")
        self.relay.withdrawPort(self.a, 2000)
        self.assertIs(self.ports.holderOf(2000), self.b)
        self.assertFalse(self.bound[0].stopped)
        self.relay.withdrawPort(self.b, 2000)
        self.assertTrue(self.bound[0].stopped)
