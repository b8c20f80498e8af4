"""
Tests for L{nfltr.streams._admission} and its use by the public ports' factories
(L{nfltr.streams.AdmittingFactory}).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from nfltr.sni.twisted import REFUSE, SNIRouterFactory
from nfltr.streams import (
    BUSY,
    HANDSHAKES,
    PER_SOURCE_OPEN,
    PER_SOURCE_RATE,
    Admission,
    AdmissionLimits,
)

from .sni.helpers import live_hello


class AdmissionTests(SynchronousTestCase):
    """
    The pure bookkeeping.
    """

    def test_openPerSource(self) -> None:
        """
        A source may hold C{per_source_open} connections; the next is refused
        until one closes; other sources are unaffected.
        """
        admission = Admission(AdmissionLimits(per_source_open=2, per_source_rate=None))
        self.assertIsNone(admission.admit("a", 0))
        self.assertIsNone(admission.admit("a", 0))
        self.assertEqual(admission.admit("a", 0), PER_SOURCE_OPEN)
        self.assertIsNone(admission.admit("b", 0))
        admission.closed("a", 0, handshaking=True)
        self.assertIsNone(admission.admit("a", 0))
        self.assertEqual(admission.refused[PER_SOURCE_OPEN], 1)

    def test_rate(self) -> None:
        """
        A burst of C{per_source_burst} passes at once, then new connections
        come at C{per_source_rate} per second.
        """
        admission = Admission(AdmissionLimits(per_source_open=None, per_source_rate=10,
                                              per_source_burst=5))
        answers = [admission.admit("a", 0) for _ in range(6)]
        self.assertEqual(answers, [None] * 5 + [PER_SOURCE_RATE])
        self.assertEqual(admission.admit("a", 0.05), PER_SOURCE_RATE)
        self.assertIsNone(admission.admit("a", 0.11))
        self.assertEqual(admission.admit("a", 0.11), PER_SOURCE_RATE)

    def test_handshakes(self) -> None:
        """
        At most C{handshakes} connections are unrouted at once, over all
        sources; a routed or closed one frees its place.
        """
        admission = Admission(AdmissionLimits(handshakes=2))
        self.assertIsNone(admission.admit("a", 0))
        self.assertIsNone(admission.admit("b", 0))
        self.assertEqual(admission.admit("c", 0), HANDSHAKES)
        admission.routed()
        self.assertIsNone(admission.admit("c", 0))
        admission.closed("b", 0, handshaking=True)
        self.assertIsNone(admission.admit("d", 0))

    def test_boundedTable(self) -> None:
        """
        The table holds at most C{max_sources} entries: idle ones are swept
        to make room; when none can go, a new source is refused as busy.
        """
        admission = Admission(AdmissionLimits(max_sources=3, per_source_burst=1,
                                              per_source_rate=1, handshakes=None))
        for source in "abc":
            self.assertIsNone(admission.admit(source, 0))
        self.assertEqual(admission.admit("d", 0), BUSY)
        admission.closed("a", 0, handshaking=False)
        self.assertEqual(len(admission), 3)  # "a" spent its token: kept until refilled
        self.assertIsNone(admission.admit("d", 5))
        self.assertLessEqual(len(admission), 3)

    @given(st.lists(st.tuples(st.sampled_from("abcd"), st.booleans(), st.floats(0, 0.5)),
                    max_size=200))
    def test_neverNegativeNorLeaking(self, steps: list[tuple[str, bool, float]]) -> None:
        """
        Any interleaving of admits and closes keeps every count in bounds,
        and once all are closed and time has passed, nothing is held.
        """
        limits = AdmissionLimits(per_source_open=3, per_source_rate=20, per_source_burst=4,
                                 handshakes=5, max_sources=3)
        admission = Admission(limits)
        now, held = 0.0, []
        for source, close, dt in steps:
            now += dt
            if close and held:
                admission.closed(held.pop(), now, handshaking=True)
            elif admission.admit(source, now) is None:
                held.append(source)
            self.assertLessEqual(admission.handshaking, 5)
            self.assertLessEqual(len(admission), 3)
        for source in held:
            admission.closed(source, now, handshaking=True)
        admission.sweep(now + 10)
        self.assertEqual((admission.handshaking, len(admission)), (0, 0))


class FactoryTests(SynchronousTestCase):
    """
    The TLS port's router factory admits before it reads.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.factory = SNIRouterFactory(lambda hello: REFUSE, self.clock)
        self.factory.admission = Admission(AdmissionLimits(per_source_open=1, handshakes=None))
        self.addr = IPv4Address("TCP", "192.0.2.7", 5000)

    def test_refusedGetsNoProtocol(self) -> None:
        """
        A connection over the source's limit gets no protocol (Twisted then
        closes it unread); once the first closes, the next is admitted.
        """
        first = self.factory.buildProtocol(self.addr)
        assert first is not None
        first.makeConnection(StringTransport())
        self.assertIsNone(self.factory.buildProtocol(self.addr))
        first.connectionLost()
        self.assertIsNotNone(self.factory.buildProtocol(self.addr))

    def test_routedLeavesHandshakes(self) -> None:
        """
        A connection routed (here refused by name) no longer counts as in its
        handshake; once closed, with its bucket full again, its source is
        forgotten.
        """
        protocol = self.factory.buildProtocol(self.addr)
        assert protocol is not None
        protocol.makeConnection(StringTransport())
        self.assertEqual(self.factory.admission.handshaking, 1)  # type: ignore[union-attr]
        protocol.dataReceived(live_hello("nobody.localhost"))
        self.assertEqual(self.factory.admission.handshaking, 0)  # type: ignore[union-attr]
        self.clock.advance(60)  # the source's bucket is full again
        protocol.connectionLost()
        self.assertEqual(len(self.factory.admission), 0)  # type: ignore[arg-type]


class NoDelayTransport(StringTransport):
    """
    Records C{setTcpNoDelay}.
    """

    noDelay = False

    def setTcpNoDelay(self, enabled: bool) -> None:
        self.noDelay = enabled


class NoDelayTests(SynchronousTestCase):
    """
    The public ports send without Nagle's delay.
    """

    def test_visitorConnections(self) -> None:
        """
        A connection to the TLS port gets TCP_NODELAY as it is accepted (held
        back behind the peer's delayed ACK, a share's first response took
        40 ms more).
        """
        factory = SNIRouterFactory(lambda hello: REFUSE, Clock())
        protocol = factory.buildProtocol(IPv4Address("TCP", "192.0.2.7", 5000))
        assert protocol is not None
        transport = NoDelayTransport()
        protocol.makeConnection(transport)
        self.assertTrue(transport.noDelay)
