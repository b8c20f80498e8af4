"""
Tests for L{nfltr.wire.health}.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire.health import FEATURE, GROUPS_FEATURE, HEALTH, health_message, parse_health
from nfltr.wire.messages import AGENT_FEATURES, MessageError, agent_hello, parse_dialer_hello


class HealthMessageTests(SynchronousTestCase):
    """
    The C{health} message and the C{group} of a hello.
    """

    def test_roundTrip(self) -> None:
        """
        What an agent sends, the relay reads back; both features are listed.
        """
        for healthy in (True, False):
            message = health_message(healthy)
            self.assertEqual(message["type"], HEALTH)
            self.assertIs(parse_health(message), healthy)
        self.assertIn(FEATURE, AGENT_FEATURES)
        self.assertIn(GROUPS_FEATURE, AGENT_FEATURES)

    @given(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.booleans())))
    def test_malformed(self, value: object) -> None:
        """
        A C{healthy} that is not a boolean is refused with L{MessageError}.
        """
        self.assertRaises(MessageError, parse_health, {"type": HEALTH, "healthy": value})

    def test_group(self) -> None:
        """
        A hello's group travels and is checked as a name; without one, none.
        """
        hello = parse_dialer_hello(agent_hello("k", "web", [], group="blue"))
        self.assertEqual(hello.group, "blue")
        self.assertIsNone(parse_dialer_hello(agent_hello("k", "web", [])).group)
        app = agent_hello("k", "web", [])
        app["group"] = "Not A Name"
        self.assertRaises(MessageError, parse_dialer_hello, app)
