"""
Tests for L{nfltr.relay_tap} (options, from L{nfltr.cli.relay_options}, and
service tree) and L{nfltr.relay.config}.
"""

from __future__ import annotations

import os
from pathlib import Path

from twisted.application.service import MultiService
from twisted.logger import LogLevel
from twisted.python import usage
from twisted.scripts.twistd import ServerOptions
from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.relay import buildService
from nfltr.relay.config import ApiLimits, database_path, default_data_dir, state_file_path
from nfltr.relay.service import RelayService
from nfltr.relay_tap import Options
from nfltr.udp import DatagramLimits


def parse(*argv: str) -> Options:
    options = Options()
    options.parseOptions(list(argv))
    return options


class DefaultDataDirTests(SynchronousTestCase):
    """
    L{default_data_dir} follows the XDG base directory rules.
    """

    def test_xdg(self) -> None:
        """
        An absolute C{XDG_DATA_HOME} is used.
        """
        self.assertEqual(
            default_data_dir({"XDG_DATA_HOME": "/data", "HOME": "/home/u"}),
            Path("/data/nfltr/relay"),
        )

    def test_home(self) -> None:
        """
        Without C{XDG_DATA_HOME}, or with a relative one, it is under
        C{~/.local/share}.
        """
        for env in ({"HOME": "/home/u"}, {"HOME": "/home/u", "XDG_DATA_HOME": "rel"}):
            self.assertEqual(default_data_dir(env), Path("/home/u/.local/share/nfltr/relay"))

    def test_files(self) -> None:
        """
        The database and the state file live in the data directory.
        """
        self.assertEqual(database_path("/d"), Path("/d/nfltr.sqlite3"))
        self.assertEqual(state_file_path("/d"), Path("/d/relay.json"))


class OptionsTests(SynchronousTestCase):
    """
    L{Options} validates in C{postOptions} and builds a L{RelayConfig}.
    """

    def test_defaults(self) -> None:
        """
        With no options: the XDG data directory, C{tcp:8443}, admin on
        loopback port 9090, no extra names, a 2 s revocation poll, a 30 s
        drain timeout, shares under C{localhost}, a 10 s handshake timeout.
        """
        self.patch(os, "environ", {"XDG_DATA_HOME": "/xdg", "HOME": "/h"})
        config = parse().config
        self.assertEqual(config.data_dir, Path("/xdg/nfltr/relay"))
        self.assertEqual(config.tls, "tcp:8443")
        self.assertEqual(config.admin, "tcp:9090:interface=127.0.0.1")
        self.assertEqual(config.names, ())
        self.assertEqual(config.revocation_poll, 2.0)
        self.assertEqual(config.drain_timeout, 30.0)
        self.assertEqual(config.share_domain, "localhost")
        self.assertEqual(config.handshake_timeout, 10.0)

    def test_everything(self) -> None:
        """
        Every option reaches the configuration; C{--name} repeats; a relative
        data directory is made absolute and C{~} expanded; the share domain is
        normalised as server names spell it.
        """
        config = parse(
            "--data-dir", "rel/dir", "--tls", "tcp:0:interface=127.0.0.1",
            "--admin", "unix:/tmp/admin.sock", "--name", "relay.example.com",
            "--name", "192.0.2.7", "--revocation-poll", "0.5", "--drain-timeout", "7.5",
            "--share-domain", "Shares.Example.COM.", "--handshake-timeout", "2.5",
        ).config
        self.assertEqual(config.data_dir, Path(os.getcwd()) / "rel" / "dir")
        self.assertEqual(config.tls, "tcp:0:interface=127.0.0.1")
        self.assertEqual(config.admin, "unix:/tmp/admin.sock")
        self.assertEqual(config.names, ("relay.example.com", "192.0.2.7"))
        self.assertEqual(config.revocation_poll, 0.5)
        self.assertEqual(config.drain_timeout, 7.5)
        self.assertEqual(config.share_domain, "shares.example.com")
        self.assertEqual(config.handshake_timeout, 2.5)
        self.assertEqual(parse("--drain-timeout", "0").config.drain_timeout, 0.0)
        home = parse("-d", "~/r").config.data_dir
        self.assertEqual(home, Path(os.path.expanduser("~/r")))

    def assertUsageError(self, argv: list[str], *fragments: str) -> None:
        e = self.assertRaises(usage.UsageError, parse, *argv)
        for fragment in fragments:
            self.assertIn(fragment, str(e))

    def test_tlsEndpointWithTLS(self) -> None:
        """
        C{--tls} refuses endpoint types that would add TLS under the relay's own.
        """
        for spec in ("ssl:8443", "tls:host:443", "SSL:1"):
            self.assertUsageError(["--tls", spec], "--tls", "adds TLS itself")

    def test_badEndpoints(self) -> None:
        """
        Endpoint strings Twisted cannot build are refused, naming the option.
        """
        self.assertUsageError(["--tls", "tcp:http"], "--tls 'tcp:http'", "not a usable endpoint")
        self.assertUsageError(["--admin", "nosuch:1"], "--admin 'nosuch:1'")
        self.assertUsageError(["--admin", "tcp:1:bogus=2"], "--admin")
        self.assertUsageError(["--tls", " "], "--tls", "required")

    def test_badName(self) -> None:
        """
        A C{--name} that is neither a DNS name nor an IP address is refused.
        """
        self.assertUsageError(["--name", "not a name"], "--name", "'not a name'")

    def test_badPoll(self) -> None:
        """
        C{--revocation-poll} must be a number in (0, 3600].
        """
        for value in ("0", "-1", "x", "3601", "nan"):
            self.assertUsageError(["--revocation-poll", value], "--revocation-poll")

    def test_badDrainTimeout(self) -> None:
        """
        C{--drain-timeout} must be a number in [0, 3600].
        """
        for value in ("-1", "x", "3601", "nan", ""):
            self.assertUsageError(["--drain-timeout", value], "--drain-timeout", "0 or more")

    def test_badHandshakeTimeout(self) -> None:
        """
        C{--handshake-timeout} must be a number in (0, 300].
        """
        for value in ("0", "-1", "x", "300.5", "nan", ""):
            self.assertUsageError(
                ["--handshake-timeout", value], "--handshake-timeout", "more than 0"
            )
        self.assertEqual(parse("--handshake-timeout", "300").config.handshake_timeout, 300.0)

    def test_udpLimits(self) -> None:
        """
        C{--udp-idle-timeout} and C{--udp-max-sessions} set the public UDP
        ports' limits (by default the datagram sessions' defaults); a
        timeout of 0 or a count below 1 is refused.
        """
        self.assertEqual(parse().config.udp_limits, DatagramLimits())
        config = parse("--udp-idle-timeout", "5", "--udp-max-sessions", "7").config
        self.assertEqual(config.udp_limits, DatagramLimits(5.0, 7))
        self.assertUsageError(["--udp-idle-timeout", "0"], "--udp-idle-timeout", "more than 0")
        self.assertUsageError(["--udp-max-sessions", "0"], "--udp-max-sessions", "")

    def test_badShareDomain(self) -> None:
        """
        C{--share-domain} must be a DNS name: not an IP address, a wildcard or
        anything else.
        """
        for value in ("192.0.2.1", "*.example.com", "", "a b", "x_y.example"):
            self.assertUsageError(["--share-domain", value], "--share-domain", repr(value))


