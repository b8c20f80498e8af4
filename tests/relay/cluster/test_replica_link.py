"""
Tests for the replica link's pieces that need no second process: the
replica holder (L{nfltr.relay.cluster.holder}), its targets, and the
visitor addresses the holding replica reads
(L{nfltr.relay.cluster.listener}).  The whole path, with real processes,
is C{tests.integration.test_replicas}.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.link import DIALER
from nfltr.link.twisted import LinkHandler, LinkProtocol, LinkUnavailable
from nfltr.relay.cluster.holder import (
    ReplicaHolder,
    parse_replica_tcp_target,
    replica_tcp_target,
    without_key,
)
from nfltr.relay.cluster.listener import visitor_address
from nfltr.relay.interfaces import KINDS, REPLICA, HolderFigures, IAgentHolder
from nfltr.wire.messages import MessageError

KEY = "nfltr_0123456789ab_" + "A" * 43
NAMES = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)


class HolderTests(SynchronousTestCase):
    """
    L{ReplicaHolder}, the third holder kind.
    """

    def holder(self, key: str | None = KEY) -> ReplicaHolder:
        link = LinkProtocol(DIALER, LinkHandler(), Clock())
        return ReplicaHolder(link, "web", key, 5.0)

    def test_interface(self) -> None:
        """
        It provides L{IAgentHolder}, of kind C{replica} (one of L{KINDS}),
        and reports its link's figures.
        """
        holder = self.holder()
        self.assertTrue(verifyObject(IAgentHolder, holder))
        self.assertIn(REPLICA, KINDS)
        self.assertEqual(holder.figures(), HolderFigures(REPLICA, 0, 0, 0, None, 5.0))

    def test_unavailable(self) -> None:
        """
        A link that is not established opens nothing; a TCP session without
        the client's key cannot be carried.
        """
        self.assertFalse(self.holder().canOpen())
        with self.assertRaises(LinkUnavailable):
            self.holder().openSession("tcp:22", object())
        with self.assertRaises(LinkUnavailable):
            self.holder(None).openSession("tcp:22", object())
        with self.assertRaises(LinkUnavailable):
            self.holder(None).openSession("resume:22", object())


class TargetTests(SynchronousTestCase):
    """
    The replica link's TCP target.
    """

    @given(st.sampled_from(["tcp", "rtcp", "resume"]), NAMES, st.integers(1, 65535))
    def test_roundTrip(self, kind: str, name: str, port: int) -> None:
        """
        What is written is read back, for each kind of client session (plain, resumable, a
        resumption).
        """
        self.assertEqual(parse_replica_tcp_target(replica_tcp_target(name, port, KEY, kind)),
                         (kind, name, port, KEY))

    def test_kinds(self) -> None:
        """
        The kinds are spelled as on a client's link, after C{replica-}; no other kind is
        written.
        """
        self.assertEqual(replica_tcp_target("web", 22, KEY), f"replica-tcp:web:22:{KEY}")
        self.assertEqual(replica_tcp_target("web", 22, KEY, "rtcp"), f"replica-rtcp:web:22:{KEY}")
        self.assertEqual(replica_tcp_target("web", 22, KEY, "resume"),
                         f"replica-resume:web:22:{KEY}")
        with self.assertRaises(ValueError):
            replica_tcp_target("web", 22, KEY, "share")

    @given(st.text(max_size=80))
    def test_anyText(self, text: str) -> None:
        """
        Any text is a target, not one, or a L{MessageError}; a bad target's
        message never holds what followed its port (the key).
        """
        try:
            parse_replica_tcp_target(f"replica-tcp:{text}")
        except MessageError as e:
            self.assertNotIn(KEY, str(e))

    def test_withoutKey(self) -> None:
        """
        An open session shows its target without the key; other targets are
        shown as they are.
        """
        self.assertEqual(without_key(replica_tcp_target("web", 22, KEY)), "replica-tcp:web:22")
        self.assertEqual(without_key(replica_tcp_target("web", 22, KEY, "resume")),
                         "replica-resume:web:22")
        self.assertEqual(without_key("share:blog@1.2.3.4:5"), "share:blog@1.2.3.4:5")

    def test_others(self) -> None:
        """
        Other targets are not replica TCP targets; a malformed one is refused
        without its key.
        """
        self.assertIsNone(parse_replica_tcp_target("tcp:web:22"))
        self.assertIsNone(parse_replica_tcp_target("share:blog@1.2.3.4:5"))
        self.assertIsNone(parse_replica_tcp_target("rtcp:web:22"))
        for kind in ("tcp", "rtcp", "resume"):
            with self.assertRaises(MessageError) as caught:
                parse_replica_tcp_target(f"replica-{kind}:web:x:{KEY}")
            self.assertNotIn(KEY, str(caught.exception))


class VisitorAddressTests(SynchronousTestCase):
    """
    The visitor address in a forwarded share target.
    """

    def test_addresses(self) -> None:
        """
        IPv4 and bracketed IPv6 addresses are read; anything else is not.
        """
        self.assertEqual(visitor_address("10.1.2.3:4567"), IPv4Address("TCP", "10.1.2.3", 4567))
        self.assertEqual(visitor_address("[::1]:80"), IPv6Address("TCP", "::1", 80))
        for bad in ("host:80", "10.1.2.3", "", "[::1]:x"):
            self.assertIsNone(visitor_address(bad))
