"""
The ClientHello body: the fields the router reads, and every way the body, its extensions and the
server name can be malformed.
"""

from __future__ import annotations

from collections.abc import Sequence

from twisted.trial.unittest import SynchronousTestCase

from nfltr.sni import (
    TLS13,
    ClientHello,
    ClientHelloError,
    ClientHelloParser,
    Reason,
    check_host_name,
    parse_client_hello,
)

from .helpers import (
    EXT_ALPN,
    EXT_ECH,
    EXT_SERVER_NAME,
    EXT_SUPPORTED_VERSIONS,
    alpn_data,
    extension,
    handshake,
    hello_body,
    records,
    sni_data,
    u16,
    versions_data,
)


def parse(extensions: Sequence[bytes] | None) -> ClientHello:
    """
    Run a hello with C{extensions} through the whole parser.
    """
    hello = ClientHelloParser().receive_data(records(handshake(hello_body(extensions))))
    assert isinstance(hello, ClientHello)
    return hello


class FieldTests(SynchronousTestCase):
    """
    The fields of L{ClientHello}.
    """

    def test_noExtensionBlock(self) -> None:
        """
        A TLS 1.2 hello may end after its compression methods: no name, no ALPN, no versions,
        and C{legacy_version} as sent.
        """
        hello = parse_client_hello(hello_body(None, legacy_version=0x0301))
        self.assertEqual(hello, ClientHello(None, (), 0x0301, (), False, ()))
        self.assertFalse(hello.tls13)

    def test_emptyExtensionBlock(self) -> None:
        """
        An empty extension block is accepted and gives no extensions.
        """
        self.assertEqual(parse([]).extensions, ())

    def test_extensionOrder(self) -> None:
        """
        C{extensions} lists every type in the client's order, unknown ones included.
        """
        hello = parse([extension(0x1A1A, b""), extension(EXT_SERVER_NAME, sni_data(b"a.b")),
                       extension(21, bytes(10))])
        self.assertEqual(hello.extensions, (0x1A1A, EXT_SERVER_NAME, 21))

    def test_supportedVersions(self) -> None:
        """
        supported_versions come in order, GREASE included; C{tls13} is whether 0x0304 is
        among them.
        """
        hello = parse([extension(EXT_SUPPORTED_VERSIONS, versions_data(0x3A3A, TLS13, 0x0303))])
        self.assertEqual(hello.supported_versions, (0x3A3A, 0x0304, 0x0303))
        self.assertTrue(hello.tls13)
        hello = parse([extension(EXT_SUPPORTED_VERSIONS, versions_data(0x0303))])
        self.assertFalse(hello.tls13)

    def test_alpn(self) -> None:
        """
        ALPN names come in order, decoded as Latin-1 so that any octets survive.
        """
        hello = parse([extension(EXT_ALPN, alpn_data(b"h2", b"http/1.1", b"\xff\x00x"))])
        self.assertEqual(hello.alpn, ("h2", "http/1.1", "\xff\x00x"))
        self.assertEqual(hello.alpn[2].encode("latin-1"), b"\xff\x00x")

    def test_ech(self) -> None:
        """
        C{ech} is set by an encrypted_client_hello extension, whatever its content (GREASE is
        random), and routing still uses the outer name.
        """
        plain = parse([extension(EXT_SERVER_NAME, sni_data(b"public.example"))])
        self.assertFalse(plain.ech)
        for data in (b"", b"\x00\x00\x01\x00\x01\x07" + u16(0) + u16(3) + b"abc", b"\xff" * 9):
            hello = parse([extension(EXT_SERVER_NAME, sni_data(b"public.example")),
                           extension(EXT_ECH, data)])
            self.assertTrue(hello.ech)
            self.assertEqual(hello.server_name, "public.example")

    def test_unknownNameTypeSkipped(self) -> None:
        """
        server_name entries of a type other than host_name are skipped: alone they give no
        name; beside a host name, the host name is taken.
        """
        self.assertIsNone(parse([extension(EXT_SERVER_NAME, sni_data(b"x", name_type=7))])
                          .server_name)
        data = sni_data(b"whatever", name_type=7)[2:] + sni_data(b"a.example")[2:]
        hello = parse([extension(EXT_SERVER_NAME, u16(len(data)) + data)])
        self.assertEqual(hello.server_name, "a.example")


