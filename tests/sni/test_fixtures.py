"""
Real ClientHellos: the captured fixtures under C{hellos/} (see its README), each fed whole, one
byte at a time, in random splits, with trailing bytes, and cut at every length; and hellos that
this machine's TLS libraries send now.
"""

from __future__ import annotations

import contextlib
import random
from pathlib import Path

from OpenSSL import SSL
from twisted.trial.unittest import SynchronousTestCase

from nfltr.sni import NEED_DATA, ClientHello, ClientHelloError, ClientHelloParser, Reason

from .capture_hellos import (
    ECH_FIXTURE,
    ECH_SOURCE,
    HELLOS,
    Expected,
    ech_grease_extension,
    fixtures,
    insert_extension,
)
from .helpers import TRAILING, feed, live_hello, random_splits

FIXTURES = list(fixtures())
SPLITS_PER_FIXTURE = 25


def parse_whole(data: bytes) -> ClientHello:
    hello = ClientHelloParser().receive_data(data)
    assert isinstance(hello, ClientHello), hello
    return hello


class FixtureSetTests(SynchronousTestCase):
    """
    The fixtures are the ones the README describes, from the clients the parser must read.
    """

    def test_set(self) -> None:
        """
        Every client and variant asked for has a fixture, each listed in the manifest has its
        file and its README row, and no stray fixture file lies beside them.
        """
        names = {name for name, _, _ in FIXTURES}
        self.assertEqual(names, {
            "python-tls12-sni-alpn", "python-tls12-nosni", "python-tls13-sni-alpn",
            "python-tls13-nosni", "pyopenssl-sni-alpn", "openssl-servername",
            "openssl-noservername", "openssl-alpn", "openssl-idn", "curl-resolve", "curl-ip",
            "chromium", "ech-grease-constructed",
        })
        self.assertEqual({p.stem for p in Path(HELLOS).glob("*.hex")}, names)
        readme = (Path(HELLOS) / "README.md").read_text(encoding="utf-8")
        for name in names:
            self.assertIn(f"| `{name}` |", readme)

    def test_echConstructed(self) -> None:
        """
        The constructed ECH-GREASE fixture is exactly its documented derivation: the source
        fixture with L{ech_grease_extension} inserted by L{insert_extension}.
        """
        data = {name: data for name, data, _ in FIXTURES}
        self.assertEqual(
            data[ECH_FIXTURE], insert_extension(data[ECH_SOURCE], ech_grease_extension())
        )


