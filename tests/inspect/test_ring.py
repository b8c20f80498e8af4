"""
Tests for L{nfltr.inspect._ring} as the tap of a real proxy
(L{nfltr.http.HTTPProxyFactory} over the in-memory network of
L{tests.http.helpers}).
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.http import COMPLETE, ICapture, IExchangeTap
from nfltr.inspect import Ring
from nfltr.inspect._ring import REDACTION
from nfltr.wire.policy import Denial

from ..http.helpers import Harness, OnStreamPath, fixed, request


class RingTests(SynchronousTestCase):
    """
    What the ring keeps of the exchanges through a proxy.
    """

    def harness(self, body: bytes = b"hello", **options: object) -> tuple[Harness, Ring]:
        h = Harness(fixed(body, extra=b"Set-Cookie: s=1\r\nX-App: yes\r\n"), **options)
        ring = Ring(h.clock.seconds, size=3, bodyCap=8, secretHeaders=[b"X-Hook-Secret"])
        h.factory.tap = ring
        return h, ring

    def test_interface(self) -> None:
        """
        The ring is an L{IExchangeTap}, its captures are L{ICapture}s.
        """
        ring = Ring(lambda: 0.0)
        self.assertTrue(verifyObject(IExchangeTap, ring))
        self.assertTrue(verifyObject(ICapture, ring.opened(b"GET", b"/", [], None)))
        self.assertTrue(verifyObject(ICapture, ring.openedHead(b"GET", b"/", b"", None)))

    def assertHidden(self, ring: Ring, *secrets: str) -> None:
        """
        None of C{secrets} is in any view of any kept exchange.
        """
        views = [repr(ring.listing())]
        for kept in ring.exchanges:
            views += [repr(kept), repr(kept.json()), repr(kept.headers),
                      repr(kept.responseHeaders)]
        for secret in secrets:
            for view in views:
                self.assertNotIn(secret, view)

    def test_redactedAnyCase(self) -> None:
        """
        Secret headers in any case, with a tab before the value, are
        redacted in every view of the exchange; the others shown.
        """
        h, ring = self.harness()
        h.visit(request(headers=b"AUTHORIZATION: Bearer s3cret\r\ncOoKiE:\ta=b\r\n"
                        b"x-HOOK-secret: 42\r\nX-Plain: shown\r\n"))
        [kept] = ring.exchanges
        headers = dict(kept.headers)
        for name in ("authorization", "cookie", "x-hook-secret"):
            self.assertEqual(headers[name], REDACTION.decode())
        self.assertEqual(headers["x-plain"], "shown")
        self.assertHidden(ring, "s3cret", "a=b", "42")

    def test_foldedResponse(self) -> None:
        """
        A service's C{Set-Cookie} folded over two lines is redacted whole.
        """
        h = Harness(fixed(b"ok", extra=b"Set-Cookie: s=1;\r\n  folded-secret\r\n"))
        ring = Ring(h.clock.seconds)
        h.factory.tap = ring
        h.visit(request())
        [kept] = ring.exchanges
        self.assertEqual(kept.status, 200)
        self.assertEqual(dict(kept.responseHeaders).get("set-cookie"), REDACTION.decode())
        self.assertHidden(ring, "folded-secret", "s=1")

    def test_headCapped(self) -> None:
        """
        Of a head larger than the cap, the fields that fit are kept and
        shown; those past it are not kept (a secret among them neither).
        """
        h, _ = self.harness()
        ring = Ring(h.clock.seconds, headCap=100)
        h.factory.tap = ring
        long = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"f" * 20) for i in range(10))
        h.visit(request(headers=long + b"Cookie: past-the-cap\r\n"))
        [kept] = ring.exchanges
        names = [n for n, _ in kept.headers]
        self.assertTrue(0 < len(names) < 5, names)
        self.assertEqual(names[0], "host")
        self.assertEqual(kept.status, 200)
        self.assertHidden(ring, "past-the-cap")
        self.assertEqual(kept.json()["method"], "GET")

    def test_bodiesCapped(self) -> None:
        """
        Bodies that come in many pieces are kept up to the cap, their whole
        size counted; a body of one piece larger than the cap too.
        """
        h, ring = self.harness(body=b"0123456789abcdef", readSize=3)
        visitor, _ = h.visit(request(b"POST", body=b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
        h.send(visitor, request(b"POST", body=b"tiny"))
        first, second = ring.exchanges
        self.assertEqual(first.body.json(), {"text": "ABCDEFGH", "size": 26, "truncated": True})
        self.assertEqual(first.responseBody.json(),
                         {"text": "01234567", "size": 16, "truncated": True})
        self.assertEqual(second.body.json(), {"text": "tiny", "size": 4, "truncated": False})
        ring = Ring(h.clock.seconds, bodyCap=8)
        capture = ring.openedHead(b"POST", b"/", b"POST / HTTP/1.1\r\n\r\n", None)
        capture.requestBody(b"x" * 100)
        capture.requestBody(b"y" * 100)
        [kept] = ring.exchanges
        self.assertEqual(kept.body.json(), {"text": "x" * 8, "size": 200, "truncated": True})

    def test_keptRedacted(self) -> None:
        """
        A request and its response are kept: method, target, headers with
        secrets redacted (Authorization, Cookie, Set-Cookie, the share's
        own), bodies up to the cap with their whole size, timings, outcome.
        """
        h, ring = self.harness(body=b"0123456789abcdef")
        h.visit(request(b"POST", b"/hook?x=1", b"Authorization: Bearer s3cret\r\n"
                        b"Cookie: a=b\r\nX-Hook-Secret: 42\r\n", body=b"payload!!!"))
        [kept] = ring.exchanges
        self.assertEqual((kept.method, kept.target, kept.status, kept.outcome),
                         ("POST", "/hook?x=1", 200, COMPLETE))
        headers = dict(kept.headers)
        for name in ("authorization", "cookie", "x-hook-secret"):
            self.assertEqual(headers[name], REDACTION.decode())
        self.assertEqual(dict(kept.responseHeaders)["set-cookie"], REDACTION.decode())
        self.assertEqual(dict(kept.responseHeaders)["x-app"], "yes")
        self.assertEqual(kept.body.json(), {"text": "payload!", "size": 10, "truncated": True})
        self.assertEqual(kept.responseBody.json()["size"], 16)
        self.assertIsNotNone(kept.took)
        text = repr(kept.json())
        for secret in ("s3cret", "a=b", "42"):
            self.assertNotIn(secret, text)

    def test_refusedSeen(self) -> None:
        """
        A request the share's gate refuses is kept with its refusal.
        """
        h, ring = self.harness(gate=lambda headers, visitor: Denial(401, ()))
        h.visit(request())
        [kept] = ring.exchanges
        self.assertEqual((kept.status, kept.outcome), (401, COMPLETE))

    def test_boundedAndFiltered(self) -> None:
        """
        Only the last exchanges are kept, newest first, and a query keeps
        those that match.
        """
        h, ring = self.harness()
        visitor, _ = h.visit(request(target=b"/a"))
        for target in (b"/b", b"/c", b"/delta"):
            h.send(visitor, request(target=target))
        self.assertEqual([e["target"] for e in ring.listing()], ["/delta", "/c", "/b"])
        self.assertEqual([e["target"] for e in ring.listing("DEL")], ["/delta"])
        self.assertIsNone(ring.find(1))
        self.assertEqual(ring.find(4).target, "/delta")


class StreamRingTests(OnStreamPath, RingTests):
    """
    The same, on the stream path.
    """
