"""
Tests for what L{nfltr.wire.messages} says about public ports: the C{tcp}
entries that ask for one, and the targets of their visitors' sessions.
"""

from __future__ import annotations

import contextlib
import ipaddress
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire.messages import (
    INSPECT,
    HttpShare,
    MessageError,
    TcpShare,
    agent_target,
    http_target,
    parse_addressed_target,
    parse_http_shares,
    parse_public_target,
    parse_tcp_share,
    public_target,
    welcome,
)

ports = st.integers(1, 65535)
visitors = st.builds(lambda ip, port: f"{ip}:{port}", st.ip_addresses(v=4), ports)


class TcpShareTests(SynchronousTestCase):
    """
    L{TcpShare} with a public port, as the hello carries it.
    """

    @given(ports, st.booleans(), st.none() | st.just(0) | ports,
           st.lists(st.ip_addresses(v=4), max_size=3), st.booleans())
    def test_roundTrip(self, port: int, e2ee: bool, public: int | None, allow: list[Any],
                       addressed: bool) -> None:
        """
        A share read back from its JSON is the same share.
        """
        networks = tuple(ipaddress.ip_network(a) for a in allow)
        share = TcpShare(port, e2ee, public, networks, addressed)
        self.assertEqual(parse_tcp_share(share.to_json()), share)

    def test_plainOld(self) -> None:
        """
        A share without a public port travels as before.
        """
        self.assertEqual(TcpShare(22).to_json(), {"port": 22, "e2ee": True})

    @given(st.one_of(st.text(), st.floats(), st.booleans(), st.integers(-10, -1),
                     st.integers(65536, 10**9), st.lists(st.integers())))
    def test_badPublicPort(self, public: Any) -> None:
        """
        Anything but a port or 0 is refused.
        """
        with self.assertRaises(MessageError):
            parse_tcp_share({"port": 1, "public_port": public})

    def test_badAllow(self) -> None:
        """
        An allow list that is not networks is refused.
        """
        with self.assertRaises(MessageError):
            parse_tcp_share({"port": 1, "public_port": 0, "allow": ["nope"]})


class TargetTests(SynchronousTestCase):
    """
    L{public_target} and L{parse_public_target}.
    """

    @given(ports, visitors)
    def test_roundTrip(self, port: int, visitor: str) -> None:
        """
        A target reads back as its port and visitor.
        """
        self.assertEqual(parse_public_target(public_target(port, visitor)), (port, visitor))

    @given(st.text(max_size=40))
    def test_anyText(self, target: str) -> None:
        """
        Any text is a public target, not one (L{None}), or a
        L{MessageError}.
        """
        with contextlib.suppress(MessageError):
            parse_public_target(target)

    @given(ports, visitors)
    def test_addressed(self, port: int, client: str) -> None:
        """
        A client's address in a C{tcp:} target reads back; without one, the
        target is a plain one.
        """
        self.assertEqual(parse_addressed_target(agent_target(port, client)), (port, client))
        self.assertIsNone(parse_addressed_target(agent_target(port)))
        self.assertIsNone(parse_addressed_target(public_target(port, client)))

    def test_httpShareAddressed(self) -> None:
        """
        An HTTP share declared C{addressed} reads back so; a flag that is
        not a boolean is refused.
        """
        share = HttpShare("blog", 80, INSPECT, addressed=True)
        self.assertEqual(parse_http_shares([share.to_json()]), (share,))
        self.assertNotIn("addressed", HttpShare("blog", 80, INSPECT).to_json())
        with self.assertRaises(MessageError):
            parse_http_shares([{**share.to_json(), "addressed": 1}])
        self.assertEqual(http_target("blog", "192.0.2.1:5"), "http:blog@192.0.2.1:5")

    def test_badAddressed(self) -> None:
        """
        A bad flag or port is refused.
        """
        with self.assertRaises(MessageError):
            parse_tcp_share({"port": 1, "addressed": "yes"})
        with self.assertRaises(MessageError):
            parse_addressed_target("tcp:x@1.2.3.4:5")

    def test_notPublic(self) -> None:
        """
        Other targets are not public ones.
        """
        self.assertIsNone(parse_public_target("tcp:22"))
        with self.assertRaises(MessageError):
            parse_public_target("public:x@1.2.3.4:5")

    def test_welcome(self) -> None:
        """
        The welcome names the public ports only when given.
        """
        self.assertNotIn("public_ports", welcome("a", "b"))
        self.assertEqual(welcome("a", "b", public_ports=[])["public_ports"], [])
