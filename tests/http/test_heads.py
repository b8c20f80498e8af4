"""
Tests for L{nfltr.http._heads}: request heads read strictly (h11, which
the full proxy uses, as the oracle for the ones that pass), response heads
read leniently, and the framing of responses.
"""

from __future__ import annotations

from http import HTTPStatus

import h11
from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.http._heads import (
    CHUNKED,
    NONE,
    UNTIL_CLOSE,
    HeadError,
    parseRequestHead,
    parseResponseHead,
    responseFraming,
)

_TCHAR = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_tokens = st.text(alphabet=_TCHAR, min_size=1, max_size=12).map(str.encode)
_values = st.text(alphabet="".join(chr(c) for c in range(0x21, 0x7F)), max_size=20).map(
    str.encode
)
_names = _tokens.filter(
    lambda n: n.lower() not in (b"host", b"content-length", b"transfer-encoding")
)
_targets = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789/?=&%-._~", max_size=20).map(
    lambda t: b"/" + t.encode()
)


@st.composite
def requestHeads(draw: st.DrawFn) -> bytes:
    """
    A well-formed request head, framed by a length, by chunks, or neither.
    """
    method = draw(_tokens)
    target = draw(_targets)
    fields = [(b"Host", b"example.test")]
    fields += draw(st.lists(st.tuples(_names, _values), max_size=6))
    framing = draw(st.sampled_from(["none", "length", "chunked"]))
    if framing == "length":
        fields.append((b"Content-Length", b"%d" % draw(st.integers(0, 10**9))))
    elif framing == "chunked":
        fields.append((b"Transfer-Encoding", draw(st.sampled_from([b"chunked", b"Chunked"]))))
    space = draw(st.sampled_from([b"", b" ", b"\t", b"  "]))
    lines = [b"%s %s HTTP/1.1" % (method, target)]
    lines += [name + b":" + space + value + space for name, value in fields]
    return b"\r\n".join(lines) + b"\r\n\r\n"


