"""
Tests for L{nfltr.link.twisted}: real link protocols over iosim on a Clock.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error
from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.logger import Logger, LogLevel
from twisted.python.failure import Failure
from twisted.test.iosim import FakeTransport
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.link import LISTENER, PRESETS, ErrorCode, FrameType, LinkConfig
from nfltr.link._frames import FrameDecoder
from nfltr.link.transport import IFramedWriter
from nfltr.link.twisted import LinkProtocol, LinkSession, LinkUnavailable, SessionResetError
from nfltr.netio import ITransientReader
from nfltr.streams.windowed import IAcceptedSession

from .twisted_helpers import CHUNK, LinkPair, RecordingHandler, Streamer, pattern

MiB = 1024 * 1024


class BulkTransferTests(SynchronousTestCase):
    """
    Many sessions move data both ways at once.
    """

    def test_eightSessionsBothWays(self) -> None:
        """
        8 sessions each move 16 MiB in both directions at once and every
        byte arrives intact, in order, followed by a clean half-close.
        """
        size = 16 * MiB
        listenerSide: dict[str, Streamer] = {}

        def accept(session):
            n = int(session.target.split(":")[1])
            listenerSide[session.target] = Streamer(1000 + n, size, n, size)
            return listenerSide[session.target]

        pair = LinkPair(listenerHandler=RecordingHandler(accept))
        dialerSide = [Streamer(n, size, 1000 + n, size) for n in range(8)]
        for n, streamer in enumerate(dialerSide):
            pair.dialer.openSession(f"echo:{n}", streamer)
        pair.run()
        for streamer in dialerSide + list(listenerSide.values()):
            self.assertEqual(streamer.received, size)
            self.assertTrue(streamer.verified())
            self.assertIsNotNone(streamer.lost)
            self.assertTrue(streamer.lost.check(error.ConnectionDone))
        self.assertEqual(pair.dialer.connection.session_count, 0)
        self.assertEqual(pair.listener.connection.session_count, 0)

    def test_stuckReaderTakesOnlyItsWindow(self) -> None:
        """
        A session whose consumer stops reading holds exactly its window of
        queued bytes; its 7 siblings finish their 4 MiB each.
        """
        window = 256 * 1024
        config = LinkConfig(session_window=window)
        size = 4 * MiB
        receivers: dict[int, Streamer] = {}

        def accept(session):
            n = int(session.target.split(":")[1])
            receivers[n] = Streamer(None, 0, n, size, stuck=(n == 0))
            return receivers[n]

        pair = LinkPair(listenerHandler=RecordingHandler(accept), config=config)
        senders = [Streamer(n, size) for n in range(8)]
        sessions = [pair.dialer.openSession(f"s:{n}", s) for n, s in enumerate(senders)]
        pair.run()
        for n in range(1, 8):
            self.assertTrue(receivers[n].verified(), n)
        self.assertEqual(receivers[0].received, 0)
        stuck = pair.listener._sessions[sessions[0].sessionId]
        self.assertEqual(sum(len(c) for c in stuck._queue), window)
        self.assertLess(senders[0].sent, size)
        stuck.resumeProducing()
        pair.run()
        self.assertTrue(receivers[0].verified())


class HalfCloseTests(SynchronousTestCase):
    """
    FIN follows the data written before it.
    """

    def test_finAfterDataDeliversEverything(self) -> None:
        """
        Data written just before loseWriteConnection all arrives, then
        readConnectionLost, even when it exceeds the window.
        """
        size = 3 * MiB + 17
        got: list[Streamer] = []
        pair = LinkPair(
            listenerHandler=RecordingHandler(
                lambda s: got.append(Streamer(None, 0, 7, size)) or got[-1]
            ),
            config=LinkConfig(session_window=64 * 1024),
        )

        class OneShot(Protocol):
            def connectionMade(self):
                self.transport.write(pattern7)
                self.transport.loseWriteConnection()

        pattern7 = pattern(7, size)
        pair.dialer.openSession("x", OneShot())
        pair.run()
        self.assertTrue(got[0].verified())

    def test_nonHalfCloseableProtocolCloses(self) -> None:
        """
        A protocol that does not support half-close is closed cleanly (both
        directions FINed) when the peer half-closes.
        """
        lost: list[Failure] = []

        class Plain(Protocol):
            def connectionLost(self, reason=None):
                lost.append(reason)

        pair = LinkPair(listenerHandler=RecordingHandler(lambda s: Plain()))
        opener = Streamer(1, 100)
        pair.dialer.openSession("x", opener)
        pair.run()
        self.assertEqual(len(lost), 1)
        self.assertTrue(lost[0].check(error.ConnectionDone))
        self.assertTrue(opener.readEnded)
        self.assertTrue(opener.lost.check(error.ConnectionDone))


class FailureTests(SynchronousTestCase):
    """
    A link that ends abnormally ends its sessions with errors.
    """

    def test_cutConnectionFailsEverySession(self) -> None:
        """
        A connection cut mid-transfer gives every session, on both sides,
        a ConnectionLost failure and never a clean ConnectionDone.
        """
        accepted: list[Streamer] = []
        pair = LinkPair(listenerHandler=RecordingHandler(
            lambda s: accepted.append(Streamer(2, 4 * MiB)) or accepted[-1]))
        openers = [Streamer(1, 4 * MiB) for _ in range(3)]
        for s in openers:
            pair.dialer.openSession("x", s)
        for _ in range(3):
            pair.pump.pump()
        pair.cut(error.ConnectionLost("cable pulled"))
        for s in openers + accepted:
            self.assertIsNotNone(s.lost)
            self.assertTrue(s.lost.check(error.ConnectionLost))
            self.assertFalse(s.lost.check(error.ConnectionDone))
        self.assertEqual(len(accepted), 3)

    def test_refusedSession(self) -> None:
        """
        A session the peer refuses ends with a SessionResetError naming
        REFUSED.
        """
        pair = LinkPair()
        opener = Streamer(1, 10)
        pair.dialer.openSession("nowhere", opener)
        pair.run()
        self.assertTrue(opener.lost.check(SessionResetError))
        self.assertEqual(opener.lost.value.code, ErrorCode.REFUSED)

    def test_garbageFailsOnlyThatLink(self) -> None:
        """
        Garbage instead of the magic fails that link with BAD_MAGIC, logged
        once at warning level, with nothing sent back; another link on the
        same clock stays usable.
        """
        logged: list[dict] = []
        good = LinkPair(listenerHandler=RecordingHandler(lambda s: Streamer(5, 1000, 6, 1000)))
        listener = LinkProtocol(LISTENER, RecordingHandler(), good.clock)
        listener.log = Logger(observer=logged.append)
        io = FakeTransport(listener, isServer=True)
        listener.makeConnection(io)
        listener.dataReceived(b"GET / HTTP/1.1\r\n\r\n")
        self.assertEqual(listener.failure.code, ErrorCode.BAD_MAGIC)
        self.assertTrue(io.disconnecting)
        self.assertEqual([e["log_level"] for e in logged], [LogLevel.warn])
        self.assertEqual(logged[0]["code"], "BAD_MAGIC")
        self.assertEqual(b"".join(io.stream), b"")
        s = Streamer(6, 1000, 5, 1000)
        good.dialer.openSession("y", s)
        good.run()
        self.assertTrue(s.verified())


class LivenessTests(SynchronousTestCase):
    """
    A dead peer is found within interval + timeout, not before.
    """

    def test_deadPeerEveryPreset(self) -> None:
        """
        For each preset, when the listener goes silent the dialer declares
        the link dead exactly interval + timeout after it last heard from
        it, and not a moment before.
        """
        for name, keepalive in PRESETS.items():
            pair = LinkPair(config=LinkConfig(keepalive=keepalive))
            self.assertEqual(pair.listener.connection._liveness.keepalive, keepalive)
            lastHeard = pair.clock.seconds()
            deadline = lastHeard + keepalive.interval + keepalive.timeout
            pair.clock.advance(deadline - lastHeard - 0.001)
            self.assertIsNone(pair.dialer.failure, name)
            pair.clock.advance(0.001)
            self.assertIsInstance(pair.dialer.failure, error.TimeoutError, name)
            self.assertTrue(pair.dialerIO.disconnecting)

    def test_livePeerNeverDeclaredDead(self) -> None:
        """
        A peer that answers PINGs keeps the link up for many intervals and
        the RTT is measured.
        """
        keepalive = PRESETS["fast"]
        pair = LinkPair(config=LinkConfig(keepalive=keepalive))
        for _ in range(200):
            pair.clock.advance(0.5)
            pair.run()
        self.assertIsNone(pair.dialer.failure)
        self.assertIsNone(pair.listener.failure)
        self.assertIsNotNone(pair.dialer.rtt)


class GoAwayTests(SynchronousTestCase):
    """
    GOAWAY drains a link.
    """

    def test_drainLetsSessionsFinishAndRefusesNewOnes(self) -> None:
        """
        After the listener drains, sessions in flight finish intact, the
        dialer cannot open new ones, and the link closes when the last
        session ends.
        """
        size = 2 * MiB
        accepted: list[Streamer] = []
        pair = LinkPair(listenerHandler=RecordingHandler(
            lambda s: accepted.append(Streamer(9, size, 8, size)) or accepted[-1]))
        opener = Streamer(8, size, 9, size)
        pair.dialer.openSession("x", opener)
        pair.pump.pump()
        pair.pump.pump()
        done: list[object] = []
        pair.listener.drain().addCallback(done.append)
        pair.pump.pump()
        pair.pump.pump()
        self.assertRaises(LinkUnavailable, pair.dialer.openSession, "y", Streamer(1, 1))
        pair.run()
        self.assertTrue(opener.verified())
        self.assertTrue(accepted[0].verified())
        self.assertEqual(done, [None])
        self.assertTrue(pair.listenerIO.disconnected or pair.listenerIO.disconnecting)

    def test_handlerToldOfDrain(self) -> None:
        """
        The handler hears of the peer's GOAWAY (C{linkGoingAway}) while the
        session in flight is still open, so it can find another link for new
        sessions; its own side's drain is not reported to it.
        """
        pair = LinkPair(listenerHandler=RecordingHandler(lambda s: Protocol()))
        session = pair.dialer.openSession("x", Protocol())
        pair.run()
        pair.listener.drain()
        pair.run()
        self.assertEqual(pair.dialerHandler.goingAway, 1)
        self.assertEqual(pair.listenerHandler.goingAway, 0)
        self.assertFalse(session.disconnected)

    def test_sessionsToldOfDrain(self) -> None:
        """
        A session told to call back when its link goes away
        (C{whenLinkGoesAway}) is called once, at the peer's GOAWAY, while it
        is still open; one asking after the GOAWAY is called at once; one
        that ended first is not called; its own side's drain calls nothing.
        """
        calls: list[str] = []
        pair = LinkPair(listenerHandler=RecordingHandler(lambda s: Protocol()))
        kept = pair.dialer.openSession("x", Protocol())
        ended = pair.dialer.openSession("y", Protocol())
        pair.run()
        kept.whenLinkGoesAway(lambda: calls.append("kept"))
        ended.whenLinkGoesAway(lambda: calls.append("ended"))
        ended.abortConnection()
        pair.run()
        pair.dialer.drain()
        pair.run()
        self.assertEqual(calls, [])
        pair.listener.drain()
        pair.run()
        self.assertEqual(calls, ["kept"])
        self.assertFalse(kept.disconnected)
        kept.whenLinkGoesAway(lambda: calls.append("late"))
        self.assertEqual(calls, ["kept", "late"])

    def test_handlerNotToldOfError(self) -> None:
        """
        A GOAWAY with an error code (the peer found a protocol error) ends
        the link: the handler hears of the loss only.
        """
        pair = LinkPair()
        pair.listenerIO.write(b"\xff" * 16)  # garbage: the dialer answers with an error
        pair.run()
        self.assertEqual(len(pair.listenerHandler.lost), 1)
        self.assertIsNotNone(pair.listener.failure)
        self.assertEqual(pair.listenerHandler.goingAway, 0)


class OpenTests(SynchronousTestCase):
    """
    Opening sessions.
    """

    def test_connectionMadeWritesTravelWithTheOpen(self) -> None:
        """
        What a protocol writes in its connectionMade (a TLS ClientHello, say)
        leaves inside the OPEN frame itself, not in a DATA frame after it.
        """

        class Greeter(Protocol):
            def connectionMade(self):
                self.transport.write(b"hello ")
                self.transport.write(b"there")

        pair = LinkPair()
        pair.dialer.openSession("svc", Greeter(), firstBytes=b">")
        pair.clock.advance(0)
        frames = FrameDecoder().feed(b"".join(pair.dialerIO.stream))
        self.assertEqual([f.type for f in frames], [FrameType.OPEN])
        self.assertEqual(frames[0].payload, b"\x00\x03svc>hello there")

    def test_halfCloseInConnectionMade(self) -> None:
        """
        A protocol that writes and half-closes in its connectionMade gets
        its bytes and its FIN delivered.
        """

        class Once(Protocol):
            def connectionMade(self):
                self.transport.write(b"x" * 100_000)
                self.transport.loseWriteConnection()

        got: list[Streamer] = []
        pair = LinkPair(listenerHandler=RecordingHandler(
            lambda s: got.append(Streamer(None, 0)) or got[-1]))
        pair.dialer.openSession("svc", Once())
        pair.run()
        self.assertEqual(got[0].received, 100_000)
        self.assertTrue(got[0].readEnded)


class BatchingTests(SynchronousTestCase):
    """
    Frames queued during one reactor turn leave in one transport write.
    """

    def test_oneWritePerTurn(self) -> None:
        """
        Writes on 8 sessions in one turn reach the transport as a single
        write on the next turn, not one per frame.
        """
        pair = LinkPair(listenerHandler=RecordingHandler(lambda s: Protocol()))
        sessions = [pair.dialer.openSession(f"s:{n}", Protocol()) for n in range(8)]
        pair.run()
        writes: list[bytes] = []
        pair.dialerIO.write = writes.append
        for session in sessions:
            session.write(b"a" * 100)
            session.write(b"b" * 100)
        self.assertEqual(writes, [])
        pair.clock.advance(0)
        self.assertEqual(len(writes), 1)
        frames = FrameDecoder().feed(writes[0])
        self.assertEqual(len(frames), 16)

    def test_afterTheEventsOfAPoll(self) -> None:
        """
        With a clock that has C{callAfterEvents} (nfltr's reactor), writes
        made outside a link's read leave once the events of the poll being
        handled were, in one write and with no timer; when it refuses (no
        poll's events being handled) a timer is used.
        """
        clock = AfterEventsClock()
        pair = LinkPair(listenerHandler=RecordingHandler(lambda s: Protocol()), clock=clock)
        sessions = [pair.dialer.openSession(f"s:{n}", Protocol()) for n in range(4)]
        pair.run()
        clock.after = []
        writes: list[bytes] = []
        pair.dialerIO.write = writes.append
        timers = set(clock.getDelayedCalls())  # the links' liveness timers
        for session in sessions:
            session.write(b"x" * 100)
        self.assertEqual(len(clock.after), 1)
        self.assertEqual(set(clock.getDelayedCalls()), timers)
        self.assertEqual(writes, [])
        clock.after.pop()()
        self.assertEqual(len(writes), 1)
        self.assertEqual(len(FrameDecoder().feed(writes[0])), 4)
        clock.after = None
        sessions[0].write(b"later")
        self.assertEqual(len(set(clock.getDelayedCalls()) - timers), 1)
        clock.advance(0)
        self.assertEqual(len(writes), 2)

    def test_writesDuringReadLeaveAtItsEnd(self) -> None:
        """
        What protocols write while a link's read is being processed (an echo
        on the same link, a forward onto another link as a relay does)
        leaves at the end of that read, in one write per link, with no
        reactor turn: nothing is left scheduled.
        """
        forward = LinkPair(listenerHandler=RecordingHandler(lambda s: Protocol()))
        onward = forward.dialer.openSession("onward", Protocol())
        forward.run()

        class EchoAndForward(Protocol):
            def dataReceived(self, data: bytes) -> None:
                self.transport.write(data.upper())
                onward.write(data)
                onward.write(data)

        pair = LinkPair(listenerHandler=RecordingHandler(lambda s: EchoAndForward()))
        session = pair.dialer.openSession("echo", Protocol())
        pair.run()
        echoed: list[bytes] = []
        forwarded: list[bytes] = []
        pair.listenerIO.write = echoed.append
        forward.dialerIO.write = forwarded.append
        session.write(b"ping")
        pair.dialer._flush()
        pair.pump.pump(advanceClock=False)
        self.assertEqual(len(echoed), 1)
        self.assertEqual([f.payload for f in FrameDecoder().feed(echoed[0])], [b"PING"])
        self.assertEqual(len(forwarded), 1)
        self.assertEqual(
            [f.payload for f in FrameDecoder().feed(forwarded[0])], [b"ping", b"ping"]
        )
        for clock in (pair.clock, forward.clock):
            due = [c for c in clock.getDelayedCalls() if c.getTime() <= clock.seconds()]
            self.assertEqual(due, [])


class AfterEventsClock(Clock):
    """
    A clock with nfltr's reactor's C{callAfterEvents}: C{after} is the list
    of functions to call once "the poll's events" are handled, or C{None}
    when no poll's events are being handled.
    """

    after: list[Any] | None = None

    def callAfterEvents(self, f: Any) -> bool:
        if self.after is None:
            return False
        self.after.append(f)
        return True


class EventOrderTests(SynchronousTestCase):
    """
    A link delivers its events in the order their frames arrived.
    """

    def test_eventsLeftByAnErrorComeFirst(self) -> None:
        """
        When a protocol's C{dataReceived} raises, the events decoded after
        its data in the same read are kept, and delivered before those of
        the next read.
        """
        order: list[object] = []

        @implementer(IHalfCloseableProtocol)
        class FailsOnce(Protocol):
            def dataReceived(self, data: bytes) -> None:
                order.append(data)
                raise RuntimeError("boom")

            def readConnectionLost(self) -> None:
                order.append("fin")

        def accept(session: LinkSession) -> Protocol:
            order.append("open " + session.target)
            return FailsOnce()

        pair = LinkPair(listenerHandler=RecordingHandler(accept))
        session = pair.dialer.openSession("a", Protocol())
        pair.run()
        session.write(b"x")
        session.loseWriteConnection()
        pair.clock.advance(0)
        self.assertRaises(RuntimeError, pair.listener.dataReceived, pair.dialerIO.getOutBuffer())
        self.assertEqual(order, ["open a", b"x"])
        pair.dialer.openSession("b", Protocol())
        pair.clock.advance(0)
        pair.listener.dataReceived(pair.dialerIO.getOutBuffer())
        self.assertEqual(order, ["open a", b"x", "fin", "open b"])


class Reacting(Protocol):
    """
    Records what a session delivers and reacts to the first data with
    C{react(transport)}.
    """

    def __init__(self, react: Any) -> None:
        self.react = react
        self.received: list[bytes] = []
        self.lost: list[Failure] = []

    def dataReceived(self, data: bytes) -> None:
        self.received.append(data)
        react, self.react = self.react, None
        if react is not None:
            react(self.transport)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.lost.append(reason)


@implementer(IHalfCloseableProtocol)
class HalfClosing(Reacting):
    """
    A L{Reacting} that keeps writing after the peer's FIN.
    """

    def readConnectionLost(self) -> None:
        self.received.append(b"<FIN>")

    def writeConnectionLost(self) -> None:
        pass


class DeliveryTests(SynchronousTestCase):
    """
    What a protocol does from its C{dataReceived} takes effect at once.
    """

    def pair(self, react: Any, config: LinkConfig | None = None) -> tuple[LinkPair, Reacting]:
        receiver = Reacting(react)
        pair = LinkPair(listenerHandler=RecordingHandler(lambda s: receiver), config=config)
        return pair, receiver

    def test_abortInDataReceived(self) -> None:
        """
        A protocol that aborts its session from C{dataReceived} gets no
        more data and one C{connectionLost}, after C{dataReceived} returned;
        the peer learns of a C{CANCEL}.
        """
        pair, receiver = self.pair(lambda transport: transport.abortConnection())
        sender = Reacting(None)
        session = pair.dialer.openSession("x", sender)
        pair.run()
        session.write(b"one")
        session.write(b"two")
        pair.clock.advance(0)
        pair.run()
        self.assertEqual(receiver.received, [b"one"])
        self.assertEqual(len(receiver.lost), 1)
        self.assertTrue(receiver.lost[0].check(error.ConnectionAborted))
        self.assertEqual(len(sender.lost), 1)
        self.assertEqual(sender.lost[0].value.code, ErrorCode.CANCEL)

    def test_pauseInDataReceived(self) -> None:
        """
        A protocol that pauses its session from C{dataReceived} gets nothing
        more until it resumes, then the rest in order.
        """
        pair, receiver = self.pair(lambda transport: transport.pauseProducing())
        session = pair.dialer.openSession("x", Protocol())
        pair.run()
        for chunk in (b"a", b"b", b"c"):
            session.write(chunk)
            pair.clock.advance(0)
            pair.run()
        self.assertEqual(receiver.received, [b"a"])
        pair.listener._sessions[session.sessionId].resumeProducing()
        self.assertEqual(receiver.received, [b"a", b"b", b"c"])

    def test_dataAfterLoseConnectionReturnsCredit(self) -> None:
        """
        Data that arrives after a protocol closed its session is dropped,
        and its credit goes back: the peer can send many windows' worth.
        """
        window = 64 * 1024
        pair, receiver = self.pair(
            lambda transport: transport.loseConnection(), LinkConfig(session_window=window)
        )
        sender = HalfClosing(None)
        session = pair.dialer.openSession("x", sender)
        pair.run()
        session.write(b"first")
        pair.clock.advance(0)
        pair.run()
        for _ in range(8):
            session.write(b"z" * (window // 2))
            pair.clock.advance(0)
            pair.run()
        self.assertEqual(receiver.received, [b"first"])
        self.assertEqual(sender.received, [b"<FIN>"])
        self.assertEqual(pair.dialer.connection._sessions[session.sessionId].pending_bytes, 0)
        session.loseConnection()
        pair.run()
        self.assertTrue(receiver.lost[0].check(error.ConnectionDone))
        self.assertTrue(sender.lost[0].check(error.ConnectionDone))


class FramedWriteTests(SynchronousTestCase):
    """
    L{LinkSession.writeFramed} sends a header and its payload as C{write} would their join,
    in one frame when both fit the credit.
    """

    def pair(self, config: LinkConfig | None = None) -> tuple[LinkPair, Reacting, LinkSession]:
        receiver = Reacting(None)
        pair = LinkPair(listenerHandler=RecordingHandler(lambda s: receiver), config=config)
        session = pair.dialer.openSession("x", Protocol())
        pair.run()
        return pair, receiver, session

    def test_interface(self) -> None:
        """
        A link session provides L{IFramedWriter} and L{IAcceptedSession}.
        """
        _, _, session = self.pair()
        self.assertTrue(verifyObject(IFramedWriter, session))
        self.assertTrue(verifyObject(IAcceptedSession, session))

    def test_oneFrame(self) -> None:
        """
        Within the credit, header and payload arrive in one delivery (one frame).
        """
        pair, receiver, session = self.pair()
        session.writeFramed(b"\x01\x00\x00\x00\x04", b"data")
        session.write(b"more")
        pair.clock.advance(0)
        pair.run()
        self.assertEqual(receiver.received, [b"\x01\x00\x00\x00\x04data", b"more"])

    def test_beyondTheCredit(self) -> None:
        """
        Beyond the session's credit, the joined bytes wait their turn: everything arrives,
        in order, once the receiver gives credit back.
        """
        window = 1024
        pair, receiver, session = self.pair(LinkConfig(session_window=window))
        session.write(b"a" * 1000)
        session.writeFramed(b"head", b"b" * 1000)
        session.write(b"c" * 10)
        pair.clock.advance(0)
        pair.run()
        self.assertEqual(b"".join(receiver.received),
                         b"a" * 1000 + b"head" + b"b" * 1000 + b"c" * 10)

    def test_beforeAccept(self) -> None:
        """
        Written before the peer accepted the session, they travel with the open, in order.
        """
        receiver = Reacting(None)
        pair = LinkPair(listenerHandler=RecordingHandler(lambda s: receiver))
        session = pair.dialer.openSession("x", Protocol())
        session.writeFramed(b"head", b"body")
        session.write(b"tail")
        pair.clock.advance(0)
        pair.run()
        self.assertEqual(b"".join(receiver.received), b"headbodytail")

    def test_afterLoseConnection(self) -> None:
        """
        Like C{write}, ignored once the session is closing for writes.
        """
        pair, receiver, session = self.pair()
        session.loseConnection()
        session.writeFramed(b"head", b"body")
        pair.clock.advance(0)
        pair.run()
        self.assertEqual(receiver.received, [])
class LentInputTests(SynchronousTestCase):
    """
    A link is an L{ITransientReader}: what it is lent is copied before the
    lender reuses its buffer.
    """

    def test_lentBufferReused(self) -> None:
        """
        Frames fed as a view of a buffer, overwritten at once after the
        call (a large DATA frame, a small one, and one cut short to be
        completed by the next input), reach the session intact.
        """
        got: list[bytes] = []

        class Keeper(Protocol):
            def dataReceived(self, data: bytes) -> None:
                got.append(data)

        pair = LinkPair(listenerHandler=RecordingHandler(lambda s: Keeper()))
        verifyObject(ITransientReader, pair.listener)
        session = pair.dialer.openSession("svc", Protocol())
        pair.run()
        data = pattern(7, 3 * CHUNK) + b"tail"
        session.write(data[: 2 * CHUNK])
        session.write(data[2 * CHUNK :])
        pair.clock.advance(0)
        out = b"".join(pair.dialerIO.stream)
        pair.dialerIO.stream = []
        cut = len(out) - 1000
        for piece in (out[:cut], out[cut:]):
            lent = bytearray(piece)
            pair.listener.transientDataReceived(memoryview(lent))
            lent[:] = bytes(len(lent))
        self.assertEqual(b"".join(got), data)
        self.assertTrue(all(type(chunk) is bytes for chunk in got))
