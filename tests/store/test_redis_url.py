# -*- test-case-name: tests.store.test_redis_url -*-
"""
Tests for L{nfltr.store.parse_redis_url}.
"""

from __future__ import annotations

import contextlib
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.store import (
    DEFAULT_PORT,
    MAX_UNIX_PATH,
    PASSWORD_ENV,
    InvalidRedisURL,
    RedisAddress,
    StoreError,
    parse_redis_url,
)

NO_ENV: dict[str, str] = {}


def parse(url: str, environ: dict[str, str] = NO_ENV) -> RedisAddress:
    return parse_redis_url(url, environ)


class ParseTests(SynchronousTestCase):
    """
    The URL forms and their defaults.
    """

    def test_tcp(self) -> None:
        """
        C{redis://HOST[:PORT][/DB]}: the port defaults to 6379, the database
        to 0; IPv6 literals go in brackets.
        """
        self.assertEqual(parse("redis://cache.example:7000/3"),
                         RedisAddress(host="cache.example", port=7000, db=3))
        self.assertEqual(parse("redis://cache.example"),
                         RedisAddress(host="cache.example", port=DEFAULT_PORT, db=0))
        self.assertEqual(parse("redis://cache.example/"), parse("redis://cache.example"))
        self.assertEqual(parse("REDIS://[::1]:6380/1"), RedisAddress(host="::1", port=6380, db=1))

    def test_tls(self) -> None:
        """
        C{rediss://} is TLS, optionally with a CA file.
        """
        self.assertEqual(parse("rediss://r.example:6380/0?ca=/etc/nfltr/redis-ca.pem"),
                         RedisAddress(host="r.example", port=6380, tls=True,
                                      ca_file="/etc/nfltr/redis-ca.pem"))
        self.assertEqual(parse("rediss://r.example"),
                         RedisAddress(host="r.example", port=DEFAULT_PORT, tls=True))

    def test_unix(self) -> None:
        """
        C{redis+unix:///PATH?db=N} and C{unix:///PATH?db=N} name a unix
        socket.
        """
        expected = RedisAddress(path="/run/redis/redis.sock", db=2)
        self.assertEqual(parse("redis+unix:///run/redis/redis.sock?db=2"), expected)
        self.assertEqual(parse("unix:///run/redis/redis.sock?db=2"), expected)
        self.assertEqual(parse("unix:///run/redis.sock"), RedisAddress(path="/run/redis.sock"))

    def test_unixPathTooLong(self) -> None:
        """
        A socket path longer than the kernel takes is refused when the URL is read (connecting
        to it would raise an error without an errno, which Twisted cannot report).
        """
        longest = "/" + "a" * (MAX_UNIX_PATH - 1)
        self.assertEqual(parse(f"unix://{longest}"), RedisAddress(path=longest))
        with self.assertRaises(InvalidRedisURL) as caught:
            parse(f"unix://{longest}a")
        self.assertIn("at most 107 bytes", str(caught.exception))

    def test_password(self) -> None:
        """
        The password comes from the user information (percent-decoded; a
        lone field is the password, as for redis-cli), else from
        L{PASSWORD_ENV}; it is in neither C{repr} nor C{describe()}.
        """
        address = parse("redis://nfltr:p%40ss%3Aw0rd@h:1/0")
        self.assertEqual((address.username, address.password), ("nfltr", "p@ss:w0rd"))
        self.assertEqual(parse("redis://:only@h").password, "only")
        self.assertEqual(parse("redis://only@h").password, "only")
        self.assertEqual(parse("redis+unix://:pw@/s.sock").password, "pw")
        self.assertEqual(parse("redis://h", {PASSWORD_ENV: "fromenv"}).password, "fromenv")
        self.assertEqual(parse("redis://:url@h", {PASSWORD_ENV: "fromenv"}).password, "url")
        self.assertIsNone(parse("redis://h").password)
        self.assertNotIn("w0rd", repr(address))
        self.assertNotIn("w0rd", address.describe())
        self.assertEqual(address.describe(), "redis://h:1/0")

    def test_describe(self) -> None:
        """
        C{describe()} reads as a URL of the same place.
        """
        for url in ("redis://h:1/2", "rediss://h:6379/0", "redis+unix:///s.sock?db=3",
                    "redis://[::1]:6379/0"):
            self.assertEqual(parse(parse(url).describe()).describe(), url)

    def test_malformed(self) -> None:
        """
        Each malformed URL is refused with L{InvalidRedisURL} (a
        L{StoreError}) saying what is wrong, and never quoting a password.
        """
        cases = {
            "http://h": "unknown Redis URL scheme",
            "redis://": "needs a host",
            "redis://h:0": "1 to 65535",
            "redis://h:99999": "malformed Redis URL",
            "redis://h:port": "malformed Redis URL",
            "redis://h/x": "database number",
            "redis://h/1/2": "database number",
            "redis://h/01": "database number",
            "redis://h?db=1": "in the path",
            "redis://h?ca=/x": "ca= is for TLS",
            "rediss://h?ca=": "ca= needs",
            "redis://h#frag": "no #fragment",
            "redis://h?x=1": "unknown Redis URL option(s): x",
            "rediss://h?ca=a&ca=b": "given twice",
            "redis+unix://host/s.sock": "has no host",
            "redis+unix://": "absolute path",
            "unix:///dir/": "absolute path",
            "unix:///s.sock?db=x": "db= is a database number",
            "unix:///s.sock?db=-1": "db= is a database number",
            "redis://h/99999999999": "database number",
            "redis://h/9999999999": "too large",
            "redis://h x": "no spaces",
            "redis://:sec ret@h": "no spaces",
            "redis://h?&&": "malformed query",
            "x" * 5000: "at most 4096",
        }
        for url, message in cases.items():
            error = self.assertRaises(InvalidRedisURL, parse, url)
            self.assertIsInstance(error, StoreError)
            self.assertIn(message, str(error), url)
        error = self.assertRaises(InvalidRedisURL, parse, "redis://:hunter2@h:bad")
        self.assertNotIn("hunter2", str(error))