class RequestHeadTests(SynchronousTestCase):
    """
    L{parseRequestHead}.
    """

    @given(requestHeads())
    def test_agreesWithH11(self, raw: bytes) -> None:
        """
        A well-formed head reads as h11 reads it: method, target, fields
        (values without the whitespace around them), and the body's length.
        """
        head = parseRequestHead(raw)
        server = h11.Connection(h11.SERVER)
        server.receive_data(raw)
        event = server.next_event()
        assert isinstance(event, h11.Request)
        self.assertEqual((head.method, head.target), (event.method, event.target))
        # h11 lowercases names, and the value of Transfer-Encoding.
        self.assertEqual(
            [(n.lower(), v.lower() if n.lower() == b"transfer-encoding" else v)
             for n, v in head.headers],
            list(event.headers))
        declared = dict(event.headers)
        if b"transfer-encoding" in declared:
            self.assertEqual(head.length, CHUNKED)
        else:
            self.assertEqual(head.length, int(declared.get(b"content-length", b"0")))

    @given(requestHeads(), st.sampled_from([
        (b"\r\n", b"\n"), (b"\r\n", b"\r"), (b":", b" :"), (b"Host:", b"Host\x00:"),
        (b"HTTP/1.1", b"HTTP/1.2"), (b"\r\nHost", b"\r\n Host"),
    ]))
    def test_damagedRefused(self, raw: bytes, damage: tuple[bytes, bytes]) -> None:
        """
        A well-formed head with one damage (a bare LF or CR, a space before
        a colon, a NUL in a name, another version, a fold) is refused
        with 400.
        """
        old, new = damage
        body = raw[:-4]
        damaged = body.replace(old, new, 1) + b"\r\n\r\n"
        with self.assertRaises(HeadError) as caught:
            parseRequestHead(damaged)
        self.assertEqual(caught.exception.status, HTTPStatus.BAD_REQUEST)

    def test_refusals(self) -> None:
        """
        Framing in doubt, and a missing or repeated C{Host}: 400 each.
        """
        for fields in (
            b"Host: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n",
            b"Host: a\r\nContent-Length: 1, 1\r\n",
            b"Host: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n",
            b"Host: a\r\nTransfer-Encoding: gzip, chunked\r\n",
            b"Host: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            b"Host: a\r\nContent-Length: -1\r\n",
            b"Host: a\r\nContent-Length: 1234567890123456789\r\n",
            b"",
            b"Host: a\r\nHost: a\r\n",
            b"Host: a\r\nX: \x7f\r\n",
        ):
            with self.assertRaises(HeadError, msg=fields):
                parseRequestHead(b"POST / HTTP/1.1\r\n" + fields + b"\r\n")

    def test_http10(self) -> None:
        """
        HTTP/1.0 needs no C{Host}, keeps its connection only if it says
        C{keep-alive}, and may not be chunked.
        """
        head = parseRequestHead(b"GET / HTTP/1.0\r\n\r\n")
        self.assertFalse(head.keepAlive)
        self.assertTrue(parseRequestHead(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
                        .keepAlive)
        with self.assertRaises(HeadError):
            parseRequestHead(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n")


class ResponseHeadTests(SynchronousTestCase):
    """
    L{parseResponseHead} and L{responseFraming}.
    """

    def framing(self, raw: bytes, method: bytes = b"GET") -> tuple[int, bool, bool]:
        response = parseResponseHead(raw)
        responseFraming(response, method)
        return response.length, response.reusable, response.clean

    def test_framing(self) -> None:
        """
        RFC 9112 section 6.3, row by row.
        """
        for raw, method, expected in (
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", b"GET", (5, True, True)),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"GET",
             (CHUNKED, True, True)),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", b"GET",
             (UNTIL_CLOSE, False, True)),
            (b"HTTP/1.1 200 OK\r\n\r\n", b"GET", (UNTIL_CLOSE, False, True)),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", b"HEAD", (NONE, False, True)),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b"HEAD", (NONE, True, True)),
            (b"HTTP/1.1 204 No Content\r\n\r\n", b"GET", (NONE, True, True)),
            (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", b"GET",
             (NONE, False, True)),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
             b"GET", (CHUNKED, False, False)),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n", b"GET", (5, False, True)),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\n", b"GET",
             (5, True, True)),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n", b"GET",
             (5, False, True)),
            (b"HTTP/1.1 200 OK\nContent-Length: 5\n\n", b"GET", (5, True, False)),
            (b"HTTP/1.1 200 OK\r\nX: 1\r\n 2\r\nContent-Length: 5\r\n\r\n", b"GET",
             (5, True, False)),
        ):
            self.assertEqual(self.framing(raw, method), expected, raw)

    def test_lengthsInDoubt(self) -> None:
        """
        Lengths that differ or are not digits: 502.
        """
        for fields in (b"Content-Length: 1\r\nContent-Length: 2\r\n", b"Content-Length: x\r\n",
                       b"Content-Length: 1, 2\r\n"):
            with self.assertRaises(HeadError) as caught:
                self.framing(b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n")
            self.assertEqual(caught.exception.status, HTTPStatus.BAD_GATEWAY)

    def test_unreadable(self) -> None:
        """
        A status line or field that cannot be read, or a bare CR: 502.
        """
        for raw in (b"HTTP/1.1 20 OK\r\n\r\n", b"HTTP/2 200 OK\r\n\r\n",
                    b"HTTP/1.1 200 OK\r\nBad Name: 1\r\n\r\n", b"HTTP/1.1 200 OK\rX: 1\r\n\r\n"):
            with self.assertRaises(HeadError, msg=raw):
                parseResponseHead(raw)

    def test_rewritten(self) -> None:
        """
        A head read leniently is written out again with CRLF and no fold;
        the length that chunks override is dropped.
        """
        response = parseResponseHead(
            b"HTTP/1.1 200 OK\nX: 1\n\t2\nContent-Length: 3\nTransfer-Encoding: chunked\n\n")
        responseFraming(response, b"GET")
        self.assertEqual(response.serialize(),
                         b"HTTP/1.1 200 OK\r\nX: 1 2\r\nTransfer-Encoding: chunked\r\n\r\n")