class BadHelloTests(SynchronousTestCase):
    """
    Malformed fixed fields and extension blocks are C{bad_hello}.
    """

    def assertBad(self, body: bytes, reason: Reason = Reason.BAD_HELLO) -> None:
        error = self.assertRaises(ClientHelloError, parse_client_hello, body)
        self.assertEqual(error.reason, reason)
        # The same through the whole parser.
        error = self.assertRaises(
            ClientHelloError, ClientHelloParser().receive_data, records(handshake(body))
        )
        self.assertEqual(error.reason, reason)

    def test_tooShort(self) -> None:
        """
        A body without room for version, random and session id is refused, down to nothing.
        """
        for size in (0, 1, 33, 34):
            self.assertBad(hello_body(None)[:size])

    def test_sessionId(self) -> None:
        """
        A session id longer than 32 bytes, or overrunning the body, is refused.
        """
        self.assertBad(hello_body(session_id=bytes(33)))
        self.assertBad(hello_body(None)[:34] + b"\x20" + bytes(5))

    def test_cipherSuites(self) -> None:
        """
        No cipher suite, an odd number of bytes, or a length past the body is refused.
        """
        self.assertBad(hello_body(suites=b""))
        self.assertBad(hello_body(suites=b"\x13\x01\x13"))
        self.assertBad(hello_body(None, session_id=b"")[:35] + u16(100) + b"\x13\x01")

    def test_compression(self) -> None:
        """
        No compression method, or none sent at all, is refused.
        """
        self.assertBad(hello_body(compression=b""))
        body = hello_body(None)
        self.assertBad(body[:-2])

    def test_extensionBlock(self) -> None:
        """
        An extension block longer than the body, shorter than it, or a lone byte where its
        length should be, is refused.
        """
        block = extension(EXT_SERVER_NAME, sni_data(b"a.b"))
        base = hello_body(None)
        self.assertBad(base + u16(len(block) + 1) + block)
        self.assertBad(base + u16(len(block) - 1) + block)
        self.assertBad(base + b"\x00")


class BadExtensionTests(SynchronousTestCase):
    """
    Malformed or repeated extensions are C{bad_extension}.
    """

    def assertBad(self, *extensions: bytes) -> None:
        error = self.assertRaises(ClientHelloError, parse, extensions)
        self.assertEqual(error.reason, Reason.BAD_EXTENSION)

    def test_headerCutShort(self) -> None:
        """
        Fewer than 4 bytes left in the block for an extension header is refused.
        """
        self.assertBad(extension(21, b""), b"\x00\x15\x00")

    def test_overrun(self) -> None:
        """
        An extension whose length runs past the block is refused.
        """
        self.assertBad(u16(21) + u16(10) + bytes(9))

    def test_repeated(self) -> None:
        """
        The same extension type twice is refused, known or not.
        """
        self.assertBad(extension(EXT_SERVER_NAME, sni_data(b"a.b")),
                       extension(EXT_SERVER_NAME, sni_data(b"a.b")))
        self.assertBad(extension(EXT_ECH, b""), extension(EXT_ECH, b""))

    def test_serverName(self) -> None:
        """
        An empty server_name, an empty list, a list shorter or longer than the extension, a
        name past the list, a missing name length, and two host names are refused.
        """
        one = sni_data(b"a.example")
        self.assertBad(extension(EXT_SERVER_NAME, b""))
        self.assertBad(extension(EXT_SERVER_NAME, u16(0)))
        self.assertBad(extension(EXT_SERVER_NAME, one + b"\x00"))
        self.assertBad(extension(EXT_SERVER_NAME, u16(1) + b"\x00"))
        self.assertBad(extension(EXT_SERVER_NAME, u16(4) + b"\x00" + u16(9) + b"a"))
        self.assertBad(extension(EXT_SERVER_NAME, u16(2) + b"\x00\x00"))
        two = one[2:] + sni_data(b"b.example")[2:]
        self.assertBad(extension(EXT_SERVER_NAME, u16(len(two)) + two))

    def test_alpn(self) -> None:
        """
        An empty ALPN extension or list, an empty protocol name, a name past the list, and a
        list not filling the extension are refused.
        """
        self.assertBad(extension(EXT_ALPN, b""))
        self.assertBad(extension(EXT_ALPN, u16(0)))
        self.assertBad(extension(EXT_ALPN, u16(1) + b"\x00"))
        self.assertBad(extension(EXT_ALPN, u16(3) + b"\x05h2"))
        self.assertBad(extension(EXT_ALPN, alpn_data(b"h2") + b"x"))

    def test_supportedVersions(self) -> None:
        """
        supported_versions that are empty, odd, or whose length disagrees with the extension
        are refused.
        """
        self.assertBad(extension(EXT_SUPPORTED_VERSIONS, b""))
        self.assertBad(extension(EXT_SUPPORTED_VERSIONS, b"\x00"))
        self.assertBad(extension(EXT_SUPPORTED_VERSIONS, b"\x03\x03\x04\x03"))
        self.assertBad(extension(EXT_SUPPORTED_VERSIONS, b"\x02\x03\x04\x03\x03"))
        self.assertBad(extension(EXT_SUPPORTED_VERSIONS, b"\x04\x03\x04"))


