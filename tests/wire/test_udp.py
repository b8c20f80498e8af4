# -*- test-case-name: tests.wire.test_udp -*-
"""
Tests for L{nfltr.wire.udp}.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire.messages import MessageError
from nfltr.wire.policy import parse_networks
from nfltr.wire.udp import (
    MAX_UDP_SHARES,
    UdpShare,
    parse_udp_shares,
    parse_udp_target,
    udp_target,
)


class TargetTests(SynchronousTestCase):
    """
    The datagram sessions' targets.
    """

    def test_forms(self) -> None:
        """
        C{udp:<port>} and C{udp:<agent>:<port>} are written and read back.
        """
        self.assertEqual(udp_target(53), "udp:53")
        self.assertEqual(udp_target(53, "dns"), "udp:dns:53")
        self.assertEqual(parse_udp_target("udp:53"), (None, 53))
        self.assertEqual(parse_udp_target("udp:dns:53"), ("dns", 53))

    def test_refused(self) -> None:
        """
        Other targets and out-of-range ports are not datagram targets.
        """
        for target in ["tcp:53", "udp:", "udp:0", "udp:65536", "udp:x", "udp::53", "udp:a:b",
                       "udp:123456", "udp:-1", "udp:053", "udp:dns:0053"]:
            self.assertIsNone(parse_udp_target(target), target)
        self.assertRaises(ValueError, udp_target, 0)

    @given(st.from_regex(r"[a-z0-9-]{1,20}", fullmatch=True), st.integers(1, 65535))
    def test_roundTrip(self, agent: str, port: int) -> None:
        """
        Every agent name and port comes back from its target.
        """
        self.assertEqual(parse_udp_target(udp_target(port, agent)), (agent, port))


class DeclarationTests(SynchronousTestCase):
    """
    The C{udp} list of an agent's hello.
    """

    def test_roundTrip(self) -> None:
        """
        Declared shares are read back, public port and allow list included;
        no list is no share.
        """
        shares = (UdpShare(53), UdpShare(5353, 0), UdpShare(123, 20123, parse_networks(["::1"])))
        self.assertEqual(parse_udp_shares([s.to_json() for s in shares]), shares)
        self.assertEqual(shares[0].to_json(), {"port": 53})
        self.assertEqual(parse_udp_shares([]), ())

    def test_refused(self) -> None:
        """
        Bad lists are refused with a message: not a list, too long, bad or
        repeated ports, bad public ports or networks, unknown keys.
        """
        for raw in ["53", [{"port": 0}], [{"port": "53"}], [{"port": 53}, {"port": 53}],
                    [{"port": 53, "e2ee": True}], [53], [{"port": 53, "public_port": -1}],
                    [{"port": 53, "allow": ["nope"]}],
                    [{"port": p} for p in range(1, MAX_UDP_SHARES + 2)]]:
            self.assertRaises(MessageError, parse_udp_shares, raw)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 70000) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["port", "public_port", "allow", "x"]), inner, max_size=4),
    max_leaves=12,
)


class FuzzTests(SynchronousTestCase):
    """
    The parsers take anything a peer sends.
    """

    @given(_json)
    def test_sharesAnyInput(self, raw: object) -> None:
        """
        Any JSON value is a valid C{udp} list or a L{MessageError}, never
        another error; what is valid round-trips.
        """
        try:
            shares = parse_udp_shares(raw)
        except MessageError:
            return
        self.assertEqual(parse_udp_shares([share.to_json() for share in shares]), shares)

    @given(st.text(max_size=30))
    def test_targetAnyText(self, text: str) -> None:
        """
        Any text is a datagram target or not, never an error; one that is
        is written back the same.
        """
        parsed = parse_udp_target(text)
        if parsed is not None:
            agent, port = parsed
            self.assertEqual(udp_target(port, agent), text)
