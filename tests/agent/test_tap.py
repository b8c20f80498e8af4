"""
Tests for L{nfltr.agent_tap}, twistd's C{nfltr-agent} plugin: its options,
its services, its usage lines and the files twistd writes for it.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

from twisted.internet.task import Clock
from twisted.logger import LogLevel
from twisted.python import usage
from twisted.scripts.twistd import ServerOptions
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import AgentService
from nfltr.agent_tap import Options, build_service, plugin_service
from nfltr.cli.twistd import TwistdService
from nfltr.client import TcpConnector

PIN = "sha256:" + "ab" * 32
KEY = "nfk_cli-key-never-printed"


class TapTests(SynchronousTestCase):
    """
    The twistd plugin's options and services.
    """

    def test_savedLogin(self) -> None:
        """
        The commands take what their command line leaves out from the login
        saved by C{nfltr login}.
        """
        from nfltr.cli.saved_login import write_login

        home = Path(self.mktemp()).absolute()
        write_login(home / "nfltr" / "nfltr.toml",
                    {"relay": "saved.example:9", "relay-pin": PIN, "key": KEY})
        for name, value in (("XDG_CONFIG_HOME", str(home)), ("NFLTR_KEY", None)):
            saved = os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value
            self.addCleanup(lambda n=name, v=saved: os.environ.pop(n, None) if v is None
                            else os.environ.__setitem__(n, v))
        for argv in (["tcp", "22", "--state-dir", self.mktemp()],
                     ["http", "3000", "--state-dir", self.mktemp()],
                     ["tcp-connect", "box", "22", "--pin", PIN]):
            options = Options()
            options.parseOptions(argv)
            relay = options.subOptions.checked.relay
            self.assertEqual((relay.address, relay.pin, relay.key), ("saved.example:9", PIN, KEY))

    def test_up(self) -> None:
        """
        C{up FILE} checks the config file and makes one agent of its
        entries; a broken file, or two files, are usage errors naming the
        problem's line.
        """
        directory = Path(self.mktemp()).absolute()
        directory.mkdir()
        config = directory / "a.toml"
        config.write_text(f'relay-pin = "{PIN}"\nkey = "{KEY}"\nstate-dir = "s"\n'
                          "[[tcp]]\nport = 22\n[[tcp]]\nport = 80\n")
        config.chmod(0o600)
        options = Options()
        options.parseOptions(["up", str(config)])
        checked = options.subOptions.checked
        self.assertEqual(checked.ports, (22, 80))
        self.assertIsInstance(build_service("up", checked, Clock(), None, lambda m: None),
                              AgentService)
        config.write_text("[[tcp]]\nport = 0\n")
        error = self.assertRaises(usage.UsageError, Options().parseOptions, ["up", str(config)])
        self.assertIn(f"{config}:2: [[tcp]] 1: port 0", str(error))
        self.assertRaises(usage.UsageError, Options().parseOptions, ["up", "a", "b"])

    def test_tcp(self) -> None:
        """
        C{tcp PORT...} with its options is checked, and makes an agent.
        """
        options = Options()
        state = self.mktemp()
        options.parseOptions(
            ["tcp", "22", "80", "--name", "box", "--state-dir", state, "--relay-pin", PIN,
             "--key", KEY]
        )
        checked = options.subOptions.checked
        self.assertEqual(checked.ports, (22, 80))
        service = build_service("tcp", checked, Clock(), None, lambda message: None)
        self.assertIsInstance(service, AgentService)
        self.assertTrue((Path(state) / "e2ee.key").exists())

    def test_http(self) -> None:
        """
        C{http PORT} takes its mode and its repeatable policy options (before
        or after the port) and makes an agent with a share key.
        """
        import ipaddress

        options = Options()
        state = self.mktemp()
        options.parseOptions(
            ["http", "--allow-ip", "10.0.0.0/8", "3000", "--mode", "inspect", "--allow-ip",
             "::1", "--require-header", "X-A:1", "--bearer", "t", "--state-dir", state,
             "--relay-pin", PIN, "--key", KEY]
        )
        [share] = options.subOptions.checked.http
        self.assertEqual((share.port, share.mode), (3000, "inspect"))
        self.assertEqual(
            share.policy.allow,
            (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1")),
        )
        self.assertEqual(share.policy.kinds, ("bearer", "headers"))
        service = build_service("http", options.subOptions.checked, Clock(), None, lambda m: None)
        self.assertIsInstance(service, AgentService)

    def test_httpSecretsFromFiles(self) -> None:
        """
        C{http PORT} takes the key and every credential from files (and
        C{--require-header} beside its file): the same policy as from the
        command line.
        """
        from nfltr.wire.policy import policy_from_options

        def secret(text: str) -> str:
            path = Path(self.mktemp())
            path.write_text(text)
            path.chmod(0o600)
            return str(path)

        options = Options()
        options.parseOptions(
            ["http", "3000", "--mode", "inspect", "--basic-auth-file", secret("u:p\n"),
             "--bearer-file", secret("tok\n"), "--require-header", "X-A:1",
             "--require-header-file", secret("X-B:2\nX-C:3\n"), "--state-dir", self.mktemp(),
             "--relay-pin", PIN, "--key-file", secret(KEY + "\n")]
        )
        checked = options.subOptions.checked
        [share] = checked.http
        self.assertEqual(share.policy,
                         policy_from_options("u:p", "tok", ["X-A:1", "X-B:2", "X-C:3"], []))
        self.assertEqual(checked.relay.key, KEY)

    def test_tcpConnect(self) -> None:
        """
        C{tcp-connect AGENT PORT} with its options makes a connector.
        """
        options = Options()
        options.parseOptions(
            ["tcp-connect", "box", "22", "--pin", PIN, "--relay-pin", PIN, "--key", KEY]
        )
        service = build_service(
            "tcp-connect", options.subOptions.checked, Clock(), None, lambda m: None
        )
        self.assertIsInstance(service, TcpConnector)

    def test_errors(self) -> None:
        """
        No command, or options that do not check, are usage errors with the
        checker's message.
        """
        self.assertRaises(usage.UsageError, Options().parseOptions, [])
        e = self.assertRaises(
            usage.UsageError, Options().parseOptions,
            ["tcp-connect", "box", "22", "--relay-pin", PIN, "--key", KEY],
        )
        self.assertIn("--pin is required", str(e))
        e = self.assertRaises(
            usage.UsageError, Options().parseOptions, ["tcp", "22", "--key", KEY]
        )
        self.assertIn("--relay-pin", str(e))

    def test_badStateDir(self) -> None:
        """
        A state directory that cannot be used ends the start with one line.
        """
        blocker = Path(self.mktemp())
        blocker.write_text("a file, not a directory")
        options = Options()
        options.parseOptions(
            ["tcp", "22", "--state-dir", str(blocker / "sub"), "--relay-pin", PIN, "--key", KEY]
        )
        e = self.assertRaises(
            SystemExit, build_service, "tcp", options.subOptions.checked, Clock(), None,
            lambda m: None,
        )
        self.assertIn("cannot use the state directory", str(e))


def twistd(*argv: str) -> ServerOptions:
    """
    twistd's options for C{twistd ARGV}, parsed as twistd parses them, with
    this tree's plugins.
    """
    config = ServerOptions()
    config.parseOptions(list(argv))
    return config


class TwistdTests(SynchronousTestCase):
    """
    The plugin as twistd parses it: the usage lines and the files twistd
    writes.
    """

    def usage(self, *argv: str) -> str:
        """
        What C{twistd ARGV --help} prints.
        """
        out = io.StringIO()
        self.patch(sys, "stdout", out)
        self.assertRaises(SystemExit, twistd, *argv, "--help")
        return out.getvalue()

    def test_usageLines(self) -> None:
        """
        The plugin's usage line lists its commands; each command's line
        names the plugin and the command once, then the command's
        arguments.
        """
        self.assertTrue(self.usage("nfltr-agent").startswith(
            "Usage: twistd [options] nfltr-agent tcp PORT... | http PORT | up [FILE] | "
            "tcp-connect AGENT PORT [options]\n"))
        for command, arguments in (("tcp", "PORT [PORT...] [options]"),
                                   ("http", "PORT [options]"),
                                   ("up", "[FILE] [options]"),
                                   ("tcp-connect", "AGENT PORT [options]")):
            first = self.usage("nfltr-agent", command).splitlines()[0]
            self.assertEqual(first, f"Usage: twistd [options] nfltr-agent {command} {arguments}")

    def test_foregroundNoPidfile(self) -> None:
        """
        In the foreground (C{-n}) the agent writes no pidfile and logs to
        standard output (no log file named).
        """
        argv = ["tcp", "22", "--name", "box", "--relay-pin", PIN, "--key", KEY]
        config = twistd("-n", "nfltr-agent", *argv)
        self.assertEqual((config["pidfile"], config["logfile"]), ("", None))

    def test_daemonFiles(self) -> None:
        """
        As a daemon, the agent's pidfile and log file are named for it (for
        its name, or the agent a client reaches), in the working directory;
        what the operator gives is kept.
        """
        relay = ["--relay-pin", PIN, "--key", KEY]
        config = twistd("nfltr-agent", "tcp", "22", "--name", "box", *relay)
        self.assertEqual(config["pidfile"], os.path.abspath("nfltr-agent-box.pid"))
        self.assertEqual(config["logfile"], "nfltr-agent-box.log")
        config = twistd("nfltr-agent", "tcp", "22", *relay)
        self.assertEqual(config["pidfile"], os.path.abspath("nfltr-agent.pid"))
        config = twistd("nfltr-agent", "tcp-connect", "box", "22", "--pin", PIN, *relay)
        self.assertEqual(config["pidfile"], os.path.abspath("nfltr-tcp-connect-box.pid"))
        config = twistd("--pidfile", "/run/a.pid", "--logfile", "/var/log/a.log",
                        "nfltr-agent", "tcp", "22", *relay)
        self.assertEqual((config["pidfile"], config["logfile"]), ("/run/a.pid", "/var/log/a.log"))

    def test_level(self) -> None:
        """
        The service twistd runs logs at info, or at debug with C{-v}, and
        holds the agent.
        """
        state = self.mktemp()
        for flags, level in (((), LogLevel.info), (("-v",), LogLevel.debug)):
            options = Options()
            options.parseOptions(["tcp", "22", *flags, "--state-dir", state, "--relay-pin", PIN,
                                  "--key", KEY])
            top = plugin_service(options, Clock(), lambda m: None, lambda m: None)
            self.assertIsInstance(top, TwistdService)
            self.assertIs(top.level, level)
            [service] = top
            self.assertIsInstance(service, AgentService)
