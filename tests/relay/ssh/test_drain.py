"""
Tests of the drain of the relay's SSH connections when it stops
(L{nfltr.relay.ssh._server.SSHRelayFactory.drain}, L{RelayUser.drain}): as
native links drain, the forwarded channels in flight may finish within the
drain's time while nothing new starts, and every connection is gone at the
end.

  - L{UserDrainTests}: one connection's avatar against a real L{Relay} and
    L{ShareRegistry}: what is withdrawn from routing, what is refused;
  - L{DrainTests}: nfltr's SSH client and the relay's real transport in
    memory (C{twisted.test.iosim}) on a L{Clock}: an agent publishing a TCP
    share with C{-R}, a client reaching it with C{-L}, status displays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ed25519
from twisted.conch.error import ConchError
from twisted.conch.ssh import channel, keys
from twisted.conch.ssh.connection import OPEN_ADMINISTRATIVELY_PROHIBITED
from twisted.conch.ssh.transport import DISCONNECT_BY_APPLICATION
from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.test import iosim
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link.twisted import LinkUnavailable
from nfltr.relay.leases import Leases
from nfltr.relay.link_handler import Relay
from nfltr.relay.shares import ShareRegistry
from nfltr.relay.ssh._auth import SSHIdentity
from nfltr.relay.ssh._server import CLOSE_GRACE, SSHRelayFactory
from nfltr.relay.ssh._user import ChannelRefused, RelayUser, SSHHub
from nfltr.ssh import SSHConfig
from nfltr.tls import ShareCA, ensure_relay_pki
from nfltr.wire.messages import agent_target, http_target
from tests.relay.helpers import FakeStore
from tests.relay.ssh.test_requests import ClientConnection, Display, LoginClient, relayFactory
from tests.relay.ssh.test_server import FakeConnection, direct, forward

STOPPING = b"the relay is stopping"


class UserDrainTests(SynchronousTestCase):
    """
    L{RelayUser.drain} against a real L{Relay} and L{ShareRegistry}.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        pki = ensure_relay_pki(Path(self.mktemp()), [], share_domain="localhost")
        registry = ShareRegistry(ShareCA.load(pki, "localhost"), self.clock, {"localhost"},
                                 Leases(3600))
        self.relay = Relay(FakeStore(), self.clock, registry, maxAgents=None)
        self.hub = SSHHub(self.relay, SSHConfig(), self.clock, lambda: ("relay.test", 2222))
        self.user = RelayUser(SSHIdentity("alice", "laptop", "ssh:alice"), self.hub)
        self.user.conn = FakeConnection()

    def test_withdrawnFromRouting(self) -> None:
        """
        A draining connection's share URL and agent name leave routing at
        once: the relay opens nothing more towards its forwards; it prints
        the note; it still counts as the credential's link (a revocation
        reaches it).
        """
        user = self.user
        self.assertTrue(user.global_tcpip_forward(forward(b"blog", 80)))
        self.assertTrue(user.global_tcpip_forward(forward(b"localhost", 5000)))
        user.drain("the relay is stopping: open connections may finish within 30 s")
        self.assertEqual(self.relay.shares.sharesOf("alice"), [])
        self.assertIsNone(self.relay.directory.agent("laptop"))
        self.assertFalse(user.canOpen())
        self.assertRaises(LinkUnavailable, user.openSession, http_target("blog"), object())
        self.assertRaises(LinkUnavailable, user.openSession, agent_target(5000), object())
        self.assertEqual(user.notes[-1],
                         "the relay is stopping: open connections may finish within 30 s")
        self.assertEqual(self.relay.revoke("ssh:alice"), 1)

    def test_nothingNew(self) -> None:
        """
        While draining, a C{-R} is refused with the reason (and not counted
        against C{max_refusals}), every new channel is refused as
        administratively prohibited, and cancelling a TCP forward does not
        claim the agent name again.
        """
        user = self.user
        self.assertTrue(user.global_tcpip_forward(forward(b"localhost", 5000)))
        self.assertTrue(user.global_tcpip_forward(forward(b"localhost", 5001)))
        user.drain("stopping")
        self.assertFalse(user.global_tcpip_forward(forward(b"blog", 80)))
        self.assertEqual(user.notes[-1], "refused -R blog:80: the relay is stopping")
        self.assertEqual(user.refusals, 0)
        for kind, data in [(b"direct-tcpip", direct(b"web", 80)), (b"session", b"")]:
            with self.assertRaises(ChannelRefused) as e:
                user.openChannel(kind, 65536, 32768, data)
            self.assertEqual((e.exception.code, e.exception.text),
                             (OPEN_ADMINISTRATIVELY_PROHIBITED, "the relay is stopping"))
        self.assertTrue(user.global_cancel_tcpip_forward(forward(b"localhost", 5000)))
        self.assertIsNone(self.relay.directory.agent("laptop"))


