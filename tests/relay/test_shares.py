"""
Tests for L{nfltr.relay.shares}: publishing share URLs, leases, routes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from hyperframe.frame import GoAwayFrame
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import RefusalReason
from nfltr.link.twisted import LinkUnavailable
from nfltr.relay.interfaces import HolderFigures
from nfltr.relay.leases import Leases
from nfltr.relay.shares import ShareRefused, ShareRegistry
from nfltr.sni.twisted import HandOver, Splice
from nfltr.tls import ShareCA, ensure_relay_pki, share_request
from nfltr.wire.messages import E2EE, INSPECT, PASSTHROUGH, HttpShare


class FakeLink:
    """
    Records the sessions opened on it, or refuses them.
    """

    def __init__(self) -> None:
        self.opened: list[tuple[str, Any]] = []
        self.unavailable = False

    def openSession(self, target: str, protocol: Any) -> None:
        if self.unavailable:
            raise LinkUnavailable("draining")
        self.opened.append((target, protocol))


class Member(FakeLink):
    """
    A member of a share's group: its own link (L{nfltr.relay.groups}).
    """

    def canOpen(self) -> bool:
        return True

    def figures(self) -> HolderFigures:
        return HolderFigures("link", len(self.opened), 0, 0, None, 0.0)


class Lost:
    """
    A protocol that records its connectionLost.
    """

    def __init__(self) -> None:
        self.reason: Failure | None = None

    def connectionLost(self, reason: Failure) -> None:
        self.reason = reason


class RegistryCase(SynchronousTestCase):
    """
    A L{ShareRegistry} with a real share CA (no tests of its own).
    """

    def setUp(self) -> None:
        pki = ensure_relay_pki(Path(self.mktemp()), [], share_domain="localhost")
        self.clock = Clock()
        self.registry = ShareRegistry(
            ShareCA.load(pki, "localhost"), self.clock, {"localhost", "relay.localhost"},
            Leases(60),
        )
        self.registry.port = 8443
        self.key = ec.generate_private_key(ec.SECP256R1())

    def e2ee(self, name: str) -> HttpShare:
        return HttpShare(name, 3000, E2EE, share_request(self.key, name))


class RegistryTests(RegistryCase):
    """
    L{ShareRegistry}: answers, routes, refusals.
    """

    def test_e2eeAnswer(self) -> None:
        """
        An e2ee share is answered with its URL and a certificate for its
        name, and routed by splicing to a session C{share:NAME@VISITOR}.
        """
        link, holder = FakeLink(), object()
        [answer] = self.registry.publish(holder, "acme", [self.e2ee("blog")], lambda: link)
        self.assertEqual(answer["url"], "https://blog.localhost:8443/")
        leaf = x509.load_pem_x509_certificates(answer["cert"].encode())[0]
        self.assertEqual(
            leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName)
            .value.get_values_for_type(x509.DNSName),
            ["blog.localhost"],
        )
        route = self.registry.route("blog")
        assert isinstance(route, Splice)
        protocol = object()
        route.backend.connect(protocol, IPv6Address("TCP", "2001:db8::5", 4711))
        self.assertEqual(link.opened, [("share:blog@[2001:db8::5]:4711", protocol)])

    def test_modes(self) -> None:
        """
        Passthrough splices (no certificate); inspect hands the connection to
        a TLS stack of the relay.
        """
        link = FakeLink()
        answers = self.registry.publish(
            object(), "acme",
            [HttpShare("raw", 443, PASSTHROUGH), HttpShare("seen", 80, INSPECT)], lambda: link,
        )
        self.assertEqual([("cert" in a) for a in answers], [False, False])
        self.assertIsInstance(self.registry.route("raw"), Splice)
        self.assertIsInstance(self.registry.route("seen"), HandOver)

    def test_inspectNamesItsCA(self) -> None:
        """
        An inspect share's answer carries the share CA (PEM) that signs
        the certificate the relay serves for it, so the agent can tell
        visitors how to trust it; a passthrough share's does not.
        """
        answers = self.registry.publish(
            object(), "acme",
            [HttpShare("raw", 443, PASSTHROUGH), HttpShare("seen", 80, INSPECT)], FakeLink,
        )
        assert self.registry.ca is not None
        self.assertEqual([a.get("ca") for a in answers], [None, self.registry.ca.pem])

    def test_inspectUnderOperatorCertificate(self) -> None:
        """
        An inspect share the operator's certificate covers says so instead
        of naming the share CA.
        """

        assert self.registry.ca is not None
        ca = self.registry.ca

        class Operator:
            tls = ca.issue("seen")

            def covers(self, host: str) -> bool:
                return host == "seen.localhost"

        self.registry.operator = Operator()  # type: ignore[assignment]
        [answer] = self.registry.publish(
            object(), "acme", [HttpShare("seen", 80, INSPECT)], FakeLink
        )
        self.assertEqual((answer.get("ca"), answer.get("operator_cert")), (None, True))

    def test_linkGone(self) -> None:
        """
        A visitor arriving while the agent's link refuses sessions has its
        connection ended (connectionLost), nothing raised.
        """
        link = FakeLink()
        self.registry.publish(object(), "acme", [HttpShare("raw", 443, PASSTHROUGH)], lambda: link)
        link.unavailable = True
        route = self.registry.route("raw")
        assert isinstance(route, Splice)
        lost = Lost()
        route.backend.connect(lost, IPv4Address("TCP", "127.0.0.1", 1))
        self.assertIsNotNone(lost.reason)

    def test_leaseHeldAfterWithdraw(self) -> None:
        """
        Another account cannot publish a name while it is published nor
        during the lease after; the owner can; all-or-nothing: a refused hello
        publishes none of its shares.
        """
        holder = object()
        self.registry.publish(holder, "acme", [self.e2ee("blog")], FakeLink)
        refused = self.assertRaises(
            ShareRefused, self.registry.publish, object(), "bravo",
            [self.e2ee("fresh"), self.e2ee("blog")], FakeLink,
        )
        self.assertEqual(refused.reason, RefusalReason.CONFLICT)
        self.assertEqual(str(refused), "name blog is leased to another account")
        self.assertIsNone(self.registry.route("fresh"))
        self.assertEqual(self.registry.withdraw(holder), ["blog"])
        self.assertIsNone(self.registry.route("blog"))
        self.clock.advance(59)
        self.assertRaises(ShareRefused, self.registry.publish, object(), "bravo",
                          [self.e2ee("blog")], FakeLink)
        self.registry.publish(object(), "acme", [self.e2ee("blog")], FakeLink)

    def test_leaseExpires(self) -> None:
        """
        After the lease time another account may take the name.
        """
        holder = object()
        self.registry.publish(holder, "acme", [self.e2ee("blog")], FakeLink)
        self.registry.withdraw(holder)
        self.clock.advance(60)
        self.registry.publish(object(), "bravo", [self.e2ee("blog")], FakeLink)

    def test_takeOverSameAccount(self) -> None:
        """
        A newer agent of the same account takes the route over; the older
        one's withdrawal then leaves it in place.
        """
        old, new = object(), object()
        oldLink, newLink = FakeLink(), FakeLink()
        self.registry.publish(old, "acme", [HttpShare("raw", 1, PASSTHROUGH)], lambda: oldLink)
        self.registry.publish(new, "acme", [HttpShare("raw", 1, PASSTHROUGH)], lambda: newLink)
        self.assertEqual(self.registry.withdraw(old), [])
        route = self.registry.route("raw")
        assert isinstance(route, Splice)
        route.backend.connect(object(), IPv4Address("TCP", "127.0.0.1", 1))
        self.assertEqual((len(oldLink.opened), len(newLink.opened)), (0, 1))
        self.registry.withdraw(new)
        self.clock.advance(1)
        self.assertRaises(ShareRefused, self.registry.publish, object(), "bravo",
                          [HttpShare("raw", 1, PASSTHROUGH)], FakeLink)

    def test_ownNamesReserved(self) -> None:
        """
        A share whose host name is one of the relay's own is refused.
        """
        refused = self.assertRaises(
            ShareRefused, self.registry.publish, object(), "acme",
            [HttpShare("relay", 1, PASSTHROUGH)], FakeLink,
        )
        self.assertIn("reserved", str(refused))

    def test_badRequest(self) -> None:
        """
        An unreadable signing request refuses the hello as invalid.
        """
        refused = self.assertRaises(
            ShareRefused, self.registry.publish, object(), "acme",
            [HttpShare("blog", 1, E2EE, "junk")], FakeLink,
        )
        self.assertEqual(refused.reason, RefusalReason.INVALID)


class H2cWithdrawTests(RegistryCase):
    """
    The h2c sessions of an inspect share whose service speaks h2c, once
    the share (or one member of its group) is withdrawn while the link
    stays up.
    """

    def publish(self, holder: Any, link: FakeLink, group: str | None = None) -> None:
        self.registry.publish(holder, "acme", [HttpShare("grpc", 50051, INSPECT, h2c_host="")],
                              lambda: link, group)

    def pooled(self, link: FakeLink) -> StringTransport:
        """
        One h2c session of the share's pool, opened on C{link}, connected
        and idle.
        """
        route = self.registry.route("grpc")
        assert isinstance(route, HandOver)
        proxy = route.factory.wrapped.wrappedFactory  # type: ignore[attr-defined]
        proxy.services.acquire()
        transport = StringTransport()
        link.opened[-1][1].makeConnection(transport)
        self.assertFalse(transport.disconnecting)
        return transport

    def test_withdrawn(self) -> None:
        """
        The share withdrawn: its idle h2c session says GOAWAY and is
        closed at once, not kept until the link ends.
        """
        link, holder = FakeLink(), object()
        self.publish(holder, link)
        transport = self.pooled(link)
        self.assertEqual(self.registry.withdraw(holder, "grpc"), ["grpc"])
        self.assertTrue(transport.disconnecting)
        self.assertIn(GoAwayFrame(0).serialize()[3:4], transport.value())

    def test_takenOver(self) -> None:
        """
        A newer agent of the account takes the share over: the older one's
        h2c sessions close (its link may stay up a while).
        """
        old, new = FakeLink(), FakeLink()
        self.publish(object(), old)
        transport = self.pooled(old)
        self.publish(object(), new)
        self.assertTrue(transport.disconnecting)
        self.pooled(new)

    def test_memberLeaves(self) -> None:
        """
        A member of the share's group withdrawn: the pool's sessions take no
        new stream (idle ones closed at once); the next stream gets a new
        session, on the member left.
        """
        first, second = Member(), Member()
        for member in (first, second):
            self.publish(member, member, "g")
        transport = self.pooled(first)
        self.registry.withdraw(first, "grpc")
        self.assertTrue(transport.disconnecting)
        self.pooled(second)
        self.assertEqual(len(first.opened), 1)


class EnforcementTests(RegistryCase):
    """
    A protected share is published only if someone checks its credentials.
    """

    def test_failClosed(self) -> None:
        """
        Refused as invalid: an e2ee share requiring credentials whose agent
        does not declare it enforces them (an older agent); an inspect share
        whose hello lacks the digests the relay must check; a passthrough
        share with credentials.  Accepted: the same e2ee share declaring
        enforcement, and an inspect share with its digests.
        """
        from nfltr.wire.policy import policy_from_options

        full = policy_from_options("a:b", None, [], [])
        csr = self.e2ee("blog").csr
        refused = [
            HttpShare("blog", 1, E2EE, csr, auth=("basic",)),
            HttpShare("blog", 1, INSPECT, auth=("basic",), policy=full.without_secrets()),
            HttpShare("blog", 1, PASSTHROUGH, auth=("basic",)),
        ]
        for share in refused:
            error = self.assertRaises(
                ShareRefused, self.registry.publish, object(), "acme", [share], FakeLink
            )
            self.assertEqual(error.reason, RefusalReason.INVALID)
            self.assertIsNone(self.registry.route("blog"))
        self.registry.publish(object(), "acme", [
            HttpShare("blog", 1, E2EE, csr, auth=("basic",), agent_enforces=True),
            HttpShare("shop", 1, INSPECT, auth=("basic",), policy=full),
        ], FakeLink)

    def test_allowListAtAccept(self) -> None:
        """
        A visitor outside a spliced share's allow list is turned away before
        a session is opened on the agent's link.
        """
        from nfltr.wire.policy import policy_from_options

        link = FakeLink()
        share = HttpShare("raw", 1, PASSTHROUGH, policy=policy_from_options(
            None, None, [], ["10.0.0.0/8"]))
        self.registry.publish(object(), "acme", [share], lambda: link)
        route = self.registry.route("raw")
        assert isinstance(route, Splice)
        lost = Lost()
        route.backend.connect(lost, IPv4Address("TCP", "192.0.2.1", 1))
        self.assertIsNotNone(lost.reason)
        self.assertEqual(link.opened, [])
        route.backend.connect(Lost(), IPv4Address("TCP", "10.1.1.1", 1))
        self.assertEqual(len(link.opened), 1)


class InspectRateTests(RegistryCase):
    """
    The relay's request rate per inspected share.
    """

    def test_rate(self) -> None:
        """
        With a rate of 1 per second and a burst of 2, the third request at
        once gets 429 with Retry-After; a second later one passes again.
        Credentials are checked first.  An open share without a rate has a
        gate too: it refuses duplicate credential headers.
        """
        from nfltr.relay.shares import _gate
        from nfltr.wire.policy import policy_from_options

        share = HttpShare("shop", 1, INSPECT, auth=("bearer",),
                          policy=policy_from_options(None, "t", [], []))
        gate = _gate(share, (1.0, 2), self.clock)
        good = [(b"authorization", b"Bearer t")]
        self.assertEqual([gate(good, None) for _ in range(2)], [None, None])
        denial = gate(good, None)
        assert denial is not None
        self.assertEqual((denial.status, denial.headers), (429, ((b"retry-after", b"1"),)))
        self.assertEqual(gate([], None).status, 401)  # type: ignore[union-attr]
        self.clock.advance(1)
        self.assertIsNone(gate(good, None))
        open_gate = _gate(HttpShare("open", 1, INSPECT), None, self.clock)
        self.assertIsNone(open_gate(good, None))
        self.assertEqual(open_gate(good * 2, None).status, 400)  # type: ignore[union-attr]
