# -*- test-case-name: tests.wire.test_udp -*-
"""
Tests for L{nfltr.wire.udp}.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire.messages import MessageError
from nfltr.wire.udp import (
    MAX_UDP_SHARES,
    parse_udp_ports,
    parse_udp_target,
    udp_declaration,
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
                       "udp:123456", "udp:-1"]:
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
        Declared ports are read back; no list is no port.
        """
        self.assertEqual(parse_udp_ports(udp_declaration([53, 5353])), frozenset({53, 5353}))
        self.assertEqual(parse_udp_ports([]), frozenset())

    def test_refused(self) -> None:
        """
        Bad lists are refused with a message: not a list, too long, bad or
        repeated ports, unknown keys.
        """
        for raw in ["53", [{"port": 0}], [{"port": "53"}], [{"port": 53}, {"port": 53}],
                    [{"port": 53, "e2ee": True}], [53],
                    [{"port": p} for p in range(1, MAX_UDP_SHARES + 2)]]:
            self.assertRaises(MessageError, parse_udp_ports, raw)
