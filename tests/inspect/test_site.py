"""
Tests for L{nfltr.inspect._site} (over raw HTTP on a L{StringTransport})
and L{nfltr.inspect._replay} (to a real local web service).
"""

from __future__ import annotations

import json
from typing import Any

from twisted.internet import reactor
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase, TestCase
from twisted.web import resource, server

from nfltr.inspect import Inspector, Ring, inspector_site
from nfltr.inspect._replay import replay
from nfltr.wire.messages import E2EE

from ..relay.api.helpers import Answer, parse


def kept(ring: Ring, method: bytes = b"POST", target: bytes = b"/hook",
         body: bytes = b"data") -> Any:
    """
    An exchange kept in C{ring} as the proxy would have told it.
    """
    capture = ring.opened(method, target, [(b"host", b"share.test"),
                                           (b"authorization", b"Bearer x"),
                                           (b"x-note", b"<script>1</script>")], "198.51.100.1:5")
    capture.requestBody(body)
    capture.response(200, [(b"content-type", b"text/plain")])
    capture.responseBody(b"ok")
    capture.ended("complete")
    return capture.record


#: A request head as the stream path keeps it, its secrets in odd case.
RAW_HEAD = (b"POST /raw HTTP/1.1\r\nHost: share.test\r\nAUTHORIZATION: Bearer zq-token\r\n"
            b"cOoKiE: zq-cookie\r\nX-Note: kept\r\nContent-Length: 4\r\n\r\n")


def keptRaw(ring: Ring) -> Any:
    """
    An exchange kept in C{ring} as the stream path would have told it.
    """
    capture = ring.openedHead(b"POST", b"/raw", RAW_HEAD, "198.51.100.1:5")
    capture.requestBody(b"data")
    capture.responseHead(200, b"HTTP/1.1 200 OK\r\nSET-COOKIE: zq-session\r\n"
                              b"Content-Length: 2\r\n\r\n")
    capture.responseBody(b"ok")
    capture.ended("complete")
    return capture.record


class SiteTests(SynchronousTestCase):
    """
    The inspector's page and API.
    """

    def setUp(self) -> None:
        self.ring = Ring(Clock().seconds)
        self.inspector = Inspector(Clock(), self.ring, 3000, None, E2EE)
        self.site = inspector_site(self.inspector, "127.0.0.1")
        self.inspector.bound("127.0.0.1", 4040)

    def call(self, method: str, path: str, headers: dict[str, str] | None = None,
             body: bytes = b"") -> Answer:
        all_headers = {"Host": "127.0.0.1:4040", **(headers or {})}
        if body:
            all_headers["Content-Length"] = str(len(body))
        head = f"{method} {path} HTTP/1.0\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in all_headers.items())
        transport = StringTransport()
        protocol = self.site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 5000))
        protocol.makeConnection(transport)
        protocol.dataReceived(head.encode() + b"\r\n" + body)
        return parse(transport.value())

    def test_pageAndList(self) -> None:
        """
        The page is served under a strict CSP; the list has the kept
        exchanges (no headers), the detail has headers and bodies, the
        secret redacted and markup as plain JSON text.
        """
        page = self.call("GET", "/")
        self.assertIn(b'src="/app.js"', page.body)
        self.assertIn("script-src 'self'", page.header("content-security-policy") or "")
        record = kept(self.ring)
        [listed] = json.loads(self.call("GET", "/api/requests").body)["requests"]
        self.assertEqual((listed["id"], listed["method"], listed["status"]),
                         (record.ident, "POST", 200))
        self.assertNotIn("headers", listed)
        detail = self.call("GET", f"/api/requests/{record.ident}")
        self.assertEqual(detail.header("content-type"), "application/json")
        data = json.loads(detail.body)
        self.assertEqual(dict(data["headers"])["authorization"], "[redacted]")
        self.assertEqual(dict(data["headers"])["x-note"], "<script>1</script>")
        self.assertEqual(data["body"]["text"], "data")
        self.assertEqual(json.loads(self.call("GET", "/api/requests?q=nothing").body)["requests"],
                         [])
        self.assertEqual(self.call("GET", "/api/requests/99").status, 404)

    def test_rawHeadRedacted(self) -> None:
        """
        An exchange kept as raw heads shows its fields in the API with the
        secrets redacted, in any case; nothing of them in any answer.
        """
        record = keptRaw(self.ring)
        listed = self.call("GET", "/api/requests")
        detail = self.call("GET", f"/api/requests/{record.ident}")
        data = json.loads(detail.body)
        self.assertEqual(data["headers"], [["host", "share.test"], ["authorization", "[redacted]"],
                                           ["cookie", "[redacted]"], ["x-note", "kept"],
                                           ["content-length", "4"]])
        self.assertEqual(dict(data["response_headers"])["set-cookie"], "[redacted]")
        self.assertEqual((data["method"], data["target"]), ("POST", "/raw"))
        for answer in (listed, detail):
            self.assertNotIn(b"zq-", answer.body)

    def test_foreignHost(self) -> None:
        """
        Another C{Host} (DNS rebinding) is refused.
        """
        self.assertEqual(self.call("GET", "/", {"Host": "evil.example:4040"}).status, 421)
        self.assertEqual(self.call("GET", "/", {"Host": "localhost:4040"}).status, 200)

    def test_replayRefusals(self) -> None:
        """
        A replay must be a JSON POST, from no foreign origin, with sound
        edits.
        """
        record = kept(self.ring)
        path = f"/api/requests/{record.ident}/replay"
        self.assertEqual(self.call("POST", path, body=b"{}").status, 415)
        self.assertEqual(self.call("POST", path, {"Content-Type": "application/json",
                                                  "Origin": "https://evil.example"},
                                   b"{}").status, 403)
        bad = self.call("POST", path, {"Content-Type": "application/json"},
                        b'{"target": "no-slash"}')
        self.assertEqual(bad.status, 400)
        self.assertIn("target", json.loads(bad.body)["error"])
        self.assertEqual(self.call("GET", path).status, 405)

    def test_tokenOffLoopback(self) -> None:
        """
        Bound elsewhere than loopback, the inspector wants its token: once
        in the query (it becomes a cookie), or as a bearer token.
        """
        inspector = Inspector(Clock(), self.ring, 3000, None, E2EE)
        self.site = inspector_site(inspector, "192.0.2.1")
        inspector.bound("192.0.2.1", 4040)
        host = {"Host": "192.0.2.1:4040"}
        self.assertEqual(self.call("GET", "/", host).status, 401)
        token = inspector.token
        assert token is not None
        self.assertEqual(self.call("GET", "/?token=wrong", host).status, 401)
        first = self.call("GET", f"/?token={token}", host)
        self.assertEqual(first.status, 200)
        cookie = (first.header("set-cookie") or "").split(";")[0]
        self.assertIn("httponly", (first.header("set-cookie") or "").lower())
        self.assertEqual(self.call("GET", "/api/requests", {**host, "Cookie": cookie}).status,
                         200)
        self.assertEqual(self.call("GET", "/", {**host, "Authorization": f"Bearer {token}"})
                         .status, 200)