class Forwarded(channel.SSHChannel):
    """
    The client's end of a forwarded channel (C{-L}'s C{direct-tcpip}, or
    the relay's C{forwarded-tcpip} towards a C{-R}): what it received, how
    it ended.
    """

    def __init__(self, name: bytes = b"direct-tcpip", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.name = name
        self.received = bytearray()
        self.failed: ConchError | None = None
        self.ended = False

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def openFailed(self, reason: Any) -> None:
        self.failed = reason

    def closed(self) -> None:
        self.ended = True


class AgentConnection(ClientConnection):
    """
    A client connection that accepts the relay's C{forwarded-tcpip}
    channels (an C{ssh -R}), keeping them in C{forwarded}.
    """

    def __init__(self) -> None:
        super().__init__()
        self.forwarded: list[Forwarded] = []

    def channel_forwarded_tcpip(self, windowSize: int, maxPacket: int, data: bytes) -> Any:
        chan = Forwarded(b"forwarded-tcpip", remoteWindow=windowSize, remoteMaxPacket=maxPacket)
        self.forwarded.append(chan)
        return chan


class Client:
    """
    One client connection of a test: the client, the relay's avatar of it
    (once logged in), the pump.
    """

    def __init__(self, client: LoginClient, server: Any, pump: iosim.IOPump) -> None:
        self.client, self.server, self.pump = client, server, pump

    @property
    def conn(self) -> Any:
        return self.client.conn

    @property
    def user(self) -> RelayUser:
        return self.server.avatar  # type: ignore[no-any-return]

    def open(self, chan: channel.SSHChannel, data: bytes = b"") -> None:
        self.conn.openChannel(chan, data)


class DrainTests(SynchronousTestCase):
    """
    L{SSHRelayFactory.drain} over the relay's real transport, in memory.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.key = keys.Key(ed25519.Ed25519PrivateKey.generate())
        self.factory: SSHRelayFactory = relayFactory(SSHConfig(), self.clock, self.key)
        self.factory.startFactory()
        self.clients: list[Client] = []

    def connect(self, login: bool = True) -> Client:
        """
        A client of the relay (logged in as C{laptop} of C{alice} unless
        not C{login}: then the pump has not run).
        """
        def client() -> LoginClient:
            made = LoginClient(self.key)
            made.conn = AgentConnection()
            return made

        made, server, pump = iosim.connectedServerAndClient(
            lambda: self.factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1)), client,
            greet=login, clock=self.clock)
        one = Client(made, server, pump)
        self.clients.append(one)
        if login:
            self.flush()
            self.assertTrue(made.conn.started, made.errors)
        return one

    def flush(self) -> None:
        """
        Pump every connection until none moves.
        """
        while any([c.pump.flush() for c in self.clients]):
            pass

    def agentAndVisitor(self) -> tuple[Client, Forwarded, Client, Forwarded]:
        """
        An agent publishing TCP share 5000 (C{-R 5000:...}) and a client
        reaching it (C{-L ...:laptop:5000}): both connections, both ends of
        the one session.
        """
        agent = self.connect()
        replies: list[Any] = []
        agent.conn.sendGlobalRequest(b"tcpip-forward", forward(b"localhost", 5000),
                                     wantReply=True).addCallback(replies.append)
        visitor = self.connect()
        self.assertEqual(len(replies), 1)
        near = Forwarded()
        visitor.open(near, direct(b"laptop", 5000))
        self.flush()
        [far] = agent.conn.forwarded
        return agent, far, visitor, near

    def test_idleDisconnectedAtOnce(self) -> None:
        """
        A logged-in connection without a channel is disconnected at once
        with the reason, and the drain fires when it is gone.
        """
        one = self.connect()
        d = self.factory.drain(30)
        self.assertNoResult(d)
        self.flush()
        self.assertEqual(one.client.errors, [(DISCONNECT_BY_APPLICATION, STOPPING)])
        self.assertIsNone(self.successResultOf(d))
        self.assertTrue(one.user.gone)
        self.assertEqual(self.factory.connections, set())

    def test_statusDisplayTold(self) -> None:
        """
        A status display prints why and for how long; a display alone does
        not hold the connection open.
        """
        one = self.connect()
        display = Display(localWindow=65536, localMaxPacket=32768)
        one.open(display)
        self.flush()
        d = self.factory.drain(30)
        self.flush()
        self.assertTrue(bytes(display.received).endswith(
            b"the relay is stopping: open connections may finish within 30 s\r\n"))
        self.assertEqual(one.client.errors, [(DISCONNECT_BY_APPLICATION, STOPPING)])
        self.successResultOf(d)

    def test_openChannelsGoOn(self) -> None:
        """
        During the drain, a session open through an C{-R} (a C{-L} channel
        on one side, a C{forwarded-tcpip} channel on the other) flows both
        ways; new channels and C{-R} requests are refused, the agent name
        is no longer routed; each connection ends when its last forwarded
        channel has, and the drain fires then.
        """
        agent, far, visitor, near = self.agentAndVisitor()
        display = Display(localWindow=65536, localMaxPacket=32768)
        visitor.open(display)
        self.flush()
        d = self.factory.drain(30)
        self.flush()
        self.assertIn(b"the relay is stopping: open connections may finish within 30 s",
                      bytes(display.received))
        self.assertIsNone(self.factory.hub.relay.directory.agent("laptop"))
        late = Forwarded()
        visitor.open(late, direct(b"laptop", 5000))
        replies: list[Any] = []
        agent.conn.sendGlobalRequest(b"tcpip-forward", forward(b"localhost", 5001),
                                     wantReply=True).addErrback(replies.append)
        self.flush()
        assert late.failed is not None
        self.assertEqual((late.failed.data, late.failed.value),
                         (OPEN_ADMINISTRATIVELY_PROHIBITED, STOPPING))
        self.assertEqual(len(replies), 1)
        visitor.conn.sendData(near, b"ping")
        agent.conn.sendData(far, b"pong")
        self.flush()
        self.assertEqual((bytes(far.received), bytes(near.received)), (b"ping", b"pong"))
        self.assertEqual(agent.client.errors + visitor.client.errors, [])
        self.assertNoResult(d)
        visitor.conn.sendClose(near)
        self.flush()
        self.assertTrue(near.ended and far.ended)
        self.assertEqual(agent.client.errors, [(DISCONNECT_BY_APPLICATION, STOPPING)])
        self.assertEqual(visitor.client.errors, [(DISCONNECT_BY_APPLICATION, STOPPING)])
        self.successResultOf(d)

    def test_timeout(self) -> None:
        """
        What is still open when the drain's time is up is disconnected
        then, with the reason; the drain fires.
        """
        agent, _, visitor, _ = self.agentAndVisitor()
        d = self.factory.drain(10)
        self.clock.advance(9.5)
        self.flush()
        self.assertEqual(agent.client.errors + visitor.client.errors, [])
        self.clock.advance(0.5)
        self.flush()
        self.assertEqual(agent.client.errors, [(DISCONNECT_BY_APPLICATION, STOPPING)])
        self.assertEqual(visitor.client.errors, [(DISCONNECT_BY_APPLICATION, STOPPING)])
        self.successResultOf(d)

    def test_zeroTimeout(self) -> None:
        """
        A drain of 0 seconds disconnects connections with open channels at
        once.
        """
        agent, _, visitor, _ = self.agentAndVisitor()
        d = self.factory.drain(0)
        self.flush()
        self.assertEqual(agent.client.errors, [(DISCONNECT_BY_APPLICATION, STOPPING)])
        self.assertEqual(visitor.client.errors, [(DISCONNECT_BY_APPLICATION, STOPPING)])
        self.successResultOf(d)

    def test_noNewLogins(self) -> None:
        """
        A connection not logged in when the drain begins, and one made
        during it, are disconnected at once with the reason: no login
        succeeds.
        """
        early = self.connect(login=False)
        d = self.factory.drain(30)
        late = self.connect(login=False)
        self.flush()
        for one in (early, late):
            self.assertFalse(one.conn.started)
            self.assertEqual(one.client.errors, [(DISCONNECT_BY_APPLICATION, STOPPING)])
        self.successResultOf(d)

    def test_nothingToDrain(self) -> None:
        """
        With no connection, the drain fires at once; a second drain waits
        for the first.
        """
        self.successResultOf(self.factory.drain(5))
        self.successResultOf(self.factory.drain(5))

    def test_secondDrainWaits(self) -> None:
        """
        A second drain fires with the first, when the last connection is
        gone, and keeps the first's time.
        """
        self.agentAndVisitor()
        first = self.factory.drain(10)
        second = self.factory.drain(60)
        self.clock.advance(10)
        self.assertNoResult(second)
        self.flush()
        self.successResultOf(first)
        self.successResultOf(second)

    def test_cutWhenNotClosed(self) -> None:
        """
        A connection still open L{CLOSE_GRACE} seconds after the drain's
        disconnect (its client does not read) is aborted.
        """
        transport = StringTransport()
        server = self.factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
        server.makeConnection(transport)
        d: Deferred[None] = self.factory.drain(30)
        self.assertTrue(transport.disconnecting)
        self.clock.advance(CLOSE_GRACE - 0.1)
        self.assertFalse(transport.disconnected)
        self.clock.advance(0.1)
        self.assertTrue(transport.disconnected)
        self.assertNoResult(d)
        server.connectionLost(None)
        self.successResultOf(d)
        self.assertEqual(self.clock.getDelayedCalls(), [])
