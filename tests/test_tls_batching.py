"""
Tests for L{nfltr.tls._batching}: real pyOpenSSL on both ends with nfltr's
contexts, joined by L{twisted.test.iosim} on a L{Clock}.
"""

from __future__ import annotations

from typing import Any

from OpenSSL import SSL
from twisted.internet import defer, error, interfaces
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOFactory
from twisted.python.failure import Failure
from twisted.test.iosim import IOPump, connectedServerAndClient
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.netio import IOSettings, ITransientReader, TunedReactor
from nfltr.tls import (
    BatchingTLSFactory,
    BatchingTLSProtocol,
    TLSClientEndpoint,
    TunedTLSFactory,
    _direct,
    client_creator,
    ensure_self_signed,
    server_context_factory,
    tls_factory,
)
from nfltr.tls._batching import RECORD_SIZE

KiB = 1024
MiB = 1024 * KiB


class Recorder(Protocol):
    """
    Records every C{dataReceived} and the connection's end.
    """

    def __init__(self) -> None:
        self.reads: list[bytes] = []
        self.lost: Failure | None = None

    @property
    def received(self) -> bytes:
        return b"".join(self.reads)

    def dataReceived(self, data: bytes) -> None:
        self.reads.append(data)

    def connectionLost(self, reason: Failure | None = None) -> None:
        self.lost = reason


class BatchPair:
    """
    A client and a server L{BatchingTLSProtocol} over iosim.
    """

    def __init__(
        self, case: SynchronousTestCase, batch: bool = True, connect: bool = True,
        direct: bool | None = None, server_app: Recorder | None = None,
    ) -> None:
        identity = ensure_self_signed(case.mktemp(), "server")
        self.clock = Clock()
        self.server_app, self.client_app = server_app or Recorder(), Recorder()
        server = BatchingTLSFactory(
            server_context_factory(identity.cert, identity.key), False,
            Factory.forProtocol(lambda: self.server_app), clock=self.clock,
        )
        client = BatchingTLSFactory(
            client_creator("server", pin=identity.fingerprint, role="server"), True,
            Factory.forProtocol(lambda: self.client_app), clock=self.clock,
        )
        server.batch = client.batch = batch
        # A test case with direct = False runs the pyOpenSSL data path.
        chosen = getattr(case, "direct", True) if direct is None else direct
        server.direct = client.direct = chosen
        address = IPv4Address("TCP", "127.0.0.1", 8443)
        self.client: BatchingTLSProtocol
        self.server: BatchingTLSProtocol
        self.pump: IOPump
        self.client, self.server, self.pump = connectedServerAndClient(
            lambda: server.buildProtocol(address), lambda: client.buildProtocol(address),
            clock=self.clock, greet=connect,
        )

    def pending(self, protocol: BatchingTLSProtocol) -> int:
        """
        Writes waiting in C{protocol}'s transport (iosim's stream).
        """
        return len(protocol.transport.stream)


class DataPathTests(SynchronousTestCase):
    """
    A write is one C{SSL_write} and one transport write; a read delivers
    every record it completed at once.
    """

    def test_oneTransportWritePerWrite(self) -> None:
        """
        A 1 MiB write leaves in one transport write and arrives whole, in
        one C{dataReceived} (iosim delivers it in one read).
        """
        pair = BatchPair(self)
        data = bytes(range(256)) * (4 * KiB)
        pair.client.write(data)
        self.assertEqual(pair.pending(pair.client), 1)
        pair.pump.flush()
        self.assertEqual(pair.server_app.reads, [data])

    def test_unbatched(self) -> None:
        """
        With C{batch} off the data path is Twisted's: a record per transport
        write and per C{dataReceived}.
        """
        pair = BatchPair(self, batch=False)
        data = b"u" * (4 * RECORD_SIZE)
        pair.client.write(data)
        self.assertEqual(pair.pending(pair.client), 4)
        pair.pump.flush()
        self.assertEqual([len(r) for r in pair.server_app.reads], [RECORD_SIZE] * 4)
        self.assertEqual(pair.server_app.received, data)

    def test_manyWritesInOrder(self) -> None:
        """
        Writes of every size, small and over a record, arrive in order.
        """
        pair = BatchPair(self)
        writes = [bytes([i % 256]) * size for i, size in enumerate(
            [1, 100, RECORD_SIZE - 1, RECORD_SIZE, RECORD_SIZE + 1, 3 * RECORD_SIZE + 7, 5]
        )]
        for chunk in writes:
            pair.client.write(chunk)
        pair.client.writeSequence([b"seq", b"uence"])
        pair.pump.flush()
        self.assertEqual(pair.server_app.received, b"".join(writes) + b"sequence")

    def test_emptyWrite(self) -> None:
        """
        Writing nothing sends nothing and breaks nothing.
        """
        pair = BatchPair(self)
        pair.client.write(b"")
        self.assertEqual(pair.pending(pair.client), 0)
        pair.client.write(b"after")
        pair.pump.flush()
        self.assertEqual(pair.server_app.received, b"after")
        self.assertIsNone(pair.server_app.lost)

    def test_wholeWriteAccepted(self) -> None:
        """
        nfltr's contexts turn partial writes off: one C{SSL_write} takes a
        write of many records whole.
        """
        pair = BatchPair(self)
        connection = pair.client.getHandle()
        self.assertEqual(connection.send(b"w" * (5 * RECORD_SIZE)), 5 * RECORD_SIZE)

    def test_writesBeforeHandshake(self) -> None:
        """
        Writes made before the handshake finished are sent after it, in
        order.
        """
        pair = BatchPair(self, connect=False)
        pair.client.write(b"early ")
        pair.client.write(b"x" * (2 * RECORD_SIZE))
        pair.pump.flush()
        self.assertEqual(pair.server_app.received, b"early " + b"x" * (2 * RECORD_SIZE))

    def test_sendBIOEmptyAfterRead(self) -> None:
        """
        Whatever OpenSSL wrote while reading (the server's TLS 1.3 session
        tickets after the client's Finished, answers to post-handshake
        messages) has left by the end of the read: the send BIO is empty on
        both sides once the pump is idle.
        """
        pair = BatchPair(self)
        pair.client.write(b"ping")
        pair.pump.flush()
        pair.server.write(b"pong")
        pair.pump.flush()
        for side in (pair.client, pair.server):
            self.assertRaises(SSL.WantReadError, side.getHandle().bio_read, 1)
        self.assertEqual(pair.client_app.received, b"pong")


