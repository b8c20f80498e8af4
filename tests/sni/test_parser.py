"""
The ClientHello parser's record layer and API: detection, limits checked from headers,
fragmentation, buffering and replay, end of stream, the sticky error state.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import PREAMBLE
from nfltr.sni import (
    MAX_HELLO_RECORDS,
    MAX_HELLO_SIZE,
    MAX_HELLO_WIRE_SIZE,
    MAX_RECORD_PAYLOAD,
    MAX_RECORD_SIZE,
    NEED_DATA,
    ClientHello,
    ClientHelloError,
    ClientHelloParser,
    Reason,
    is_tls_start,
)

from .helpers import TRAILING, client_hello, extension, feed, handshake, hello_body, records, u16


class IsTLSStartTests(SynchronousTestCase):
    """
    L{is_tls_start} tells a TLS handshake record from other traffic by its first bytes.
    """

    def test_tlsRecordStarts(self) -> None:
        """
        A handshake record of version 3.0 to 3.4 is TLS once its three first bytes are in.
        """
        for minor in range(5):
            self.assertIs(is_tls_start(bytes([0x16, 3, minor])), True)
            self.assertIs(is_tls_start(bytes([0x16, 3, minor, 0x02, 0x00, 0x01])), True)

    def test_undecided(self) -> None:
        """
        Nothing, C{0x16} and C{0x16 0x03} could still be TLS: more bytes are needed.
        """
        for prefix in (b"", b"\x16", b"\x16\x03"):
            self.assertIsNone(is_tls_start(prefix), prefix)

    def test_otherTrafficAtOnce(self) -> None:
        """
        Plain HTTP, the link magic and an SSLv2-style hello are refused from their first byte.
        """
        for data in (b"G", b"GET / HTTP/1.1\r\n", PREAMBLE[:1], PREAMBLE, b"\x80\x2e\x01"):
            self.assertIs(is_tls_start(data), False, data)

    def test_wrongVersionOrType(self) -> None:
        """
        Another record type, major version or a minor version past 4 is not a TLS start.
        """
        for data in (b"\x17\x03\x03", b"\x15\x03\x01", b"\x16\x02", b"\x16\x03\x05", b"\x16\x04"):
            self.assertIs(is_tls_start(data), False, data)


class ResultTests(SynchronousTestCase):
    """
    A complete hello is returned, and its bytes stay in C{buffered()}.
    """

    def test_wholeHello(self) -> None:
        """
        A hello fed in one piece comes back decoded; C{result} holds it; C{buffered()} is the
        input.
        """
        data = client_hello()
        parser = ClientHelloParser()
        self.assertIsNone(parser.result)
        hello = parser.receive_data(data)
        assert isinstance(hello, ClientHello)
        self.assertEqual(hello.server_name, "demo.localhost")
        self.assertEqual(hello.alpn, ("h2", "http/1.1"))
        self.assertTrue(hello.tls13)
        self.assertIs(parser.result, hello)
        self.assertEqual(parser.buffered(), data)

    def test_needData(self) -> None:
        """
        Until the last byte of the hello, every call returns L{NEED_DATA}.
        """
        data = client_hello()
        results = feed(ClientHelloParser(), [data[i : i + 1] for i in range(len(data))])
        self.assertEqual(results[:-1], [NEED_DATA] * (len(data) - 1))
        self.assertIsInstance(results[-1], ClientHello)
        self.assertEqual(repr(NEED_DATA), "NEED_DATA")

    def test_trailingBytesUntouched(self) -> None:
        """
        Bytes after the hello in the same read are not parsed and stay in C{buffered()}.
        """
        data = client_hello() + TRAILING
        parser = ClientHelloParser()
        self.assertIsInstance(parser.receive_data(data), ClientHello)
        self.assertEqual(parser.buffered(), data)

    def test_dataAfterResult(self) -> None:
        """
        After the hello, more reads (even a bare end of stream) return the same hello and are
        appended to C{buffered()} unparsed: the buffer can still grow after parsing.
        """
        data = client_hello()
        parser = ClientHelloParser()
        hello = parser.receive_data(data)
        self.assertIs(parser.receive_data(b"\xff" * 100), hello)
        self.assertIs(parser.receive_data(b""), hello)
        self.assertIs(parser.receive_data(b"more"), hello)
        self.assertEqual(parser.buffered(), data + b"\xff" * 100 + b"more")

    def test_recordLongerThanHello(self) -> None:
        """
        The parser answers at the hello's last byte, without waiting for the rest of the record
        that holds it.
        """
        message = handshake(hello_body())
        declared = len(message) + 50
        data = b"\x16\x03\x01" + u16(declared) + message
        parser = ClientHelloParser()
        self.assertIsInstance(parser.receive_data(data), ClientHello)
        self.assertEqual(parser.buffered(), data)


class NotTLSTests(SynchronousTestCase):
    """
    Traffic that is not TLS is refused at once, as C{not_tls}.
    """

    def assertNotTLS(self, data: bytes) -> None:
        error = self.assertRaises(ClientHelloError, ClientHelloParser().receive_data, data)
        self.assertEqual(error.reason, Reason.NOT_TLS)
        self.assertEqual(error.reason, "not_tls")

    def test_plainHTTP(self) -> None:
        """
        C{GET / HTTP/1.1} is refused from its first byte.
        """
        self.assertNotTLS(b"G")
        self.assertNotTLS(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")

    def test_linkMagic(self) -> None:
        """
        The nfltr link preamble is refused from its first byte.
        """
        self.assertNotTLS(PREAMBLE[:1])
        self.assertNotTLS(PREAMBLE)

    def test_otherRecords(self) -> None:
        """
        An SSLv2-style hello, an application-data record, a bad version: refused as soon as the
        deciding byte arrives.
        """
        for data in (
            b"\x80\x2e\x01\x03\x01", b"\x17\x03\x03\x00\x10", b"\x16\x03\x05", b"\x16\x02"
        ):
            self.assertNotTLS(data)

    def test_decidedByteByByte(self) -> None:
        """
        Fed one byte at a time, HTTP is refused on the first byte and a bad version on the
        third, with L{NEED_DATA} before.
        """
        parser = ClientHelloParser()
        self.assertIs(parser.receive_data(b"\x16"), NEED_DATA)
        self.assertIs(parser.receive_data(b"\x03"), NEED_DATA)
        error = self.assertRaises(ClientHelloError, parser.receive_data, b"\x09")
        self.assertEqual(error.reason, Reason.NOT_TLS)


class LimitTests(SynchronousTestCase):
    """
    Sizes over the limits are refused from their headers, before any body is buffered.
    """

    def test_limits(self) -> None:
        """
        The named limits: a 2^14-byte record payload, a hello that fits one record, 32 records.
        """
        self.assertEqual(MAX_RECORD_PAYLOAD, 16384)
        self.assertEqual(MAX_RECORD_SIZE, 16384 + 5)
        self.assertEqual(MAX_HELLO_SIZE, 16384)
        self.assertEqual(MAX_HELLO_RECORDS, 32)
        self.assertEqual(MAX_HELLO_WIRE_SIZE, 16384 + 32 * 5)

    def test_recordTooLarge(self) -> None:
        """
        A record header declaring 2^14 + 1 bytes is refused from its 5 header bytes alone.
        """
        error = self.assertRaises(
            ClientHelloError, ClientHelloParser().receive_data, b"\x16\x03\x01" + u16(16385)
        )
        self.assertEqual(error.reason, Reason.RECORD_TOO_LARGE)

    def test_largestRecordWaits(self) -> None:
        """
        A record of exactly 2^14 bytes is within the limit: the parser waits for its body.
        """
        parser = ClientHelloParser()
        self.assertIs(parser.receive_data(b"\x16\x03\x01" + u16(16384)), NEED_DATA)

    def test_helloTooLarge(self) -> None:
        """
        A handshake header declaring a hello one byte longer than a record can carry is refused
        from that header, the 4 bytes after the record header.
        """
        header = b"\x01" + (MAX_HELLO_SIZE - 4 + 1).to_bytes(3)
        data = b"\x16\x03\x01" + u16(16384) + header
        error = self.assertRaises(ClientHelloError, ClientHelloParser().receive_data, data)
        self.assertEqual(error.reason, Reason.HELLO_TOO_LARGE)

    def test_largestHello(self) -> None:
        """
        A hello of exactly L{MAX_HELLO_SIZE} bytes, padded with an unknown extension, parses.
        """
        bare = len(handshake(hello_body([b""])))
        message = handshake(hello_body([extension(21, bytes(MAX_HELLO_SIZE - bare - 4))]))
        self.assertEqual(len(message), MAX_HELLO_SIZE)
        self.assertIsInstance(ClientHelloParser().receive_data(records(message)), ClientHello)

    def test_hugeHelloDeclaredInSmallRecords(self) -> None:
        """
        A hello declaring 16 MiB in a small record is refused from its handshake header.
        """
        error = self.assertRaises(
            ClientHelloError, ClientHelloParser().receive_data,
            b"\x16\x03\x01" + u16(4) + b"\x01\xff\xff\xff",
        )
        self.assertEqual(error.reason, Reason.HELLO_TOO_LARGE)


class FragmentationTests(SynchronousTestCase):
    """
    A hello may span several records, up to L{MAX_HELLO_RECORDS}.
    """

    def test_twoRecords(self) -> None:
        """
        A hello split over two records parses, whole and byte by byte.
        """
        data = client_hello(sizes=[100])
        self.assertEqual(data.count(b"\x16\x03\x01"), 2)
        self.assertEqual(ClientHelloParser().receive_data(data), ClientHelloParser().receive_data(
            client_hello()
        ))
        results = feed(ClientHelloParser(), [data[i : i + 1] for i in range(len(data))])
        self.assertEqual(results[:-1], [NEED_DATA] * (len(data) - 1))
        self.assertIsInstance(results[-1], ClientHello)

    def test_handshakeHeaderSplit(self) -> None:
        """
        The 4-byte handshake header may itself be split over records, a byte per record.
        """
        data = client_hello(sizes=[1, 1, 1, 1, 5])
        hello = ClientHelloParser().receive_data(data)
        assert isinstance(hello, ClientHello)
        self.assertEqual(hello.server_name, "demo.localhost")

    def test_mostRecords(self) -> None:
        """
        A hello over exactly L{MAX_HELLO_RECORDS} records parses.
        """
        data = client_hello(sizes=[1] * (MAX_HELLO_RECORDS - 1))
        self.assertIsInstance(ClientHelloParser().receive_data(data), ClientHello)

    def test_tooManyRecords(self) -> None:
        """
        The record header that would open record 33 of an incomplete hello is refused.
        """
        data = client_hello(sizes=[1] * MAX_HELLO_RECORDS)
        cut = MAX_HELLO_RECORDS * 6 + 5
        parser = ClientHelloParser()
        self.assertIs(parser.receive_data(data[: cut - 1]), NEED_DATA)
        error = self.assertRaises(ClientHelloError, parser.receive_data, data[cut - 1 : cut])
        self.assertEqual(error.reason, Reason.TOO_FRAGMENTED)

    def test_laterRecordNotHandshake(self) -> None:
        """
        A hello continued in a record of another type (an alert) is refused as C{bad_record}.
        """
        message = handshake(hello_body())
        data = records(message[:10]) + records(message[10:], ctype=21)
        error = self.assertRaises(ClientHelloError, ClientHelloParser().receive_data, data)
        self.assertEqual(error.reason, Reason.BAD_RECORD)

    def test_laterRecordTooLarge(self) -> None:
        """
        A later record declaring more than 2^14 bytes is refused from its header.
        """
        message = handshake(hello_body())
        data = records(message[:10]) + b"\x16\x03\x03" + u16(20000)
        error = self.assertRaises(ClientHelloError, ClientHelloParser().receive_data, data)
        self.assertEqual(error.reason, Reason.RECORD_TOO_LARGE)

    def test_emptyRecord(self) -> None:
        """
        An empty handshake record (forbidden by RFC 8446), first or later, is C{bad_record}.
        """
        message = handshake(hello_body())
        for data in (b"\x16\x03\x01\x00\x00", records(message[:10]) + b"\x16\x03\x03\x00\x00"):
            error = self.assertRaises(ClientHelloError, ClientHelloParser().receive_data, data)
            self.assertEqual(error.reason, Reason.BAD_RECORD)


class HandshakeTypeTests(SynchronousTestCase):
    """
    The first handshake message must be a ClientHello.
    """

    def test_serverHello(self) -> None:
        """
        A ServerHello (type 2) is refused as C{not_client_hello} from its handshake header.
        """
        error = self.assertRaises(
            ClientHelloError, ClientHelloParser().receive_data,
            b"\x16\x03\x03" + u16(100) + b"\x02\x00\x00\x60",
        )
        self.assertEqual(error.reason, Reason.NOT_CLIENT_HELLO)


class EndOfStreamTests(SynchronousTestCase):
    """
    C{receive_data(b"")} is the end of the stream.
    """

    def test_truncated(self) -> None:
        """
        The end of the stream before the hello is complete, even before any byte, is
        C{truncated}.
        """
        data = client_hello()
        for cut in (0, 1, 5, 9, len(data) - 1):
            parser = ClientHelloParser()
            if cut:
                self.assertIs(parser.receive_data(data[:cut]), NEED_DATA)
            error = self.assertRaises(ClientHelloError, parser.receive_data, b"")
            self.assertEqual(error.reason, Reason.TRUNCATED)


class StickyErrorTests(SynchronousTestCase):
    """
    After an error, the parser refuses everything with the same reason, and keeps its bytes.
    """

    def test_errorRepeats(self) -> None:
        """
        Once refused, any later input (even a valid hello) raises the same reason again, and
        C{buffered()} still holds what was received up to the error.
        """
        parser = ClientHelloParser()
        self.assertRaises(ClientHelloError, parser.receive_data, b"GET /")
        for later in (client_hello(), b"", b"x"):
            error = self.assertRaises(ClientHelloError, parser.receive_data, later)
            self.assertEqual(error.reason, Reason.NOT_TLS)
        self.assertEqual(parser.buffered(), b"GET /")
        self.assertIsNone(parser.result)

    def test_errorText(self) -> None:
        """
        The error's text starts with its reason code; C{detail} explains it.
        """
        error = self.assertRaises(ClientHelloError, ClientHelloParser().receive_data, b"GET")
        self.assertTrue(str(error).startswith("not_tls: "), str(error))
        self.assertIn("GET", error.detail)