class Recorder(resource.Resource):
    """
    A web service that records what it was sent.
    """

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[bytes, bytes, dict[bytes, bytes], bytes]] = []

    def render(self, request: Any) -> bytes:
        headers = {k.lower(): v[0] for k, v in request.requestHeaders.getAllRawHeaders()}
        self.seen.append((request.method, request.uri, headers, request.content.read()))
        request.setHeader(b"set-cookie", b"session=1")
        return b"replayed:" + request.uri


class ReplayTests(TestCase):
    """
    Replays sent to a real service.
    """

    async def test_replay(self) -> None:
        """
        A replay reaches the service with the share's Host, the kept headers
        (the redacted ones left out) and body, or the edited ones; it is
        kept as a new exchange marked as a replay, with its response.
        """
        service = Recorder()
        port = reactor.listenTCP(0, server.Site(service), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        ring = Ring(reactor.seconds)
        record = kept(ring)
        number = port.getHost().port
        new = await replay(reactor, ring, record, {}, number, b"localhost:3000")
        method, uri, headers, body = service.seen[0]
        self.assertEqual((method, uri, body), (b"POST", b"/hook", b"data"))
        self.assertEqual(headers[b"host"], b"localhost:3000")
        self.assertNotIn(b"authorization", headers)
        self.assertEqual((new.status, new.replay, new.outcome), (200, True, "complete"))
        self.assertEqual(new.responseBody.json()["text"], "replayed:/hook")
        self.assertEqual(dict(new.responseHeaders)["set-cookie"], "[redacted]")
        edited = await replay(reactor, ring, record,
                              {"method": "PUT", "target": "/other", "body": "new",
                               "headers": [["Authorization", "Bearer again"]]}, number, None)
        method, uri, headers, body = service.seen[1]
        self.assertEqual((method, uri, body, headers[b"authorization"]),
                         (b"PUT", b"/other", b"new", b"Bearer again"))
        self.assertEqual(headers[b"host"], b"share.test")
        self.assertEqual(edited.status, 200)
        self.assertEqual([e["replay"] for e in ring.listing()], [True, True, False])

    async def test_replayRawHead(self) -> None:
        """
        A replay of an exchange kept as raw heads sends none of its
        secrets, whatever their case, and its own C{Host}.
        """
        service = Recorder()
        port = reactor.listenTCP(0, server.Site(service), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        ring = Ring(reactor.seconds)
        new = await replay(reactor, ring, keptRaw(ring), {}, port.getHost().port, None)
        method, uri, headers, body = service.seen[0]
        self.assertEqual((method, uri, body, headers[b"host"], headers[b"x-note"]),
                         (b"POST", b"/raw", b"data", b"share.test", b"kept"))
        self.assertNotIn(b"authorization", headers)
        self.assertNotIn(b"cookie", headers)
        self.assertNotIn(b"zq-", b"".join(headers.values()))
        self.assertNotIn("zq-", repr(new.json()))
