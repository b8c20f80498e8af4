"""
Tests of an SSH connection as the relay sees it (L{nfltr.relay.ssh._user}): what
C{-R} publishes, what C{-L} may reach, what ends with the connection; and of
the login checkers (L{nfltr.relay.ssh._auth}).
"""

from __future__ import annotations

import base64
import struct
from pathlib import Path
from typing import Any

from twisted.conch.error import ValidPublicKey
from twisted.conch.ssh import common, connection, keys
from twisted.cred.credentials import SSHPrivateKey, UsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.link.twisted import LinkUnavailable
from nfltr.relay.directory import AgentEntry
from nfltr.relay.interfaces import IRemoteRoutes
from nfltr.relay.leases import Leases
from nfltr.relay.link_handler import Relay
from nfltr.relay.shares import ShareRegistry
from nfltr.relay.ssh._auth import (
    STORE_UNAVAILABLE,
    AccountKeyChecker,
    APIKeyPasswordChecker,
    SSHIdentity,
)
from nfltr.relay.ssh._server import UNAVAILABLE, RelayConnection
from nfltr.relay.ssh._session import StatusSession
from nfltr.relay.ssh._user import ChannelRefused, RelayUser, SSHHub
from nfltr.relay.store_health import StoreHealth
from nfltr.relay.tcp_route import RouteRefused
from nfltr.ssh import SSHConfig
from nfltr.ssh.channel import ForwardChannel
from nfltr.store import StoreCorrupt, StoreUnavailable
from nfltr.tls import ShareCA, ensure_relay_pki
from nfltr.wire.messages import http_target
from tests.relay.helpers import FakeStore


def forward(address: bytes, port: int) -> bytes:
    return struct.pack(">L", len(address)) + address + struct.pack(">L", port)


def direct(host: bytes, port: int) -> bytes:
    return forward(host, port) + forward(b"127.0.0.1", 4242)


class FakeConnection:
    """
    The parts of conch's connection a L{RelayUser} uses.
    """

    def __init__(self) -> None:
        self.channels: dict[int, Any] = {}
        self.opened: list[tuple[Any, bytes]] = []
        self.transport = self
        self.disconnects: list[bytes] = []
        self.bytesReceived = 0
        self.bytesSent = 0

    def openChannel(self, channel: Any, extra: bytes) -> None:
        self.opened.append((channel, extra))
        self.channels[len(self.channels)] = channel

    def sendDisconnect(self, code: int, why: bytes) -> None:
        self.disconnects.append(why)

    def getPeer(self) -> IPv4Address:
        return IPv4Address("TCP", "192.0.2.7", 50022)


class Sink:
    """
    A protocol that records what happens to it.
    """

    def __init__(self) -> None:
        self.transport: Any = None
        self.lost: Any = None

    def makeConnection(self, transport: Any) -> None:
        self.transport = transport

    def connectionLost(self, reason: Any) -> None:
        self.lost = reason