class MakeServiceTests(SynchronousTestCase):
    """
    L{buildService} makes the service tree without starting anything.
    """

    def test_tree(self) -> None:
        """
        The tree is a L{MultiService} holding one L{RelayService} named
        C{relay}, with the parsed configuration and the given reactor, not
        running.
        """
        options = parse("--data-dir", "/nowhere")
        reactor = object()
        top = buildService(options.config, reactor)
        self.assertIsInstance(top, MultiService)
        relay = top.getServiceNamed("relay")
        self.assertIsInstance(relay, RelayService)
        self.assertIs(relay.config, options.config)
        self.assertIs(relay.reactor, reactor)
        self.assertFalse(relay.running)
        self.assertFalse(Path("/nowhere").exists())


class LimitAndCertificateOptionTests(SynchronousTestCase):
    """
    The limits, share and certificate options.
    """

    def test_limits(self) -> None:
        """
        Defaults, values and C{none}; zero, negative and junk are usage
        errors naming the option.
        """
        config = parse().config
        assert config is not None
        self.assertEqual(
            (config.admission.per_source_open, config.admission.per_source_rate,
             config.admission.per_source_burst, config.admission.handshakes, config.max_agents),
            (2000, 200.0, 2000, 10000, None),
        )
        config = parse("--per-source-connections", "none", "--per-source-rate", "2.5",
                       "--max-handshakes", "5", "--max-agents", "3", "--lease-time", "60",
                       "--public-port", "443", "--http", "none").config
        assert config is not None
        self.assertEqual(
            (config.admission.per_source_open, config.admission.per_source_rate,
             config.admission.handshakes, config.max_agents, config.lease_time,
             config.public_port, config.http),
            (None, 2.5, 5, 3, 60.0, 443, None),
        )
        for option, value in (("--per-source-connections", "0"), ("--per-source-rate", "-1"),
                              ("--max-agents", "many"), ("--per-source-burst", "none"),
                              ("--public-port", "70000"), ("--lease-time", "-5")):
            error = self.assertRaises(usage.UsageError, parse, option, value)
            self.assertIn(option, str(error))

    def test_apiLimits(self) -> None:
        """
        The API's and dashboard's limits have their defaults, take values,
        and refuse zero or junk naming the option (the API built with them:
        L{tests.relay.api.test_events}).
        """
        config = parse().config
        assert config is not None
        self.assertEqual(config.api, ApiLimits(10, 6.0, 256, 16, 1.0))
        config = parse("--admin-failure-burst", "3", "--admin-failure-interval", "30",
                       "--dashboard-sessions", "8", "--dashboard-streams", "2",
                       "--dashboard-interval", "5").config
        assert config is not None
        self.assertEqual(config.api, ApiLimits(3, 30.0, 8, 2, 5.0))
        for option in ("--admin-failure-burst", "--dashboard-streams", "--dashboard-interval",
                       "--admin-failure-interval", "--dashboard-sessions"):
            error = self.assertRaises(usage.UsageError, parse, option, "0")
            self.assertIn(option, str(error))

    def test_peerDrainTimeout(self) -> None:
        """
        C{--peer-drain-timeout} bounds a peer's drain: 30 s by default, seconds or C{none};
        negative and junk are usage errors naming it.  The relay of the service gets it.
        """
        config = parse().config
        assert config is not None
        self.assertEqual(config.peer_drain_timeout, 30.0)
        for value, expected in (("5", 5.0), ("0", 0.0), ("none", None)):
            config = parse("--peer-drain-timeout", value).config
            assert config is not None
            self.assertEqual(config.peer_drain_timeout, expected)
        for value in ("-1", "soon", "100000"):
            error = self.assertRaises(usage.UsageError, parse, "--peer-drain-timeout", value)
            self.assertIn("--peer-drain-timeout", str(error))

    def test_directory(self) -> None:
        """
        C{--directory} is a Redis URL, parsed at once: none by default (SQLite
        in the data directory); a malformed one is a usage error naming the
        option and never the password.
        """
        config = parse().config
        assert config is not None
        self.assertIsNone(config.directory)
        self.patch(os, "environ", {"NFLTR_REDIS_PASSWORD": "from-env"})
        config = parse("--directory", "redis+unix:///run/redis/redis.sock?db=2").config
        assert config is not None and config.directory is not None
        self.assertEqual((config.directory.path, config.directory.db),
                         ("/run/redis/redis.sock", 2))
        self.assertEqual(config.directory.password, "from-env")
        config = parse("--directory", "rediss://:s3cret@redis.internal:6380/1?ca=/ca.pem").config
        assert config is not None and config.directory is not None
        self.assertEqual((config.directory.host, config.directory.port, config.directory.tls),
                         ("redis.internal", 6380, True))
        for value in ("http://redis.internal/", "redis://:s3cret@/0", "redis://h:99999/0"):
            error = self.assertRaises(usage.UsageError, parse, "--directory", value)
            self.assertIn("--directory", str(error))
            self.assertNotIn("s3cret", str(error))

    def test_linkMemory(self) -> None:
        """
        C{--link-memory}: 256 MiB by default; bytes with K, M or G, or none;
        below 1 MiB, or junk, is a usage error naming the option.
        """
        config = parse().config
        assert config is not None
        self.assertEqual(config.link_memory, 256 << 20)
        for value, want in (("1G", 1 << 30), ("2048k", 2 << 20), ("1048576", 1 << 20),
                            ("none", None)):
            config = parse("--link-memory", value).config
            assert config is not None
            self.assertEqual(config.link_memory, want, value)
        for value in ("1000", "0", "-5M", "lots", "1.5G", "²M", "2T"):
            error = self.assertRaises(usage.UsageError, parse, "--link-memory", value)
            self.assertIn("--link-memory", str(error))

    def test_certificate(self) -> None:
        """
        C{--cert} and C{--key} go together and must load.
        """
        from .test_certs import self_signed

        cert, key = self_signed(Path(self.mktemp()), ["relay.example.com"])
        config = parse("--cert", str(cert), "--key", str(key)).config
        assert config is not None
        self.assertEqual((config.cert, config.key), (cert.absolute(), key.absolute()))
        self.assertIn("go together", str(self.assertRaises(usage.UsageError, parse,
                                                           "--cert", str(cert))))
        error = self.assertRaises(usage.UsageError, parse, "--cert", str(key), "--key", str(key))
        self.assertIn("--cert/--key", str(error))


