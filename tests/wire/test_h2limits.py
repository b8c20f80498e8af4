"""
Tests for L{nfltr.wire.h2limits}: the HTTP/2 limits, and how the agent
(C{nfltr http --h2-limits}, C{--service-protocol}) and the relay
(C{--h2-limits}) take them.
"""

from __future__ import annotations

from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import ConfigError, http_option
from nfltr.relay_tap import Options
from nfltr.wire.h2limits import DEFAULT_H2_LIMITS, H2Limits, parse_h2_limits


class ParseTests(SynchronousTestCase):
    """
    L{parse_h2_limits}.
    """

    def test_named(self) -> None:
        """
        Each name is a limit's with dashes; those not named keep their
        defaults.
        """
        limits = parse_h2_limits(" max-concurrent-streams=50, rate-window=2.5,service-streams=8")
        self.assertEqual(limits, H2Limits(max_concurrent_streams=50, rate_window=2.5,
                                          service_streams=8))
        self.assertEqual(parse_h2_limits(""), DEFAULT_H2_LIMITS)

    def test_windowsAndIdleTimeout(self) -> None:
        """
        The connection's window is a size; the h2c pool's idle timeout is
        seconds, or C{none} for no timeout.
        """
        limits = parse_h2_limits("connection-window=8388608,service-idle-timeout=2.5")
        self.assertEqual((limits.connection_window, limits.service_idle_timeout),
                         (8 * 1024 * 1024, 2.5))
        self.assertIsNone(parse_h2_limits("service-idle-timeout=None").service_idle_timeout)

    def test_refused(self) -> None:
        """
        An unknown name, a pair without a value, a value that is no number
        or out of range: refused, naming it.
        """
        for text, said in (("max-streams=5", "max-streams=5"), ("max-resets", "max-resets"),
                           ("max-resets=lots", "max-resets=lots"),
                           ("max-resets=0", "max-resets must be a positive integer"),
                           ("initial-window=2147483648", "initial-window must be at most"),
                           ("connection-window=1000", "connection-window must be at least"),
                           ("service-idle-timeout=0", "service-idle-timeout must be positive")):
            with self.assertRaises(ValueError) as caught:
                parse_h2_limits(text)
            self.assertIn(said, str(caught.exception))


class AgentOptionTests(SynchronousTestCase):
    """
    C{nfltr http}'s C{--h2-limits} and C{--service-protocol}.
    """

    def test_limits(self) -> None:
        """
        An e2ee share takes its limits; an inspect share's are the relay's.
        """
        option = http_option(3000, {"h2-limits": "max-resets=7"}, {})
        self.assertEqual(option.h2_limits.max_resets, 7)
        self.assertRaises(ConfigError, http_option, 3000,
                          {"mode": "inspect", "h2-limits": "max-resets=7"}, {})
        self.assertRaises(ConfigError, http_option, 3000, {"h2-limits": "nope=1"}, {})

    def test_serviceProtocol(self) -> None:
        """
        C{http1} by default; C{h2c} for e2ee and inspect, not passthrough nor
        with plain HTTP; any other value refused.
        """
        self.assertEqual(http_option(3000, {}, {}).service_protocol, "http1")
        for mode in ("e2ee", "inspect"):
            option = http_option(3000, {"service-protocol": "h2c", "mode": mode}, {})
            self.assertEqual(option.service_protocol, "h2c")
        for values in ({"service-protocol": "h2"},
                       {"service-protocol": "h2c", "mode": "passthrough"},
                       {"service-protocol": "h2c", "plain-http": "true"}):
            self.assertRaises(ConfigError, http_option, 3000, values, {})


class RelayOptionTests(SynchronousTestCase):
    """
    The relay's C{--h2-limits}.
    """

    def test_option(self) -> None:
        """
        It sets the limits of inspect shares; a bad one is a usage error.
        """
        options = Options()
        options.parseOptions(["--data-dir", "/d", "--h2-limits", "max-control-frames=9"])
        assert options.config is not None
        self.assertEqual(options.config.h2_limits.max_control_frames, 9)
        default = Options()
        default.parseOptions(["--data-dir", "/d"])
        assert default.config is not None
        self.assertEqual(default.config.h2_limits, DEFAULT_H2_LIMITS)
        self.assertRaises(usage.UsageError, Options().parseOptions,
                          ["--data-dir", "/d", "--h2-limits", "max-control-frames=0"])