VALID_NAMES = {
    b"a": "a",
    b"demo.localhost": "demo.localhost",
    b"Demo.LocalHost": "demo.localhost",
    b"xn--bcher-kva.example": "xn--bcher-kva.example",
    b"XN--BCHER-KVA.example": "xn--bcher-kva.example",
    b"a-b.c-d.e": "a-b.c-d.e",
    b"1a.example.2b": "1a.example.2b",
    b"123.example": "123.example",
    b"ab--cd.example": "ab--cd.example",
    b"a" * 63 + b".example": "a" * 63 + ".example",
    b".".join([b"a" * 63] * 3 + [b"b" * 61]): ".".join(["a" * 63] * 3 + ["b" * 61]),
}

INVALID_NAMES = [
    b"",
    b"-a.example",
    b"a-.example",
    b"a..example",
    b".example",
    b"example.",
    b"a_b.example",
    b"a b.example",
    b"a\x00b.example",
    b"b\xc3\xbccher.example",
    b"\xff",
    b"1.2.3.4",
    b"example.123",
    b"::1",
    b"[::1]",
    b"a" * 64 + b".example",
    b".".join([b"a" * 63] * 3 + [b"b" * 62]),
    b"xn--zz.example",
    b"xn--.example",
    b"xn--ls8h.example",
    b"*.example",
]


class ServerNameTests(SynchronousTestCase):
    """
    The host name is lowercased and must be a DNS host name.
    """

    def test_valid(self) -> None:
        """
        LDH names up to 253 bytes with labels up to 63 are accepted, lowercased; so are valid
        A-labels, and digits anywhere but the whole last label.
        """
        for raw, expected in VALID_NAMES.items():
            self.assertEqual(check_host_name(raw), expected)
            hello = parse([extension(EXT_SERVER_NAME, sni_data(raw))])
            self.assertEqual(hello.server_name, expected)

    def test_invalid(self) -> None:
        """
        Empty names, bad labels, trailing dots, underscores, non-ASCII, IP literals, long labels
        or names, invalid A-labels and wildcards are refused as C{bad_server_name}.
        """
        for raw in INVALID_NAMES:
            error = self.assertRaises(ClientHelloError, check_host_name, raw)
            self.assertEqual(error.reason, Reason.BAD_SERVER_NAME, raw)
            error = self.assertRaises(
                ClientHelloError, parse, [extension(EXT_SERVER_NAME, sni_data(raw))]
            )
            self.assertEqual(error.reason, Reason.BAD_SERVER_NAME, raw)