class TwistdTests(SynchronousTestCase):
    """
    The plugin as twistd parses it: the files twistd writes and the log
    level.
    """

    def twistd(self, *argv: str) -> ServerOptions:
        config = ServerOptions()
        config.parseOptions([*argv[:-1], "nfltr-relay", "--data-dir", "/nowhere", argv[-1]])
        return config

    def test_foregroundNoPidfile(self) -> None:
        """
        In the foreground (C{-n}) the relay writes no pidfile and logs to
        standard output.
        """
        config = self.twistd("-n", "--log-level=info")
        self.assertEqual((config["pidfile"], config["logfile"]), ("", None))

    def test_daemonFiles(self) -> None:
        """
        As a daemon, its pidfile and log file are C{nfltr-relay.pid} and
        C{nfltr-relay.log} in the working directory, unless given.
        """
        config = self.twistd("--log-level=info")
        self.assertEqual(config["pidfile"], os.path.abspath("nfltr-relay.pid"))
        self.assertEqual(config["logfile"], "nfltr-relay.log")
        config = self.twistd("--pidfile", "/run/r.pid", "--log-level=info")
        self.assertEqual(config["pidfile"], "/run/r.pid")

    def test_logLevel(self) -> None:
        """
        C{--log-level} works under twistd too, info by default.
        """
        self.assertIs(self.twistd("-n", "--log-level=DEBUG").subOptions["log-level"],
                      LogLevel.debug)
        self.assertIs(parse("--data-dir", "/d")["log-level"], LogLevel.info)
