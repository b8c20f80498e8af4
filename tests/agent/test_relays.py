"""
Tests for L{nfltr.agent.RelayAddresses} and the dialler over a relay of
several addresses (replicas): real links against test relays, joined by
iosim on a Clock.
"""

from __future__ import annotations

import random
from typing import Any

from twisted.internet import error
from twisted.internet.address import IPv4Address
from twisted.internet.endpoints import HostnameEndpoint
from twisted.internet.interfaces import (
    IHostnameResolver,
    IReactorPluggableNameResolver,
    IReactorTCP,
    IReactorTime,
    IStreamClientEndpoint,
)
from twisted.internet.protocol import Factory
from twisted.internet.testing import MemoryReactorClock
from twisted.logger import LogLevel
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.agent import IRelayChoice, RelayAddresses, RelayDialler, ShuffledNames
from nfltr.backoff import ReconnectSchedule
from nfltr.wire.messages import agent_hello

from .helpers import LogCapture, Network, Recorder, TestRelay
from .test_dialler import KEY, Observer


class RelayAddressesTests(SynchronousTestCase):
    """
    L{RelayAddresses} picks one address at a time.
    """

    def test_interfaces(self) -> None:
        """
        It is a client endpoint and a relay choice.
        """
        addresses = RelayAddresses([("a:1", object())], random.Random(1))
        verifyObject(IStreamClientEndpoint, addresses)
        verifyObject(IRelayChoice, addresses)

    def test_shuffledAndAdvancing(self) -> None:
        """
        The order is a shuffle of the addresses by the given generator;
        C{connect} uses the current one, C{advance} moves to the next and
        wraps around; no address is refused.
        """
        network = Network()
        relays = [TestRelay(network) for _ in range(3)]
        endpoints = [(f"r{i}:1", relay.endpoint()) for i, relay in enumerate(relays)]
        addresses = RelayAddresses(endpoints, random.Random(3))
        expected = list(endpoints)
        random.Random(3).shuffle(expected)
        self.assertEqual(addresses.order, expected)
        self.assertEqual(addresses.count, 3)
        seen = []
        for _ in range(4):
            seen.append(addresses.where)
            addresses.advance()
        self.assertEqual(seen, [w for w, _ in expected] + [expected[0][0]])
        self.assertRaises(ValueError, RelayAddresses, [], random.Random())


@implementer(IHostnameResolver)
class FixedResolver:
    """
    Resolves every name to the same addresses, at once.
    """

    def __init__(self, hosts: list[str]) -> None:
        self.hosts = hosts

    def resolveHostName(
        self, resolutionReceiver: Any, hostName: str, portNumber: int = 0,
        addressTypes: Any = None, transportSemantics: str = "TCP",
    ) -> Any:
        resolutionReceiver.resolutionBegan(None)
        for host in self.hosts:
            resolutionReceiver.addressResolved(IPv4Address("TCP", host, portNumber))
        resolutionReceiver.resolutionComplete()
        return None


class ShuffledNamesTests(SynchronousTestCase):
    """
    A name that resolves to several addresses (replicas): a
    C{HostnameEndpoint} over L{ShuffledNames} gets them shuffled.
    """

    def test_interfaces(self) -> None:
        """
        L{ShuffledNames} is what a C{HostnameEndpoint} needs of a reactor;
        its resolver is a name resolver.
        """
        names = ShuffledNames(MemoryReactorClock(), random.Random(1))
        for interface in (IReactorTCP, IReactorTime, IReactorPluggableNameResolver):
            verifyObject(interface, names)
        verifyObject(IHostnameResolver, names.nameResolver)

    def test_shuffled(self) -> None:
        """
        The first connection attempt goes to the first address of the
        shuffled resolution, whichever it is; over many resolutions every
        address comes first sometimes.
        """
        hosts = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
        firsts = set()
        rand = random.Random(5)
        for _ in range(30):
            reactor = MemoryReactorClock()
            reactor.installNameResolver(FixedResolver(hosts))
            names = ShuffledNames(reactor, rand)
            HostnameEndpoint(names, "replicas.example", 8443).connect(Factory())
            self.assertEqual(len(reactor.tcpClients), 1)
            firsts.add(reactor.tcpClients[0][0])
        self.assertEqual(firsts, set(hosts))