class UserTests(SynchronousTestCase):
    """
    L{RelayUser} against a real L{Relay} and L{ShareRegistry}.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        pki = ensure_relay_pki(Path(self.mktemp()), [], share_domain="localhost")
        registry = ShareRegistry(ShareCA.load(pki, "localhost"), self.clock, {"localhost"},
                                 Leases(3600))
        self.relay = Relay(FakeStore(), self.clock, registry, maxAgents=None)
        self.hub = SSHHub(self.relay, SSHConfig(), self.clock, lambda: ("relay.test", 2222))

    def user(self, account: str = "alice", name: str = "laptop") -> tuple[RelayUser,
                                                                          FakeConnection]:
        user = RelayUser(SSHIdentity(account, name, f"ssh:{account}", "publickey:AAAA"),
                         self.hub)
        user.conn = FakeConnection()
        return user, user.conn

    def test_shareURL(self) -> None:
        """
        C{-R NAME:80} publishes an inspect share whose visitors' sessions
        become C{forwarded-tcpip} channels to the forward the client asked
        for; the share ends with the connection.
        """
        user, conn = self.user()
        self.assertTrue(user.global_tcpip_forward(forward(b"blog", 80)))
        self.assertIn("share URL https://blog.localhost", user.notes[-1])
        self.assertEqual(self.relay.shares.sharesOf("alice")[0][:2], ("blog", "inspect"))
        sink = Sink()
        channel = user.openSession(http_target("blog"), sink)
        self.assertIsInstance(channel, ForwardChannel)
        self.assertIs(sink.transport, channel)
        [(opened, extra)] = conn.opened
        self.assertEqual(opened.name, b"forwarded-tcpip")
        self.assertEqual(extra[:12], forward(b"blog", 80))
        user.logout()
        self.assertEqual(self.relay.shares.sharesOf("alice"), [])
        self.assertRaises(LinkUnavailable, user.openSession, http_target("blog"), Sink())

    def test_nameLeasedByAnother(self) -> None:
        """
        A name another account holds is refused; the status display says
        why.
        """
        alice, _ = self.user("alice")
        alice.global_tcpip_forward(forward(b"blog", 80))
        bob, _ = self.user("bob", "b")
        self.assertFalse(bob.global_tcpip_forward(forward(b"blog", 80)))
        self.assertIn("refused -R blog:80: name blog is leased to another account",
                      bob.notes[-1])

    def test_tcpShare(self) -> None:
        """
        C{-R 0:...} registers the user's agent with an allocated port, which
        the reply carries; another account's user of the same name is
        refused; cancelling the forward releases the agent.
        """
        user, _ = self.user()
        ok, reply = user.global_tcpip_forward(forward(b"localhost", 0))
        self.assertTrue(ok)
        (port,) = struct.unpack(">L", reply)
        entry = self.relay.directory.reachable("laptop", "alice", port)
        assert entry is not None
        self.assertEqual(entry.plain, frozenset({port}))
        other, _ = self.user("bob", "laptop")
        self.assertFalse(other.global_tcpip_forward(forward(b"", 22)))
        self.assertIn("name laptop is leased to another account", other.notes[-1])
        self.assertTrue(user.global_cancel_tcpip_forward(forward(b"localhost", port)))
        self.assertIsNone(self.relay.directory.agent("laptop"))

    def test_agentLimit(self) -> None:
        """
        The relay's agent limit counts SSH agents too.
        """
        self.relay.maxAgents = 1
        first, _ = self.user("alice", "one")
        self.assertTrue(first.global_tcpip_forward(forward(b"", 22)))
        second, _ = self.user("alice", "two")
        self.assertFalse(second.global_tcpip_forward(forward(b"", 22)))
        self.assertIn("agent limit", second.notes[-1])

    def test_ownershipRule(self) -> None:
        """
        C{direct-tcpip} to another account's agent, to a missing agent, or to
        a port not shared is refused with the same words; to an e2ee port of
        one's own agent with a pointer to tcp-connect.
        """
        holder = object()
        self.relay.claimAgent(
            AgentEntry("web", "alice", "k1", frozenset({80, 443}), holder, plain=frozenset({80}))
        )
        bob, _ = self.user("bob")
        alice, _ = self.user("alice")
        texts = []
        for user, host, port in [(bob, b"web", 80), (bob, b"nosuch", 80), (alice, b"web", 81)]:
            with self.assertRaises(ChannelRefused) as e:
                user.openChannel(b"direct-tcpip", 65536, 32768, direct(host, port))
            texts.append(e.exception.text)
        self.assertEqual(set(texts), {"no such agent or port"})
        with self.assertRaises(ChannelRefused) as e:
            alice.openChannel(b"direct-tcpip", 65536, 32768, direct(b"web", 443))
        self.assertIn("tcp-connect", e.exception.text)

    def test_otherReplica(self) -> None:
        """
        On a replica of a cluster, C{direct-tcpip} to an agent this replica
        does not hold asks the cluster's routes, with the client's proof
        and address: the channel comes when they answer, or its refusal in
        their words.
        """
        remote = _Remote()
        self.assertTrue(verifyObject(IRemoteRoutes, remote))
        self.relay.remote = remote
        alice, _ = self.user()
        first = alice.openChannel(b"direct-tcpip", 65536, 32768, direct(b"web", 22))
        second = alice.openChannel(b"direct-tcpip", 65536, 32768, direct(b"web", 23))
        self.assertEqual([call[:4] for call in remote.calls],
                         [("alice", "publickey:AAAA", "web", 22),
                          ("alice", "publickey:AAAA", "web", 23)])
        self.assertEqual(remote.calls[0][5], "192.0.2.7:50022")
        end = Sink()
        remote.answers[0].callback(end)
        channel = self.successResultOf(first)
        self.assertIsInstance(channel, ForwardChannel)
        self.assertIs(channel.protocol, end)
        remote.answers[1].errback(RouteRefused(1, "no such agent or port"))
        refused = self.failureResultOf(second, ChannelRefused)
        self.assertEqual(refused.value.text, "no such agent or port")

    def test_unknownChannelType(self) -> None:
        """
        Channel types other than session and direct-tcpip are refused.
        """
        user, _ = self.user()
        self.assertRaises(ChannelRefused, user.openChannel, b"x11", 1, 1, b"")
        self.assertIsInstance(user.openChannel(b"session", 1024, 1024, b""), StatusSession)

    def test_revoked(self) -> None:
        """
        Revoking the credential a connection logged in with disconnects it
        with the reason, and its shares go.
        """
        user, conn = self.user()
        user.global_tcpip_forward(forward(b"blog", 80))
        self.assertEqual(self.relay.revoke("ssh:alice"), 1)
        self.assertEqual(conn.disconnects, [b"API key ssh:alice was revoked"])
        self.assertEqual(self.relay.shares.sharesOf("alice"), [])

    def test_status(self) -> None:
        """
        C{status} lists the account's agents and shares, relay-wide.
        """
        user, _ = self.user()
        user.global_tcpip_forward(forward(b"blog", 80))
        user.global_tcpip_forward(forward(b"", 5000))
        other, _ = self.user("alice", "x")
        lines = other._commands()["status"]()
        self.assertIn("  agent laptop: TCP ports [5000]", lines)
        self.assertTrue(any(line.startswith("  share blog (inspect)") for line in lines))


@implementer(IRemoteRoutes)
class _Remote:
    """
    The cluster's routes, answering C{openSSH} when the test says.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.answers: list[Deferred[Any]] = []

    def routeTCP(self, session: Any, key: str, account: str, name: str, port: int,
                 kind: str = "tcp", client: str | None = None) -> None:
        raise AssertionError("not an SSH channel")

    def openSSH(self, account: str, credential: str, name: str, port: int, lostReason: str,
                client: str | None) -> Deferred[Any]:
        self.calls.append((account, credential, name, port, lostReason, client))
        self.answers.append(Deferred())
        return self.answers[-1]


