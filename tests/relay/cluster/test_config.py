"""
Tests for the replica options (C{--replica-listen}, C{--replica-address},
C{--cluster-ca}, C{--replica-links}, C{--presence-...}, C{--handover-wait}) and
L{nfltr.relay.cluster.config}.
"""

from __future__ import annotations

from pathlib import Path

from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.cluster.config import (
    DEFAULT_HANDOVER_WAIT,
    DEFAULT_PRESENCE_CACHE_ENTRIES,
    DEFAULT_PRESENCE_STALE_LIMIT,
    DEFAULT_REPLICA_LINKS,
    MAX_HANDOVER_WAIT,
    MAX_PRESENCE_STALE_LIMIT,
    MAX_REPLICA_LINKS,
    MIN_PRESENCE_TTL,
    ReplicaConfig,
    parse_address,
)
from nfltr.relay_tap import Options

REDIS = "redis://127.0.0.1:6379/0"


def parse(*argv: str) -> Options:
    options = Options()
    options.parseOptions(["--data-dir", "/nowhere", *argv])
    return options


class ReplicaOptionsTests(SynchronousTestCase):
    """
    The relay's replica options.
    """

    def test_none(self) -> None:
        """
        Without C{--replica-listen} the relay is one of its own.
        """
        config = parse().config
        assert config is not None
        self.assertIsNone(config.replica)

    def test_replica(self) -> None:
        """
        C{--replica-listen} with a directory and a cluster CA makes a
        replica, the defaults named.
        """
        config = parse("--directory", REDIS, "--replica-listen", "tcp:0:interface=127.0.0.1",
                       "--cluster-ca", "/ca").config
        assert config is not None
        self.assertEqual(config.replica, ReplicaConfig("tcp:0:interface=127.0.0.1", Path("/ca"),
                                                       None, DEFAULT_REPLICA_LINKS))

    def test_needs(self) -> None:
        """
        C{--replica-listen} without C{--directory} or C{--cluster-ca} is
        refused, naming what is missing.
        """
        with self.assertRaisesRegex(usage.UsageError, "--replica-listen needs --directory"):
            parse("--replica-listen", "tcp:0", "--cluster-ca", "/ca")
        with self.assertRaisesRegex(usage.UsageError, "needs --cluster-ca"):
            parse("--replica-listen", "tcp:0", "--directory", REDIS)

    def test_bad(self) -> None:
        """
        A bad address, link count or endpoint names its option.
        """
        for argv, option in [
            (("--replica-address", "nohost"), "--replica-address"),
            (("--replica-address", "h:70000"), "--replica-address"),
            (("--replica-links", "0"), "--replica-links"),
            (("--replica-links", str(MAX_REPLICA_LINKS + 1)), "--replica-links"),
            (("--replica-listen", "nonsense:1"), "--replica-listen"),
            (("--presence-ttl", "301"), "--presence-ttl"),
            (("--presence-stale-limit", "-1"), "--presence-stale-limit"),
            (("--presence-stale-limit", str(MAX_PRESENCE_STALE_LIMIT + 1)),
             "--presence-stale-limit"),
            (("--presence-cache-entries", "0"), "--presence-cache-entries"),
            (("--presence-cache-entries", "many"), "--presence-cache-entries"),
        ]:
            with self.assertRaisesRegex(usage.UsageError, option):
                parse(*argv)

    def test_presenceTTL(self) -> None:
        """
        C{--presence-ttl} is at least L{MIN_PRESENCE_TTL} seconds.
        """
        argv = ("--directory", REDIS, "--replica-listen", "tcp:0", "--cluster-ca", "/ca")
        config = parse(*argv, "--presence-ttl", "60").config
        assert config is not None and config.replica is not None
        self.assertEqual(config.replica.presence_ttl, 60.0)
        with self.assertRaisesRegex(usage.UsageError, "--presence-ttl 2.0: give seconds, 3 to"):
            parse(*argv, "--presence-ttl", str(MIN_PRESENCE_TTL - 1))

    def test_presenceCache(self) -> None:
        """
        C{--presence-stale-limit} (0 turns the cache off) and
        C{--presence-cache-entries} reach the replica's settings, their
        defaults named.
        """
        argv = ("--directory", REDIS, "--replica-listen", "tcp:0", "--cluster-ca", "/ca")
        config = parse(*argv).config
        assert config is not None and config.replica is not None
        self.assertEqual((config.replica.presence_stale_limit,
                          config.replica.presence_cache_entries),
                         (DEFAULT_PRESENCE_STALE_LIMIT, DEFAULT_PRESENCE_CACHE_ENTRIES))
        config = parse(*argv, "--presence-stale-limit", "0",
                       "--presence-cache-entries", "50").config
        assert config is not None and config.replica is not None
        self.assertEqual((config.replica.presence_stale_limit,
                          config.replica.presence_cache_entries), (0.0, 50))

    def test_handoverWait(self) -> None:
        """
        C{--handover-wait} is L{DEFAULT_HANDOVER_WAIT} seconds unless given,
        0 (drain at once) to L{MAX_HANDOVER_WAIT}.
        """
        argv = ("--directory", REDIS, "--replica-listen", "tcp:0", "--cluster-ca", "/ca")
        for given, wait in [((), DEFAULT_HANDOVER_WAIT), (("--handover-wait", "0"), 0.0),
                            (("--handover-wait", "12.5"), 12.5)]:
            config = parse(*argv, *given).config
            assert config is not None and config.replica is not None
            self.assertEqual(config.replica.handover_wait, wait)
        for bad in ("-1", str(MAX_HANDOVER_WAIT + 1), "soon"):
            with self.assertRaisesRegex(usage.UsageError, "--handover-wait"):
                parse(*argv, "--handover-wait", bad)

    def test_address(self) -> None:
        """
        C{HOST:PORT} and C{[V6]:PORT} are read.
        """
        self.assertEqual(parse_address("10.0.0.2:7000"), ("10.0.0.2", 7000))
        self.assertEqual(parse_address("[::1]:7000"), ("::1", 7000))
