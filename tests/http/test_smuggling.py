"""
Tests for the proxy's framing decisions (RFC 9112 sections 2.2, 3.2, 5.2, 6
as they bind an intermediary): a request whose length two parsers could
read differently is refused before any byte of it reaches the backend, what
the backend gets is framed one way only, and no backend connection whose
framing is in doubt is handed to the next visitor.

The backend here is L{LengthOnlyServer}: it frames requests by
C{Content-Length} alone, as C{http.server}-style development servers do, and
records the raw bytes it reads, so a request that desynchronises it shows.
"""

from __future__ import annotations

from typing import Any

import h11
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from .helpers import Harness, ScriptedServer, fixed, parseResponses, request

HOSTS = frozenset({"blog.test"})


class LengthOnlyServer(ScriptedServer):
    """
    A backend that reads a head up to its blank line (bare LF accepted),
    then as many body bytes as its first C{Content-Length} says, ignoring
    C{Transfer-Encoding}; it answers each request with a body naming its
    request line and keeps the connection open.

    @ivar raw: every byte it read.
    @ivar seen: each request as (request line, head, body).
    """

    def __init__(self) -> None:
        super().__init__(fixed(b""))
        self.raw = bytearray()
        self.buffer = bytearray()
        self.seen: list[tuple[bytes, bytes, bytes]] = []

    def dataReceived(self, data: bytes) -> None:
        self.raw += data
        self.buffer += data
        while (request := self._next()) is not None:
            self.seen.append(request)
            answer = b"answer to " + request[0]
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer)
            )

    def _next(self) -> tuple[bytes, bytes, bytes] | None:
        end = self.buffer.find(b"\n\r\n")
        end = end + 3 if end >= 0 else self.buffer.find(b"\n\n") + 2
        if end < 2:
            return None
        head = bytes(self.buffer[:end])
        length = 0
        for line in head.split(b"\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.split(b",")[0])
                break
        if len(self.buffer) < end + length:
            return None
        body = bytes(self.buffer[end:end + length])
        del self.buffer[:end + length]
        return head.split(b"\n")[0].rstrip(b"\r"), head, body


def status(received: bytes) -> int:
    """
    The status of the first response in C{received}.
    """
    return parseResponses(received, closed=True)[0][0].status_code


#: Requests no two parsers may frame differently: each is refused with 400.
UNFRAMEABLE = {
    "CL.TE": b"POST /a HTTP/1.1\r\nHost: blog.test\r\nContent-Length: 6\r\n"
             b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nG",
    "TE.CL": b"POST /a HTTP/1.1\r\nHost: blog.test\r\nTransfer-Encoding: chunked\r\n"
             b"Content-Length: 3\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    "CL.CL": b"POST /a HTTP/1.1\r\nHost: blog.test\r\nContent-Length: 5\r\n"
             b"Content-Length: 6\r\n\r\nabcdef",
    "CL list": b"POST /a HTTP/1.1\r\nHost: blog.test\r\nContent-Length: 5, 6\r\n\r\nabcdef",
    "chunked not last": b"POST /a HTTP/1.1\r\nHost: blog.test\r\n"
                        b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
    "gzip alone": b"POST /a HTTP/1.1\r\nHost: blog.test\r\nTransfer-Encoding: gzip\r\n\r\nxx",
    "TE twice": b"POST /a HTTP/1.1\r\nHost: blog.test\r\nTransfer-Encoding: chunked\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "TE in HTTP/1.0": b"POST /a HTTP/1.0\r\nHost: blog.test\r\nTransfer-Encoding: chunked\r\n"
                      b"\r\n3\r\nabc\r\n0\r\n\r\n",
    "space before colon": b"POST /a HTTP/1.1\r\nHost: blog.test\r\nTransfer-Encoding : chunked"
                          b"\r\nContent-Length: 3\r\n\r\nabc",
    "fold at start": b"GET /a HTTP/1.1\r\n Host: blog.test\r\n\r\n",
    "authority-form": b"GET blog.test:443 HTTP/1.1\r\nHost: blog.test\r\n\r\n",
    "asterisk for GET": b"GET * HTTP/1.1\r\nHost: blog.test\r\n\r\n",
    "userinfo": b"GET http://u@blog.test/ HTTP/1.1\r\nHost: blog.test\r\n\r\n",
}


class RefusedFramingTests(SynchronousTestCase):
    """
    Requests whose framing or target is in doubt are answered 400 and the
    visitor connection is closed; the backend gets nothing.
    """

    def test_refused(self) -> None:
        """
        Every case in L{UNFRAMEABLE}, whole or split byte by byte, gets
        C{400} and a closed connection, and no backend connection is made.
        """
        for name, raw in UNFRAMEABLE.items():
            for readSize in (len(raw), 1):
                h = Harness(serve=LengthOnlyServer, pool=True, hosts=HOSTS, readSize=readSize)
                visitor, _ = h.visit(raw)
                self.assertEqual(status(bytes(visitor.received)), 400, name)
                self.assertTrue(visitor.cleanlyClosed, name)
                self.assertEqual(h.backend.servers, [], name)


class ForwardedFramingTests(SynchronousTestCase):
    """
    What is forwarded is framed one way only, whatever the visitor's bytes
    looked like.
    """

    def forward(self, raw: bytes) -> bytes:
        """
        Send C{raw} through a proxy; the bytes the backend read.
        """
        h = Harness(serve=LengthOnlyServer, pool=True, hosts=HOSTS)
        h.visit(raw)
        [server] = h.backend.servers
        return bytes(server.raw)

    def test_sameContentLengths(self) -> None:
        """
        Repeated equal lengths (C{5, 5} and another C{5}) go on as one
        C{Content-Length: 5}.
        """
        got = self.forward(b"POST /a HTTP/1.1\r\nHost: blog.test\r\nContent-Length: 5, 5\r\n"
                           b"Content-Length: 5\r\n\r\nabcde")
        self.assertEqual(got.lower().count(b"content-length"), 1)
        self.assertIn(b"\r\nContent-Length: 5\r\n", got)
        self.assertTrue(got.endswith(b"\r\n\r\nabcde"))

    def test_obsFoldUnfolded(self) -> None:
        """
        An obs-fold is replaced by a space (RFC 9112 section 5.2): no header
        line the backend gets starts with a space or a tab.
        """
        got = self.forward(b"GET /a HTTP/1.1\r\nHost: blog.test\r\nX-A: 1\r\n\t2\r\n 3\r\n\r\n")
        lines = got.split(b"\r\n")
        self.assertIn(b"X-A: 1 2 3", lines)
        self.assertFalse([line for line in lines if line[:1] in (b" ", b"\t")])

    def test_bareLF(self) -> None:
        """
        A head with bare LF line ends reaches the backend with CRLF line ends
        only (RFC 9112 section 2.2).
        """
        got = self.forward(b"POST /a HTTP/1.1\nHost: blog.test\nContent-Length: 2\n\nok")
        head, _, body = got.partition(b"\r\n\r\n")
        self.assertEqual(body, b"ok")
        self.assertNotIn(b"\n", head.replace(b"\r\n", b""))

    def test_chunkedStaysChunked(self) -> None:
        """
        A chunked request reaches the backend chunked, with no
        C{Content-Length}.
        """
        got = self.forward(b"POST /a HTTP/1.1\r\nHost: blog.test\r\nTransfer-Encoding: chunked"
                           b"\r\n\r\n3;ext=1\r\nabc\r\n0\r\n\r\n")
        self.assertNotIn(b"content-length", got.lower())
        self.assertIn(b"\r\nTransfer-Encoding: chunked\r\n", got)
        self.assertTrue(got.endswith(b"\r\n\r\n3\r\nabc\r\n0\r\n\r\n"))

    def test_absoluteForm(self) -> None:
        """
        An absolute-form target (RFC 9112 section 3.2.2) goes on in origin
        form, its authority as C{Host} (the visitor's C{Host} ignored).
        """
        got = self.forward(b"GET http://BLOG.test:8080/p?q=1 HTTP/1.1\r\nHost: elsewhere\r\n\r\n")
        self.assertTrue(got.startswith(b"GET /p?q=1 HTTP/1.1\r\nHost: BLOG.test:8080\r\n"), got)
        self.assertNotIn(b"elsewhere", got)

    def test_noH2cUpgrade(self) -> None:
        """
        An upgrade to C{h2c} (deprecated, RFC 9113 section 3.1) is not
        passed on: inside it the visitor's HTTP/2 requests would reach the
        service unchecked, with its own forwarding headers.  The request
        goes on as a plain one; other protocols in the list stay.
        """
        got = self.forward(b"GET /a HTTP/1.1\r\nHost: blog.test\r\nUpgrade: h2c\r\n"
                           b"Connection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAA\r\n\r\n")
        self.assertNotIn(b"upgrade", got.lower())
        self.assertNotIn(b"http2-settings", got.lower())
        got = self.forward(b"GET /a HTTP/1.1\r\nHost: blog.test\r\nUpgrade: H2C, WebSocket\r\n"
                           b"Connection: upgrade\r\n\r\n")
        self.assertIn(b"\r\nUpgrade: WebSocket\r\nConnection: upgrade\r\n", got)

    def test_asterisk(self) -> None:
        """
        C{OPTIONS *} goes on as it is.
        """
        got = self.forward(b"OPTIONS * HTTP/1.1\r\nHost: blog.test\r\n\r\n")
        self.assertTrue(got.startswith(b"OPTIONS * HTTP/1.1\r\n"))


class MisdirectedTests(SynchronousTestCase):
    """
    A proxy given the names it serves answers a request for any other name
    C{421} (RFC 9110 section 15.5.20), without forwarding it.
    """

    def test_otherShare(self) -> None:
        """
        A C{Host}, or an absolute-form authority, naming another share gets
        C{421}; the backend sees none of it.
        """
        for raw in (
            b"GET /a HTTP/1.1\r\nHost: other.test\r\n\r\n",
            b"GET /a HTTP/1.1\r\nHost: other.test:443\r\n\r\n",
            b"GET http://other.test/a HTTP/1.1\r\nHost: blog.test\r\n\r\n",
            b"GET /a HTTP/1.1\r\nHost: blog.test.other.test\r\n\r\n",
            b"GET /a HTTP/1.0\r\n\r\n",
        ):
            h = Harness(serve=LengthOnlyServer, pool=True, hosts=HOSTS)
            visitor, _ = h.visit(raw)
            self.assertEqual(status(bytes(visitor.received)), 421, raw)
            self.assertEqual(h.backend.servers, [], raw)

    def test_ownNames(self) -> None:
        """
        The share's own name passes in any case, with a port, with a
        trailing dot; after a misdirected request on a kept-alive
        connection nothing else is read from it.
        """
        h = Harness(serve=LengthOnlyServer, pool=True, hosts=HOSTS)
        visitor, _ = h.visit(b"GET /1 HTTP/1.1\r\nHost: BLOG.Test:8443\r\n\r\n"
                             b"GET /2 HTTP/1.1\r\nHost: blog.test.\r\n\r\n"
                             b"GET /3 HTTP/1.1\r\nHost: other.test\r\n\r\n"
                             b"GET /4 HTTP/1.1\r\nHost: blog.test\r\n\r\n")
        [server] = h.backend.servers
        self.assertEqual([line for line, _, _ in server.seen],
                         [b"GET /1 HTTP/1.1", b"GET /2 HTTP/1.1"])
        responses = parseResponses(bytes(visitor.received), [b"GET"] * 3)
        self.assertEqual([r.status_code for r, _, _ in responses], [200, 200, 421])

    def test_anyHost(self) -> None:
        """
        Without names (the agent behind the relay's proxy, which checked),
        any C{Host} passes.
        """
        h = Harness(serve=LengthOnlyServer, pool=True)
        visitor, _ = h.visit(b"GET /a HTTP/1.1\r\nHost: other.test\r\n\r\n")
        self.assertEqual(status(bytes(visitor.received)), 200)


class CaptureTests(SynchronousTestCase):
    """
    The attack of the review: a visitor's request smuggled past the proxy
    lies in wait on a pooled backend connection and takes the next
    visitor's request as its body.
    """

    victim = (b"GET /victim HTTP/1.1\r\nHost: blog.test\r\n"
              b"Cookie: session=VICTIM-SECRET\r\n\r\n")

    def test_capturedNextRequest(self) -> None:
        """
        CL.TE with a C{POST /capture} smuggled in the chunked body, sized to
        take the victim's request as its body, then a victim's request with
        a cookie through the same pool: the victim gets its own answer, its
        cookie is in its own request only, and the attacker gets 400.
        """
        # What a length-framing backend would read as /capture's body: the
        # rest of the re-chunked body, then the victim's request, forwarded.
        taken = len(b"comment=\r\n0\r\n\r\n") + len(self.victim)
        hidden = (b"POST /capture HTTP/1.1\r\nHost: blog.test\r\nContent-Length: %d\r\n"
                  b"\r\ncomment=" % taken)
        smuggle = (b"POST /post HTTP/1.1\r\nHost: blog.test\r\nContent-Length: 4\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
                   % (len(hidden), hidden))
        h = Harness(serve=LengthOnlyServer, pool=True, hosts=HOSTS)
        attacker, _ = h.visit(smuggle)
        victim, _ = h.visit(self.victim)
        [(_, body, _)] = parseResponses(bytes(victim.received), closed=False)
        self.assertEqual(body, b"answer to GET /victim HTTP/1.1")
        seen = [request for server in h.backend.servers for request in server.seen]
        self.assertEqual([line for line, _, _ in seen], [b"GET /victim HTTP/1.1"])
        self.assertNotIn(b"VICTIM-SECRET", b"".join(body for _, _, body in seen))
        self.assertNotIn(b"/capture", b"".join(bytes(s.raw) for s in h.backend.servers))
        self.assertEqual(status(bytes(attacker.received)), 400)


class PooledFramingTests(SynchronousTestCase):
    """
    A backend connection goes back to the pool only when both messages on
    it were framed without doubt and ended.
    """

    def pooled(self, h: Harness) -> int:
        assert h.pool is not None
        return len(h.pool.idle)

    def test_responseWithBothLengths(self) -> None:
        """
        A response with C{Content-Length} and C{Transfer-Encoding} is read by
        the chunks and reaches the visitor without the length (RFC 9112
        section 6.3); its backend connection is closed, not pooled.
        """
        raw = (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\nhello\r\n0\r\n\r\n")
        h = Harness(lambda request, body: (raw, False), pool=True)
        visitor, _ = h.visit(request())
        [(response, body, _)] = parseResponses(bytes(visitor.received), closed=False)
        self.assertEqual(body, b"hello")
        self.assertNotIn(b"content-length", [name for name, _ in response.headers])
        self.assertEqual(self.pooled(h), 0)
        self.assertIsNotNone(h.backend.servers[0].lost)

    def test_bodilessResponseDeclaringABody(self) -> None:
        """
        A response that carries no body by rule (to a HEAD, a 204, a 304)
        but declares one (a length above 0, or chunked) might be followed
        by one: its connection is closed, not pooled.  One that declares
        none is pooled.
        """
        for method, head, pooled in (
            (b"HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 0),
            (b"HEAD", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0),
            (b"GET", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", 0),
            (b"HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 1),
            (b"GET", b"HTTP/1.1 204 No Content\r\n\r\n", 1),
            (b"GET", b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", 1),
        ):
            h = Harness(lambda request, body, head=head: (head, False), pool=True)
            visitor, _ = h.visit(request(method=method))
            [(response, _, _)] = parseResponses(bytes(visitor.received), [method], closed=False)
            self.assertEqual(response.status_code, int(head[9:12]))
            self.assertEqual((head, self.pooled(h)), (head, pooled))

    def test_earlyResponse(self) -> None:
        """
        A response before the request body was all sent: the backend
        connection is closed, not pooled, and the visitor's connection
        closes after the response.
        """
        answered: list[Any] = []

        class Early(ScriptedServer):
            def dataReceived(self, data: bytes) -> None:
                if not answered:
                    answered.append(True)
                    self.transport.write(b"HTTP/1.1 413 Too Big\r\nContent-Length: 0\r\n\r\n")

        h = Harness(serve=lambda: Early(fixed(b"")), pool=True)
        visitor, _ = h.visit(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        [(response, _, _)] = parseResponses(bytes(visitor.received))
        self.assertEqual(response.status_code, 413)
        self.assertEqual(self.pooled(h), 0)
        self.assertIsNotNone(visitor.lost)

    def test_closeDelimited(self) -> None:
        """
        A response delimited by the backend's close leaves nothing to pool.
        """
        h = Harness(lambda request, body: (b"HTTP/1.1 200 OK\r\n\r\nall", True), pool=True)
        visitor, _ = h.visit(request())
        [(_, body, _)] = parseResponses(bytes(visitor.received), closed=False)
        self.assertEqual(body, b"all")
        self.assertEqual(self.pooled(h), 0)

    def test_abortedBody(self) -> None:
        """
        A visitor that goes mid-body takes its backend connection with it.
        """
        h = Harness(serve=LengthOnlyServer, pool=True)
        visitor, _ = h.visit(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        visitor.transport.abortConnection()
        h.network.run()
        self.assertEqual(self.pooled(h), 0)
        self.assertIsNotNone(h.backend.servers[0].lost)

    def test_malformedChunk(self) -> None:
        """
        A chunked body that turns malformed aborts the backend connection.
        """
        h = Harness(serve=LengthOnlyServer, pool=True)
        h.visit(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX")
        self.assertEqual(self.pooled(h), 0)
        self.assertIsNotNone(h.backend.servers[0].lost)

    def test_unaskedSwitch(self) -> None:
        """
        A C{101} to a request that asked for no upgrade: C{502}, and the
        backend connection is aborted.
        """
        h = Harness(lambda request, body: (b"HTTP/1.1 101 Switching Protocols\r\n"
                                           b"Upgrade: x\r\nConnection: upgrade\r\n\r\n", False),
                    pool=True)
        visitor, _ = h.visit(request())
        self.assertEqual(status(bytes(visitor.received)), 502)
        self.assertEqual(self.pooled(h), 0)
        self.assertIsNotNone(h.backend.servers[0].lost)

    def test_informationalThenFinal(self) -> None:
        """
        A C{100} then the response: the connection is pooled as usual (the
        control case of this class).
        """
        h = Harness(lambda request, body: (b"HTTP/1.1 100 Continue\r\n\r\n"
                                           b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", False),
                    pool=True)
        visitor, _ = h.visit(request(headers=b"Expect: 100-continue\r\n", body=b"x"))
        self.assertEqual(status(bytes(visitor.received)), 200)
        self.assertEqual(self.pooled(h), 1)


_lines = st.sampled_from([
    b"Content-Length: 3", b"Content-Length: 0", b"Content-Length: 3, 3", b"Content-Length: 3, 4",
    b"content-length:007", b"Transfer-Encoding: chunked", b"Transfer-Encoding: Chunked",
    b"Transfer-Encoding: chunked, identity", b"Transfer-Encoding: gzip, chunked",
    b"Transfer-Encoding: gzip", b"Transfer-Encoding : chunked", b" chunked", b"\tX: y",
    b"X-A: 1", b"Connection: content-length", b"Connection: transfer-encoding",
    b"Connection: close", b"Expect: 100-continue", b"Host: blog.test",
])
_ends = st.sampled_from([b"\r\n", b"\n"])
_bodies = st.sampled_from([b"", b"abc", b"3\r\nabc\r\n0\r\n\r\n", b"0\r\n\r\nGET /x HTTP/1.1\r\n"])


def canonical(raw: bytes) -> bool:
    """
    Whether C{raw}, all a backend read, is requests framed one way only:
    CRLF lines, no fold, at most one of C{Content-Length} and
    C{Transfer-Encoding: chunked}, and nothing after the last.
    """
    server = h11.Connection(h11.SERVER)
    server.receive_data(raw)
    while True:
        event = server.next_event()
        if event is h11.NEED_DATA:
            return not server.trailing_data[0]
        if isinstance(event, h11.Request):
            names = [name for name, _ in event.headers]
            if names.count(b"content-length") + names.count(b"transfer-encoding") > 1:
                return False
        elif isinstance(event, h11.EndOfMessage):
            server.send(h11.Response(status_code=200, headers=[(b"Content-Length", b"0")]))
            server.send(h11.EndOfMessage())
            if server.their_state is h11.MUST_CLOSE:
                # An HTTP/1.0 request (h11 keeps no HTTP/1.0 connection
                # alive): nothing may follow it.
                return not server.trailing_data[0]
            server.start_next_cycle()


class AnyHeadTests(SynchronousTestCase):
    """
    Whatever head a visitor sends, what the backend reads is framed one way.
    """

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(_lines, _ends), max_size=6), _ends,
           st.sampled_from([b"1.1", b"1.0"]), _bodies)
    def test_anyHead(
        self, lines: list[tuple[bytes, bytes]], end: bytes, version: bytes, body: bytes
    ) -> None:
        """
        The backend's bytes hold only canonical requests (see L{canonical}),
        and no line of their heads ends in a bare LF or starts with a space.
        """
        head = b"POST /a HTTP/" + version + b"\r\nHost: blog.test\r\n"
        head += b"".join(line + ending for line, ending in lines)
        h = Harness(serve=LengthOnlyServer, pool=True, hosts=HOSTS)
        h.visit(head + end + body)
        for server in h.backend.servers:
            raw = bytes(server.raw)
            self.assertTrue(canonical(raw), raw)
            for one in server.seen:
                lines = one[1].split(b"\r\n")
                self.assertNotIn(b"\n", b"".join(lines))
                self.assertFalse([line for line in lines if line[:1] in (b" ", b"\t")])
