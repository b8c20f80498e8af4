"""
Tests for L{nfltr.ssh._config}: the SSH listener's limits, and the relay's
C{--ssh-...} options that set them (L{nfltr.relay_tap}).
"""

from __future__ import annotations

from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay_tap import Options
from nfltr.ssh import SSHConfig, SSHConfigError


def parse(*argv: str) -> Options:
    options = Options()
    options.parseOptions(["--data-dir", "/nonexistent/relay", *argv])
    return options


class SSHConfigTests(SynchronousTestCase):
    """
    L{SSHConfig} checks each limit's range.
    """

    def test_refusalLimits(self) -> None:
        """
        C{max_refusals} is a positive integer or L{None} (no limit);
        C{max_status_lines} a positive integer.
        """
        self.assertIsNone(SSHConfig(max_refusals=None).max_refusals)
        for bad in ({"max_refusals": 0}, {"max_refusals": 1.5}, {"max_status_lines": 0},
                    {"max_status_lines": None}):
            self.assertRaises(SSHConfigError, SSHConfig, **bad)


class SSHOptionsTests(SynchronousTestCase):
    """
    The relay's C{--ssh-...} options build its L{SSHConfig}.
    """

    def test_defaults(self) -> None:
        """
        Without the options, the defaults.
        """
        config = parse().config
        assert config is not None
        self.assertEqual(config.ssh_config, SSHConfig())

    def test_refusals(self) -> None:
        """
        C{--ssh-max-refusals} (C{none}: no limit) and
        C{--ssh-max-status-lines} set the refusal limits.
        """
        config = parse("--ssh-max-refusals", "10", "--ssh-max-status-lines", "20").config
        assert config is not None
        self.assertEqual((config.ssh_config.max_refusals, config.ssh_config.max_status_lines),
                         (10, 20))
        config = parse("--ssh-max-refusals", "none").config
        assert config is not None
        self.assertIsNone(config.ssh_config.max_refusals)
        for bad in (("--ssh-max-refusals", "0"), ("--ssh-max-status-lines", "none"),
                    ("--ssh-max-status-lines", "100000")):
            self.assertRaises(usage.UsageError, parse, *bad)

    def test_openTimeout(self) -> None:
        """
        C{--ssh-open-timeout} sets how long an agent has to accept a C{-L}/C{-W}
        channel (15 s by default); 0 and over an hour are refused.
        """
        self.assertEqual(SSHConfig().open_timeout, 15.0)
        config = parse("--ssh-open-timeout", "5").config
        assert config is not None
        self.assertEqual(config.ssh_config.open_timeout, 5.0)
        for bad in ("0", "3601"):
            self.assertRaises(usage.UsageError, parse, "--ssh-open-timeout", bad)