_hosts = st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10}){0,3}", fullmatch=True)
_paths = st.from_regex(r"(/[A-Za-z0-9._-]{1,12}){1,4}", fullmatch=True)
_passwords = st.none() | st.text(min_size=1, max_size=30)


class PropertyTests(SynchronousTestCase):
    """
    Hypothesis over the parser.
    """

    @given(st.text(max_size=300))
    def test_anyText(self, text: str) -> None:
        """
        Whatever the text, the parser returns an address or raises
        L{InvalidRedisURL}, nothing else.
        """
        with contextlib.suppress(InvalidRedisURL):
            parse(text)

    @given(st.sampled_from(["redis", "rediss"]), _hosts, st.integers(1, 65535),
           st.integers(0, 10**6), _passwords)
    def test_tcpRoundTrip(self, scheme: str, host: str, port: int, db: int,
                          password: str | None) -> None:
        """
        A URL built from its parts parses back to them, the password
        percent-encoded in the URL and intact in the address, absent from
        C{describe()}.
        """
        auth = f":{quote(password, safe='')}@" if password else ""
        address = parse(f"{scheme}://{auth}{host}:{port}/{db}")
        self.assertEqual(address, RedisAddress(host=host, port=port, db=db,
                                               tls=scheme == "rediss", password=password))
        self.assertEqual(address.describe(), f"{scheme}://{host}:{port}/{db}")

    @given(st.sampled_from(["redis+unix", "unix"]), _paths, st.integers(0, 10**6), _passwords)
    def test_unixRoundTrip(self, scheme: str, path: str, db: int, password: str | None) -> None:
        """
        Likewise for unix socket URLs.
        """
        auth = f":{quote(password, safe='')}@" if password else ""
        address = parse(f"{scheme}://{auth}{path}?db={db}")
        self.assertEqual(address, RedisAddress(path=path, db=db, password=password))
        self.assertEqual(parse(address.describe()), RedisAddress(path=path, db=db))
