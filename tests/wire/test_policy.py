"""
Tests for L{nfltr.wire.policy}: share policies.
"""

from __future__ import annotations

import base64
import contextlib

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire.policy import (
    Denial,
    PolicyError,
    SharePolicy,
    parse_policy,
    policy_from_options,
)


def basic(user: str, password: str) -> tuple[bytes, bytes]:
    return b"authorization", b"Basic " + base64.b64encode(f"{user}:{password}".encode())


class CheckTests(SynchronousTestCase):
    """
    L{SharePolicy.check} lets through what the policy allows, and answers
    the rest with the right status and challenge.
    """

    def test_open(self) -> None:
        """
        An empty policy lets everything through.
        """
        self.assertIsNone(SharePolicy().check([], None))

    def test_basic(self) -> None:
        """
        Basic auth: the right user and password pass; a wrong one, none, a
        malformed header or another scheme get 401 with a realm.
        """
        policy = policy_from_options("ann:s3cret", None, [], [], realm="blog")
        self.assertIsNone(policy.check([basic("ann", "s3cret")], "1.2.3.4"))
        for headers in ([basic("ann", "wrong")], [], [(b"authorization", b"Basic !!!")],
                        [(b"authorization", b"Bearer s3cret")]):
            denial = policy.check(headers, "1.2.3.4")
            self.assertEqual(
                denial,
                Denial(401, ((b"www-authenticate", b'Basic realm="blog", charset="UTF-8"'),)),
            )

    def test_bearer(self) -> None:
        """
        A bearer token passes; a wrong one gets 401 with a Bearer challenge
        (no realm a browser would prompt for).
        """
        policy = policy_from_options(None, "tok-123", [], [])
        self.assertIsNone(policy.check([(b"authorization", b"Bearer tok-123")], None))
        denial = policy.check([(b"authorization", b"Bearer tok-124")], None)
        self.assertEqual(denial, Denial(401, ((b"www-authenticate", b'Bearer realm="nfltr"'),)))

    def test_either(self) -> None:
        """
        With Basic and Bearer both set, either passes.
        """
        policy = policy_from_options("a:b", "t", [], [])
        self.assertIsNone(policy.check([basic("a", "b")], None))
        self.assertIsNone(policy.check([(b"authorization", b"bearer t")], None))
        self.assertEqual(policy.check([], None).status, 401)  # type: ignore[union-attr]

    def test_requiredHeaders(self) -> None:
        """
        Every required header must be there with its value (names compared
        without case); otherwise 403.
        """
        policy = policy_from_options(None, None, ["X-Hook-Secret: abc", "X-Other:1"], [])
        good = [(b"x-hook-secret", b"abc"), (b"x-other", b"1")]
        self.assertIsNone(policy.check(good, None))
        self.assertEqual(policy.check(good[:1], None), Denial(403))
        self.assertEqual(policy.check([(b"x-hook-secret", b"abd"), good[1]], None), Denial(403))

    def test_allowList(self) -> None:
        """
        Only addresses in an allowed network pass (IPv4-mapped IPv6 counts
        as IPv4); an unknown address does not.
        """
        policy = policy_from_options(None, None, [], ["10.0.0.0/8", "2001:db8::/32"])
        for address in ("10.1.2.3", "::ffff:10.0.0.1", "2001:db8::5"):
            self.assertTrue(policy.allows(address), address)
        for address in ("11.0.0.1", "2001:db9::1", None, "junk"):
            self.assertFalse(policy.allows(address), address)
        self.assertEqual(policy.check([], "11.0.0.1"), Denial(403))

    def test_duplicateCredentials(self) -> None:
        """
        Two C{Authorization} or C{Proxy-Authorization} headers, or two of a
        required header (in any case, C{_} for C{-}, as CGI servers read
        them), are a 400, whatever their values:
        a check of one and a service reading the other could disagree.  An
        open policy refuses them too.
        """
        policy = policy_from_options("a:b", None, ["X-Hook: v"], [])
        good = [basic("a", "b"), (b"x-hook", b"v")]
        self.assertIsNone(policy.check(good, None))
        for extra in (basic("a", "b"), (b"Authorization", b"Basic bm86bm8="),
                      (b"X-HOOK", b"v"), (b"proxy-authorization", b"x"),
                      (b"Proxy-Authorization", b"y")):
            headers = [*good, extra]
            if extra[0].lower() == b"proxy-authorization":
                headers.append(extra)
            self.assertEqual(policy.check(headers, None), Denial(400), extra)
        self.assertEqual(policy.check([*good, (b"X_Hook", b"v")], None), Denial(400))
        twice = [basic("a", "b"), (b"authorization", b"Bearer x")]
        self.assertEqual(SharePolicy().check(twice, None), Denial(400))
        self.assertIsNone(SharePolicy().check([(b"cookie", b"a"), (b"cookie", b"b")], None))


class MessageTests(SynchronousTestCase):
    """
    A policy's message form carries digests, never secrets, and parses back.
    """

    def test_roundTrip(self) -> None:
        """
        A full policy round-trips, and no secret appears in its form.
        """
        policy = policy_from_options("ann:s3cret", "tok", ["X-K: v4lue"], ["10.0.0.0/8"])
        data = policy.to_json()
        self.assertEqual(parse_policy(data), policy)
        text = repr(data)
        for secret in ("s3cret", "tok", "v4lue"):
            self.assertNotIn(secret, text)

    def test_rejections(self) -> None:
        """
        Bad options and messages raise L{PolicyError}, never echoing secrets.
        """
        for args in (("nocolon", None, [], []), (None, "has space", [], []),
                     (None, None, ["novalue"], []), (None, None, [], ["10.0.0.0/33"]),
                     (None, None, ["bad name:v"], [])):
            error = self.assertRaises(PolicyError, policy_from_options, *args)
            self.assertNotIn("has space", str(error))
        for data in ([], {"basic": "00"}, {"allow": "10.0.0.0/8"}, {"headers": [["x", "zz"]]},
                     {"allow": ["x"] * 65}):
            self.assertRaises(PolicyError, parse_policy, data)

    @given(st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
            st.sampled_from(["allow", "basic", "bearer", "headers", "x"]), inner, max_size=4),
        max_leaves=10,
    ))
    def test_anyMessage(self, data: object) -> None:
        """
        Whatever the message, parsing raises only L{PolicyError}.
        """
        with contextlib.suppress(PolicyError):
            parse_policy(data)

    @given(st.lists(st.tuples(
        st.sampled_from([b"authorization", b"x-k", b"other"]) | st.binary(max_size=12),
        st.sampled_from([b"Bearer t", b"Basic YTpi", b"v"]) | st.binary(max_size=30),
    ), max_size=6))
    def test_anyHeaders(self, headers: list[tuple[bytes, bytes]]) -> None:
        """
        Whatever the headers, a protected policy answers without raising,
        and lets a request through only if it has one Authorization, a
        valid credential, and one x-k, the required value.
        """
        policy = policy_from_options("a:b", "t", ["x-k:v"], [])
        values: dict[bytes, list[bytes]] = {}
        for name, value in headers:
            values.setdefault(name.lower(), []).append(value)
        [authorization] = values.get(b"authorization", [b""])[:1]
        valid = authorization.strip() in (b"Bearer t", b"Basic YTpi")
        single = all(len(values.get(name, [])) <= 1 for name in (b"authorization", b"x-k"))
        self.assertEqual(
            policy.check(headers, "1.2.3.4") is None,
            single and valid and values.get(b"x-k") == [b"v"],
        )
