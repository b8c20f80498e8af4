"""
Tests for L{nfltr.relay.port_ranges}, L{nfltr.relay.public_ports} and
L{nfltr.relay.public_listener}: the operator's ranges, the ports' leases
and refusals, and each visitor's admission and session.
"""

from __future__ import annotations

import errno
import ipaddress
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.internet.address import IPv4Address
from twisted.internet.error import CannotListenError, ConnectionDone
from twisted.internet.protocol import Factory
from twisted.internet.task import Clock
from twisted.python import usage
from twisted.python.failure import Failure
from twisted.test.proto_helpers import StringTransport
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.link import RefusalReason
from nfltr.link.twisted import LinkUnavailable
from nfltr.relay.agents import Relay
from nfltr.relay.directory import AgentEntry
from nfltr.relay.interfaces import ISessionOpener
from nfltr.relay.leases import Leases
from nfltr.relay.metrics import metrics_registry
from nfltr.relay.names import REPLACED
from nfltr.relay.port_ranges import MAX_RANGES, PortRangeError, PortRanges, parse_port_ranges
from nfltr.relay.public_listener import PublicPortFactory
from nfltr.relay.public_ports import PortRequest, PublicPortRefused, PublicPorts, lease_name
from nfltr.streams import Admission, AdmissionLimits
from tests.relay.helpers import FakeStore
from tests.relay.test_tap import parse

LEASE = 100.0


@st.composite
def port_ranges(draw: Any) -> list[tuple[int, int]]:
    """
    Sorted, disjoint, inclusive ranges.
    """
    bounds = sorted(draw(st.sets(st.integers(1, 65535), min_size=1, max_size=2 * MAX_RANGES)))
    pairs = []
    for i in range(0, len(bounds) - 1, 2):
        pairs.append((bounds[i], bounds[i + 1]))
    if len(bounds) % 2:
        pairs.append((bounds[-1], bounds[-1]))
    return pairs


class RangeTests(SynchronousTestCase):
    """
    L{parse_port_ranges}.
    """

    @given(port_ranges(), st.integers(1, 65535))
    def test_roundTrip(self, pairs: list[tuple[int, int]], port: int) -> None:
        """
        Ranges written out read back the same; a port is in them exactly
        when one range holds it; the count is the ports'.
        """
        text = ",".join(f"{low}-{high}" for low, high in pairs)
        ranges = parse_port_ranges(text)
        self.assertEqual(parse_port_ranges(str(ranges)), ranges)
        self.assertEqual(port in ranges, any(low <= port <= high for low, high in pairs))
        self.assertEqual(len(ranges), sum(high - low + 1 for low, high in pairs))

    @given(st.text(max_size=40))
    def test_anyText(self, text: str) -> None:
        """
        Any text is ranges or a L{PortRangeError}, nothing else.
        """
        try:
            ranges = parse_port_ranges(text)
        except PortRangeError:
            return
        self.assertTrue(all(1 <= port <= 65535 for low, high in ranges.ranges
                            for port in (low, high)))

    def test_bad(self) -> None:
        """
        Each mistake is named.
        """
        for text, words in [("0-10", "1..65535"), ("20-10", "ends before it starts"),
                            ("10-20,15", "overlap at port 15"), ("x", "'x'"),
                            ("1-70000", "1..65535"), (",".join(["1"] * 65), "at most 64")]:
            with self.assertRaises(PortRangeError) as caught:
                parse_port_ranges(text)
            self.assertIn(words, str(caught.exception))

    def test_none(self) -> None:
        """
        C{none} and nothing: no ports, false.
        """
        self.assertFalse(parse_port_ranges("none"))
        self.assertFalse(parse_port_ranges(""))
        self.assertEqual(str(parse_port_ranges("7, 1-3")), "1-3,7")


