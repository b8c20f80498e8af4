"""
Tests for L{nfltr.streams.FirstUseFactory}: a factory made on its first
connection.
"""

from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.interfaces import IProtocolFactory
from twisted.internet.protocol import Factory, Protocol
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.streams import FirstUseFactory

PEER = IPv4Address("TCP", "127.0.0.1", 40000)


class Counting(Factory):
    """
    Counts its starts and stops.
    """

    protocol = Protocol

    def __init__(self) -> None:
        self.starts = self.stops = 0

    def startFactory(self) -> None:
        self.starts += 1

    def stopFactory(self) -> None:
        self.stops += 1


class FirstUseFactoryTests(SynchronousTestCase):
    """
    The real factory is made on the first connection, once, and started
    and stopped as the stand-in is.
    """

    def setUp(self) -> None:
        self.made: list[Counting] = []

        def make() -> Counting:
            self.made.append(Counting())
            return self.made[-1]

        self.lazy = FirstUseFactory(make)

    def test_madeOnFirstConnection(self) -> None:
        """
        Nothing is made until a protocol is asked for; then the real
        factory builds every protocol, and is made only once.
        """
        self.assertTrue(verifyObject(IProtocolFactory, self.lazy))
        self.assertEqual(self.made, [])
        first, second = self.lazy.buildProtocol(PEER), self.lazy.buildProtocol(PEER)
        self.assertEqual(len(self.made), 1)
        self.assertIs(self.lazy.built, self.made[0])
        self.assertIs(first.factory, self.made[0])
        self.assertIs(second.factory, self.made[0])

    def test_startedWhenMadeWhileStarted(self) -> None:
        """
        Made while a port uses the stand-in, the real factory is started at
        once, and stopped when that port stops.
        """
        self.lazy.doStart()
        self.lazy.buildProtocol(PEER)
        real = self.made[0]
        self.assertEqual((real.starts, real.stops), (1, 0))
        self.lazy.doStop()
        self.assertEqual((real.starts, real.stops), (1, 1))

    def test_startedLater(self) -> None:
        """
        Made before any port started it, the real factory starts with the
        first port; never made, nothing is started or stopped.
        """
        self.lazy.doStart()
        self.lazy.doStop()
        self.assertEqual(self.made, [])
        self.lazy.buildProtocol(PEER)
        real = self.made[0]
        self.assertEqual(real.starts, 0)
        self.lazy.doStart()
        self.lazy.doStop()
        self.assertEqual((real.starts, real.stops), (1, 1))
