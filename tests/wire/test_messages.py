"""
Tests for L{nfltr.wire.messages}: hellos, answers and targets.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import RefusalReason, refusal
from nfltr.wire import messages as m


class HelloTests(SynchronousTestCase):
    """
    Dialer hellos built by agents and clients parse on the relay.
    """

    def test_agentRoundTrip(self) -> None:
        """
        An agent hello parses back to its role, key, name and shares.
        """
        app = m.agent_hello("k", "web-1", [m.TcpShare(3000), m.TcpShare(22, e2ee=False)])
        hello = m.parse_dialer_hello(app)
        self.assertEqual(hello.role, m.AGENT)
        self.assertEqual(hello.key, "k")
        self.assertEqual(hello.name, "web-1")
        self.assertEqual(hello.tcp, (m.TcpShare(3000, True), m.TcpShare(22, False)))

    def test_clientRoundTrip(self) -> None:
        """
        A client hello parses with no name and no shares.
        """
        hello = m.parse_dialer_hello(m.client_hello("k"))
        self.assertEqual((hello.role, hello.name, hello.tcp), (m.CLIENT, None, ()))

    def test_rejections(self) -> None:
        """
        Each malformed field is refused with a message naming it and never
        echoing the key.
        """
        good = m.agent_hello("secret-key", "a", [m.TcpShare(1)])
        cases = {
            "role": {**good, "role": "admin"},
            "API key": {**good, "key": ""},
            "agent name": {**good, "name": "Bad_Name"},
            "port": {**good, "tcp": [{"port": 0, "e2ee": True}]},
            "e2ee": {**good, "tcp": [{"port": 1, "e2ee": "yes"}]},
            "twice": {**good, "tcp": [{"port": 1}, {"port": 1}]},
            "list": {**good, "tcp": [{"port": 1}] * (m.MAX_SHARES + 1)},
        }
        for word, app in cases.items():
            with self.assertRaises(m.MessageError) as caught:
                m.parse_dialer_hello(app)
            self.assertIn(word, str(caught.exception))
            self.assertNotIn("secret-key", str(caught.exception))

    def test_refusalText(self) -> None:
        """
        A refusal reads back to its reason and text; an unknown reason is
        kept as text with no reason.
        """
        self.assertEqual(
            m.refusal_text(refusal(RefusalReason.REVOKED, "gone")), (RefusalReason.REVOKED, "gone")
        )
        self.assertEqual(m.refusal_text({"reason": "new", "message": 3}), (None, "refused"))


class TargetTests(SynchronousTestCase):
    """
    Session targets round-trip and reject anything else.
    """

    @given(
        st.from_regex(m.NAME_PATTERN, fullmatch=True), st.integers(min_value=1, max_value=65535)
    )
    def test_clientTargetRoundTrip(self, name: str, port: int) -> None:
        """
        Every valid agent name and port survives client_target and back.
        """
        self.assertEqual(m.parse_client_target(m.client_target(name, port)), (name, port))
        self.assertEqual(m.parse_agent_target(m.agent_target(port)), port)

    def test_badTargets(self) -> None:
        """
        Malformed targets raise MessageError.
        """
        for target in ["", "tcp:", "udp:a:1", "tcp:a:", "tcp:a:0", "tcp:a:70000", "tcp::1",
                       "tcp:A:1", "tcp:a:-1"]:
            self.assertRaises(m.MessageError, m.parse_client_target, target)
        for target in ["", "tcp:", "tcp:x", "http:80", "tcp:0"]:
            self.assertRaises(m.MessageError, m.parse_agent_target, target)

    def test_names(self) -> None:
        """
        Names are DNS labels: lower case, digits, inner hyphens, 1-63 long.
        """
        for ok in ["a", "a-b", "web1", "x" * 63]:
            self.assertEqual(m.check_name(ok), ok)
        for bad in ["", "-a", "a-", "A", "a_b", "x" * 64, "a.b", None]:
            self.assertRaises(m.MessageError, m.check_name, bad)

    def test_noTrailingNewline(self) -> None:
        """
        A name, or a data token, ending in a line break is refused: C{$} would have let
        C{"blog\\n"} through (a share URL with a line break, split log lines).
        """
        for bad in ["blog\n", "a\n", "\nblog"]:
            self.assertRaises(m.MessageError, m.check_name, bad)
            self.assertRaises(m.MessageError, m.parse_client_target, f"tcp:{bad}:80")
        hello = {"role": "data", "key": "k", "token": "0" * 32 + "\n"}
        self.assertRaises(m.MessageError, m.parse_dialer_hello, hello)

    def test_portsAreAsciiDigits(self) -> None:
        """
        A target's port is 1 to 5 ASCII digits: C{"\u00b2"} passes C{str.isdigit} and fails
        C{int} (it used to escape as a ValueError), and other scripts' digits are not ports.
        """
        for port in ["\u00b2", "\u0663", "\uff18\uff10", " 80", "80 ", "+80", "080000"]:
            self.assertRaises(m.MessageError, m.parse_client_target, f"tcp:web:{port}")
            self.assertRaises(m.MessageError, m.parse_agent_target, f"tcp:{port}")
            self.assertRaises(m.MessageError, m.parse_port, port)
        self.assertEqual(m.parse_port("8080"), 8080)
        self.assertEqual(m.parse_port(443), 443)

    def test_badTargetNamedSafely(self) -> None:
        """
        The error for a bad target shows it as one short printable line.
        """
        e = self.assertRaises(m.MessageError, m.parse_client_target, "tcp:\n" + "x" * 5000)
        self.assertNotIn("\n", str(e))
        self.assertLess(len(str(e)), 300)

    def test_badFieldsNamedSafely(self) -> None:
        """
        A bad name (in a target or a hello), port or share mode is named in
        the error as one short printable line (through peerText), never as
        a Python repr of whatever length the peer sent.
        """
        long = "\x1b[31m\n" + "x" * 5000
        errors = [
            self.assertRaises(m.MessageError, m.parse_client_target, f"tcp:{long}:80"),
            self.assertRaises(m.MessageError, m.parse_dialer_hello,
                              {**m.agent_hello("k", "a", []), "name": long}),
            self.assertRaises(m.MessageError, m.parse_dialer_hello,
                              {**m.agent_hello("k", "a", []), "tcp": [{"port": long}]}),
            self.assertRaises(m.MessageError, m.parse_http_shares,
                              [{"name": "blog", "port": 80, "mode": long}]),
        ]
        for e in errors:
            self.assertNotIn("\n", str(e))
            self.assertNotIn("\x1b", str(e))
            self.assertLess(len(str(e)), 400)


class HttpShareTests(SynchronousTestCase):
    """
    Share URLs in an agent's hello, and share targets.
    """

    def test_roundTrip(self) -> None:
        """
        Each mode round-trips; an e2ee share carries its signing request.
        """
        shares = [m.HttpShare("blog", 3000, m.E2EE, "PEM"), m.HttpShare("shop", 8000, m.INSPECT)]
        hello = m.parse_dialer_hello(m.agent_hello("k", "web", [], shares))
        self.assertEqual(hello.http, tuple(shares))

    def test_h2cHost(self) -> None:
        """
        An inspect share whose service speaks h2c says so with the
        C{:authority} to send (empty: the visitor's); it round-trips, and
        is refused on other modes, with plain HTTP, or not a host.
        """
        shares = [m.HttpShare("rpc", 50051, m.INSPECT, h2c_host="localhost:50051"),
                  m.HttpShare("any", 50052, m.INSPECT, h2c_host="")]
        hello = m.parse_dialer_hello(m.agent_hello("k", "web", [], shares))
        self.assertEqual(hello.http, tuple(shares))
        for bad in ({"mode": "passthrough", "h2c_host": ""},
                    {"mode": "inspect", "plain": True, "h2c_host": ""},
                    {"mode": "inspect", "h2c_host": "a b"},
                    {"mode": "inspect", "h2c_host": 5}):
            self.assertRaises(m.MessageError, m.parse_http_shares,
                              [{"name": "rpc", "port": 1, **bad}])

    def test_rejections(self) -> None:
        """
        Bad names, ports, modes, a missing or superfluous request, a name
        given twice, and too many shares are refused with L{m.MessageError}.
        """
        bad = [
            [{"name": "Blog", "port": 1, "mode": "inspect"}],
            [{"name": "blog", "port": 0, "mode": "inspect"}],
            [{"name": "blog", "port": 1, "mode": "sniff"}],
            [{"name": "blog", "port": 1, "mode": "e2ee"}],
            [{"name": "blog", "port": 1, "mode": "inspect", "csr": "PEM"}],
            [{"name": "blog", "port": 1, "mode": "inspect"}] * 2,
            [{"name": f"n{i}", "port": 1, "mode": "inspect"} for i in range(m.MAX_HTTP_SHARES + 1)],
            "blog",
            ["blog"],
        ]
        for http in bad:
            app = m.agent_hello("k", "web", [])
            app["http"] = http
            self.assertRaises(m.MessageError, m.parse_dialer_hello, app)

    def test_targets(self) -> None:
        """
        A share target carries the share's name and the visitor's address,
        an IPv6 one included; other targets are not share targets.
        """
        self.assertEqual(
            m.parse_share_target(m.share_target("blog", "[2001:db8::1]:443")),
            ("blog", "[2001:db8::1]:443"),
        )
        self.assertEqual(m.parse_share_target("share:blog"), ("blog", ""))
        self.assertIsNone(m.parse_share_target("tcp:3000"))
        self.assertRaises(m.MessageError, m.parse_share_target, "share:Bad@x")
