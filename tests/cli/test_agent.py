"""
Tests for C{nfltr tcp}, C{nfltr http} and C{nfltr tcp-connect}
(L{nfltr.cli.agent}): argument errors in this process, and the commands as
real processes against a test relay that listens on 127.0.0.1 with TLS.
"""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path
from typing import Any

from twisted.internet import defer, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint, connectProtocol
from twisted.internet.protocol import Factory, ProcessProtocol
from twisted.internet.task import deferLater
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.trial.unittest import SynchronousTestCase, TestCase

from nfltr.cli import main
from nfltr.link import LISTENER, RefusalReason
from nfltr.link.twisted import LinkProtocol
from nfltr.tls import ensure_self_signed, server_context_factory
from tests.agent.helpers import AnswersAtEnd, Asker, Network, RelayHandler, TestRelay

REPO = Path(__file__).resolve().parent.parent.parent
PIN = "sha256:" + "ab" * 32
KEY = "nfk_cli-key-never-printed"


class ArgumentTests(SynchronousTestCase):
    """
    Wrong command lines end at once with one line and status 2.
    """

    def setUp(self) -> None:
        self.stdout, self.stderr = io.StringIO(), io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)
        saved = os.environ.pop("NFLTR_KEY", None)
        if saved is not None:
            self.addCleanup(os.environ.__setitem__, "NFLTR_KEY", saved)
        # No login saved by the user (nfltr login) may fill in what a test leaves out.
        config = os.environ.get("XDG_CONFIG_HOME")
        os.environ["XDG_CONFIG_HOME"] = self.mktemp()
        self.addCleanup(lambda: os.environ.update(XDG_CONFIG_HOME=config) if config is not None
                        else os.environ.pop("XDG_CONFIG_HOME"))

    def test_help(self) -> None:
        """
        C{nfltr --help} lists both commands.
        """
        self.assertEqual(main(["--help"]), 0)
        self.assertIn("tcp-connect", self.stdout.getvalue())
        self.assertIn("tcp ", self.stdout.getvalue())

    def test_noPort(self) -> None:
        """
        C{nfltr tcp} without a port is a usage error.
        """
        self.assertEqual(main(["tcp"]), 2)
        self.assertIn("PORT", self.stderr.getvalue())

    def test_noKey(self) -> None:
        """
        No key anywhere: one line saying how to give one, status 2.
        """
        self.assertEqual(main(["tcp", "3000", "--relay-pin", PIN]), 2)
        lines = self.stderr.getvalue().splitlines()
        self.assertEqual(len(lines), 1)
        self.assertTrue(lines[0].startswith("nfltr tcp: an API key is required"), lines)

    def test_noPin(self) -> None:
        """
        C{tcp-connect} end to end without C{--pin}: one line, status 2; the
        key given on the command line is not echoed.
        """
        argv = ["tcp-connect", "box", "22", "--relay-pin", PIN, "--key", KEY]
        self.assertEqual(main(argv), 2)
        err = self.stderr.getvalue()
        self.assertIn("--pin is required", err)
        self.assertNotIn(KEY, err)
        self.assertEqual(self.stdout.getvalue(), "")

    def test_readableSecretFile(self) -> None:
        """
        C{nfltr http} with a C{--bearer-file} others may read: one line
        naming the file and the fix, status 2, the token not echoed.
        """
        path = Path(self.mktemp())
        path.write_text(KEY)
        path.chmod(0o644)
        argv = ["http", "3000", "--bearer-file", str(path), "--relay-pin", PIN, "--key", "k"]
        self.assertEqual(main(argv), 2)
        [line] = self.stderr.getvalue().splitlines()
        self.assertTrue(line.startswith(f"nfltr http: --bearer-file {path} has mode 0644"), line)
        self.assertIn(f"chmod 600 {path}", line)
        self.assertNotIn(KEY, line)


class Process(ProcessProtocol):
    """
    A child process whose output is collected by lines.
    """

    def __init__(self) -> None:
        self.out: list[str] = []
        self.err: list[str] = []
        self.ended: defer.Deferred[int] = defer.Deferred()
        self._buffers = {1: "", 2: ""}
        self._waiting: list[tuple[re.Pattern[str], defer.Deferred[re.Match[str]]]] = []

    def childDataReceived(self, fd: int, data: bytes) -> None:
        text = self._buffers[fd] + data.decode()
        *lines, self._buffers[fd] = text.split("\n")
        (self.out if fd == 1 else self.err).extend(lines)
        if fd == 1:
            for line in lines:
                for pattern, d in list(self._waiting):
                    match = pattern.search(line)
                    if match:
                        self._waiting.remove((pattern, d))
                        d.callback(match)

    def waitFor(self, pattern: str) -> defer.Deferred[re.Match[str]]:
        """
        Fires with the match of the first line of standard output that
        matches C{pattern}.
        """
        compiled = re.compile(pattern)
        for line in self.out:
            match = compiled.search(line)
            if match:
                return defer.succeed(match)
        d: defer.Deferred[re.Match[str]] = defer.Deferred()
        self._waiting.append((compiled, d))
        return d

    def processEnded(self, reason: Any) -> None:
        for _, d in self._waiting:
            d.errback(AssertionError(f"exited first; stderr: {self.err}"))
        self.ended.callback(reason.value.exitCode)


