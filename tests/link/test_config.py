"""
Tests for L{nfltr.link.LinkConfig}: defaults and validation at creation.
"""

from __future__ import annotations

import dataclasses

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import DEFAULT_KEEPALIVE, MAX_PAYLOAD, PRESETS, LinkConfig
from nfltr.link._config import MAX_SESSIONS_LIMIT, MAX_WINDOW, MIN_WINDOW


class DefaultTests(SynchronousTestCase):
    """
    The defaults and the derived limits.
    """

    def test_defaults(self) -> None:
        """
        512 KiB window, 1024 sessions, default keepalive, 10 s handshake, 20
        PINGs a second.
        """
        config = LinkConfig()
        self.assertEqual(
            (config.session_window, config.max_sessions, config.keepalive,
             config.handshake_timeout, config.ping_rate),
            (512 * 1024, 1024, DEFAULT_KEEPALIVE, 10.0, 20.0),
        )

    def test_default_budget(self) -> None:
        """
        The default budget is window times sessions, capped at 256 MiB.
        """
        self.assertEqual(LinkConfig(session_window=4096, max_sessions=10).budget, 40960)
        self.assertEqual(LinkConfig().budget, 64 << 20)

    def test_default_budget_never_below_window(self) -> None:
        """
        A window over 256 MiB is valid on its own: the default budget is
        then the window, not a confusing error about a budget not given.
        """
        config = LinkConfig(session_window=300 << 20)
        self.assertEqual(config.budget, 300 << 20)
        self.assertEqual(LinkConfig(session_window=MAX_WINDOW).budget, MAX_WINDOW)

    def test_explicit_budget(self) -> None:
        """
        A given budget is used as is.
        """
        self.assertEqual(LinkConfig(session_window=4096, connection_budget=5000).budget, 5000)

    def test_high_water(self) -> None:
        """
        The send high-water mark defaults to the session window.
        """
        self.assertEqual(LinkConfig(session_window=8192).high_water, 8192)
        self.assertEqual(LinkConfig(send_high_water=MAX_PAYLOAD).high_water, MAX_PAYLOAD)

    def test_frozen(self) -> None:
        """
        A config cannot be changed after validation.
        """
        config = LinkConfig()
        self.assertRaises(
            dataclasses.FrozenInstanceError, setattr, config, "session_window", 1
        )

    def test_keepalive(self) -> None:
        """
        Any preset can be chosen.
        """
        self.assertIs(LinkConfig(keepalive=PRESETS["nat"]).keepalive, PRESETS["nat"])


class ValidationTests(SynchronousTestCase):
    """
    Values outside the protocol's bounds are refused at creation.
    """

    def test_bounds_accepted(self) -> None:
        """
        Every bound itself is valid.
        """
        LinkConfig(session_window=MIN_WINDOW, max_sessions=1)
        LinkConfig(session_window=MAX_WINDOW, connection_budget=MAX_WINDOW)
        LinkConfig(max_sessions=MAX_SESSIONS_LIMIT)
        LinkConfig(handshake_timeout=300, ping_rate=1000)

    def test_out_of_bounds(self) -> None:
        """
        Each field just past its bound is a ValueError naming the field.
        """
        for kwargs, name in [
            ({"session_window": MIN_WINDOW - 1}, "session_window"),
            ({"session_window": MAX_WINDOW + 1}, "session_window"),
            ({"max_sessions": 0}, "max_sessions"),
            ({"max_sessions": MAX_SESSIONS_LIMIT + 1}, "max_sessions"),
            ({"session_window": 8192, "connection_budget": 8191}, "connection_budget"),
            ({"connection_budget": MAX_WINDOW + 1}, "connection_budget"),
            ({"send_high_water": MAX_PAYLOAD - 1}, "send_high_water"),
            ({"handshake_timeout": 0}, "handshake_timeout"),
            ({"handshake_timeout": 300.5}, "handshake_timeout"),
            ({"handshake_timeout": float("nan")}, "handshake_timeout"),
            ({"ping_rate": 0}, "ping_rate"),
            ({"ping_rate": 1001}, "ping_rate"),
        ]:
            e = self.assertRaises(ValueError, LinkConfig, **kwargs)
            self.assertIn(name, str(e), kwargs)

    def test_integers_only(self) -> None:
        """
        Byte counts and the session limit must be integers (not floats, not
        booleans): the hello carries them and the peer accepts only integers.
        """
        for kwargs, name in [
            ({"session_window": 65536.0}, "session_window"),
            ({"session_window": 65536.5}, "session_window"),
            ({"connection_budget": float(1 << 24)}, "connection_budget"),
            ({"max_sessions": 10.0}, "max_sessions"),
            ({"max_sessions": True}, "max_sessions"),
            ({"send_high_water": 1e6}, "send_high_water"),
        ]:
            e = self.assertRaises(ValueError, LinkConfig, **kwargs)
            self.assertIn(name, str(e), kwargs)


class BoundsTests(SynchronousTestCase):
    """
    The limits on what a link holds for its peer: defaults, validation and
    the reply bound in force.
    """

    def test_defaults(self) -> None:
        """
        16 MiB of session queues, 1 MiB of unread answers, 10 s for them.
        """
        config = LinkConfig()
        self.assertEqual(
            (config.send_queue_limit, config.reply_limit, config.unread_timeout),
            (16 << 20, 1 << 20, 10.0),
        )

    def test_none(self) -> None:
        """
        L{None} is no limit: a queue bound no queue reaches, no reply bound.
        """
        config = LinkConfig(send_queue_limit=None, reply_limit=None)
        self.assertGreater(config.queue_limit, 1 << 40)
        self.assertIsNone(config.reply_bound(4096))

    def test_invalid(self) -> None:
        """
        Below one frame, above 2**30, not an integer, or a timeout outside
        (0, 300]: a ValueError naming the field.
        """
        for kwargs, name in [
            ({"send_queue_limit": MAX_PAYLOAD - 1}, "send_queue_limit"),
            ({"send_queue_limit": MAX_WINDOW + 1}, "send_queue_limit"),
            ({"send_queue_limit": 1e7}, "send_queue_limit"),
            ({"reply_limit": 100}, "reply_limit"),
            ({"reply_limit": True}, "reply_limit"),
            ({"unread_timeout": 0}, "unread_timeout"),
            ({"unread_timeout": 301}, "unread_timeout"),
            ({"unread_timeout": float("nan")}, "unread_timeout"),
        ]:
            e = self.assertRaises(ValueError, LinkConfig, **kwargs)
            self.assertIn(name, str(e), kwargs)

    def test_replyBoundNeverBelowWindowTraffic(self) -> None:
        """
        The reply bound in force is the reply limit, raised to 128 bytes per
        window of budget when the window in force is small (what DATA within
        credit can provoke must never stop reading).
        """
        config = LinkConfig(reply_limit=MAX_PAYLOAD)
        self.assertEqual(config.reply_bound(512 * 1024), MAX_PAYLOAD)
        self.assertEqual(config.reply_bound(1024), 128 * (64 << 20) // 1024)
