"""
Tests for L{nfltr.cli.relay}, the C{nfltr relay} command: option handling in
this process, and a real relay process started and stopped by a signal.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ServerEndpoint
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.protocol import Factory, ProcessProtocol
from twisted.logger import LogLevel
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase, TestCase

from nfltr.cli import main
from nfltr.cli.relay import commandOptions
from nfltr.store import claim_owner

REPO = Path(__file__).resolve().parent.parent.parent
LOOPBACK = "tcp:0:interface=127.0.0.1"


class CommandLineTests(SynchronousTestCase):
    """
    C{nfltr relay} hands its arguments to the relay's options.
    """

    def setUp(self) -> None:
        self.stdout, self.stderr = io.StringIO(), io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)

    def test_help(self) -> None:
        """
        C{--help} prints the relay's options, C{--log-level} included, with their defaults, in
        argparse's format like every other command, and exits 0.
        """
        self.assertEqual(main(["relay", "--help"]), 0)
        out = self.stdout.getvalue()
        self.assertTrue(out.startswith("usage: nfltr relay [-h]"), out)
        self.assertIn("(default: tcp:9090:interface=127.0.0.1)", " ".join(out.split()))
        for option in ("--data-dir", "--tls", "--admin", "--name", "--revocation-poll",
                       "--drain-timeout", "--log-level"):
            self.assertIn(option, out)

    def test_badOption(self) -> None:
        """
        An unknown option exits 2 with the usage and one error line, as every other command
        does, no traceback.
        """
        self.assertEqual(main(["relay", "--bogus"]), 2)
        err = self.stderr.getvalue()
        self.assertTrue(err.startswith("usage: nfltr relay [-h]"), err)
        self.assertTrue(err.endswith("nfltr relay: error: unrecognized arguments: --bogus\n"), err)
        self.assertNotIn("Traceback", err)

    def test_badValue(self) -> None:
        """
        A bad value reported by the relay's options exits 2, naming the option.
        """
        self.assertEqual(main(["relay", "--tls", "ssl:443"]), 2)
        self.assertIn("nfltr relay: error: --tls 'ssl:443'", self.stderr.getvalue())
        self.assertEqual(main(["relay", "--log-level", "loud"]), 2)
        self.assertIn("--log-level loud", self.stderr.getvalue())

    def test_logLevel(self) -> None:
        """
        C{--log-level} becomes a L{LogLevel}; the default is info.
        """
        options = commandOptions()
        options.parseOptions(["--log-level", "DEBUG", "--data-dir", "/d"])
        self.assertIs(options["log-level"], LogLevel.debug)
        options = commandOptions()
        options.parseOptions(["--data-dir", "/d"])
        self.assertIs(options["log-level"], LogLevel.info)
        self.assertEqual(options.config.data_dir, Path("/d"))


class RelayProcess(ProcessProtocol):
    """
    Collects a relay process's standard error; C{listening} fires when it
    logs that it listens, C{ended} with the exit code.
    """

    def __init__(self) -> None:
        self.stderr = b""
        self.listening: Deferred[None] = Deferred()
        self.ended: Deferred[int | None] = Deferred()

    def errReceived(self, data: bytes) -> None:
        self.stderr += data
        if b"relay listening" in self.stderr and not self.listening.called:
            self.listening.callback(None)

    def processEnded(self, reason: Failure) -> None:
        if not self.listening.called:
            self.listening.errback(reason)
        code = reason.value.exitCode if reason.check(ProcessDone, ProcessTerminated) else None
        self.ended.callback(code)


class ProcessTests(TestCase):
    """
    C{nfltr relay} as its own process.
    """

    timeout = 60

    def spawn(self, *argv: str) -> RelayProcess:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        process = RelayProcess()
        transport = reactor.spawnProcess(
            process, sys.executable, [sys.executable, "-m", "nfltr", "relay", *argv], env=env
        )

        def kill() -> Deferred[Any] | None:
            if process.ended.called:
                return None
            transport.signalProcess("KILL")
            return process.ended

        self.addCleanup(kill)
        return process

    def test_runAndStopOnSignal(self) -> None:
        """
        The relay logs where it listens and how to trust it, writes
        C{relay.json} with its pid, and on SIGTERM exits 0 and removes the
        file; nothing it logs is a traceback.
        """
        dataDir = Path(self.mktemp()).absolute()
        process = self.spawn("--data-dir", str(dataDir), "--tls", LOOPBACK, "--admin", LOOPBACK,
                             "--http", "none")
        state = dataDir / "relay.json"

        def listening(_: None) -> Deferred[int | None]:
            info = json.loads(state.read_text())
            self.assertEqual(info["pid"], process.transport.pid)
            process.transport.signalProcess("TERM")
            return process.ended

        def ended(code: int | None) -> None:
            self.assertEqual(code, 0)
            self.assertFalse(state.exists())
            err = process.stderr.decode()
            self.assertIn("--relay-pin sha256:", err)
            self.assertIn(f"--ca {dataDir / 'tls' / 'ca.crt'}", err)
            self.assertNotIn("Traceback", err)

        return process.listening.addCallback(listening).addCallback(ended)

    def test_startFailure(self) -> None:
        """
        A relay that cannot bind its admin port exits 1 after one log line
        naming the option, its endpoint and why, without a traceback.
        """
        dataDir = Path(self.mktemp()).absolute()
        d = TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(Factory())

        def spawn(busy: Any) -> Deferred[int | None]:
            self.addCleanup(busy.stopListening)
            admin = f"tcp:{busy.getHost().port}:interface=127.0.0.1"
            process = self.spawn("--data-dir", str(dataDir), "--tls", LOOPBACK, "--admin", admin,
                                 "--http", "none")
            process.listening.addErrback(lambda _: None)

            def ended(code: int | None) -> None:
                self.assertEqual(code, 1)
                err = process.stderr.decode()
                self.assertIn(
                    f"the relay could not start: --admin {admin}: address already in use", err
                )
                self.assertNotIn("Traceback", err)
                self.assertFalse((dataDir / "relay.json").exists())

            return process.ended.addCallback(ended)

        return d.addCallback(spawn)

    def test_dataDirectoryInUse(self) -> None:
        """
        A relay whose data directory another process holds exits 1 after one line naming the
        holder, without a traceback (the refusal comes before the reactor runs: it must still
        stop it).
        """
        dataDir = Path(self.mktemp()).absolute()
        dataDir.mkdir(parents=True)
        holder = claim_owner(dataDir / "relay.lock", "x", "y")
        self.addCleanup(holder.release)
        process = self.spawn("--data-dir", str(dataDir), "--tls", LOOPBACK, "--admin", LOOPBACK,
                             "--http", "none")
        process.listening.addErrback(lambda _: None)

        def ended(code: int | None) -> None:
            self.assertEqual(code, 1)
            err = process.stderr.decode()
            self.assertIn(f"the data directory {dataDir} is in use by another process", err)
            self.assertNotIn("Traceback", err)

        return process.ended.addCallback(ended)