class RealProcessTests(TestCase):
    """
    C{nfltr tcp} and C{nfltr tcp-connect} as processes, through a test relay
    on this reactor (TLS, pinned by the commands), to a service on
    127.0.0.1.
    """

    timeout = 60

    @defer.inlineCallbacks
    def setUp(self) -> Any:
        identity = ensure_self_signed(self.mktemp(), "relay")
        self.relayPin = identity.fingerprint
        self.relay = TestRelay(Network())
        self.relayReceived: list[bytes] = []
        received = self.relayReceived
        relay = self.relay

        class RecordingLink(LinkProtocol):
            def dataReceived(self, data: bytes) -> None:
                received.append(data)
                super().dataReceived(data)

        class Links(Factory):
            def buildProtocol(self, addr: Any) -> LinkProtocol:
                return RecordingLink(LISTENER, RelayHandler(relay), reactor)

        tls = TLSMemoryBIOFactory(
            server_context_factory(identity.cert, identity.key), False, Links(), clock=reactor
        )
        self.relayPort = yield TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(tls)
        self.addCleanup(self.relayPort.stopListening)
        self.servicePort = yield TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
            Factory.forProtocol(AnswersAtEnd)
        )
        self.addCleanup(self.servicePort.stopListening)

    def spawn(self, *args: str) -> Process:
        """
        Run C{python -m nfltr ARGS} against the test relay, with the key in
        the environment; it is stopped (SIGTERM) at the end of the test.
        """
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        env["NFLTR_KEY"] = KEY
        relay = ["--relay", f"127.0.0.1:{self.relayPort.getHost().port}",
                 "--relay-pin", self.relayPin]
        process = Process()
        transport = reactor.spawnProcess(  # type: ignore[attr-defined]
            process, sys.executable, [sys.executable, "-m", "nfltr", *args, *relay], env=env,
            path=str(REPO),
        )

        def stop() -> defer.Deferred[int]:
            if not process.ended.called:
                transport.signalProcess("TERM")
            return process.ended

        self.addCleanup(stop)
        return process

    @defer.inlineCallbacks
    def test_tunnel(self) -> Any:
        """
        An agent and a connector as processes: a request that half-closes
        gets the service's answer through the tunnel; the relay never sees
        the plaintext; SIGTERM ends both with status 0 and no traceback.
        """
        servicePort = str(self.servicePort.getHost().port)
        agent = self.spawn("tcp", servicePort, "--name", "box", "--state-dir", self.stateDir())
        match = yield agent.waitFor(r"fingerprint (sha256:[0-9a-f]{64})$")
        pin = match.group(1)
        command = yield agent.waitFor(r"nfltr tcp-connect box \d+ .*")
        self.assertIn(f"--pin {pin}", command.group(0))
        yield self.waitUntil(lambda: "box" in self.relay.agents)
        client = self.spawn("tcp-connect", "box", servicePort, "--pin", pin)
        listening = yield client.waitFor(r"^listening on 127\.0\.0\.1:(\d+)$")
        user = Asker(b"question 5d1e")
        yield connectProtocol(
            TCP4ClientEndpoint(reactor, "127.0.0.1", int(listening.group(1))), user
        )
        yield self.waitUntil(lambda: user.lost is not None)
        self.assertEqual(user.received, b"answer to question 5d1e")
        self.assertNotIn(b"question 5d1e", b"".join(self.relayReceived))
        for process in (client, agent):
            process.transport.signalProcess("TERM")
            status = yield process.ended
            self.assertEqual(status, 0, process.err)
            self.assertNotIn("Traceback", "\n".join(process.err))
            self.assertNotIn(KEY, "\n".join(process.out + process.err))

    @defer.inlineCallbacks
    def test_revoked(self) -> Any:
        """
        An agent whose key the relay refuses for good exits with status 1
        and the relay's reason on one line.
        """
        self.relay.policy = lambda app: (RefusalReason.REVOKED, "API key abc was revoked")
        agent = self.spawn("tcp", "3000", "--name", "box", "--state-dir", self.stateDir())
        status = yield agent.ended
        self.assertEqual(status, 1)
        self.assertEqual(agent.err[-1], "nfltr: relay refused: API key abc was revoked")
        self.assertNotIn("Traceback", "\n".join(agent.err))

    @defer.inlineCallbacks
    def test_wrongRelayPin(self) -> Any:
        """
        A relay whose certificate does not match C{--relay-pin}: status 1,
        the fingerprint message on one line.
        """
        self.relayPin = "sha256:" + "0" * 64
        agent = self.spawn("tcp", "3000", "--name", "box", "--state-dir", self.stateDir())
        status = yield agent.ended
        self.assertEqual(status, 1)
        self.assertRegex(
            agent.err[-1],
            r"^nfltr: relay certificate fingerprint sha256:[0-9a-f]{64} does not match "
            r"--pin sha256:0{64}$",
        )

    def stateDir(self) -> str:
        """
        An absolute path for an agent's state (the child runs elsewhere).
        """
        return os.path.abspath(self.mktemp())

    @defer.inlineCallbacks
    def waitUntil(self, condition: Any) -> Any:
        """
        Poll C{condition} every 10 ms.
        """
        while not condition():
            yield deferLater(reactor, 0.01, lambda: None)