class ReplicaFixture:
    """
    A dialler given two test relays as one relay of two addresses.
    """

    def __init__(self, case: SynchronousTestCase) -> None:
        self.network = Network()
        self.relays = [TestRelay(self.network), TestRelay(self.network)]
        self.endpoints = [relay.endpoint() for relay in self.relays]
        named = [("a.example:1", self.endpoints[0]), ("b.example:2", self.endpoints[1])]
        self.addresses = RelayAddresses(named, random.Random())
        self.addresses.order = named  # the first address first
        self.observer = Observer()
        self.logs = LogCapture(case)
        self.dialler = RelayDialler(
            self.addresses, self.network.clock, agent_hello(KEY, "box", []), self.observer,
            "a.example:1,b.example:2", schedule=ReconnectSchedule(rand=lambda: 0.0),
        )

    def attempts(self) -> list[int]:
        return [endpoint.attempts for endpoint in self.endpoints]

    def start(self) -> None:
        self.dialler.start()
        self.network.run()


class ReplicaDiallerTests(SynchronousTestCase):
    """
    A dialler over several relay addresses moves to another when one fails,
    its link is lost, or it goes away.
    """

    def test_unreachableMovesOn(self) -> None:
        """
        When the first address refuses the connection, the next attempt
        (on the schedule) goes to the second, which welcomes the dialler;
        the warning names the address that failed, the info line the one
        that welcomed.
        """
        f = ReplicaFixture(self)
        f.endpoints[0].refuse = True
        f.start()
        self.assertEqual(f.attempts(), [1, 0])
        f.network.advance(0.25)
        self.assertEqual(f.attempts(), [1, 1])
        self.assertIsNotNone(f.dialler.link)
        self.assertIn("cannot reach the relay at a.example:1: connection refused",
                      f.logs.lines()[0])
        self.assertIn("reconnected to the relay at b.example:2 (account acme)",
                      " ".join(f.logs.lines(LogLevel.info)))

    def test_lostMovesOn(self) -> None:
        """
        A welcomed link that is cut (its replica died) is dialled again on
        the other address.
        """
        f = ReplicaFixture(self)
        f.start()
        f.endpoints[0].cut()
        self.assertEqual(f.observer.downs, 1)
        f.network.advance(0.25)
        self.assertEqual(f.attempts(), [1, 1])
        self.assertEqual(len(f.observer.ups), 2)
        self.assertIs(f.dialler.link, f.observer.ups[1][0])
        self.assertEqual(len(f.relays[1].links), 1)
        self.assertIn("lost the link to the relay at a.example:1", f.logs.lines()[0])

    def test_goAwayMovesOn(self) -> None:
        """
        A GOAWAY (the replica drains): the dialler dials the other address at
        once and is welcomed there while the session in flight on the old
        link goes on to its end (make before break).
        """
        f = ReplicaFixture(self)
        f.start()
        peer = Recorder()
        old = f.relays[0].links[0]
        old.openSession("tcp:22", peer)
        f.network.run()
        old.drain()
        f.network.run()
        self.assertEqual(f.attempts(), [1, 1])
        self.assertEqual(len(f.observer.ups), 2)
        self.assertEqual(len(f.relays[1].links), 1)
        [session] = f.observer.sessions
        session.write(b", still")
        f.network.run()
        self.assertEqual(peer.received, b"from the agent, still")
        peer.transport.loseConnection()
        f.network.run()
        assert peer.lost is not None
        self.assertTrue(peer.lost.check(error.ConnectionDone), peer.lost)
        self.assertEqual(f.attempts(), [1, 1])
        self.assertIn(
            "the relay at a.example:1 is going away: 1 session(s) finish on its link; "
            "dialling again", f.logs.lines(LogLevel.info),
        )