@implementer(ITransientReader)
class Borrower(Recorder):
    """
    A L{Recorder} that can be lent its reads: records each as a copy, and
    what it was given.
    """

    def __init__(self) -> None:
        super().__init__()
        self.kinds: list[type] = []

    def dataReceived(self, data: bytes) -> None:
        self.kinds.append(type(data))
        super().dataReceived(data)

    def transientDataReceived(self, data: memoryview) -> None:
        self.kinds.append(type(data))
        super().dataReceived(bytes(data))


class LendingTests(SynchronousTestCase):
    """
    A protocol that provides L{ITransientReader} is lent what a read
    decrypted, as a view; any other gets C{bytes}.
    """

    def test_lent(self) -> None:
        """
        An L{ITransientReader} is lent each read that fits the read buffer,
        bytes intact and in order; a read larger than the buffer comes as
        C{bytes}.
        """
        borrower = Borrower()
        verifyObject(ITransientReader, borrower)
        pair = BatchPair(self, server_app=borrower)
        small, large = b"s" * 100, bytes(range(256)) * (4 * KiB)
        pair.client.write(small)
        pair.pump.flush()
        pair.client.write(large)
        pair.pump.flush()
        self.assertEqual(borrower.received, small + large)
        self.assertEqual(borrower.kinds, [memoryview, bytes])

    def test_notLent(self) -> None:
        """
        Without the direct data path, or to another protocol, reads are
        C{bytes}.
        """
        borrower = Borrower()
        pair = BatchPair(self, direct=False, server_app=borrower)
        pair.client.write(b"x" * 100)
        pair.pump.flush()
        self.assertEqual(borrower.kinds, [bytes])
        plain = BatchPair(self)
        plain.client.write(b"y" * 100)
        plain.pump.flush()
        self.assertEqual(plain.server_app.reads, [b"y" * 100])
        self.assertIs(type(plain.server_app.reads[0]), bytes)


class CloseTests(SynchronousTestCase):
    """
    Data before a close arrives before the close, in both modes of ending.
    """

    def test_dataThenCloseNotify(self) -> None:
        """
        Data and the C{close_notify} after it, read together: the
        application gets the data, then a clean end.
        """
        pair = BatchPair(self)
        pair.server.write(b"last words" * 5000)
        pair.server.loseConnection()
        pair.pump.flush()
        self.assertEqual(pair.client_app.received, b"last words" * 5000)
        assert pair.client_app.lost is not None and pair.server_app.lost is not None
        self.assertTrue(pair.client_app.lost.check(error.ConnectionDone), pair.client_app.lost)
        self.assertTrue(pair.server_app.lost.check(error.ConnectionDone), pair.server_app.lost)

    def test_dataThenGarbage(self) -> None:
        """
        Data followed by bytes that are no TLS record, read together: the
        data is delivered first, then the connection ends with the error.
        """
        pair = BatchPair(self)
        pair.server.write(b"good")
        wire = b"".join(pair.server.transport.stream)
        del pair.server.transport.stream[:]
        pair.client.dataReceived(wire + b"\x17\x03\x03\x00\x20" + b"\x00" * 32)
        self.assertEqual(pair.client_app.received, b"good")
        pair.pump.flush()
        assert pair.client_app.lost is not None
        self.assertFalse(pair.client_app.lost.check(error.ConnectionDone))

    def test_abortDuringDelivery(self) -> None:
        """
        An application that aborts while data is delivered gets nothing
        more.
        """
        pair = BatchPair(self)

        def abort(data: bytes) -> None:
            pair.client_app.reads.append(data)
            pair.client.abortConnection()

        pair.client_app.dataReceived = abort  # type: ignore[method-assign]
        pair.server.write(b"a" * 10)
        pair.pump.flush()
        pair.server.write(b"b" * 10)
        pair.pump.flush()
        self.assertEqual(pair.client_app.received, b"a" * 10)


