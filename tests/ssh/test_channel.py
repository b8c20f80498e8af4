"""
Tests of L{nfltr.ssh.channel.ForwardChannel}: window credit only for bytes
gone onward, bounded queues, ends that say how they ended.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error, interfaces
from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.ssh import SSHConfig
from nfltr.ssh.channel import ForwardChannel
from nfltr.streams.windowed import IAcceptedSession

KIB = 1024
CONFIG = SSHConfig(window=64 * KIB, max_packet=16 * KIB, max_buffer=128 * KIB)


class FakeConnection:
    """
    What a channel calls on conch's connection, recorded.
    """

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.credits: list[int] = []
        self.eofs = 0
        self.closes = 0
        self.debugs: list[tuple[bytes, bool]] = []
        self.channelsToRemoteChannel: dict[ForwardChannel, int] = {}
        self.transport = self

    def getPeer(self) -> str:
        return "peer"

    getHost = getPeer

    def sendDebug(self, message: bytes, alwaysDisplay: bool = False) -> None:
        self.debugs.append((message, alwaysDisplay))

    def sendData(self, channel: ForwardChannel, data: bytes) -> None:
        assert not channel.localClosed
        self.sent.append(data)

    def adjustWindow(self, channel: ForwardChannel, n: int) -> None:
        self.credits.append(n)
        channel.localWindowLeft += n

    def sendEOF(self, channel: ForwardChannel) -> None:
        self.eofs += 1

    def sendClose(self, channel: ForwardChannel) -> None:
        self.closes += 1
        channel.localClosed = True
        if channel.remoteClosed:
            channel.closed()

    def receive(self, channel: ForwardChannel, data: bytes) -> None:
        """
        As L{nfltr.relay.ssh._server.RelayConnection.ssh_CHANNEL_DATA} does.
        """
        assert len(data) <= channel.localWindowLeft, "client over its window"
        channel.localWindowLeft -= len(data)
        channel.dataReceived(data)

    def peerCloses(self, channel: ForwardChannel) -> None:
        channel.closeReceived()
        channel.remoteClosed = True
        if channel.localClosed:
            channel.closed()


@implementer(IHalfCloseableProtocol)
class Recorder(Protocol):
    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.readLost = False
        self.reason: Failure | None = None

    def dataReceived(self, data: bytes) -> None:
        self.received.append(data)

    def readConnectionLost(self) -> None:
        self.readLost = True

    def writeConnectionLost(self) -> None:
        pass

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        self.reason = reason


class Producer:
    def __init__(self) -> None:
        self.paused = False

    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False

    def stopProducing(self) -> None:
        pass


def opened(remoteWindow: int = 64 * KIB, remoteMaxPacket: int = 16 * KIB) -> tuple[
        ForwardChannel, FakeConnection, Recorder]:
    conn, protocol = FakeConnection(), Recorder()
    channel = ForwardChannel(protocol, CONFIG, conn, b"direct-tcpip", remoteWindow,
                             remoteMaxPacket)
    conn.channelsToRemoteChannel[channel] = 0
    channel.channelOpen(b"")
    return channel, conn, protocol


class CreditTests(SynchronousTestCase):
    """
    Client to relay: credit follows consumption.
    """

    def test_interfaces(self) -> None:
        """
        A channel is the transport of the protocol it carries, and tells when
        it was accepted (at once: an C{ssh -R} channel is open once opened).
        """
        channel, _, _ = opened()
        self.assertTrue(verifyObject(interfaces.ITransport, channel))
        self.assertTrue(verifyObject(IAcceptedSession, channel))
        self.assertEqual(self.successResultOf(channel.whenAccepted()), None)

    def test_creditAfterDelivery(self) -> None:
        """
        Bytes reach the protocol; credit goes back in batches of half the
        window, never before delivery.
        """
        channel, conn, protocol = opened()
        conn.receive(channel, b"a" * (16 * KIB))
        self.assertEqual(conn.credits, [])
        conn.receive(channel, b"b" * (16 * KIB))
        self.assertEqual(conn.credits, [32 * KIB])
        self.assertEqual(b"".join(protocol.received), b"a" * (16 * KIB) + b"b" * (16 * KIB))
        self.assertEqual(channel.localWindowLeft, 64 * KIB)

    def test_pausedKeepsCredit(self) -> None:
        """
        While the consumer downstream has paused the channel no credit goes
        back, so the client runs out of window on this channel; resuming
        returns all that is owed.
        """
        channel, conn, _protocol = opened()
        channel.pauseProducing()
        for _ in range(4):
            conn.receive(channel, b"x" * (16 * KIB))
        self.assertEqual(conn.credits, [])
        self.assertEqual(channel.localWindowLeft, 0)
        self.assertRaises(AssertionError, conn.receive, channel, b"y")
        channel.resumeProducing()
        self.assertEqual(conn.credits, [64 * KIB])


class QueueTests(SynchronousTestCase):
    """
    Relay to client: the client's window bounds what is sent, the producer
    pauses while bytes wait.
    """

    def test_windowAndPackets(self) -> None:
        """
        A write within the window goes out in packets of the client's
        maximum size; beyond it the rest waits, the producer is paused, and
        a window adjustment sends the rest and resumes it.
        """
        channel, conn, _ = opened(remoteWindow=40 * KIB)
        producer = Producer()
        channel.registerProducer(producer, True)
        channel.write(b"z" * (50 * KIB))
        self.assertEqual([len(d) for d in conn.sent], [16 * KIB, 16 * KIB, 8 * KIB])
        self.assertTrue(producer.paused)
        channel.addWindowBytes(20 * KIB)
        self.assertEqual(sum(map(len, conn.sent)), 50 * KIB)
        self.assertFalse(producer.paused)
        self.assertEqual(channel.remoteWindowLeft, 10 * KIB)

    def test_beforeOpen(self) -> None:
        """
        Writes before the client confirms the channel wait, then go.
        """
        conn, protocol = FakeConnection(), Recorder()
        channel = ForwardChannel(protocol, CONFIG, conn, b"forwarded-tcpip")
        channel.connect()
        channel.write(b"early")
        self.assertEqual(conn.sent, [])
        channel.remoteWindowLeft, channel.remoteMaxPacket = 1024, 512
        channel.channelOpen(b"")
        self.assertEqual(conn.sent, [b"early"])

    def test_overflowResets(self) -> None:
        """
        A writer that ignores the pause and queues more than C{max_buffer}
        has its channel reset.
        """
        channel, conn, protocol = opened(remoteWindow=0)
        channel.write(b"q" * (128 * KIB))
        self.assertIsNone(protocol.reason)
        channel.write(b"q")
        assert protocol.reason is not None
        self.assertTrue(protocol.reason.check(error.ConnectionAborted))
        self.assertEqual(conn.closes, 1)


class EndTests(SynchronousTestCase):
    """
    How a channel ends.
    """

    def test_eofThenClose(self) -> None:
        """
        The client's EOF half-closes; its close after that is clean.
        """
        channel, conn, protocol = opened()
        channel.eofReceived()
        self.assertTrue(protocol.readLost)
        conn.peerCloses(channel)
        assert protocol.reason is not None
        self.assertTrue(protocol.reason.check(error.ConnectionDone))

    def test_closeWithoutEOF(self) -> None:
        """
        A close without EOF is a lost connection, not a clean end.
        """
        channel, conn, protocol = opened()
        conn.peerCloses(channel)
        assert protocol.reason is not None
        self.assertTrue(protocol.reason.check(error.ConnectionLost))

    def test_loseConnectionDrainsFirst(self) -> None:
        """
        A close sends what waits, then EOF and close; the protocol hears a
        clean end when the client closes too.
        """
        channel, conn, protocol = opened(remoteWindow=4)
        channel.write(b"abcdefgh")
        channel.loseConnection()
        self.assertEqual((conn.eofs, conn.closes), (0, 0))
        channel.addWindowBytes(4)
        self.assertEqual(b"".join(conn.sent), b"abcdefgh")
        self.assertEqual((conn.eofs, conn.closes), (1, 1))
        conn.peerCloses(channel)
        assert protocol.reason is not None
        self.assertTrue(protocol.reason.check(error.ConnectionDone))

    def test_halfClose(self) -> None:
        """
        C{loseWriteConnection} sends EOF after what waits, and no close.
        """
        channel, conn, _ = opened(remoteWindow=2)
        channel.write(b"abcd")
        channel.loseWriteConnection()
        self.assertEqual(conn.eofs, 0)
        channel.addWindowBytes(2)
        self.assertEqual((conn.eofs, conn.closes), (1, 0))

    def test_refused(self) -> None:
        """
        A channel the client refuses is a refused connection for the
        protocol, with the client's words.
        """
        conn, protocol = FakeConnection(), Recorder()
        channel = ForwardChannel(protocol, CONFIG, conn, b"forwarded-tcpip")
        channel.connect()
        reason: Any = type("R", (), {"desc": b"no forward"})()
        channel.openFailed(reason)
        assert protocol.reason is not None
        self.assertTrue(protocol.reason.check(error.ConnectionRefusedError))


class ResetTests(SynchronousTestCase):
    """
    A confirmed channel whose far end was reset (the agent could not reach
    its service, another replica refused the session): SSH has no refusal
    left to send, so the client is told why in a debug message.
    """

    def test_resetSaysWhy(self) -> None:
        """
        C{abortWith} on an open C{direct-tcpip} channel sends one SSH debug
        message naming the client's channel number and the reason, then
        closes the channel without EOF; the protocol hears an abort.
        """
        channel, conn, protocol = opened()
        conn.channelsToRemoteChannel[channel] = 3
        channel.abortWith(15, "service on port 4000 refused the connection")
        self.assertEqual(conn.debugs, [
            (b"channel 3 (direct-tcpip) reset: service on port 4000 refused the connection",
             True),
        ])
        self.assertEqual((conn.eofs, conn.closes), (0, 1))
        assert protocol.reason is not None
        self.assertFalse(protocol.reason.check(error.ConnectionDone))
        channel.abortWith(15, "again")
        self.assertEqual(len(conn.debugs), 1)

    def test_reasonIsOneLine(self) -> None:
        """
        The reason is a peer's words: sent as one printable line, and an
        empty one names the code.
        """
        channel, conn, _ = opened()
        channel.abortWith(13, "no such\nagent\x1b[31m")
        [(text, _)] = conn.debugs
        self.assertNotIn(b"\n", text)
        self.assertNotIn(b"\x1b", text)
        other, conn, _ = opened()
        other.abortWith(13, "")
        self.assertEqual(conn.debugs[0][0], b"channel 0 (direct-tcpip) reset: error code 13")

    def test_resetBeforeOpenOrForwarded(self) -> None:
        """
        Nothing is said on a channel the client has not confirmed, nor on
        the channels the relay opens towards an C{ssh -R} client (a
        visitor's end is not the client's error); both still end.
        """
        conn, protocol = FakeConnection(), Recorder()
        channel = ForwardChannel(protocol, CONFIG, conn, b"forwarded-tcpip")
        channel.connect()
        channel.abortWith(14, "client link lost")
        self.assertEqual((conn.debugs, conn.closes), ([], 0))
        assert protocol.reason is not None
        forwarded, conn, _ = opened()
        forwarded.name = b"forwarded-tcpip"
        forwarded.abortWith(14, "client link lost")
        self.assertEqual((conn.debugs, conn.closes), ([], 1))
