"""
Tests for L{nfltr.inspect._ring} as the tap of a real proxy
(L{nfltr.http.HTTPProxyFactory} over the in-memory network of
L{tests.http.helpers}).
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.http import COMPLETE, IExchangeTap
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
        The ring is an L{IExchangeTap}.
        """
        self.assertTrue(verifyObject(IExchangeTap, Ring(lambda: 0.0)))

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
