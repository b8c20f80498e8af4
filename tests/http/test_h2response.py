"""
Tests for L{nfltr.http._h2response}: the HTTP/1.1 response of one HTTP/2
stream, read whole, split anyhow, and followed by more.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.http._h2response import (
    DATA,
    END,
    HEAD,
    INFORMATIONAL,
    Event,
    ResponseError,
    ResponseReader,
)

LIMIT = 64 * 1024


def read(data: bytes, method: bytes = b"GET", splits: list[int] | None = None,
         eof: bool = False) -> tuple[ResponseReader, list[Event]]:
    """
    Feed C{data} to a new reader, cut at C{splits}; its events.
    """
    reader, events, at = ResponseReader(method, LIMIT), [], 0
    for cut in [*sorted(splits or []), len(data)]:
        if cut > at:
            events += reader.feed(data[at:cut])
            at = cut
    if eof:
        events += reader.feed(b"")
    return reader, events


def summary(events: list[Event]) -> list[tuple[int, int, list[tuple[bytes, bytes]], bytes]]:
    """
    The events with the body's bytes joined into one.
    """
    out: list[tuple[int, int, list[tuple[bytes, bytes]], bytes]] = []
    for kind, status, headers, data in events:
        if kind == DATA and out and out[-1][0] == DATA:
            out[-1] = (DATA, 0, [], out[-1][3] + data)
        else:
            out.append((kind, status, list(headers), data))
    return out


SIZED = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Thing: A\r\n\r\nhello"
CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"3\r\nhel\r\n2\r\nlo\r\n0\r\ngrpc-status: 0\r\n\r\n")
INFORMED = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n" + SIZED


class ResponseReaderTests(SynchronousTestCase):
    """
    L{ResponseReader}.
    """

    def test_sized(self) -> None:
        """
        A head (names lowercase) and a body of its Content-Length, then the
        end; the connection may be reused.
        """
        reader, events = read(SIZED)
        self.assertEqual(summary(events), [
            (HEAD, 200, [(b"content-length", b"5"), (b"x-thing", b"A")], b""),
            (DATA, 0, [], b"hello"), (END, 0, [], b"")])
        self.assertTrue(reader.ended)
        self.assertTrue(reader.reusable)

    @given(st.sampled_from([SIZED, CHUNKED, INFORMED]),
           st.lists(st.integers(min_value=0, max_value=200), max_size=8))
    def test_splitAnyhow(self, data: bytes, splits: list[int]) -> None:
        """
        However the bytes are cut, the same response is read.
        """
        self.assertEqual(summary(read(data, splits=splits)[1]), summary(read(data)[1]))

    def test_oneByteAtATime(self) -> None:
        """
        Byte by byte, the same response is read.
        """
        for data in (SIZED, CHUNKED, INFORMED):
            self.assertEqual(summary(read(data, splits=list(range(len(data))))[1]),
                             summary(read(data)[1]))

    def test_chunkedWithTrailers(self) -> None:
        """
        A chunked body is decoded; its trailers end the response.
        """
        reader, events = read(CHUNKED)
        self.assertEqual(summary(events)[1:], [(DATA, 0, [], b"hello"),
                                               (END, 0, [(b"grpc-status", b"0")], b"")])
        self.assertTrue(reader.reusable)

    def test_informational(self) -> None:
        """
        A 103 comes before the head; a 101 is an error.
        """
        events = read(INFORMED)[1]
        self.assertEqual(events[0], (INFORMATIONAL, 103, [(b"link", b"</s.css>")], b""))
        self.assertEqual(events[1][:2], (HEAD, 200))
        with self.assertRaises(ResponseError):
            read(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n")

    def test_untilClose(self) -> None:
        """
        A body without a length runs to the end of the connection, which
        is then not reusable.
        """
        reader, events = read(b"HTTP/1.1 200 OK\r\n\r\nall of it", eof=True)
        self.assertEqual(summary(events)[1:], [(DATA, 0, [], b"all of it"), (END, 0, [], b"")])
        self.assertFalse(reader.reusable)

    def test_closedEarly(self) -> None:
        """
        The end of the connection before the response's end is an error.
        """
        for data in (b"", b"HTTP/1.1 200 OK\r\n", SIZED[:-1], CHUNKED[:-5]):
            with self.assertRaises(ResponseError):
                read(data, eof=True)

    def test_bodiless(self) -> None:
        """
        A response to HEAD, a 204 and a 304 end with their head, whatever
        they announce (a connection whose response announced a body is not
        reused, as on the stream path); one followed by bytes is not reused.
        """
        reader, events = read(SIZED[:-5], b"HEAD")
        self.assertEqual([e[0] for e in events], [HEAD, END])
        self.assertTrue(read(SIZED[:-5].replace(b": 5", b": 0"), b"HEAD")[0].reusable)
        reader, events = read(b"HTTP/1.1 204 No Content\r\n\r\n")
        self.assertEqual([e[0] for e in events], [HEAD, END])
        self.assertTrue(reader.reusable)
        reader, _ = read(b"HTTP/1.1 304 Not Modified\r\n\r\nsurprise")
        self.assertFalse(reader.reusable)

    def test_notReused(self) -> None:
        """
        After C{Connection: close}, after bytes beyond the response, and in
        HTTP/1.0 without keep-alive, the connection is not reused.
        """
        closing = SIZED.replace(b"X-Thing", b"Connection: close\r\nX-Thing")
        for data in (closing, SIZED + b"HTTP/1.1", SIZED.replace(b"1.1", b"1.0"),
                     CHUNKED + b"x"):
            reader, _ = read(data)
            self.assertTrue(reader.ended)
            self.assertFalse(reader.reusable, data)
        reader = read(SIZED)[0]
        reader.feed(b"late")
        self.assertFalse(reader.reusable)

    def test_tolerantHeads(self) -> None:
        """
        Bare LF line ends and obs-fold are read.
        """
        events = read(b"HTTP/1.1 200 OK\nContent-Length: 2\nX-A: one\n two\n\nok")[1]
        self.assertEqual(events[0], (HEAD, 200, [(b"content-length", b"2"),
                                                 (b"x-a", b"one two")], b""))

    def test_refused(self) -> None:
        """
        A head too large, one that cannot be read, lengths in doubt, and a
        malformed chunked body are errors.
        """
        for data in (b"HTTP/1.1 200 OK\r\nX: " + b"a" * LIMIT + b"\r\n\r\n",
                     b"HTTP/1.1 200 OK\r\n" + b"a" * (LIMIT + 1),
                     b"HTTP/9 200 OK\r\n\r\n",
                     b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                     b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
            with self.assertRaises(ResponseError):
                read(data)