class KeyStore:
    def __init__(self, accounts: dict[str, str]) -> None:
        self.accounts = accounts
        self.error: Exception | None = None

    def ssh_key_account(self, line: str) -> Deferred[str | None]:
        if self.error is not None:
            return fail(self.error)
        return succeed(self.accounts.get(line))


class CheckerTests(SynchronousTestCase):
    """
    L{AccountKeyChecker}: registered keys, real signatures, no SHA-1.
    """

    def setUp(self) -> None:
        self.key = keys.Key.fromString(_ed25519())
        line = self.key.public().toString("OPENSSH").decode()
        self.store = KeyStore({line: "alice"})
        self.checker = AccountKeyChecker(self.store.ssh_key_account)

    def login(self, alg: bytes = b"ssh-ed25519", signed: bool = True,
              key: keys.Key | None = None, data: bytes = b"session data") -> Any:
        key = key or self.key
        signature = key.sign(data) if signed else None
        creds = SSHPrivateKey(b"laptop", alg, key.public().blob(), data, signature)
        results: list[Any] = []
        self.checker.requestAvatarId(creds).addBoth(results.append)
        return results[0]

    def test_registered(self) -> None:
        """
        A registered key with a good signature logs into its account.
        """
        identity = self.login()
        self.assertEqual((identity.account, identity.user), ("alice", "laptop"))
        self.assertTrue(identity.credential.startswith("ssh:SHA256:"))
        # What another replica checks: the public key, never shown in a repr.
        blob = base64.b64encode(self.key.public().blob()).decode()
        self.assertEqual(identity.proof, f"publickey:{blob}")
        self.assertNotIn(blob, repr(identity))

    def test_refusals(self) -> None:
        """
        No signature yet: the key is acceptable (the client then signs); a
        bad signature, an unregistered key or a SHA-1 algorithm: refused.
        """
        self.assertTrue(self.login(signed=False).check(ValidPublicKey))
        other = keys.Key.fromString(_ed25519())
        sig = other.sign(b"session data")
        creds = SSHPrivateKey(b"u", b"ssh-ed25519", self.key.public().blob(), b"session data",
                              sig)
        results: list[Any] = []
        self.checker.requestAvatarId(creds).addBoth(results.append)
        self.assertTrue(results[0].check(UnauthorizedLogin))
        self.assertTrue(self.login(key=other).check(UnauthorizedLogin))
        self.assertTrue(self.login(alg=b"ssh-rsa").check(UnauthorizedLogin))

    def test_keyStoreDown(self) -> None:
        """
        A public key whose account cannot be found (the store is
        unavailable, and nothing is remembered) is refused with the message
        to try later; another failure is passed on as it is.
        """
        self.store.error = StoreUnavailable("Redis did not answer within 5 s")
        refused = self.login()
        self.assertTrue(refused.check(UnauthorizedLogin))
        self.assertEqual(str(refused.value), STORE_UNAVAILABLE)
        self.store.error = StoreCorrupt("Redis key nfltr:ssh:X does not hold an nfltr record")
        self.assertTrue(self.login().check(StoreCorrupt))

    def test_password(self) -> None:
        """
        With password logins on, an API key is a password; a revoked or
        unknown one is not.
        """
        store = FakeStore()
        text = store.addKey("0123456789ab", "alice")
        revoked: set[str] = set()
        checker = APIKeyPasswordChecker(store, revoked.__contains__)
        results: list[Any] = []
        checker.requestAvatarId(UsernamePassword(b"u", text.encode())).addBoth(results.append)
        self.assertEqual(results[-1].account, "alice")
        self.assertEqual(results[-1].proof, f"password:{text}")
        self.assertNotIn(text, repr(results[-1]))
        checker.requestAvatarId(UsernamePassword(b"u", b"nope")).addBoth(results.append)
        self.assertTrue(results[-1].check(UnauthorizedLogin))
        revoked.add("0123456789ab")
        checker.requestAvatarId(UsernamePassword(b"u", text.encode())).addBoth(results.append)
        self.assertTrue(results[-1].check(UnauthorizedLogin))

    def test_storeDown(self) -> None:
        """
        A login the store cannot check (it is unavailable) is refused with
        the message to try later, and marks the store down; while it is
        down, logins are refused without asking it.
        """
        store = FakeStore()
        text = store.addKey("0123456789ab", "alice")
        store.error = StoreUnavailable("Redis did not answer within 5 s")
        health = StoreHealth("the test store", Clock())
        health.log = Logger(observer=lambda event: None)
        checker = APIKeyPasswordChecker(store, set().__contains__, health)
        results: list[Any] = []
        checker.requestAvatarId(UsernamePassword(b"u", text.encode())).addBoth(results.append)
        self.assertTrue(results[-1].check(UnauthorizedLogin))
        self.assertEqual(str(results[-1].value), STORE_UNAVAILABLE)
        self.assertFalse(health.available)
        store.error, store.hold = None, True
        checker.requestAvatarId(UsernamePassword(b"u", text.encode())).addBoth(results.append)
        self.assertEqual(str(results[-1].value), STORE_UNAVAILABLE)
        self.assertEqual(store.held, [])


