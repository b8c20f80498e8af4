"""
Tests for L{nfltr.link._output}: what a link leaves in its transport for a
peer is bounded whatever the peer announces or does.  Real links over
L{BoundedTransport}s (send buffers, producers, reads that stop) on a Clock.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IPushProducer
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.test.proto_helpers import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import DIALER, LISTENER, PREAMBLE, ErrorCode, FrameType, LinkConfig
from nfltr.link._config import MAX_WINDOW
from nfltr.link._control import encode_message, hello_message
from nfltr.link._frames import FrameDecoder, decode_goaway, encode_control, encode_open
from nfltr.link.twisted import LinkHandler, LinkProtocol

from .twisted_helpers import BoundedPair, BoundedTransport, RecordingHandler, Streamer, Trickler

KiB = 1024
MiB = 1024 * KiB


def dialer_hello(window: int = 512 * KiB, budget: int = 64 * MiB) -> bytes:
    """
    A dialer's preamble and hello, written by hand as a hostile peer would.
    """
    message = hello_message(DIALER, window, budget, 1024, LinkConfig().keepalive, {})
    return PREAMBLE + encode_control(encode_message(message))


def opens(first: int, count: int) -> bytes:
    """
    C{count} OPENs of the smallest kind, from session id C{first} (odd) up.
    """
    return b"".join(encode_open(first + 2 * n, b"x", b"") for n in range(count))


class HostileListener:
    """
    A listener link whose peer is played by the test: bytes are fed to it
    by hand, and nobody reads what it writes (its transport fills and stays
    full).
    """

    def __init__(self, config: LinkConfig | None = None, bufferSize: int = 16 * KiB) -> None:
        self.clock = Clock()
        self.link = LinkProtocol(LISTENER, LinkHandler(), self.clock, config)
        self.io = BoundedTransport(self.link, True, bufferSize)
        self.link.makeConnection(self.io)
        self.link.dataReceived(dialer_hello())
        self.nextId = 1

    def provoke(self, count: int) -> None:
        """
        One read of C{count} OPENs, each refused by the handler.
        """
        self.link.dataReceived(opens(self.nextId, count))
        self.nextId += 2 * count


class ProducerTests(SynchronousTestCase):
    """
    A link is a streaming producer on its transport.
    """

    def test_registered(self) -> None:
        """
        Once connected, the link is its transport's streaming producer.
        """
        transport = StringTransport()
        link = LinkProtocol(DIALER, LinkHandler(), Clock())
        link.makeConnection(transport)
        self.assertIs(transport.producer, link)
        self.assertTrue(transport.streaming)
        self.assertTrue(IPushProducer.providedBy(link))

    def test_closeUnregisters(self) -> None:
        """
        C{link.transport.loseConnection()} (how a link's owner closes it)
        unregisters the link first: a TLS or TCP transport with a producer
        would otherwise never close.
        """
        transport = StringTransport()
        link = LinkProtocol(DIALER, LinkHandler(), Clock())
        link.makeConnection(transport)
        link.transport.loseConnection()
        self.assertIsNone(transport.producer)
        self.assertTrue(transport.disconnecting)


class HeldDataTests(SynchronousTestCase):
    """
    While the transport is full, DATA waits in the session queues and the
    sessions that write are paused; they resume when it drains.
    """

    def setUp(self) -> None:
        # Both windows and budgets huge: only the transport can hold data back.
        big = LinkConfig(session_window=64 * MiB, connection_budget=MAX_WINDOW)
        self.sinks: list[Streamer] = []

        def accept(session: Any) -> Protocol:
            self.sinks.append(Streamer(None, 0))
            return self.sinks[-1]

        self.pair = BoundedPair(
            listenerHandler=RecordingHandler(accept), config=big, bufferSize=64 * KiB
        )
        # The listener reads nothing from here on, until a test says so.
        self.pair.peerReads[DIALER] = False
        self.writers = [Trickler(self.pair.clock, 8 * MiB) for _ in range(3)]
        self.idle = Trickler(self.pair.clock, 0)
        for n, writer in enumerate([*self.writers, self.idle]):
            self.pair.dialer.openSession(f"s:{n}", writer)
        self.pair.run()

    def test_transportBounded(self) -> None:
        """
        The listener reads nothing: the dialer's transport buffer stays
        within one turn's writes (3 x 64 KiB, and the OPENs) though 64 MiB
        of credit would allow 24 MiB; what the writers wrote meanwhile waits
        in the session queues, one write each.
        """
        pair = self.pair
        self.assertLessEqual(pair.dialerIO.peak, 3 * 64 * KiB + KiB)
        self.assertTrue(pair.dialer.writePaused)
        self.assertTrue(all(w.paused for w in self.writers))
        self.assertLessEqual(pair.dialer.connection.queued_bytes, 3 * 64 * KiB)
        self.assertTrue(all(w.sent < 8 * MiB for w in self.writers))

    def test_writersResume(self) -> None:
        """
        Once the listener reads again everything arrives; only the sessions
        that wrote were paused and resumed, the idle one never.
        """
        pair = self.pair
        pair.peerReads[DIALER] = True
        pair.run()
        self.assertEqual(sorted(s.received for s in self.sinks), [0, 8 * MiB, 8 * MiB, 8 * MiB])
        self.assertTrue(all(w.pauses >= 1 and w.resumes >= 1 for w in self.writers))
        self.assertEqual((self.idle.pauses, self.idle.resumes), (0, 0))
        self.assertEqual(pair.dialer.connection.queued_bytes, 0)


class QueueLimitTests(SynchronousTestCase):
    """
    A link's session queues together hold at most its send queue limit
    (plus one write per session), though each session's own high water
    would allow more.
    """

    def test_manySessions(self) -> None:
        """
        50 sessions whose receivers never consume, each allowed 1 MiB of
        queue by its high water: the link queues at most its 2 MiB limit
        and one 64 KiB write per session, not 50 MiB; every writer is
        paused.
        """
        config = LinkConfig(
            session_window=64 * KiB, send_high_water=MiB, send_queue_limit=2 * MiB
        )
        stuck = RecordingHandler(lambda session: Streamer(None, 0, stuck=True))
        pair = BoundedPair(listenerHandler=stuck, config=config)
        writers = [Trickler(pair.clock, 4 * MiB) for _ in range(50)]
        for n, writer in enumerate(writers):
            pair.dialer.openSession(f"s:{n}", writer)
        pair.run()
        self.assertLessEqual(pair.dialer.connection.queued_bytes, 2 * MiB + 50 * 64 * KiB)
        self.assertTrue(all(w.paused for w in writers))


class UnreadAnswersTests(SynchronousTestCase):
    """
    A peer that provokes answers (RESETs of refused OPENs) and never reads
    them: the link stops reading it past its reply bound, and ends the link
    with ENHANCE_YOUR_CALM if they stay unread.
    """

    def setUp(self) -> None:
        self.config = LinkConfig(reply_limit=256 * KiB, unread_timeout=10.0)

    def test_stopsReading(self) -> None:
        """
        Reads of 2,000 OPENs each (26 KiB, answered by 74 KiB of RESETs):
        once more than the bound is held in the full transport the link
        stops reading; what it holds is the bound plus one read's answers.
        """
        hostile = HostileListener(self.config)
        for _ in range(100):
            if not hostile.io.reading:
                break
            hostile.provoke(2000)
        self.assertFalse(hostile.io.reading)
        self.assertGreater(hostile.link.replies, 256 * KiB)
        self.assertLessEqual(hostile.link.replies, 256 * KiB + 80 * KiB)
        self.assertLessEqual(len(hostile.io.buffered), 16 * KiB + 256 * KiB + 160 * KiB)

    def test_cutWhenUnread(self) -> None:
        """
        Still unread after unread_timeout: a GOAWAY with ENHANCE_YOUR_CALM is
        the last frame written and the connection is aborted.
        """
        hostile = HostileListener(self.config)
        while hostile.io.reading:
            hostile.provoke(2000)
        hostile.clock.advance(9.9)
        self.assertFalse(hostile.io.aborted)
        hostile.clock.advance(0.2)
        self.assertTrue(hostile.io.aborted)
        decoder = FrameDecoder()
        frames = decoder.feed(bytes(hostile.io.buffered[len(PREAMBLE):]))
        self.assertEqual(frames[-1].type, FrameType.GOAWAY)
        self.assertEqual(decode_goaway(frames[-1].payload)[1], ErrorCode.ENHANCE_YOUR_CALM)

    def test_readsAgainWhenDrained(self) -> None:
        """
        A peer that does read what it provoked, late, is read again and not
        cut.
        """
        hostile = HostileListener(self.config)
        while hostile.io.reading:
            hostile.provoke(2000)
        hostile.io.take(len(hostile.io.buffered))
        self.assertTrue(hostile.io.reading)
        self.assertEqual(hostile.link.replies, 0)
        hostile.clock.advance(11)  # past the reply timeout, before the keepalive's
        self.assertFalse(hostile.io.aborted)


class CloseTests(SynchronousTestCase):
    """
    A close gives a peer that does not read C{unread_timeout} seconds, then
    becomes an abort; a peer that reads is closed normally.
    """

    def test_nonReaderAborted(self) -> None:
        """
        Its owner closes a link whose peer reads nothing and whose transport
        is full: 10 s later the connection is aborted.
        """
        hostile = HostileListener()
        while not hostile.link.writePaused:
            hostile.provoke(100)
        hostile.link.transport.loseConnection()
        self.assertTrue(hostile.io.disconnecting)
        hostile.clock.advance(9.9)
        self.assertFalse(hostile.io.aborted)
        hostile.clock.advance(0.2)
        self.assertTrue(hostile.io.aborted)

    def test_readerClosed(self) -> None:
        """
        A peer that reads gets everything and a normal close; no abort is
        left pending.
        """
        pair = BoundedPair()
        pair.dialer.transport.loseConnection()
        pair.run()
        self.assertFalse(pair.dialerIO.aborted)
        self.assertEqual(pair.clock.getDelayedCalls(), [])


class TwoWayBulkTests(SynchronousTestCase):
    """
    Two honest links sending bulk both ways at once over small transport
    buffers never both stop reading: DATA within credit does not count
    against the reply bound, and the WINDOWs it provokes stay far under it.
    """

    def test_noDeadlock(self) -> None:
        """
        8 sessions each way move 2 MiB both directions at once, with 8 KiB
        transport buffers and reads, 16 KiB windows, a 512 KiB budget and
        the smallest reply limit (64 KiB): what one side writes in a turn is
        far over that limit (a design that counted it would stop both sides
        reading, for good), yet every byte arrives, both transports were
        full often, and neither side ever stopped reading.
        """
        config = LinkConfig(session_window=16 * KiB, connection_budget=512 * KiB,
                            reply_limit=64 * KiB)
        size = 2 * MiB
        far: dict[str, Streamer] = {}

        def accept(session: Any) -> Streamer:
            n = int(session.target.split(":")[1])
            far[session.target] = Streamer(100 + n, size, n, size)
            return far[session.target]

        pair = BoundedPair(listenerHandler=RecordingHandler(accept), config=config,
                           bufferSize=8 * KiB, readSize=8 * KiB)
        near = [Streamer(n, size, 100 + n, size) for n in range(8)]
        for n, streamer in enumerate(near):
            pair.dialer.openSession(f"bulk:{n}", streamer)
        pair.run()
        for streamer in near + list(far.values()):
            self.assertTrue(streamer.verified())
        self.assertGreater(min(pair.dialerIO.producerPauses, pair.listenerIO.producerPauses), 10)
        self.assertEqual((pair.dialerIO.readPauses, pair.listenerIO.readPauses), (0, 0))
