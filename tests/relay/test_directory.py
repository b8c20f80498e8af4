"""
Tests for L{nfltr.relay.directory}.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.directory import AgentEntry, Directory, NameInUse


def entry(name: str = "web", account: str = "acme", keyid: str = "k1",
          ports: tuple[int, ...] = (3000,), holder: object | None = None) -> AgentEntry:
    return AgentEntry(name, account, keyid, frozenset(ports), holder or object())


class DirectoryTests(SynchronousTestCase):
    """
    Agents by name, links by key id.
    """

    def setUp(self) -> None:
        self.d = Directory()

    def test_claimFreeName(self) -> None:
        """
        A free name is claimed without replacing anybody, and the agent's link
        is recorded under its key id.
        """
        e = entry()
        self.assertIsNone(self.d.claimAgent(e))
        self.assertIs(self.d.agent("web"), e)
        self.assertEqual(self.d.linksFor("k1"), [e.holder])

    def test_otherAccountConflicts(self) -> None:
        """
        Another account cannot claim a live agent's name; the holder stays.
        """
        first = entry()
        self.d.claimAgent(first)
        self.assertRaises(NameInUse, self.d.claimAgent, entry(account="bravo", keyid="k2"))
        self.assertIs(self.d.agent("web"), first)
        self.assertEqual(self.d.linksFor("k2"), [])

    def test_sameAccountReplaces(self) -> None:
        """
        The same account's new agent replaces the old one, which is returned
        and no longer listed under its key; releasing the old entry later
        leaves the new one in place.
        """
        old, new = entry(keyid="k1"), entry(keyid="k2")
        self.d.claimAgent(old)
        self.assertIs(self.d.claimAgent(new), old)
        self.assertIs(self.d.agent("web"), new)
        self.assertEqual(self.d.linksFor("k1"), [])
        self.assertFalse(self.d.releaseAgent(old))
        self.assertIs(self.d.agent("web"), new)
        self.assertTrue(self.d.releaseAgent(new))
        self.assertIsNone(self.d.agent("web"))
        self.assertEqual(self.d.counts(), (0, 0))

    def test_reachable(self) -> None:
        """
        An agent is reachable only by its own account, on a port it shares.
        """
        e = entry(ports=(3000, 22))
        self.d.claimAgent(e)
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