@implementer(interfaces.IPushProducer)
class Producer:
    def __init__(self) -> None:
        self.events: list[str] = []

    def pauseProducing(self) -> None:
        self.events.append("pause")

    def resumeProducing(self) -> None:
        self.events.append("resume")

    def stopProducing(self) -> None:
        self.events.append("stop")


class BackpressureTests(SynchronousTestCase):
    """
    A producer on the TLS transport is paused and resumed with the
    transport below, and while writes wait for the handshake.
    """

    def test_followsTransportBelow(self) -> None:
        """
        Pausing the transport's producer (the TLS layer's membrane) pauses
        the application's producer once; resuming resumes it.
        """
        pair = BatchPair(self)
        producer = Producer()
        pair.client.registerProducer(producer, True)
        below = pair.client.transport.producer
        below.pauseProducing()
        below.pauseProducing()
        below.resumeProducing()
        self.assertEqual(producer.events, ["pause", "resume"])
        pair.client.unregisterProducer()

    def test_pausedUntilHandshake(self) -> None:
        """
        A write before the handshake pauses the producer; the handshake's
        end resumes it.
        """
        pair = BatchPair(self, connect=False)
        producer = Producer()
        pair.client.registerProducer(producer, True)
        pair.client.write(b"early")
        self.assertEqual(producer.events, ["pause"])
        pair.pump.flush()
        self.assertEqual(producer.events, ["pause", "resume"])
        self.assertEqual(pair.server_app.received, b"early")


def releases(factory: TLSMemoryBIOFactory) -> bool:
    """
    Whether a connection of C{factory} releases its record buffers while
    idle (its OpenSSL mode, read through L{nfltr.tls._direct}'s handles).
    """
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
    protocol.makeConnection(StringTransport())
    mode = _direct._lib.SSL_set_mode(protocol._tlsConnection._ssl, 0)
    return bool(mode & _direct._lib.SSL_MODE_RELEASE_BUFFERS)


class FactoryTests(SynchronousTestCase):
    """
    L{tls_factory} and L{TLSClientEndpoint} choose the protocol.
    """

    def test_choice(self) -> None:
        """
        C{batch} picks nfltr's batching factory or Twisted's own protocol
        (in a factory that only carries the settings).
        """
        identity = ensure_self_signed(self.mktemp(), "s")
        creator = server_context_factory(identity.cert, identity.key)
        wrapped = Factory.forProtocol(Protocol)
        batching = tls_factory(creator, False, wrapped, Clock(), batch=True)
        self.assertIsInstance(batching, BatchingTLSFactory)
        self.assertIs(batching.protocol, BatchingTLSProtocol)
        twisted = tls_factory(creator, False, wrapped, Clock(), batch=False)
        self.assertIs(type(twisted), TunedTLSFactory)
        self.assertIs(twisted.protocol, BufferingTLSTransport)
        self.assertFalse(batching.noisy or twisted.noisy)

    def test_reactorSettings(self) -> None:
        """
        Without C{batch}, the factory follows the I/O settings of its
        reactor (a L{TunedReactor}'s, else the defaults): batching or not,
        OpenSSL called directly or not, and whether its connections release
        their buffers while idle (the shared context is left as it is).
        """
        identity = ensure_self_signed(self.mktemp(), "s")
        creator = server_context_factory(identity.cert, identity.key)
        wrapped = Factory.forProtocol(Protocol)
        plain = tls_factory(creator, False, wrapped, Clock())
        self.assertIsInstance(plain, BatchingTLSFactory)
        self.assertTrue(plain.direct)
        self.assertTrue(releases(plain))
        chosen = IOSettings(tls_batch=False, tls_direct=False, tls_release_buffers=False)
        tuned = tls_factory(creator, False, wrapped, TunedReactor(Clock(), chosen))
        self.assertIs(type(tuned), TunedTLSFactory)
        self.assertFalse(releases(tuned))
        self.assertTrue(releases(plain))
        direct = tls_factory(creator, False, wrapped,
                             TunedReactor(Clock(), IOSettings(tls_direct=False)))
        self.assertIsInstance(direct, BatchingTLSFactory)
        self.assertFalse(direct.direct)

    def test_endpoint(self) -> None:
        """
        The endpoint connects its inner endpoint with a TLS factory around
        the application's, and fires with the application's protocol.
        """
        connected: list[Any] = []

        class Inner:
            def connect(self, factory: Any) -> defer.Deferred[Any]:
                connected.append(factory)
                protocol = factory.buildProtocol(None)
                return defer.succeed(protocol)

        app = Protocol()
        endpoint = TLSClientEndpoint(
            client_creator("x", pin="sha256:" + "0" * 64), Inner(), Clock()
        )
        result = self.successResultOf(endpoint.connect(Factory.forProtocol(lambda: app)))
        self.assertIs(result, app)
        self.assertIsInstance(connected[0], TLSMemoryBIOFactory)
