"""
Tests for what a link logs of what its peers say: short, printable lines,
throttled per source address.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.task import Clock
from twisted.logger import Logger, LogLevel, formatEvent
from twisted.test.proto_helpers import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import LISTENER, PREAMBLE, ErrorCode, FrameType
from nfltr.link._frames import HEADER, MAX_REASON, FrameDecoder, decode_coded, encode_goaway
from nfltr.link.twisted import LinkFactory, LinkHandler
from nfltr.wire import DEFAULT_BURST, PEER_TEXT_LIMIT

KiB = 1024


def raw_goaway(reason: bytes) -> bytes:
    """
    A GOAWAY (last 0, PROTOCOL_ERROR) with any reason, however long, as a
    hostile peer writes it.
    """
    payload = (0).to_bytes(4, "big") + int(ErrorCode.PROTOCOL_ERROR).to_bytes(4, "big") + reason
    return HEADER.pack(FrameType.GOAWAY, 0, 0, len(payload)) + payload


class GoAwayLogTests(SynchronousTestCase):
    """
    100 connections from one address each send a GOAWAY with a 60 KiB
    reason before any hello.
    """

    def setUp(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.factory = LinkFactory(LISTENER, LinkHandler, Clock())
        for n in range(100):
            link = self.factory.buildProtocol(None)
            link.log = Logger(observer=self.events.append)
            link.makeConnection(StringTransport(peerAddress=IPv4Address("TCP", "192.0.2.7", n + 1)))
            link.dataReceived(PREAMBLE + raw_goaway(b"\x1b[31m" + b"A" * (60 * KiB)))

    def test_bounded(self) -> None:
        """
        At most the throttle's burst of lines is logged, each short, with no
        traceback and no escape sequence reaching the log.
        """
        lines = [formatEvent(e) for e in self.events]
        self.assertGreater(len(lines), 0)
        self.assertLessEqual(len(lines), DEFAULT_BURST)
        for line, event in zip(lines, self.events, strict=True):
            self.assertLess(len(line), PEER_TEXT_LIMIT + 200, line[:300])
            self.assertNotIn("\x1b", line)
            self.assertNotIn("log_failure", event)

    def test_otherSourcesLogged(self) -> None:
        """
        The throttle is per source: another address is still heard.
        """
        before = len(self.events)
        link = self.factory.buildProtocol(None)
        link.log = Logger(observer=self.events.append)
        link.makeConnection(StringTransport(peerAddress=IPv4Address("TCP", "198.51.100.1", 1)))
        link.dataReceived(PREAMBLE + raw_goaway(b"bye"))
        self.assertEqual(len(self.events), before + 1)

    def test_failureReasonCut(self) -> None:
        """
        The reason the link keeps as its failure is cut too.
        """
        link = self.factory.buildProtocol(None)
        link.makeConnection(StringTransport(peerAddress=IPv4Address("TCP", "192.0.2.8", 1)))
        link.dataReceived(PREAMBLE + raw_goaway(b"B" * (60 * KiB)))
        self.assertLess(len(str(link.failure)), PEER_TEXT_LIMIT + 100)


class ReasonLengthTests(SynchronousTestCase):
    """
    A receiver keeps at most MAX_REASON bytes of a peer's reason.
    """

    def test_cut(self) -> None:
        """
        A 60 KiB GOAWAY reason decodes to MAX_REASON characters.
        """
        [frame] = FrameDecoder().feed(raw_goaway(b"C" * (60 * KiB)))
        self.assertEqual(len(decode_coded(frame.payload, 4)[1]), MAX_REASON)
        self.assertEqual(len(encode_goaway(0, 1, "D" * 5000)), 10 + 8 + MAX_REASON)


class AddressInLogTests(SynchronousTestCase):
    """
    A link names its peer as people write addresses, never as a Python repr.
    """

    def goingAway(self, peer: Any, closeFirst: bool = False) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        link = LinkFactory(LISTENER, LinkHandler, Clock()).buildProtocol(None)
        link.log = Logger(observer=events.append)
        link.makeConnection(StringTransport(peerAddress=peer))
        if closeFirst:
            link.transport.loseConnection()
        link.dataReceived(PREAMBLE + encode_goaway(0, ErrorCode.NO_ERROR))
        return events

    def test_ipv4(self) -> None:
        """
        A GOAWAY from 127.0.0.1:18443 is logged as C{link 127.0.0.1:18443: the
        peer is going away}.
        """
        [event] = self.goingAway(IPv4Address("TCP", "127.0.0.1", 18443))
        self.assertEqual(formatEvent(event), "link 127.0.0.1:18443: the peer is going away")

    def test_ipv6(self) -> None:
        """
        An IPv6 peer is bracketed: C{[::1]:8443}.
        """
        [event] = self.goingAway(IPv6Address("TCP", "::1", 8443))
        self.assertEqual(formatEvent(event), "link [::1]:8443: the peer is going away")

    def test_alreadyClosing(self) -> None:
        """
        A GOAWAY on a link this side already closes (the relay refused us,
        say) is no news to the user: debug level, not info.
        """
        [event] = self.goingAway(IPv4Address("TCP", "127.0.0.1", 18443), closeFirst=True)
        self.assertEqual(event["log_level"], LogLevel.debug)
