"""
Tests for L{nfltr.relay.directory}, with times passed in as a L{Clock}
would give them.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.directory import AgentEntry, Directory
from nfltr.relay.leases import Leases, NameLeased

LEASE = 60.0


def entry(name: str = "web", account: str = "acme", keyid: str = "k1",
          ports: tuple[int, ...] = (3000,), holder: object | None = None) -> AgentEntry:
    return AgentEntry(name, account, keyid, frozenset(ports), holder or object())


class DirectoryTests(SynchronousTestCase):
    """
    Agents by name, links by key id.
    """

    def setUp(self) -> None:
        self.leases = Leases(LEASE)
        self.d = Directory(self.leases)

    def test_claimFreeName(self) -> None:
        """
        A free name is claimed without replacing anybody, and leased to the
        agent's account.
        """
        e = entry()
        self.assertIsNone(self.d.claimAgent(e, 0))
        self.assertIs(self.d.agent("web"), e)
        self.assertEqual(self.leases.holder("web", 10 * LEASE), "acme")

    def test_otherAccountConflicts(self) -> None:
        """
        Another account cannot claim a live agent's name; the holder stays.
        """
        first = entry()
        self.d.claimAgent(first, 0)
        self.assertRaises(NameLeased, self.d.claimAgent, entry(account="bravo", keyid="k2"), 1)
        self.assertIs(self.d.agent("web"), first)

    def test_leaseOutlivesTheAgent(self) -> None:
        """
        Once the agent gave its name up, another account still cannot claim
        it until the lease time passed; the owner's agent may meanwhile,
        and another account may after.
        """
        first = entry()
        self.d.claimAgent(first, 0)
        self.assertTrue(self.d.releaseAgent(first, 10))
        self.assertIsNone(self.d.agent("web"))
        bravo = entry(account="bravo", keyid="k2")
        self.assertRaises(NameLeased, self.d.claimAgent, bravo, 10 + LEASE - 0.1)
        self.assertIsNone(self.d.agent("web"))
        again = entry(keyid="k3")
        self.assertIsNone(self.d.claimAgent(again, 20))
        self.assertTrue(self.d.releaseAgent(again, 30))
        self.assertRaises(NameLeased, self.d.claimAgent, bravo, 30 + LEASE - 0.1)
        self.assertIsNone(self.d.claimAgent(bravo, 30 + LEASE))
        self.assertIs(self.d.agent("web"), bravo)

    def test_shareLeaseHoldsAgentName(self) -> None:
        """
        A name leased for a share (the same table) cannot be another
        account's agent name.
        """
        self.leases.claim("blog", "acme", 0)
        self.assertRaises(NameLeased, self.d.claimAgent, entry("blog", "bravo"), 1)

    def test_sameAccountReplaces(self) -> None:
        """
        The same account's new agent replaces the old one, which is returned;
        releasing the old entry later leaves the new one in place, and the
        lease counts the name's holder once.
        """
        old, new = entry(keyid="k1"), entry(keyid="k2")
        self.d.claimAgent(old, 0)
        self.assertIs(self.d.claimAgent(new, 1), old)
        self.assertIs(self.d.agent("web"), new)
        self.assertFalse(self.d.releaseAgent(old, 2))
        self.assertIs(self.d.agent("web"), new)
        self.assertTrue(self.d.releaseAgent(new, 3))
        self.assertIsNone(self.d.agent("web"))
        self.assertEqual(self.leases.holder("web", 3 + LEASE - 0.1), "acme")
        self.assertIsNone(self.leases.holder("web", 3 + LEASE))
        self.assertEqual(self.d.counts(), (0, 0))

    def test_nameReleasedLinkStays(self) -> None:
        """
        An agent that gives its name up (it drains) stays listed under its
        key until its link is removed, so a revocation still finds it.
        """
        e = entry()
        self.d.addLink("k1", e.holder)
        self.d.claimAgent(e, 0)
        self.d.releaseAgent(e, 1)
        self.assertEqual(self.d.linksFor("k1"), [e.holder])
        self.d.removeLink("k1", e.holder)
        self.assertEqual(self.d.linksFor("k1"), [])

    def test_reachable(self) -> None:
        """
        An agent is reachable only by its own account, on a port it shares.
        """
        e = entry(ports=(3000, 22))
        self.d.claimAgent(e, 0)
        self.assertIs(self.d.reachable("web", "acme", 22), e)
        self.assertIsNone(self.d.reachable("web", "bravo", 22))
        self.assertIsNone(self.d.reachable("web", "acme", 80))
        self.assertIsNone(self.d.reachable("api", "acme", 22))

    def test_links(self) -> None:
        """
        Links are listed by key id until removed; removing twice is harmless.
        """
        a, b = object(), object()
        self.d.addLink("k", a)
        self.d.addLink("k", b)
        self.assertEqual(set(self.d.linksFor("k")), {a, b})
        self.d.removeLink("k", a)
        self.d.removeLink("k", a)
        self.assertEqual(self.d.linksFor("k"), [b])
        self.assertEqual(self.d.counts(), (0, 1))

    def test_revoked(self) -> None:
        """
        A key marked revoked stays known as revoked.
        """
        self.assertFalse(self.d.isRevoked("k"))
        self.d.markRevoked("k")
        self.assertTrue(self.d.isRevoked("k"))
