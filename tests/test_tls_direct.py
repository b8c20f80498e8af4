"""
Tests for L{nfltr.tls._direct}: L{DirectIO} on real pyOpenSSL connections
that finished their handshake, and L{BatchingTLSProtocol} with and without
it (the batching tests run again on pyOpenSSL's own calls).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from OpenSSL import SSL
from twisted.internet import error
from twisted.trial.unittest import SynchronousTestCase

from nfltr.netio import IOSettings, WriteNowMixin
from nfltr.tls import _direct
from nfltr.tls._direct import READ_BUFFER, SEND_BUFFER, DirectIO, Problem, available
from tests import test_tls_batching as batching

KiB = 1024
MiB = 1024 * KiB


def handshaken(case: SynchronousTestCase) -> tuple[Any, Any]:
    """
    The client and server pyOpenSSL connections of a pair whose handshake
    is done and whose BIOs are empty.
    """
    pair = batching.BatchPair(case)
    pair.client.write(b"hello")
    pair.pump.flush()
    pair.server.write(b"hello")
    pair.pump.flush()
    return pair.client.getHandle(), pair.server.getHandle()


def cross(sender: DirectIO, receiver: DirectIO) -> bytes:
    """
    Move the sender's ciphertext to the receiver; what it decrypts.
    """
    receiver.feed(sender.drain())
    return receiver.read()


class DirectIOTests(SynchronousTestCase):
    """
    L{DirectIO} moves data as pyOpenSSL's calls would, and reports every
    other outcome as the exception pyOpenSSL raises.
    """

    def setUp(self) -> None:
        if not available():
            raise self.skipTest("this pyOpenSSL has no cffi handles")  # pragma: no cover
        client, server = handshaken(self)
        self.client, self.server = DirectIO(client), DirectIO(server)

    def test_roundTrip(self) -> None:
        """
        A write comes out of the other side whole, both ways.
        """
        self.client.write(b"request")
        self.assertEqual(cross(self.client, self.server), b"request")
        self.server.write(memoryview(b"response"))
        self.assertEqual(cross(self.server, self.client), b"response")

    def test_nothingToRead(self) -> None:
        """
        With no complete record, a read returns nothing and raises nothing.
        """
        self.assertEqual(self.client.read(), b"")
        self.client.write(b"x" * 100)
        wire = self.client.drain()
        self.server.feed(wire[:10])
        self.assertEqual(self.server.read(), b"")
        self.server.feed(wire[10:])
        self.assertEqual(self.server.read(), b"x" * 100)

    def test_largerThanTheBuffers(self) -> None:
        """
        Plaintext beyond the read buffer and ciphertext beyond the send
        buffer arrive whole and in order.
        """
        data = bytes(range(256)) * ((max(READ_BUFFER, SEND_BUFFER) * 2 + 4099) // 256)
        self.client.write(data)
        wire = self.client.drain()
        self.assertGreater(len(wire), SEND_BUFFER)
        self.server.feed(wire)
        self.assertEqual(self.server.read(), data)

    def test_drainOffersToSender(self) -> None:
        """
        C{drain} offers the ciphertext to C{send}; what it did not take is
        returned, so that the bytes on the wire are the same as without it.
        """
        self.client.write(b"a" * 5000)
        taken: list[bytes] = []

        def send(view: memoryview) -> int:
            taken.append(bytes(view[:1000]))
            return 1000

        rest = self.client.drain(send)
        self.assertEqual(len(taken), 1)
        self.assertGreater(len(rest), 4000)
        self.server.feed(b"".join(taken) + rest)
        self.assertEqual(self.server.read(), b"a" * 5000)
        self.assertEqual(cross(self.client, self.server), b"")

    def test_drainAllTaken(self) -> None:
        """
        When C{send} takes everything nothing is returned, and the bytes it
        saw decrypt on the other side.
        """
        self.client.write(b"b" * 3000)
        taken: list[bytes] = []

        def send(view: memoryview) -> int:
            taken.append(bytes(view))
            return len(view)

        self.assertEqual(self.client.drain(send), b"")
        self.server.feed(b"".join(taken))
        self.assertEqual(self.server.read(), b"b" * 3000)

    def test_drainEmpty(self) -> None:
        """
        An empty send BIO gives nothing and does not call C{send}.
        """
        self.assertEqual(self.client.drain(lambda view: self.fail("called")), b"")

    def test_closeNotifyAfterData(self) -> None:
        """
        Data and then C{close_notify}: a L{Problem} carrying the data and
        C{ZeroReturnError}.
        """
        self.client.write(b"last")
        self.client.connection.shutdown()
        self.server.feed(self.client.drain())
        problem = self.assertRaises(Problem, self.server.read)
        self.assertEqual(problem.data, b"last")
        self.assertIsInstance(problem.error, SSL.ZeroReturnError)

    def test_garbage(self) -> None:
        """
        Bytes that are no valid record: a L{Problem} with pyOpenSSL's
        C{Error}, after the data before them; OpenSSL's error queue is left
        empty.
        """
        self.client.write(b"good")
        self.server.feed(self.client.drain() + b"\x17\x03\x03\x00\x20" + b"\x00" * 32)
        problem = self.assertRaises(Problem, self.server.read)
        self.assertEqual(problem.data, b"good")
        self.assertIsInstance(problem.error, SSL.Error)
        self.assertEqual(_direct._lib.ERR_peek_error(), 0)

    def test_truncated(self) -> None:
        """
        The stream ends in the middle of a record: pyOpenSSL's "Unexpected
        EOF".
        """
        self.client.write(b"z" * 100)
        self.server.feed(self.client.drain()[:50])
        self.server.connection.bio_shutdown()
        problem = self.assertRaises(Problem, self.server.read)
        self.assertIsInstance(problem.error, SSL.SysCallError)

    def test_writeAfterClose(self) -> None:
        """
        A write after this side sent C{close_notify} fails as pyOpenSSL's
        C{send} would.
        """
        self.client.connection.shutdown()
        problem = self.assertRaises(Problem, self.client.write, b"late")
        self.assertIsInstance(problem.error, SSL.Error)

    @settings(max_examples=25, deadline=None)
    @given(
        writes=st.lists(st.binary(min_size=1, max_size=40000), min_size=1, max_size=6),
        cuts=st.lists(st.integers(min_value=1, max_value=70000), max_size=8),
    )
    def test_anyChunking(self, writes: list[bytes], cuts: list[int]) -> None:
        """
        However the ciphertext is cut into reads, the plaintext comes out
        whole and in order.
        """
        for chunk in writes:
            self.client.write(chunk)
        wire = self.client.drain()
        got = []
        start = 0
        for cut in sorted(set(cuts)):
            if cut >= len(wire):
                break
            self.server.feed(wire[start:cut])
            got.append(self.server.read())
            start = cut
        self.server.feed(wire[start:])
        got.append(self.server.read())
        self.assertEqual(b"".join(got), b"".join(writes))


class SendNowTransport(WriteNowMixin):
    """
    Stands for nfltr's TCP transport: C{sendNow} takes a fixed number of
    bytes of each offer, C{write} records the rest.
    """

    def __init__(self, inner: Any, take: int) -> None:
        self.inner = inner
        self.take = take
        self.offers = 0

    def write(self, data: bytes) -> None:
        self.inner.write(data)

    def sendNow(self, view: memoryview) -> int:
        self.offers += 1
        n = min(self.take, len(view))
        if n:
            self.inner.write(bytes(view[:n]))
        return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class ProtocolTests(SynchronousTestCase):
    """
    L{BatchingTLSProtocol} switches to L{DirectIO} after the handshake, and
    only when asked to.
    """

    def test_usedAfterHandshake(self) -> None:
        """
        After the handshake the protocol holds a L{DirectIO}; without
        C{direct} it never does.  Data flows either way.
        """
        for direct in (True, False):
            pair = batching.BatchPair(self, direct=direct)
            pair.client.write(b"ping")
            pair.pump.flush()
            self.assertEqual(pair.server_app.received, b"ping")
            self.assertEqual(pair.client._direct is not None, direct and available())
            self.assertEqual(pair.server._direct is not None, direct and available())

    def test_sendNowThenWrite(self) -> None:
        """
        A transport with C{sendNow} is offered the ciphertext from the
        buffer; what it does not take is written after it, in order.
        """
        for take in (0, 100, 10**9):
            pair = batching.BatchPair(self)
            pair.client.write(b"warm")
            pair.pump.flush()
            fake = SendNowTransport(pair.client.transport, take)
            pair.client.transport = fake
            data = bytes(range(256)) * 1000
            pair.client.write(data)
            pair.pump.flush()
            self.assertEqual(pair.server_app.received, b"warm" + data)
            self.assertEqual(fake.offers, 1)

    def test_wrapperNotBypassed(self) -> None:
        """
        A transport that only forwards attribute lookups to one with
        C{sendNow} (a protocol wrapper: TLS under this TLS) gets every byte
        through its own C{write}.
        """
        pair = batching.BatchPair(self)
        pair.client.write(b"warm")
        pair.pump.flush()
        below = SendNowTransport(pair.client.transport, 10**9)
        written: list[bytes] = []

        class Wrapper:
            def write(self, data: bytes) -> None:
                written.append(data)
                below.inner.write(data)

            def __getattr__(self, name: str) -> Any:
                return getattr(below, name)

        pair.client.transport = Wrapper()
        pair.client.write(b"through the wrapper")
        pair.pump.flush()
        self.assertEqual(below.offers, 0)
        self.assertEqual(len(written), 1)
        self.assertEqual(pair.server_app.received, b"warmthrough the wrapper")

    def test_droppedOnConnectionLost(self) -> None:
        """
        The L{DirectIO} goes with the connection.
        """
        pair = batching.BatchPair(self)
        pair.client.write(b"x")
        pair.pump.flush()
        pair.client.loseConnection()
        pair.pump.flush()
        assert pair.client_app.lost is not None
        self.assertTrue(pair.client_app.lost.check(error.ConnectionDone))
        self.assertIsNone(pair.client._direct)

    def test_setting(self) -> None:
        """
        C{NFLTR_TLS_DIRECT=0} turns it off; it is on by default.
        """
        self.assertTrue(IOSettings.from_environ({}).tls_direct)
        self.assertFalse(IOSettings.from_environ({"NFLTR_TLS_DIRECT": "0"}).tls_direct)


class PyOpenSSLDataPathTests(batching.DataPathTests):
    """
    The data path tests on pyOpenSSL's calls (C{direct} off).
    """

    direct = False


class PyOpenSSLCloseTests(batching.CloseTests):
    """
    The close tests on pyOpenSSL's calls (C{direct} off).
    """

    direct = False
