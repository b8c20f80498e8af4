"""
The relay between the two ends of a resumable session cannot make either end accept bytes the
other did not send: the session's bytes are the end-to-end TLS of the tunnel (the product's
contexts: the agent's self-signed key, the connector pinning it), so a byte altered in the
middle (in data resent after a resume, in data sent once, in a record's header) fails the
session at the receiving end, which resets both local connections with a TCP RST and never
hands an altered byte to the service or the visitor.

A connector's L{ConnectorResumer} and an agent's L{AgentResumer} are joined by fake link
sessions whose bytes pass through a L{Middle} that plays the relay and alters one byte.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from twisted.internet import error
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.test.proto_helpers import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import TcpEnd, splice_local
from nfltr.agent._resume import AgentResumer
from nfltr.client._resume import ConnectorResumer
from nfltr.resume import RECORD_DATA, RECORD_HEADER_SIZE
from nfltr.resume.twisted import RecordsBroken
from nfltr.tls import (
    E2EETLSFactory,
    TunnelTLSBroken,
    ensure_self_signed,
    resuming_client,
    resuming_server,
    ssl_words,
)
from tests.resume.test_twisted import FakeSession

TIMEOUT = 30.0
AGENT, PORT = "web", 22
KiB = 1024


class LocalTransport(StringTransport):
    """
    A local TCP connection (the visitor's at the connector, the service's at the agent): what
    was written to it, and how it ended.  Aborting a TCP connection sends a RST (Twisted sets
    C{SO_LINGER} to zero seconds before it closes an aborted socket).
    """

    aborted = False

    def abortConnection(self) -> None:
        self.aborted = True


class OrderedSession(FakeSession):
    """
    A link session whose reset leaves after what was written before it, as on a link (a
    session's DATA frames go before its RESET): an end that gives up tells its peer with an
    ABORT record first.
    """

    def abortConnection(self) -> None:
        data, peer = self.value(), self.peer
        self.clear()
        if data and peer is not None and peer.protocol is not None:
            peer.protocol.dataReceived(data)
        super().abortConnection()


class Tamper:
    """
    Follows the records of one direction of a link session and flips every bit of one byte
    of its C{nth} DATA record (counted from when the tamper was set, at a record boundary):
    the byte at C{where(length)} from the record's start, its 5-byte header included (none
    if C{nth} is negative).

    @ivar done: the byte was flipped.
    @ivar passed: the bytes of DATA payloads that went through.
    @ivar flipped: where the byte flipped was among them.
    """

    def __init__(self, nth: int, where: Callable[[int], int]) -> None:
        self.nth = nth
        self.where = where
        self.done = False
        self._header = bytearray()
        self._start = self._remaining = self._seen = self._position = self._kind = 0
        self._target: int | None = None
        self._targetPassed = 0
        self.passed = 0
        self.flipped: int | None = None

    def feed(self, data: bytearray) -> None:
        """
        The next bytes of the direction, altered in place.
        """
        i = 0
        while i < len(data):
            if self._remaining:
                step = min(self._remaining, len(data) - i)
                i += step
                self._remaining -= step
                if self._kind == RECORD_DATA:
                    self.passed += step
                continue
            if not self._header:
                self._start = self._position + i
            take = min(RECORD_HEADER_SIZE - len(self._header), len(data) - i)
            self._header += data[i:i + take]
            i += take
            if len(self._header) == RECORD_HEADER_SIZE:
                self._kind, self._remaining = struct.unpack("!BI", self._header)
                self._header.clear()
                if self._kind == RECORD_DATA:
                    if self._seen == self.nth:
                        where = self.where(self._remaining)
                        self._target = self._start + where
                        self._targetPassed = self.passed + where - RECORD_HEADER_SIZE
                    self._seen += 1
        target = self._target
        if target is not None and not self.done and 0 <= target - self._position < len(data):
            data[target - self._position] ^= 0xFF
            self.done = True
            self.flipped = self._targetPassed
        self._position += len(data)


class Middle:
    """
    The relay: moves the bytes of each pair of link sessions, through C{tamper} for those
    from the agent (C{"a"}) or the connector (C{"c"}) of the pair numbered C{tamperOn[0]}.

    @ivar pairs: the connector's and the agent's link session of each session opened, in order.
    @ivar lost: the bytes each side had in flight when the relay died.
    """

    def __init__(self) -> None:
        self.pairs: list[tuple[FakeSession, FakeSession]] = []
        self.tamper: Tamper | None = None
        self.tamperOn: tuple[int, str] = (0, "a")
        self.lost = {"c": 0, "a": 0}

    @property
    def altered(self) -> bool:
        return self.tamper is not None and self.tamper.done

    def pump(self) -> None:
        moved = True
        while moved:
            moved = False
            for number, (c, a) in enumerate(self.pairs):
                for side, session in (("c", c), ("a", a)):
                    data = session.value()
                    if not data or session.peer is None or session.peer.protocol is None:
                        continue
                    session.clear()
                    moved = True
                    if self.tamper is not None and (number, side) == self.tamperOn:
                        buffer = bytearray(data)
                        self.tamper.feed(buffer)
                        data = bytes(buffer)
                    session.peer.protocol.dataReceived(data)

    def cut(self) -> None:
        """
        The relay dies: every link session is lost, with whatever was in flight (counted in
        C{lost} by the side that sent it).
        """
        for c, a in self.pairs:
            self.lost["c"] += len(c.value())
            self.lost["a"] += len(a.value())
            c.clear()
            a.clear()
            c.cut(Failure(error.ConnectionLost("the relay is gone")))


class Ends:
    """
    A connector and an agent with the product's end-to-end TLS over resumable sessions, joined
    by a L{Middle}.
    """

    def __init__(self, case: SynchronousTestCase) -> None:
        self.clock = Clock()
        identity = ensure_self_signed(case.mktemp(), "agent")
        self.serverTLS = E2EETLSFactory(resuming_server(identity.cert, identity.key), False,
                                        self.clock)
        self.clientTLS = E2EETLSFactory(resuming_client(AGENT, identity.fingerprint), True,
                                        self.clock)
        self.middle = Middle()
        self.agent = AgentResumer(self.clock, TIMEOUT)
        self.connector = ConnectorResumer(self.clock, AGENT, PORT, TIMEOUT, lambda: self)
        self.visitor, self.service = LocalTransport(), LocalTransport()
        self.visitorEnd: TcpEnd | None = None
        self.serviceEnd: TcpEnd | None = None
        #: Why the session ended at the connector (C{"c"}) and at the agent (C{"a"}): what the
        #: splice end over the TLS layer was told, which the connector explains in its log.
        self.reasons: dict[str, Failure] = {}

    # The connector's link.

    def canOpen(self) -> bool:
        return True

    def openSession(self, target: str, protocol: Any) -> None:
        c, a = OrderedSession(), OrderedSession()
        c.peer, a.peer = a, c
        self.middle.pairs.append((c, a))
        c.accept(protocol)
        if target.startswith("rtcp:"):
            local, remote = splice_local()
            self.serviceEnd = local
            remote.onLost = lambda reason: self.reasons.setdefault("a", reason)
            self.agent.serve(a, self.serverTLS.wrap(remote), local)
            local.makeConnection(self.service)
        else:
            self.agent.resume(a)

    def open(self) -> None:
        """
        A visitor's connection through a new resumable session, its TLS handshake done.
        """
        local, remote = splice_local()
        self.visitorEnd = local
        remote.onLost = lambda reason: self.reasons.setdefault("c", reason)
        self.connector.open(self, self.clientTLS.wrap(remote), local)
        local.makeConnection(self.visitor)
        self.pump()

    def pump(self) -> None:
        for _ in range(20):
            self.middle.pump()
            self.clock.advance(0)

    def resume(self) -> None:
        """
        The relay is back: the connector resumes its suspended session.
        """
        self.connector.relayUp()
        self.pump()


class TamperTests(SynchronousTestCase):
    """
    One byte altered between the ends ends the session with a reset at both local connections;
    no altered byte reaches either local side, and each end says why.
    """

    def setUp(self) -> None:
        self.ends = Ends(self)
        self.ends.open()
        self.fromService = bytes(range(256)) * (256 * KiB // 256)
        self.fromVisitor = bytes(range(255, -1, -1)) * (128 * KiB // 256)

    def serviceWrites(self, data: bytes) -> None:
        assert self.ends.serviceEnd is not None
        self.ends.serviceEnd.dataReceived(data)

    def visitorWrites(self, data: bytes) -> None:
        assert self.ends.visitorEnd is not None
        self.ends.visitorEnd.dataReceived(data)

    def tamper(self, on: tuple[int, str], where: Callable[[int], int], nth: int = 0) -> None:
        """
        From now on the middle flips the byte C{where(length)} of the C{nth} next DATA record
        of link session pair C{on[0]} from side C{on[1]}.
        """
        self.ends.middle.tamper = Tamper(nth, where)
        self.ends.middle.tamperOn = on

    def cutAfterWriting(self, side: str, data: bytes) -> None:
        """
        C{side} (C{"a"}: the service, C{"c"}: the visitor) writes C{data}, which leaves its
        end, then the relay dies with all of it in flight: it is resent after the resume.
        """
        (self.serviceWrites if side == "a" else self.visitorWrites)(data)
        self.ends.clock.advance(0)
        self.ends.middle.cut()
        self.assertGreater(self.ends.middle.lost[side], len(data), "sent, then lost")

    def assertFailedLoudly(self, tlsAt: str | None) -> None:
        """
        Both local connections were reset (never closed cleanly), each received only a prefix
        of what the other side sent, and the session is gone at both ends.  If C{tlsAt}, the
        end-to-end TLS of that end (C{"a"} or C{"c"}) is what failed.
        """
        ends = self.ends
        self.assertTrue(ends.middle.altered, "the middle found the byte to alter")
        for name, local in (("visitor", ends.visitor), ("service", ends.service)):
            self.assertTrue(local.aborted, f"the {name}'s connection was reset")
            self.assertFalse(local.disconnecting, f"the {name}'s connection ended cleanly")
        self.assertTrue(self.fromService.startswith(ends.visitor.value()))
        self.assertTrue(self.fromVisitor.startswith(ends.service.value()))
        self.assertEqual(len(ends.agent.table), 0, "the agent forgot the session")
        self.assertEqual(ends.connector.suspended, {}, "the connector does not resume it")
        for side, reason in ends.reasons.items():
            self.assertFalse(reason.check(error.ConnectionDone), f"{side} ended cleanly")
        if tlsAt is not None:
            for reason in ends.reasons.values():
                self.assertTrue(reason.check(TunnelTLSBroken), reason)
            self.assertIn("bad record mac", ssl_words(ends.reasons[tlsAt].value))

    def test_unaltered(self) -> None:
        """
        Unaltered, the bytes pass both ways, across a cut too (the harness itself works).
        """
        self.cutAfterWriting("a", self.fromService[:100 * KiB])
        self.visitorWrites(self.fromVisitor)
        self.ends.resume()
        self.serviceWrites(self.fromService[100 * KiB:])
        self.ends.pump()
        self.assertEqual(self.ends.visitor.value(), self.fromService)
        self.assertEqual(self.ends.service.value(), self.fromVisitor)
        self.assertFalse(self.ends.visitor.aborted or self.ends.service.aborted)
        self.assertEqual(self.ends.reasons, {})

    def test_resentToVisitor(self) -> None:
        """
        The service's bytes leave the agent and are lost with the relay; after the resume the
        relay flips one byte in the middle of the first DATA record the agent resends: the
        connector's TLS fails (bad record mac), and both local connections are reset.
        """
        self.cutAfterWriting("a", self.fromService)
        self.tamper((1, "a"), lambda length: RECORD_HEADER_SIZE + length // 2)
        self.ends.resume()
        self.assertFailedLoudly(tlsAt="c")

    def test_resentToService(self) -> None:
        """
        The same the other way: a byte the connector resends altered fails the agent's TLS.
        """
        self.cutAfterWriting("c", self.fromVisitor)
        self.tamper((1, "c"), lambda length: RECORD_HEADER_SIZE + length // 2)
        self.ends.resume()
        self.assertFailedLoudly(tlsAt="a")

    def test_resentLastByte(self) -> None:
        """
        The last byte of a resent record (inside a TLS record's authentication tag) altered:
        the same.
        """
        self.cutAfterWriting("a", self.fromService)
        self.tamper((1, "a"), lambda length: RECORD_HEADER_SIZE + length - 1)
        self.ends.resume()
        self.assertFailedLoudly(tlsAt="c")

    def test_sentOnce(self) -> None:
        """
        A byte of data sent once (no cut) altered: the same.
        """
        self.tamper((0, "a"), lambda length: RECORD_HEADER_SIZE + length // 3, nth=1)
        self.serviceWrites(self.fromService)
        self.ends.pump()
        self.assertFailedLoudly(tlsAt="c")

    def test_tlsRecordHeader(self) -> None:
        """
        The length in a TLS record's header (bytes 3 and 4 of the header, RFC 8446 section
        5.1, at the start of a DATA record's payload) altered: the session fails the same
        way, whatever TLS says.
        """
        self.tamper((0, "a"), lambda length: RECORD_HEADER_SIZE + 3)
        self.serviceWrites(self.fromService)
        self.ends.pump()
        self.assertFailedLoudly(tlsAt=None)
        self.assertTrue(self.ends.reasons["c"].check(TunnelTLSBroken))

    def test_resumeRecordHeader(self) -> None:
        """
        The type of a resumable session's record altered (to one that does not exist): the
        receiving end finds it broken and resets the session.
        """
        self.tamper((0, "a"), lambda length: 0)
        self.serviceWrites(self.fromService)
        self.ends.pump()
        self.assertFailedLoudly(tlsAt=None)
        self.assertTrue(self.ends.reasons["c"].check(RecordsBroken))

    def test_resentRecordLength(self) -> None:
        """
        The length of a resent DATA record altered (shorter: the rest reads as a record of an
        unknown type or as bytes TLS refuses): the session is reset.
        """
        self.cutAfterWriting("a", self.fromService)
        self.tamper((1, "a"), lambda length: 2)
        self.ends.resume()
        self.assertFailedLoudly(tlsAt=None)
        self.assertTrue(self.ends.reasons["c"].check(RecordsBroken))