class FixtureTests(SynchronousTestCase):
    """
    Each real hello gives what its client was asked to send, however it is cut into reads.
    """

    def assertExpected(self, name: str, hello: ClientHello, expected: Expected) -> None:
        self.assertEqual(hello.server_name, expected.server_name, name)
        self.assertEqual(list(hello.alpn), expected.alpn, name)
        self.assertEqual(hello.tls13, expected.tls13, name)
        self.assertEqual(hello.ech, expected.ech, name)
        self.assertEqual(hello.legacy_version, 0x0303, name)

    def test_whole(self) -> None:
        """
        Fed in one read, each hello gives its client's server name, ALPN, TLS 1.3 offer and ECH,
        and C{buffered()} is exactly its bytes.
        """
        for name, data, expected in FIXTURES:
            parser = ClientHelloParser()
            hello = parser.receive_data(data)
            assert isinstance(hello, ClientHello), name
            self.assertExpected(name, hello, expected)
            self.assertEqual(parser.buffered(), data, name)

    def test_byteByByte(self) -> None:
        """
        Fed one byte at a time, each hello gives L{NEED_DATA} until its last byte, then the same
        hello as fed whole.
        """
        for name, data, _ in FIXTURES:
            results = feed(ClientHelloParser(), [data[i : i + 1] for i in range(len(data))])
            self.assertEqual(results[:-1], [NEED_DATA] * (len(data) - 1), name)
            self.assertEqual(results[-1], parse_whole(data), name)

    def test_randomSplits(self) -> None:
        """
        Cut into random reads, each hello gives the same hello as fed whole, with L{NEED_DATA}
        before the last read, and C{buffered()} is its bytes.
        """
        rng = random.Random(4)
        for name, data, _ in FIXTURES:
            whole = parse_whole(data)
            for _ in range(SPLITS_PER_FIXTURE):
                chunks = random_splits(data, rng)
                parser = ClientHelloParser()
                results = feed(parser, chunks)
                self.assertEqual(results[:-1], [NEED_DATA] * (len(chunks) - 1), name)
                self.assertEqual(results[-1], whole, name)
                self.assertEqual(parser.buffered(), data, name)

    def test_trailingData(self) -> None:
        """
        With the client's next bytes in the same read as the hello's end, or in random reads
        after, the hello is the same and every byte stays in C{buffered()}, untouched.
        """
        rng = random.Random(5)
        for name, data, _ in FIXTURES:
            whole = parse_whole(data)
            for chunks in ([data + TRAILING], random_splits(data + TRAILING, rng)):
                parser = ClientHelloParser()
                results = [r for r in feed(parser, chunks) if r is not NEED_DATA]
                self.assertEqual(results[0], whole, name)
                self.assertEqual(parser.buffered(), data + TRAILING, name)

    def test_everyPrefix(self) -> None:
        """
        Every proper prefix of each hello gives L{NEED_DATA}, never an error nor a hello; ended
        there, it is C{truncated}.
        """
        for name, data, _ in FIXTURES:
            for cut in range(1, len(data)):
                parser = ClientHelloParser()
                self.assertIs(parser.receive_data(data[:cut]), NEED_DATA, (name, cut))
                error = self.assertRaises(ClientHelloError, parser.receive_data, b"")
                self.assertEqual(error.reason, Reason.TRUNCATED, (name, cut))

    def test_greaseVersions(self) -> None:
        """
        Chromium's GREASE value in supported_versions (0x?a?a) is kept and does not hide its TLS
        1.3 offer.
        """
        hello = parse_whole(next(data for name, data, _ in FIXTURES if name == "chromium"))
        grease = [v for v in hello.supported_versions if v & 0x0F0F == 0x0A0A]
        self.assertEqual(len(grease), 1)
        self.assertTrue(hello.tls13)


class LiveHelloTests(SynchronousTestCase):
    """
    Hellos the TLS libraries of this machine send now (not only when the fixtures were made).
    """

    def test_pythonSSL(self) -> None:
        """
        Python's C{ssl}, TLS 1.2 and 1.3, with and without SNI and ALPN.
        """
        for tls12 in (False, True):
            hello = parse_whole(live_hello("share.example", ["h2", "http/1.1"], tls12=tls12))
            self.assertEqual(hello.server_name, "share.example")
            self.assertEqual(hello.alpn, ("h2", "http/1.1"))
            self.assertEqual(hello.tls13, not tls12)
            hello = parse_whole(live_hello(None, tls12=tls12))
            self.assertIsNone(hello.server_name)
            self.assertEqual(hello.alpn, ())

    def test_pythonIDN(self) -> None:
        """
        An internationalised name given to Python's C{ssl} arrives as its A-labels.
        """
        self.assertEqual(
            parse_whole(live_hello("bücher.example")).server_name, "xn--bcher-kva.example"
        )

    def pyopenssl_hello(self, server_name: bytes) -> bytes:
        context = SSL.Context(SSL.TLS_CLIENT_METHOD)
        context.set_alpn_protos([b"h2", b"http/1.1"])
        connection = SSL.Connection(context, None)
        connection.set_tlsext_host_name(server_name)
        connection.set_connect_state()
        with contextlib.suppress(SSL.WantReadError):
            connection.do_handshake()
        return connection.bio_read(65536)

    def test_pyOpenSSL(self) -> None:
        """
        pyOpenSSL's hello (with its post-quantum key share) gives its name and ALPN.
        """
        hello = parse_whole(self.pyopenssl_hello(b"share.example"))
        self.assertEqual(hello.server_name, "share.example")
        self.assertEqual(hello.alpn, ("h2", "http/1.1"))
        self.assertTrue(hello.tls13)

    def test_pyOpenSSLBadName(self) -> None:
        """
        pyOpenSSL sends any bytes as the name: one with an underscore is C{bad_server_name}.
        """
        error = self.assertRaises(
            ClientHelloError, ClientHelloParser().receive_data,
            self.pyopenssl_hello(b"bad_name.example"),
        )
        self.assertEqual(error.reason, Reason.BAD_SERVER_NAME)