class Holder:
    """
    An agent holder that records the sessions it opens and its refusal.
    """

    def __init__(self) -> None:
        self.opened: list[tuple[str, Any]] = []
        self.refused: tuple[RefusalReason, str] | None = None
        self.unavailable = False

    def openSession(self, target: str, protocol: Any, firstBytes: bytes = b"",
                    wantAccept: bool = False) -> Any:
        if self.unavailable:
            raise LinkUnavailable("draining")
        transport = StringTransport()
        self.opened.append((target, protocol))
        protocol.makeConnection(transport)
        return transport

    def refuse(self, reason: RefusalReason, message: str) -> None:
        self.refused = (reason, message)


class Listening:
    """
    A bound port, stopped or not.
    """

    def __init__(self, port: int, factory: Any) -> None:
        self.port = port
        self.factory = factory
        self.stopped = False

    def stopListening(self) -> None:
        self.stopped = True


class PortsCase(SynchronousTestCase):
    """
    L{PublicPorts} over ports 2000-2004, two per account, with a listener
    that records (and fails on the ports in C{busy}).
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.leases = Leases(LEASE)
        self.busy: set[int] = set()
        self.bound: dict[int, Listening] = {}
        self.ports = PublicPorts(parse_port_ranges("2000-2004"), 2, self.leases, self.clock,
                                 self.listen, lambda port: Factory())

    def listen(self, port: int, factory: Any) -> Listening:
        if port in self.busy:
            raise CannotListenError("127.0.0.1", port, OSError(errno.EADDRINUSE,
                                                               "Address already in use"))
        listening = self.bound[port] = Listening(port, factory)
        return listening

    def refused(self, holder: Any, account: str, *requests: PortRequest) -> PublicPortRefused:
        with self.assertRaises(PublicPortRefused) as caught:
            self.ports.publish(holder, account, requests)
        return caught.exception


class PublishTests(PortsCase):
    """
    L{PublicPorts.publish} and L{PublicPorts.withdraw}.
    """

    def test_explicit(self) -> None:
        """
        A port in the ranges is bound, leased to the account, and answered.
        """
        holder = Holder()
        answers = self.ports.publish(holder, "acme", [PortRequest(5432, 2003)])
        self.assertEqual(answers, [{"port": 5432, "public_port": 2003}])
        self.assertIn(2003, self.bound)
        self.assertEqual(self.leases.holder(lease_name(2003), 0), "acme")
        self.assertIs(self.ports.holderOf(2003), holder)

    def test_outside(self) -> None:
        """
        A port outside the ranges is refused, naming them; nothing is bound.
        """
        e = self.refused(Holder(), "acme", PortRequest(22, 3000))
        self.assertEqual(e.reason, RefusalReason.INVALID)
        self.assertEqual(str(e), "public port 3000 is outside the relay's public ports "
                                 "(2000-2004)")
        self.assertEqual(self.bound, {})

    def test_notEnabled(self) -> None:
        """
        A relay without ranges refuses every request, naming the option.
        """
        self.ports.ranges = PortRanges()
        self.assertIn("--public-ports", str(self.refused(Holder(), "acme", PortRequest(1, 0))))

    def test_leasedToAnother(self) -> None:
        """
        Another account cannot take a held port, nor a port whose lease
        runs after its holder left; once the lease ended, it can.
        """
        holder = Holder()
        self.ports.publish(holder, "acme", [PortRequest(1, 2001)])
        e = self.refused(Holder(), "evil", PortRequest(1, 2001))
        self.assertEqual((e.reason, str(e)),
                         (RefusalReason.CONFLICT, "public port 2001 is leased to another account"))
        self.assertEqual(self.ports.withdraw(holder), [2001])
        self.assertTrue(self.bound[2001].stopped)
        self.refused(Holder(), "evil", PortRequest(1, 2001))
        self.clock.advance(LEASE)
        self.ports.publish(Holder(), "evil", [PortRequest(1, 2001)])

    def test_anyPrefersTheAccountsLease(self) -> None:
        """
        A request for 0 gets the lowest free port, or first one the
        account's lease still holds (its agent reconnecting).
        """
        first = Holder()
        self.assertEqual(self.ports.publish(first, "acme", [PortRequest(1, 2002)])[0],
                         {"port": 1, "public_port": 2002})
        self.ports.withdraw(first)
        [answer] = self.ports.publish(Holder(), "acme", [PortRequest(1, 0)])
        self.assertEqual(answer["public_port"], 2002)
        [other] = self.ports.publish(Holder(), "other", [PortRequest(1, 0)])
        self.assertEqual(other["public_port"], 2000)

    def test_anySkipsBusy(self) -> None:
        """
        A port 0 request moves on past ports another program holds.
        """
        self.busy = {2000, 2001}
        [answer] = self.ports.publish(Holder(), "acme", [PortRequest(1, 0)])
        self.assertEqual(answer["public_port"], 2002)

    def test_busy(self) -> None:
        """
        A port asked for that cannot be bound is refused, saying why.
        """
        self.busy = {2001}
        e = self.refused(Holder(), "acme", PortRequest(1, 2001))
        self.assertEqual(str(e), "public port 2001 cannot be bound on the relay: address "
                                 "already in use")

    def test_allOrNone(self) -> None:
        """
        When one request fails, the ports bound for the others are let go
        and nothing is leased.
        """
        self.busy = {2001}
        self.refused(Holder(), "acme", PortRequest(1, 2000), PortRequest(2, 2001))
        self.assertTrue(self.bound[2000].stopped)
        self.assertIsNone(self.leases.holder(lease_name(2000), 0))
        self.assertEqual(len(self.ports), 0)

    def test_twice(self) -> None:
        """
        One port asked for twice in one hello is refused.
        """
        e = self.refused(Holder(), "acme", PortRequest(1, 2000), PortRequest(2, 2000))
        self.assertIn("asked for twice", str(e))

    def test_perAccount(self) -> None:
        """
        An account holds at most C{perAccount} ports, whichever holders
        hold them; other accounts are not counted.
        """
        self.ports.publish(Holder(), "acme", [PortRequest(1, 2000)])
        self.ports.publish(Holder(), "acme", [PortRequest(1, 0)])
        e = self.refused(Holder(), "acme", PortRequest(1, 0))
        self.assertEqual(e.reason, RefusalReason.LIMIT)
        self.assertIn("--max-public-ports-per-account", str(e))
        self.ports.publish(Holder(), "other", [PortRequest(1, 0), PortRequest(2, 0)])

    def test_full(self) -> None:
        """
        With every port taken, a request for 0 is refused.
        """
        self.ports.perAccount = 10
        self.ports.publish(Holder(), "acme", [PortRequest(i, 0) for i in range(5)])
        self.assertIn("no free public port", str(self.refused(Holder(), "b", PortRequest(1, 0))))

    def test_takeOver(self) -> None:
        """
        A newer holder of the account takes a port over: the listener
        stays, the lease has one holder, and the older holder's withdrawal
        leaves it.
        """
        old, new = Holder(), Holder()
        self.ports.publish(old, "acme", [PortRequest(1, 2000)])
        listening = self.bound[2000]
        self.ports.publish(new, "acme", [PortRequest(2, 2000)])
        self.assertIs(self.ports.holderOf(2000), new)
        self.assertEqual(self.ports.withdraw(old), [])
        self.assertFalse(listening.stopped)
        self.assertEqual(self.leases.count(lease_name(2000)), 1)

    def test_close(self) -> None:
        """
        Closing stops every listener.
        """
        self.ports.publish(Holder(), "acme", [PortRequest(1, 2000), PortRequest(2, 2001)])
        self.ports.close()
        self.assertTrue(all(listening.stopped for listening in self.bound.values()))
        self.assertEqual(len(self.ports), 0)


class ClaimPlaceTests(PortsCase):
    """
    L{Relay.publishPorts}: the one claim place refuses the holder a port
    is taken from.
    """

    def setUp(self) -> None:
        super().setUp()
        self.relay = Relay(FakeStore(), self.clock)

    def holder(self) -> Any:
        return Holder()

    def test_notEnabled(self) -> None:
        """
        A relay without public ports refuses them.
        """
        with self.assertRaises(PublicPortRefused):
            self.relay.publishPorts(self.holder(), "acme", [PortRequest(1, 2000)])

    def test_replaced(self) -> None:
        """
        The older holder is refused with L{REPLACED}; withdrawing shares
        (a holder leaving) withdraws its ports.
        """
        self.relay.publicPorts = self.ports
        old, new = self.holder(), self.holder()
        self.relay.publishPorts(old, "acme", [PortRequest(1, 2000)])
        self.relay.publishPorts(new, "acme", [PortRequest(1, 2000)])
        self.assertEqual(old.refused, (RefusalReason.CONFLICT, REPLACED))
        self.relay.withdrawShares(new)
        self.assertEqual(len(self.ports), 0)


class VisitorTests(PortsCase):
    """
    L{PublicPortFactory}: each visitor's admission and session.
    """

    def setUp(self) -> None:
        super().setUp()
        self.relay = Relay(FakeStore(), self.clock)
        self.admission = Admission(AdmissionLimits(per_source_open=1))
        self.holder = Holder()

    def factory(self, *allow: str) -> PublicPortFactory:
        networks = tuple(ipaddress.ip_network(a) for a in allow)
        self.ports.publish(self.holder, "acme", [PortRequest(5432, 2000, networks)])
        return PublicPortFactory(2000, self.ports, self.relay.tcp, self.admission, self.clock,
                                 self.relay.counters)

    def factory2(self) -> PublicPortFactory:
        """
        Another factory of the same port, with the same admission.
        """
        return PublicPortFactory(2000, self.ports, self.relay.tcp, self.admission, self.clock,
                                 self.relay.counters)

    def test_session(self) -> None:
        """
        A visitor's connection is a session C{public:PORT@VISITOR} to the
        service's port, spliced both ways; closing gives the source's
        place back.
        """
        self.assertTrue(verifyObject(ISessionOpener, self.relay.tcp))
        protocol = self.factory().buildProtocol(IPv4Address("TCP", "192.0.2.7", 4321))
        assert protocol is not None
        [(target, agentEnd)] = self.holder.opened
        self.assertEqual(target, "public:5432@192.0.2.7:4321")
        visitor = StringTransport()
        protocol.makeConnection(visitor)
        protocol.dataReceived(b"hello")
        self.assertEqual(agentEnd.transport.value(), b"hello")
        agentEnd.dataReceived(b"world")
        self.assertEqual(visitor.value(), b"world")
        self.assertIsNone(self.factory2().buildProtocol(IPv4Address("TCP", "192.0.2.7", 1)))
        protocol.connectionLost(Failure(ConnectionDone()))
        self.assertIsNotNone(self.factory2().buildProtocol(IPv4Address("TCP", "192.0.2.7", 1)))

    def test_perSource(self) -> None:
        """
        The per-source limits apply: a second connection from one address
        is refused before any session opens.
        """
        factory = self.factory()
        address = IPv4Address("TCP", "192.0.2.7", 1)
        self.assertIsNotNone(factory.buildProtocol(address))
        self.assertIsNone(factory.buildProtocol(address))
        self.assertEqual(len(self.holder.opened), 1)
        self.assertIsNotNone(factory.buildProtocol(IPv4Address("TCP", "192.0.2.8", 1)))

    def test_allowList(self) -> None:
        """
        A visitor outside the allow list is refused; its place is given
        back.
        """
        factory = self.factory("10.0.0.0/8")
        self.assertIsNone(factory.buildProtocol(IPv4Address("TCP", "192.0.2.7", 1)))
        self.assertEqual(self.holder.opened, [])
        self.assertIsNotNone(factory.buildProtocol(IPv4Address("TCP", "10.1.2.3", 1)))
        self.assertIsNone(factory.buildProtocol(IPv4Address("TCP", "10.1.2.3", 2)))

    def test_unavailable(self) -> None:
        """
        An agent that cannot open a session now: the visitor is closed.
        """
        factory = self.factory()
        self.holder.unavailable = True
        self.assertIsNone(factory.buildProtocol(IPv4Address("TCP", "192.0.2.7", 1)))
        self.holder.unavailable = False
        self.assertIsNotNone(factory.buildProtocol(IPv4Address("TCP", "192.0.2.7", 1)))

    def test_withdrawn(self) -> None:
        """
        A port no longer published takes no visitor.
        """
        factory = self.factory()
        self.ports.withdraw(self.holder)
        self.assertIsNone(factory.buildProtocol(IPv4Address("TCP", "192.0.2.7", 1)))


class RelayOptionTests(SynchronousTestCase):
    """
    C{--public-ports}, C{--max-public-ports-per-account} and
    C{--public-ports-interface}.
    """

    def test_defaults(self) -> None:
        """
        No public ports by default, four per account, every IPv4 address.
        """
        config = parse().config
        assert config is not None
        self.assertEqual((config.public_ports, config.public_ports_per_account,
                          config.public_ports_interface), (PortRanges(), 4, "0.0.0.0"))

    def test_values(self) -> None:
        """
        Values are checked and kept; mistakes are usage errors naming the
        option.
        """
        config = parse("--public-ports", "20000-20999,21000", "--max-public-ports-per-account",
                       "9", "--public-ports-interface", "::").config
        assert config is not None
        self.assertEqual((str(config.public_ports), config.public_ports_per_account,
                          config.public_ports_interface), ("20000-20999,21000", 9, "::"))
        for option, value in (("--public-ports", "1-x"), ("--max-public-ports-per-account", "0"),
                              ("--public-ports-interface", "example.com")):
            error = self.assertRaises(usage.UsageError, parse, option, value)
            self.assertIn(option, str(error))


class AddressedRouteTests(SynchronousTestCase):
    """
    L{nfltr.relay.tcp_route.TCPRoute.openTCP} names the client in the
    target of a port the agent declared C{addressed} (it writes PROXY
    headers), and only there.
    """

    def test_addressed(self) -> None:
        """
        The target carries C{@CLIENT} for an addressed port with a known
        client, and is the bare C{tcp:PORT} otherwise.
        """
        relay = Relay(FakeStore(), Clock())
        holder: Any = Holder()
        relay.claimAgent(AgentEntry("box", "acme", "k", frozenset({22, 23}), holder,
                                    addressed=frozenset({22})))
        relay.tcp.openTCP("acme", "box", 22, "lost", client="192.0.2.1:9")
        relay.tcp.openTCP("acme", "box", 23, "lost", client="192.0.2.1:9")
        relay.tcp.openTCP("acme", "box", 22, "lost")
        self.assertEqual([target for target, _ in holder.opened],
                         ["tcp:22@192.0.2.1:9", "tcp:23", "tcp:22"])


class MetricsTests(PortsCase):
    """
    The relay's metrics count public ports and their refused visitors.
    """

    def test_metrics(self) -> None:
        """
        The metrics give the number of published public ports and the
        visitors refused by the per-source limits.
        """
        from types import SimpleNamespace

        from tests.relay.test_metrics import samples

        relay = Relay(FakeStore(), self.clock)
        relay.publicPorts = self.ports
        self.ports.admission = Admission(AdmissionLimits(per_source_open=1))
        self.ports.publish(Holder(), "acme", [PortRequest(1, 2000)])
        self.ports.admission.admit("192.0.2.1", 0)
        self.ports.admission.admit("192.0.2.1", 0)
        seen = samples(metrics_registry(SimpleNamespace(
            relay=relay, router=None, tlsAdmission=None, httpAdmission=None)))
        self.assertEqual(seen[("nfltr_public_ports", ())], 1)
        self.assertEqual(seen[("nfltr_admission_refused_total",
                               (("port", "public"), ("reason", "per_source_open")))], 1)
