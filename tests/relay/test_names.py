"""
Tests for L{nfltr.relay.names}: one ownership rule for agent names and share
names, through real dialer links (L{RelayHarness}) on a L{Clock}.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet import error
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import RefusalReason
from nfltr.relay.directory import AgentEntry, Directory
from nfltr.relay.leases import Leases
from nfltr.relay.names import (
    ClaimRefused,
    check_agent_claim,
    check_name_free,
    name_taken_message,
)
from nfltr.relay.shares import ShareRegistry
from nfltr.tls import ShareCA, ensure_relay_pki
from nfltr.wire.messages import PASSTHROUGH, HttpShare, TcpShare, agent_hello

from .helpers import RelayHarness, without_token

A_KEY, A2_KEY, B_KEY = "aaaaaaaaaaaa", "a2a2a2a2a2a2", "bbbbbbbbbbbb"
LEASE = 60.0
TAKEN = {"type": "refused", "reason": "conflict", "message": name_taken_message("blog")}


class RuleTests(SynchronousTestCase):
    """
    L{check_name_free} and L{check_agent_claim} on their own.
    """

    def setUp(self) -> None:
        self.directory = Directory(Leases(LEASE))

    def entry(self, account: str, holder: object | None = None) -> AgentEntry:
        return AgentEntry("blog", account, "k", frozenset({22}), holder or object())

    def test_leaseDecides(self) -> None:
        """
        A name another account leases is refused as C{conflict} in the
        same words for a connected holder and a lease alone; one's own
        lease is no obstacle.
        """
        alice = self.entry("alice")
        self.directory.claimAgent(alice, 0)
        texts = []
        for now in (1, 2):
            with self.assertRaises(ClaimRefused) as e:
                check_agent_claim(self.directory, self.entry("bob"), now, None)
            texts.append((e.exception.reason, str(e.exception)))
            self.directory.releaseAgent(alice, now)
        self.assertEqual(texts, [(RefusalReason.CONFLICT, name_taken_message("blog"))] * 2)
        check_agent_claim(self.directory, self.entry("alice"), 3, None)
        check_name_free(self.directory.leases, "blog", "alice", 3)
        check_agent_claim(self.directory, self.entry("bob"), 1 + LEASE, None)

    def test_leaseBeforeLimit(self) -> None:
        """
        At the agent limit, another account's claim to a leased name is
        refused for the name, not the limit: the same answer as below it.
        """
        self.directory.claimAgent(self.entry("alice"), 0)
        with self.assertRaises(ClaimRefused) as e:
            check_agent_claim(self.directory, self.entry("bob"), 1, maxAgents=1)
        self.assertEqual(str(e.exception), name_taken_message("blog"))

    def test_noReplace(self) -> None:
        """
        Without C{replace}, the account's own live agent under the name is
        not replaced (unless it is the claimant's own holder); with it, it is.
        """
        holder = object()
        self.directory.claimAgent(self.entry("alice", holder), 0)
        with self.assertRaises(ClaimRefused) as e:
            check_agent_claim(self.directory, self.entry("alice"), 1, None, replace=False)
        self.assertIn("connected already", str(e.exception))
        check_agent_claim(self.directory, self.entry("alice", holder), 1, None, replace=False)
        check_agent_claim(self.directory, self.entry("alice"), 1, None)


class OwnershipTests(SynchronousTestCase):
    """
    Alice's C{nfltr http --name blog} and Bob's C{nfltr tcp --name blog},
    as the relay sees them.
    """

    def setUp(self) -> None:
        pki = ensure_relay_pki(Path(self.mktemp()), [], share_domain="localhost")
        clock = Clock()
        self.registry = ShareRegistry(ShareCA.load(pki, "localhost"), clock, (), Leases(LEASE))
        self.h = RelayHarness(shares=self.registry, clock=clock)
        self.alice = self.h.store.addKey(A_KEY, "alice")
        self.alice2 = self.h.store.addKey(A2_KEY, "alice")
        self.bob = self.h.store.addKey(B_KEY, "bob")

    def http(self, key: str, name: str = "blog", share: str = "blog") -> Any:
        return self.h.dial(agent_hello(key, name, [], [HttpShare(share, 443, PASSTHROUGH)]))

    def tcp(self, key: str, name: str = "blog") -> Any:
        return self.h.dial(agent_hello(key, name, [TcpShare(22)]))

    def test_agentNameLeasedWithTheShare(self) -> None:
        """
        While Alice's agent is away for a moment (its link cut), Bob's TCP
        agent cannot take the agent name; Alice's reconnecting agent gets
        name and share back; after the lease ends without her, Bob may.
        """
        first = self.http(self.alice)
        first.cut(error.ConnectionLost("wifi"))
        self.h.run()
        bob = self.tcp(self.bob)
        self.assertEqual(bob.controls, [TAKEN])
        self.assertTrue(bob.closed)
        self.assertIsNone(self.h.relay.directory.agent("blog"))
        again = self.http(self.alice)
        [welcome] = without_token(again.controls)
        self.assertEqual((welcome["type"], welcome["name"]), ("welcome", "blog"))
        self.assertEqual(self.h.relay.directory.agent("blog").account, "alice")
        self.assertIsNotNone(self.registry.route("blog"))
        again.cut(error.ConnectionLost("gone for good"))
        self.h.run()
        self.h.clock.advance(LEASE - 0.1)
        self.assertEqual(self.tcp(self.bob).controls, [TAKEN])
        self.h.clock.advance(0.1)
        late = self.tcp(self.bob)
        self.assertEqual(late.controls[0]["type"], "welcome")
        self.assertEqual(self.h.relay.directory.agent("blog").account, "bob")

    def test_drainingOwnerKeepsTheLease(self) -> None:
        """
        An agent that drains gives its name up to its own account's next
        agent, not to another account.
        """
        first = self.tcp(self.alice)
        first.link.drain()
        self.h.run()
        self.assertIsNone(self.h.relay.directory.agent("blog"))
        self.assertEqual(self.tcp(self.bob).controls, [TAKEN])
        successor = self.tcp(self.alice2)
        self.assertEqual(successor.controls[0]["type"], "welcome")

    def test_refusalsIdentical(self) -> None:
        """
        Bob asking for C{blog} gets the same refusal whether Alice's agent
        is connected or only her lease lives, and whether C{blog} is asked
        for, or held, as an agent name or a share name.
        """
        answers = {}
        alice = self.http(self.alice)
        answers["agent name, holder connected"] = self.tcp(self.bob).controls
        answers["share name, holder connected"] = self.http(self.bob, "other").controls
        alice.cut(error.ConnectionLost("away"))
        self.h.run()
        answers["agent name, lease only"] = self.tcp(self.bob).controls
        answers["share name, lease only"] = self.http(self.bob, "other").controls
        self.h.clock.advance(LEASE)
        elsewhere = self.http(self.alice, "elsewhere", "blog")  # blog: only a share name
        answers["agent name held as a share name"] = self.tcp(self.bob).controls
        elsewhere.cut(error.ConnectionLost("away"))
        self.h.run()
        self.h.clock.advance(LEASE)
        self.tcp(self.alice)  # blog: only an agent name
        answers["share name held as an agent name"] = self.http(self.bob, "other").controls
        self.assertEqual(set(map(str, answers.values())), {str([TAKEN])}, answers)
