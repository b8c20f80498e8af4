"""
Tests of the forward requests of a logged-in SSH connection over the real
transport (L{nfltr.relay.ssh._server}, L{nfltr.relay.ssh._user}): refused requests are
answered, what the status display keeps of them is bounded
(C{SSHConfig.max_status_lines}), and a connection that keeps asking is cut
with a reason it can read (C{SSHConfig.max_refusals}).

  - In memory (C{twisted.test.iosim}): nfltr's SSH client logs in with a
    registered key and sends C{tcpip-forward} requests.
  - Against the real OpenSSH client, over loopback: C{ssh -R} with more
    refused forwards than the limit, which OpenSSH reports as the relay's
    disconnect.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ed25519
from twisted.conch.ssh import channel, connection, keys, userauth
from twisted.conch.ssh.transport import DISCONNECT_BY_APPLICATION
from twisted.internet import defer, protocol
from twisted.internet.interfaces import IReactorProcess, IReactorTCP
from twisted.internet.task import Clock
from twisted.test import iosim
from twisted.trial.unittest import SkipTest, SynchronousTestCase, TestCase

from nfltr.relay.link_handler import Relay
from nfltr.relay.ssh._server import SSHRelayFactory
from nfltr.relay.ssh._user import SSHHub
from nfltr.ssh import SSHConfig
from nfltr.ssh.client import ClientTransport
from tests.relay.helpers import FakeStore

_hostKey: list[keys.Key] = []


def hostKey() -> keys.Key:
    """
    The server's Ed25519 host key, made once for the module.
    """
    if not _hostKey:
        _hostKey.append(keys.Key(ed25519.Ed25519PrivateKey.generate()))
    return _hostKey[0]


def forward(address: bytes, port: int) -> bytes:
    """
    The data of a C{tcpip-forward} request.
    """
    return struct.pack(">L", len(address)) + address + struct.pack(">L", port)


#: A forward the relay always refuses: a share URL is on port 80 or 443.
REFUSED = forward(b"blog", 81)


def relayFactory(config: SSHConfig, clock: Clock, user: keys.Key) -> SSHRelayFactory:
    """
    The relay's SSH factory, with C{user}'s key registered to C{alice}, on
    a relay without share URLs.
    """
    store = FakeStore()
    store.sshKeys[user.public().toString("OPENSSH").decode()] = "alice"
    relay = Relay(store, clock, None, maxAgents=None)
    hub = SSHHub(relay, config, clock, lambda: ("relay.test", 2222))
    return SSHRelayFactory(hub, {b"ssh-ed25519": hostKey()}, store)


class KeyAuth(userauth.SSHUserAuthClient):
    """
    Public-key login with one key.
    """

    def __init__(self, user: bytes, instance: Any, key: keys.Key) -> None:
        super().__init__(user, instance)
        self.key: keys.Key | None = key
        self.private = key

    def getPublicKey(self) -> keys.Key | None:
        key, self.key = self.key, None
        return None if key is None else key.public()

    def getPrivateKey(self) -> defer.Deferred[keys.Key]:
        return defer.succeed(self.private)


class ClientConnection(connection.SSHConnection):
    """
    The client's connection service: notes that it started; with
    C{reading} false, it stops crediting its channels' windows (a client
    that does not read).
    """

    started = False
    reading = True

    def serviceStarted(self) -> None:
        super().serviceStarted()
        self.started = True

    def adjustWindow(self, channel: Any, bytesToAdd: int) -> None:
        if self.reading:
            super().adjustWindow(channel, bytesToAdd)


class Display(channel.SSHChannel):
    """
    The client's end of a status display (C{ssh relay} with a shell).
    """

    name = b"session"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.received = bytearray()

    def channelOpen(self, specificData: bytes) -> None:
        assert self.conn is not None
        self.conn.sendRequest(self, b"shell", b"")

    def dataReceived(self, data: bytes) -> None:
        self.received += data


class LoginClient(ClientTransport):
    """
    nfltr's SSH client logging in as C{laptop} with C{key}; records how the
    connection ended.
    """

    def __init__(self, key: keys.Key) -> None:
        super().__init__()
        self.key = key
        self.conn = ClientConnection()
        self.errors: list[tuple[int, bytes]] = []

    def verifyHostKey(self, blob: bytes, fingerprint: bytes) -> defer.Deferred[Any]:
        if blob == hostKey().public().blob():
            return defer.succeed(True)
        return defer.fail(ValueError("unknown host key"))

    def connectionSecure(self) -> None:
        self.requestService(KeyAuth(b"laptop", self.conn, self.key))

    def receiveError(self, reasonCode: int, description: bytes) -> None:
        self.errors.append((reasonCode, description))


class RefusedRequestTests(SynchronousTestCase):
    """
    Refused C{tcpip-forward} requests over the real transport, in memory.
    """

    def login(self, **limits: Any) -> tuple[LoginClient, Any, iosim.IOPump]:
        """
        A client logged in to a relay with C{limits}: the client, the
        relay's avatar of its connection, and the pump.
        """
        clock = Clock()
        user = keys.Key(ed25519.Ed25519PrivateKey.generate())
        factory = relayFactory(SSHConfig(**limits), clock, user)
        factory.startFactory()
        client, server, pump = iosim.connectedServerAndClient(
            lambda: factory.buildProtocol(None), lambda: LoginClient(user))
        pump.flush()
        self.assertTrue(client.conn.started, client.errors)
        return client, server.avatar, pump

    def ask(self, client: LoginClient, pump: iosim.IOPump, n: int) -> list[Any]:
        """
        Send C{n} refused requests, each wanting a reply; what came back.
        """
        replies: list[Any] = []
        for _ in range(n):
            d = client.conn.sendGlobalRequest(b"tcpip-forward", REFUSED, wantReply=True)
            d.addCallbacks(replies.append, lambda f: replies.append(False))
        pump.flush()
        return replies

    def test_refusalsCut(self) -> None:
        """
        Each refusal is answered; with the C{max_refusals}th the relay
        disconnects with a reason that names the limit, and the
        connection's shares and agent go.
        """
        client, user, pump = self.login(max_refusals=5)
        self.assertEqual(self.ask(client, pump, 4), [False] * 4)
        self.assertEqual(client.errors, [])
        self.assertFalse(user.gone)
        self.ask(client, pump, 3)
        [(code, why)] = client.errors
        self.assertEqual(code, DISCONNECT_BY_APPLICATION)
        self.assertIn(b"5 refused forward requests", why)
        self.assertTrue(user.gone)

    def test_statusLinesBounded(self) -> None:
        """
        With no refusal limit, 1,000 refusals keep at most
        C{max_status_lines} lines for the status display, the latest, and
        the banner says how many earlier ones were dropped.
        """
        client, user, pump = self.login(max_refusals=None, max_status_lines=10)
        self.assertEqual(self.ask(client, pump, 1000), [False] * 1000)
        self.assertEqual(client.errors, [])
        self.assertEqual(len(user.notes), 10)
        self.assertIn("refused -R blog:81", user.notes[-1])
        self.assertIn("(990 earlier lines not kept)", user._banner())

    def test_displayThatDoesNotRead(self) -> None:
        """
        A status display whose client stops reading holds at most
        C{max_status_buffer} bytes and one line more, however many shares
        are published and cancelled; once it reads again, it is told how
        many lines it missed.
        """
        client, user, pump = self.login(max_status_buffer=4096)
        display = Display(localWindow=1024, localMaxPacket=1024)
        client.conn.openChannel(display)
        pump.flush()
        client.conn.reading = False
        tcp = forward(b"localhost", 5000)
        for _ in range(300):
            client.conn.sendGlobalRequest(b"tcpip-forward", tcp)
            client.conn.sendGlobalRequest(b"cancel-tcpip-forward", tcp)
        pump.flush()
        [session] = user.sessions
        self.assertLess(len(session.buf), 4096 + 200)
        self.assertGreater(session.dropped, 250)
        self.assertEqual(client.errors, [])
        client.conn.reading = True
        client.conn.adjustWindow(display, 1 << 20)
        pump.flush()
        client.conn.sendGlobalRequest(b"tcpip-forward", tcp)
        pump.flush()
        self.assertRegex(bytes(display.received), rb"\(\d+ lines not shown: this display was "
                         rb"not reading\)\r\nTCP share laptop:5000")

    def test_defaults(self) -> None:
        """
        With the default limits, 200 refusals: the connection is cut at the
        64th, and at most 100 lines were kept.
        """
        client, user, pump = self.login()
        self.ask(client, pump, 200)
        [(code, why)] = client.errors
        self.assertEqual(code, DISCONNECT_BY_APPLICATION)
        self.assertIn(b"64 refused forward requests", why)
        self.assertLessEqual(len(user.notes), 100)


class OpenSSHRefusalTests(TestCase):
    """
    The real OpenSSH client asks for more refused forwards than the relay
    takes.
    """

    timeout = 60

    def setUp(self) -> None:
        self.ssh = shutil.which("ssh")
        if self.ssh is None:
            raise SkipTest("the OpenSSH client is not installed (Debian: openssh-client)")
        from twisted.internet import reactor

        self.reactor: Any = reactor
        self.home = Path(self.mktemp()).absolute()
        self.home.mkdir(mode=0o700)
        self.user = keys.Key(ed25519.Ed25519PrivateKey.generate())
        self.identity = self.home / "id_ed25519"
        self.identity.write_bytes(self.user.toString("OPENSSH"))
        self.identity.chmod(0o600)

    def listen(self, config: SSHConfig) -> int:
        """
        Start the relay's SSH port on loopback; its port, with a
        known_hosts file naming it.
        """
        factory = relayFactory(config, self.reactor, self.user)
        tcp: IReactorTCP = self.reactor
        port = tcp.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.addCleanup(factory.disconnectAll, "the test is over")
        number: int = port.getHost().port
        line = hostKey().public().toString("openssh").decode()
        (self.home / "known_hosts").write_text(f"[127.0.0.1]:{number} {line}\n")
        return number

    @defer.inlineCallbacks
    def test_keepsAsking(self) -> Any:
        """
        C{ssh -N} with 6 refused C{-R} forwards, against a relay taking 4:
        OpenSSH warns of the refusals it was answered, then exits 255 with
        the relay's reason.
        """
        port = self.listen(SSHConfig(max_refusals=4))
        assert self.ssh is not None
        forwards = [a for n in range(6) for a in ("-R", f"name{n}:81:127.0.0.1:9")]
        args = [self.ssh, "-F", "/dev/null", "-p", str(port), "-i", str(self.identity),
                "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                "-o", f"UserKnownHostsFile={self.home / 'known_hosts'}",
                "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes",
                "-o", "UpdateHostKeys=no", "-o", "ConnectTimeout=20",
                "-o", "ExitOnForwardFailure=no", "-N", *forwards, "laptop@127.0.0.1"]
        run = SSHRun()
        processes: IReactorProcess = self.reactor
        env = {"HOME": str(self.home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        processes.spawnProcess(run, self.ssh, args, env=env)
        code, err = yield run.ended
        self.assertEqual(code, 255, err)
        self.assertIn("remote port forwarding failed", err)
        self.assertIn("4 refused forward requests", err)


class SSHRun(protocol.ProcessProtocol):
    """
    One C{ssh} run: its standard error and exit code.
    """

    def __init__(self) -> None:
        self.err: list[bytes] = []
        self.ended: defer.Deferred[tuple[int, str]] = defer.Deferred()

    def connectionMade(self) -> None:
        assert self.transport is not None
        self.transport.closeStdin()

    def errReceived(self, data: bytes) -> None:
        self.err.append(data)

    def processEnded(self, reason: Any) -> None:
        self.ended.callback((reason.value.exitCode,
                             b"".join(self.err).decode("utf-8", "replace")))
