"""
Tests for a load-balancing group's share whose every member, on every
replica, withdrew its service (health checks failing): its visitors get the
answer one relay gives (an C{inspect} share's, and a plain-HTTP URL's:
C{503} with C{Retry-After}) through every replica's port, the one that
holds the withdrawn members and one that holds none
(L{nfltr.relay.cluster.routes}), two replicas in memory
(L{tests.relay.cluster.replicas}).  A share nobody publishes:
L{tests.relay.cluster.test_unknown_share}.
"""

from __future__ import annotations

from zope.interface.verify import verifyObject

from nfltr.relay.interfaces import IShareRoutes
from nfltr.wire.messages import INSPECT, HttpShare
from tests.relay.cluster.replicas import TwoReplicasCase
from tests.relay.test_groups import Member


class WithdrawnEverywhereTests(TwoReplicasCase):
    """
    Replica C{a} holds the group's one member of the share C{web}
    (C{inspect}, also in plain HTTP), which withdrew; replica C{b} holds
    none.  A visitor of either replica gets what one relay answers.
    """

    def setUp(self) -> None:
        super().setUp()
        self.records.records[("share", "web")] = {
            "replica": "a", "account": "acme", "mode": INSPECT, "plain": "1", "group": "g",
            "member:a": "9 withdrawn"}
        member = Member(name="a")
        self.a.registry.publish(member, "acme", [HttpShare("web", 3000, INSPECT, plain=True)],
                                lambda: member, "g")
        self.a.registry.health.withdraw(member)

    def test_interfaces(self) -> None:
        """
        The replicas' routing tables are L{IShareRoutes}.
        """
        self.assertTrue(verifyObject(IShareRoutes, self.a.shares))
        self.assertTrue(verifyObject(IShareRoutes, self.b.shares))

    def test_inspectThroughEveryReplica(self) -> None:
        """
        The share's visitor gets the same C{503} (with C{Retry-After}) one
        relay answers, through the replica that holds the withdrawn member
        and through the one that holds none (which carries the visitor to
        the other, whose TLS and answer it is); its TLS is ended by the
        share's certificate each time.
        """
        one = self.visit(self.a, self.a.registry)
        self.assertTrue(one.handshook)
        self.assertTrue(one.received.startswith(b"HTTP/1.1 503 "), one.received)
        self.assertIn(b"\r\nretry-after: 5\r\n", one.received.lower())
        for replica in (self.a, self.b):
            app = self.visit(replica, replica.shares)
            self.assertTrue(app.handshook, f"through replica {replica.name}")
            self.assertEqual(app.received, one.received, f"through replica {replica.name}")

    def test_plainThroughEveryReplica(self) -> None:
        """
        The share's plain-HTTP visitor gets the same C{503} one relay
        answers through either replica's HTTP port.
        """
        one = self.visitPlain(self.a.registry.plainRoute)
        self.assertTrue(one.startswith(b"HTTP/1.1 503 "), one)
        for replica in (self.a, self.b):
            self.assertEqual(self.visitPlain(replica.plain), one, f"through replica {replica.name}")
