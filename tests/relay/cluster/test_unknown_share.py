"""
Tests for a visitor of the TLS port whose ClientHello names a share under
the share domain that this replica does not publish
(L{nfltr.relay.cluster.routes.ClusterShareRoutes}): after a look-up in the
directory, a share no replica publishes gets the answer one relay gives at
once (a fatal C{unrecognized_name} alert, counted alike), one another
replica publishes is forwarded there, and a directory that cannot answer
closes the visitor without an answer.  Two replicas in memory
(L{tests.relay.cluster.replicas}).
"""

from __future__ import annotations

from OpenSSL import SSL

from nfltr.relay.counters import NOT_FOUND, SHARE
from nfltr.sni.twisted import UNRECOGNIZED_NAME_ALERT
from nfltr.streams import Admission, AdmissionLimits
from nfltr.wire.messages import INSPECT, PASSTHROUGH, HttpShare
from tests.relay.cluster.replicas import REDIRECT, VISITOR, TwoReplicasCase, Visit
from tests.relay.test_groups import Member


class UnknownShareTests(TwoReplicasCase):
    """
    Replica C{b}'s TLS port, routed by the cluster's table, against one
    relay's port (C{b}'s own table alone) for the same names.
    """

    def assertRefusedAlike(self, visit: Visit, one: Visit) -> None:
        """
        C{visit} was answered byte for byte as C{one} (one relay's visit):
        the C{unrecognized_name} alert, which the visitor's TLS stack reads
        as such; counted alike.
        """
        self.assertEqual(bytes(one.written), UNRECOGNIZED_NAME_ALERT)
        self.assertEqual(bytes(visit.written), bytes(one.written))
        self.assertFalse(visit.app.handshook)
        assert visit.app.lost is not None
        self.assertTrue(visit.app.lost.check(SSL.Error), visit.app.lost)
        self.assertIn("unrecognized name", str(visit.app.lost.value))
        self.assertEqual((visit.port.refused, visit.port.routed),
                         (one.port.refused, one.port.routed))

    def test_publishedNowhere(self) -> None:
        """
        A share no replica publishes (no record in the directory) gets, after
        the look-up, the alert one relay answers at once, counted as one
        relay counts it (a refusal C{unrecognized_name}, no share session);
        its plain-HTTP URL is redirected, as on one relay.
        """
        one = self.visitPort(self.port(self.b, self.b.registry), "nope")
        sessions = dict(self.b.harness.relay.counters.sessions)
        visit = self.visitPort(self.port(self.b, self.b.shares), "nope")
        self.assertRefusedAlike(visit, one)
        self.assertEqual(visit.port.refused["unrecognized_name"], 1)
        self.assertEqual(self.b.harness.relay.counters.sessions, sessions)
        self.assertEqual(self.visitPlain(self.b.plain), REDIRECT)

    def test_recordOfThisReplica(self) -> None:
        """
        A record that names only this replica, which does not publish the
        share (a record not yet removed), is no replica publishing it: the
        same alert.
        """
        self.records.records[("share", "web")] = {
            "replica": "b", "account": "acme", "mode": INSPECT}
        one = self.visitPort(self.port(self.b, self.b.registry))
        self.assertRefusedAlike(self.visitPort(self.port(self.b, self.b.shares)), one)

    def test_publishedElsewhere(self) -> None:
        """
        A share another replica publishes is still forwarded there: the
        holder there is asked for a session of the share for this visitor.
        """
        member = Member(name="a")
        self.a.registry.publish(member, "acme", [HttpShare("web", 3000, PASSTHROUGH)],
                                lambda: member)
        self.records.records[("share", "web")] = {
            "replica": "a", "account": "acme", "mode": PASSTHROUGH}
        visit = self.visitPort(self.port(self.b, self.b.shares))
        self.assertEqual(member.opened, ["share:web@192.0.2.7:40000"])
        self.assertEqual(visit.written, b"")
        self.assertEqual(visit.port.routed["splice"], 1)
        self.assertEqual(sum(visit.port.refused.values()), 0)
        self.assertEqual(self.b.peers.counters.forwarded["share"], 1)

    def test_withdrawnElsewhere(self) -> None:
        """
        A C{passthrough} group's share whose every member, on another
        replica, withdrew its service is published there: its visitor is
        closed without an answer through this replica, as through that one
        (one relay's answer), not refused as an unknown name.
        """
        member = Member(name="a")
        self.a.registry.publish(member, "acme", [HttpShare("web", 3000, PASSTHROUGH)],
                                lambda: member, "g")
        self.a.registry.health.withdraw(member)
        self.records.records[("share", "web")] = {
            "replica": "a", "account": "acme", "mode": PASSTHROUGH, "group": "g",
            "member:a": "9 withdrawn"}
        one = self.visitPort(self.port(self.a, self.a.registry))
        visit = self.visitPort(self.port(self.b, self.b.shares))
        for each in (one, visit):
            self.assertEqual(each.written, b"")
            self.assertFalse(each.app.handshook)
            self.assertIsNotNone(each.app.lost)
            self.assertEqual(each.port.refused["unrecognized_name"], 0)
        self.assertEqual(member.opened, [])

    def test_directoryCannotAnswer(self) -> None:
        """
        While the directory cannot answer (and remembers nothing of the
        name), the name may exist elsewhere: the visitor is closed without
        an answer (no alert), counted as a share session the relay could
        not route, not as an unknown name.
        """
        self.records.down = True
        visit = self.visitPort(self.port(self.b, self.b.shares), "nope")
        self.assertEqual(bytes(visit.written), b"")
        self.assertFalse(visit.app.handshook)
        self.assertIsNotNone(visit.app.lost)
        self.assertEqual(visit.port.refused["unrecognized_name"], 0)
        self.assertEqual(
            self.b.harness.relay.counters.sessions[SHARE, "agent_unavailable"], 1)
        self.assertEqual(self.b.harness.relay.counters.sessions[SHARE, NOT_FOUND], 0)

    def test_admission(self) -> None:
        """
        An unknown name's visitor counts toward the TLS port's per-source
        admission limits as on one relay: each takes one of the source's
        connection tokens, and holds none of its open connections or of
        the port's handshakes once refused.
        """
        limits = AdmissionLimits(per_source_open=1, per_source_rate=1e-6, per_source_burst=2)
        ports = []
        for shares in (self.b.registry, self.b.shares):
            port = self.port(self.b, shares)
            port.admission = Admission(limits)
            for _ in range(2):
                self.visitPort(port, "nope")
            assert port.admission is not None
            self.assertEqual((port.admission.handshaking, port.refused["unrecognized_name"]),
                             (0, 2))
            self.assertIsNone(port.buildProtocol(VISITOR))
            ports.append(port.admission.refused)
        one, replica = ports
        self.assertEqual(replica, one)
        self.assertEqual(replica["per_source_rate"], 1)
