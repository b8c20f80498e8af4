"""
Tests for L{nfltr.http._headers}: hop-by-hop removal, the Host rewrite and
the forwarding headers, by example and with hypothesis.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.http._headers import (
    HOP_BY_HOP,
    commaValues,
    forwardedElement,
    headerValues,
    isUpgrade,
    quoteIfNeeded,
    requestHeaders,
    responseHeaders,
    visitorIP,
    withoutHopByHop,
)

V4 = "203.0.113.5:4711"
V6 = "[2001:db8::1]:443"

_names = st.sampled_from([
    b"Host", b"Accept", b"X-Custom", b"Cookie", b"Authorization", b"Content-Length",
    b"Connection", b"Keep-Alive", b"TE", b"Trailer", b"Upgrade", b"Proxy-Authorization",
    b"Proxy-Connection", b"X-Forwarded-For", b"Forwarded", b"X-Other",
]).flatmap(lambda name: st.sampled_from([name, name.lower(), name.upper()]))
_values = st.binary(min_size=0, max_size=20).map(
    lambda v: bytes(c for c in v if 0x21 <= c <= 0x7E and c != ord(","))
)
_headerLists = st.lists(st.tuples(_names, _values), max_size=12)


class HopByHopTests(SynchronousTestCase):
    """
    Hop-by-hop headers are dropped, including those C{Connection} names.
    """

    def test_fixedList(self) -> None:
        """
        Every header of the fixed list goes, any case; others stay, in order.
        """
        headers = [
            (b"Host", b"a"), (b"connection", b"keep-alive"), (b"Keep-Alive", b"timeout=5"),
            (b"TE", b"trailers"), (b"Trailer", b"X"), (b"Transfer-Encoding", b"chunked"),
            (b"Upgrade", b"h2c"), (b"Proxy-Authorization", b"Basic x"),
            (b"Proxy-Connection", b"keep-alive"), (b"Accept", b"*/*"),
        ]
        self.assertEqual(withoutHopByHop(headers), [(b"Host", b"a"), (b"Accept", b"*/*")])

    def test_connectionNamed(self) -> None:
        """
        Headers named in any C{Connection} header go too, but never C{Host}
        or C{Content-Length}.
        """
        headers = [
            (b"Connection", b"X-Secret, close"), (b"connection", b"x-other ,Host,content-length"),
            (b"x-secret", b"1"), (b"X-Other", b"2"), (b"X-Kept", b"3"), (b"Host", b"h"),
            (b"Content-Length", b"0"),
        ]
        self.assertEqual(
            withoutHopByHop(headers),
            [(b"X-Kept", b"3"), (b"Host", b"h"), (b"Content-Length", b"0")],
        )

    def test_upgradeKept(self) -> None:
        """
        An upgrade keeps C{Upgrade} and says C{Connection: upgrade} once.
        """
        headers = [(b"Connection", b"Upgrade, X-A"), (b"Upgrade", b"websocket"), (b"X-A", b"1")]
        self.assertTrue(isUpgrade(headers))
        self.assertEqual(
            withoutHopByHop(headers, upgrade=True),
            [(b"Upgrade", b"websocket"), (b"Connection", b"upgrade")],
        )

    def test_upgradeNeedsBoth(self) -> None:
        """
        Without C{Connection: upgrade}, or without an C{Upgrade} value, a
        request is no upgrade and loses its C{Upgrade} header.
        """
        self.assertFalse(isUpgrade([(b"Upgrade", b"websocket")]))
        self.assertFalse(isUpgrade([(b"Connection", b"upgrade")]))
        out = requestHeaders([(b"Host", b"h"), (b"Upgrade", b"websocket")], forwarded=False)
        self.assertEqual(out, [(b"Host", b"h")])

    def test_responseHeaders(self) -> None:
        """
        A response loses its hop-by-hop headers; a 101 keeps its upgrade.
        """
        headers = [(b"Connection", b"close"), (b"Transfer-Encoding", b"chunked"),
                   (b"Content-Type", b"text/html"), (b"Upgrade", b"websocket")]
        self.assertEqual(responseHeaders(headers), [(b"Content-Type", b"text/html")])
        self.assertEqual(
            responseHeaders([(b"Upgrade", b"websocket"), (b"Connection", b"Upgrade")], True),
            [(b"Upgrade", b"websocket"), (b"Connection", b"upgrade")],
        )

    @given(_headerLists)
    def test_neverHopByHop(self, headers: list[tuple[bytes, bytes]]) -> None:
        """
        Whatever comes in, nothing hop-by-hop or named by C{Connection}
        (other than C{Host} and C{Content-Length}) goes out, and every other
        header goes out unchanged, in order.
        """
        named = set(commaValues(headers, b"connection")) - {b"host", b"content-length"}
        out = withoutHopByHop(headers)
        for name, _ in out:
            self.assertNotIn(name.lower(), HOP_BY_HOP | named)
        expected = [(n, v) for n, v in headers if n.lower() not in HOP_BY_HOP | named]
        self.assertEqual(out, expected)


class ForwardingTests(SynchronousTestCase):
    """
    The forwarding headers and the Host rewrite.
    """

    def test_visitorIP(self) -> None:
        """
        The address is found in IPv4 and bracketed IPv6 forms, with or without
        a port; anything else is no address.
        """
        self.assertEqual(str(visitorIP(V4)), "203.0.113.5")
        self.assertEqual(str(visitorIP(V6)), "2001:db8::1")
        self.assertEqual(str(visitorIP("2001:db8::2")), "2001:db8::2")
        self.assertEqual(str(visitorIP("192.0.2.1")), "192.0.2.1")
        for bad in (None, "", "unix:/x", "example.test:80", "[nope]:1", "1.2.3.4\r\nX: y"):
            self.assertIsNone(visitorIP(bad), bad)

    def test_visitorsForwardingReplaced(self) -> None:
        """
        The forwarding headers the visitor sent (C{X-Forwarded-For},
        C{-Proto}, C{-Host}, C{Forwarded}, C{X-Real-IP}, in any case, any
        number of them) are dropped; ours say the visitor's address, the
        scheme and its C{Host}, each in one header.
        """
        headers = [
            (b"Host", b"app.test"), (b"X-Forwarded-For", b"198.51.100.1"),
            (b"x-forwarded-for", b"198.51.100.2 "), (b"X-Forwarded-Proto", b"http"),
            (b"X-Forwarded-Host", b"spoofed.test"), (b"FORWARDED", b"for=198.51.100.1"),
            (b"X-Real-IP", b"198.51.100.3"),
        ]
        out = requestHeaders(headers, visitor=V4)
        self.assertEqual(out, [
            (b"Host", b"app.test"), (b"X-Forwarded-For", b"203.0.113.5"),
            (b"X-Real-IP", b"203.0.113.5"), (b"X-Forwarded-Proto", b"https"),
            (b"X-Forwarded-Host", b"app.test"),
            (b"Forwarded", b"for=203.0.113.5;proto=https;host=app.test"),
        ])

    def test_underscoreSpellingsDropped(self) -> None:
        """
        A visitor's C{X_Forwarded_For} (which CGI and WSGI servers read as
        C{X-Forwarded-For}) is dropped with the rest.
        """
        headers = [(b"Host", b"app.test"), (b"X_Forwarded_For", b"198.51.100.1"),
                   (b"x-real_ip", b"198.51.100.1"), (b"X_Other", b"kept")]
        out = requestHeaders(headers, visitor=V4)
        self.assertNotIn(b"198.51.100.1", b"".join(value for _, value in out))
        self.assertIn((b"X_Other", b"kept"), out)

    def test_contentLengthCanonical(self) -> None:
        """
        A C{Content-Length} goes on as its decimal value, without leading
        zeros.
        """
        out = requestHeaders([(b"Host", b"h"), (b"Content-Length", b"007")], forwarded=False)
        self.assertEqual(out, [(b"Host", b"h"), (b"Content-Length", b"7")])

    def test_forwardedIPv6(self) -> None:
        """
        An IPv6 visitor is bracketed and quoted in C{Forwarded} (RFC 7239
        section 6); a host with a port is quoted.
        """
        headers = [(b"Host", b"app.test:8443"), (b"Forwarded", b"for=192.0.2.60;proto=http")]
        out = requestHeaders(headers, visitor=V6, scheme=b"https")
        self.assertEqual(
            headerValues(out, b"forwarded"),
            [b'for="[2001:db8::1]";proto=https;host="app.test:8443"'],
        )
        self.assertEqual(headerValues(out, b"x-forwarded-for"), [b"2001:db8::1"])

    def test_forwardedIPv4(self) -> None:
        """
        An IPv4 visitor and a plain host are tokens.
        """
        out = requestHeaders([(b"Host", b"app.test")], visitor=V4, scheme=b"http")
        self.assertEqual(
            headerValues(out, b"forwarded"), [b"for=203.0.113.5;proto=http;host=app.test"]
        )

    def test_quoting(self) -> None:
        """
        Quotes and backslashes are escaped in a quoted-string.
        """
        self.assertEqual(quoteIfNeeded(b"tok.en"), b"tok.en")
        self.assertEqual(quoteIfNeeded(b'a"b\\c'), b'"a\\"b\\\\c"')

    def test_hostRewrite(self) -> None:
        """
        With a host given, C{Host} becomes it and the visitor's goes in
        C{X-Forwarded-Host} (replacing one the visitor sent).
        """
        headers = [(b"Host", b"app.example"), (b"X-Forwarded-Host", b"spoofed")]
        out = requestHeaders(headers, visitor=V4, host=b"127.0.0.1:3000")
        self.assertEqual(headerValues(out, b"host"), [b"127.0.0.1:3000"])
        self.assertEqual(headerValues(out, b"x-forwarded-host"), [b"app.example"])
        self.assertIn(b"host=app.example", headerValues(out, b"forwarded")[0])

    def test_disabled(self) -> None:
        """
        With forwarding off the forwarding headers pass unchanged; a host
        rewrite keeps an existing C{X-Forwarded-Host} (a trusted proxy's)
        and adds one only if there is none.
        """
        headers = [
            (b"Host", b"app.example"), (b"X-Forwarded-For", b"198.51.100.1"),
            (b"X-Forwarded-Proto", b"http"), (b"Forwarded", b"for=198.51.100.1"),
            (b"X-Forwarded-Host", b"original.example"),
        ]
        self.assertEqual(requestHeaders(headers, visitor=V4, forwarded=False), headers)
        out = requestHeaders(headers, visitor=V4, forwarded=False, host=b"local")
        self.assertEqual(headerValues(out, b"x-forwarded-host"), [b"original.example"])
        out = requestHeaders(headers[:1], visitor=V4, forwarded=False, host=b"local")
        self.assertEqual(out, [(b"Host", b"local"), (b"X-Forwarded-Host", b"app.example")])

    def test_unknownVisitor(self) -> None:
        """
        With no visitor address, the visitor's forwarding headers still go;
        ours say the scheme and host, and no address.
        """
        headers = [(b"Host", b"h"), (b"X-Forwarded-For", b"198.51.100.1"), (b"X-Real-Ip", b"x")]
        self.assertEqual(requestHeaders(headers, visitor=None), [
            (b"Host", b"h"), (b"X-Forwarded-Proto", b"https"), (b"X-Forwarded-Host", b"h"),
        ])

    def test_chunkedRequestStaysChunked(self) -> None:
        """
        A request with a chunked body is marked chunked for the backend (h11
        frames it again).
        """
        out = requestHeaders([(b"Host", b"h"), (b"Transfer-Encoding", b"chunked")], forwarded=False)
        self.assertEqual(out, [(b"Host", b"h"), (b"Transfer-Encoding", b"chunked")])

    def test_neverBothLengths(self) -> None:
        """
        A chunked message never goes on with a C{Content-Length} too (RFC
        9112 section 6.3), in a request or a response.
        """
        both = [(b"Host", b"h"), (b"Content-Length", b"4"), (b"Transfer-Encoding", b"chunked")]
        self.assertEqual(
            requestHeaders(both, forwarded=False),
            [(b"Host", b"h"), (b"Transfer-Encoding", b"chunked")],
        )
        self.assertEqual(responseHeaders(both), [(b"Host", b"h")])
        self.assertEqual(responseHeaders(both[:2]), both[:2])

    @given(
        _headerLists,
        st.ip_addresses(),
        st.sampled_from([b"http", b"https"]),
    )
    def test_forwardedAlwaysLast(
        self, headers: list[tuple[bytes, bytes]], ip: object, scheme: bytes
    ) -> None:
        """
        Whatever the headers, C{X-Forwarded-For} and C{X-Real-IP} are the
        visitor's address and C{Forwarded} is this hop's element alone, each
        one header.
        """
        text = f"[{ip}]:1" if ":" in str(ip) else f"{ip}:1"
        out = requestHeaders(headers, visitor=text, scheme=scheme)
        self.assertEqual(headerValues(out, b"x-forwarded-for"), [str(ip).encode()])
        self.assertEqual(headerValues(out, b"x-real-ip"), [str(ip).encode()])
        address = visitorIP(text)
        assert address is not None
        host = next(iter(headerValues(headers, b"host")), None)
        self.assertEqual(headerValues(out, b"forwarded"), [forwardedElement(address, scheme, host)])