def _ed25519() -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    return ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )



class _Avatar:
    """
    An avatar whose channel opens answer when the test says.
    """

    def __init__(self, hub: SSHHub) -> None:
        self.hub = hub
        self.gone = self.draining = False
        self.answers: list[Deferred[Any]] = []

    def openChannel(self, channelType: bytes, windowSize: int, maxPacket: int,
                    data: bytes) -> Deferred[Any]:
        self.answers.append(Deferred())
        return self.answers[-1]


class _Channel:
    """
    A channel that records being closed.
    """

    ended = False

    def closed(self) -> None:
        self.ended = True


class _Transport:
    """
    The parts of the SSH transport a L{RelayConnection} uses here.
    """

    def __init__(self, avatar: _Avatar) -> None:
        self.avatar = avatar
        self.packets: list[tuple[int, bytes]] = []

    def sendPacket(self, kind: int, payload: bytes) -> None:
        self.packets.append((kind, payload))


class LaterOpenTests(SynchronousTestCase):
    """
    L{RelayConnection} with channel opens the avatar answers later (an agent
    another replica holds).
    """

    def setUp(self) -> None:
        clock = Clock()
        relay = Relay(FakeStore(), clock, None, maxAgents=None)
        self.avatar = _Avatar(SSHHub(relay, SSHConfig(max_channels=2), clock,
                                     lambda: ("relay.test", 2222)))
        self.transport = _Transport(self.avatar)
        self.conn = RelayConnection()
        self.conn.transport = self.transport

    def open(self, sender: int) -> None:
        self.conn.ssh_CHANNEL_OPEN(common.NS(b"direct-tcpip") + struct.pack(">3L", sender, 65536,
                                                                            32768)
                                   + direct(b"web", 22))

    def test_answeredLater(self) -> None:
        """
        Nothing is sent until the avatar answers; opens still waiting count
        against the channel limit; a refusal is sent with its text, and a
        failure that is not one with L{UNAVAILABLE} (and logged).
        """
        self.open(1)
        self.open(2)
        self.open(3)  # over the limit of 2, counting the two waiting
        [(kind, payload)] = self.transport.packets
        self.assertEqual(kind, connection.MSG_CHANNEL_OPEN_FAILURE)
        self.assertIn(b"at most 2 channels", payload)
        self.assertEqual(len(self.avatar.answers), 2)
        self.avatar.answers[0].errback(ChannelRefused(2, "no such agent or port"))
        self.assertEqual(self.transport.packets[-1][0], connection.MSG_CHANNEL_OPEN_FAILURE)
        self.assertIn(b"no such agent or port", self.transport.packets[-1][1])
        self.avatar.answers[1].errback(RuntimeError("a bug"))
        self.assertIn(UNAVAILABLE.encode(), self.transport.packets[-1][1])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.assertEqual(self.conn.waitingOpens, 0)

    def test_goneMeanwhile(self) -> None:
        """
        A channel that comes after the connection ended is closed, and
        nothing is sent.
        """
        self.open(1)
        self.conn.stopped = True
        channel = _Channel()
        self.avatar.answers[0].callback(channel)
        self.assertEqual((channel.ended, self.transport.packets), (True, []))
