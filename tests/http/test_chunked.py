"""
Tests for L{nfltr.http._chunked}: where a chunked body ends, however it is
cut into reads (h11 as the oracle), and what is refused.
"""

from __future__ import annotations

import h11
from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.http._chunked import MAX_LINE, MAX_TRAILER, ChunkedBody, ChunkError

_extensions = st.sampled_from([b"", b";a=b", b";x", b';q="v"', b";a=b;c"])
_trailers = st.lists(st.sampled_from([b"T: 1", b"X-Sum: abc", b"Empty:"]), max_size=3)


@st.composite
def chunkedBodies(draw: st.DrawFn) -> bytes:
    """
    A well-formed chunked body: chunks with extensions, sizes in either
    case, then trailers.
    """
    out = []
    for chunk in draw(st.lists(st.binary(min_size=1, max_size=300), max_size=6)):
        size = b"%x" % len(chunk)
        if draw(st.booleans()):
            size = size.upper()
        out.append(size + draw(_extensions) + b"\r\n" + chunk + b"\r\n")
    out.append(b"0" + draw(_extensions) + b"\r\n")
    out += [line + b"\r\n" for line in draw(_trailers)]
    out.append(b"\r\n")
    return b"".join(out)


def h11End(body: bytes, tail: bytes) -> int:
    """
    Where h11 says C{body} (then C{tail}) ends, as a response's body.
    """
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method=b"GET", target=b"/", headers=[(b"Host", b"x")]))
    client.send(h11.EndOfMessage())
    client.receive_data(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body + tail)
    while not isinstance(client.next_event(), h11.EndOfMessage):
        pass
    return len(body) + len(tail) - len(client.trailing_data[0])


class ChunkedBodyTests(SynchronousTestCase):
    """
    L{ChunkedBody}.
    """

    def feed(self, data: bytes, cuts: list[int]) -> int:
        """
        Feed C{data} cut at C{cuts}, what was not settled given again first
        with the next piece, as the stream path does; where the body ended,
        in C{data}.
        """
        body = ChunkedBody()
        held, at = b"", 0
        for cut in sorted({*cuts, len(data)}):
            if cut <= at:
                continue
            piece = held + data[at:cut]
            offset = at - len(held)
            end = body.feed(piece)
            if body.done:
                return offset + end
            held, at = piece[end:], cut
            self.assertLessEqual(len(held), MAX_LINE)
        self.fail("the body did not end")

    @given(chunkedBodies(), st.binary(max_size=20), st.lists(st.integers(0, 3000), max_size=12))
    def test_endsWhereH11Ends(self, body: bytes, tail: bytes, cuts: list[int]) -> None:
        """
        However the bytes come, the body ends where h11 says, and what
        follows is left.
        """
        self.assertEqual(self.feed(body + tail, cuts), len(body))
        self.assertEqual(h11End(body, tail), len(body))

    @given(chunkedBodies(), st.integers(1, 50))
    def test_startOffset(self, body: bytes, start: int) -> None:
        """
        C{feed} reads from C{start}: what comes before is not the body's.
        """
        chunked = ChunkedBody()
        self.assertEqual(chunked.feed(b"x" * start + body, start), start + len(body))
        self.assertTrue(chunked.done)

    def test_refused(self) -> None:
        """
        Malformed bodies raise L{ChunkError}, as early as the bytes tell.
        """
        for raw in (
            b"g\r\n",                    # not hex
            b"-1\r\n",                   # a sign
            b"\r\n",                     # no size
            b"1 2\r\n",                  # space inside
            b"1 ;a\r\n",                 # space before an extension
            b"3\nabc\r\n",               # bare LF
            b"3\r\nabcX",                # data longer than its size
            b"3\r\nabc\n",               # bare LF after data
            b"1" * 16 + b"\r\n",        # too many digits
            b"1;" + b"e" * MAX_LINE + b"\r\n",  # a line too long
            b"0\r\nBad Field\r\n",       # a malformed trailer
            b"0\r\n" + b"".join(        # a trailer section too large
                b"T%d: %s\r\n" % (i, b"v" * 1000) for i in range(MAX_TRAILER // 1000 + 2)),
        ):
            with self.assertRaises(ChunkError, msg=raw[:40]):
                ChunkedBody().feed(raw)
