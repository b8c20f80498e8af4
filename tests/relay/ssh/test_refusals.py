"""
What an SSH client is told when its C{ssh -L}/C{-W} channel to an agent
fails (L{nfltr.relay.ssh._user}, L{nfltr.ssh.channel}): a real relay, a real
agent link over iosim, an SSH connection's avatar on a L{Clock}.

The refusals the relay decides itself (no such agent or port, another
account's agent, a port shared end-to-end encrypted, an agent that takes no
session now) are channel open failures, before any confirmation:
L{tests.relay.ssh.test_server.UserTests.test_ownershipRule} and
C{test_otherReplica}.  The agent's own refusal (its service is down) is one
too: the relay confirms the channel only once the agent accepted the session
(link C{ACCEPT}), within C{SSHConfig.open_timeout}.  A reset after that (the
service closed the connection abruptly) is told in a debug message.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from twisted.conch.ssh.connection import OPEN_CONNECT_FAILED
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import ErrorCode, LinkConnection
from nfltr.link import twisted as link_twisted
from nfltr.link.twisted import LinkSession
from nfltr.relay.leases import Leases
from nfltr.relay.shares import ShareRegistry
from nfltr.relay.ssh._auth import SSHIdentity
from nfltr.relay.ssh._user import ChannelRefused, RelayUser, SSHHub
from nfltr.ssh import SSHConfig
from nfltr.ssh.channel import ForwardChannel
from nfltr.tls import ShareCA, ensure_relay_pki
from nfltr.wire.messages import TcpShare, agent_hello
from tests.relay.helpers import RelayHarness
from tests.relay.ssh.test_server import direct
from tests.ssh.test_channel import FakeConnection as ChannelConnection

from ...link.twisted_helpers import RecordingHandler


class SSHConnection(ChannelConnection):
    """
    An SSH connection as a channel and its avatar see it.
    """

    def getPeer(self) -> Any:  # type: ignore[override]
        return IPv4Address("TCP", "192.0.2.7", 50022)


class Held(RecordingHandler):
    """
    An agent that takes each session and answers when the test says (as one
    that dials its service).
    """

    def sessionRequested(self, session: LinkSession) -> None:
        self.sessions.append(session)
        session.accept(Protocol(), confirm=False)


class AgentCase(SynchronousTestCase):
    """
    A relay, an agent C{box} of account C{acme} sharing port 3000 plainly,
    and an SSH user of that account.
    """

    agentHandler: Any = None

    def setUp(self) -> None:
        self.clock = clock = Clock()
        pki = ensure_relay_pki(Path(self.mktemp()), [], share_domain="localhost")
        registry = ShareRegistry(ShareCA.load(pki, "localhost"), clock, {"localhost"},
                                 Leases(60.0))
        self.h = RelayHarness(shares=registry, clock=clock)
        key = self.h.store.addKey("aaaaaaaaaaaa", "acme")
        self.agent = self.agentHandler or RecordingHandler(lambda s: Protocol())
        self.h.dial(agent_hello(key, "box", [TcpShare(3000, e2ee=False)]), self.agent)
        hub = SSHHub(self.h.relay, SSHConfig(), clock, lambda: ("relay.test", 2222))
        self.user = RelayUser(SSHIdentity("acme", "laptop", "aaaaaaaaaaaa"), hub)
        self.conn = SSHConnection()
        self.user.conn = self.conn

    def openForward(self) -> ForwardChannel:
        """
        Open and confirm a C{direct-tcpip} channel to box:3000 as
        L{nfltr.relay.ssh._server.RelayConnection} does (the client knows it
        as its channel 5); the agent sees the session.
        """
        d = self.user.openChannel(b"direct-tcpip", 65536, 32768, direct(b"box", 3000))
        self.h.run()
        channel = self.successResultOf(d)
        assert isinstance(channel, ForwardChannel)
        self.conn.channelsToRemoteChannel[channel] = 5
        channel.channelOpen(b"")
        self.h.run()
        self.assertEqual([s.target for s in self.agent.sessions], ["tcp:3000"])
        return channel


class AgentRefusalTests(AgentCase):
    """
    An agent that resets a session after the channel opened: a debug message.
    """

    def test_resetAfterOpen(self) -> None:
        """
        The agent's reset (C{CONNECT_FAILED}, its words) reaches the client
        as one SSH debug message naming its channel and the agent's words
        (C{ssh -v} prints it), and the channel closes without EOF.
        """
        self.openForward()
        self.agent.sessions[0].abortWith(ErrorCode.CONNECT_FAILED,
                                         "service on port 3000 refused the connection")
        self.h.run()
        self.assertEqual(self.conn.debugs, [
            (b"channel 5 (direct-tcpip) reset: service on port 3000 refused the connection",
             True),
        ])
        self.assertEqual((self.conn.eofs, self.conn.closes), (0, 1))

    def test_cleanEndSaysNothing(self) -> None:
        """
        A session the agent ends cleanly (its service closed) ends the
        channel's stream with EOF, and no debug message.
        """
        self.openForward()
        self.agent.sessions[0].loseConnection()
        self.h.run()
        self.assertEqual(self.conn.debugs, [])
        self.assertEqual((self.conn.eofs, self.conn.closes), (1, 0))


class AcceptanceTests(AgentCase):
    """
    The relay confirms a C{direct-tcpip} channel only once the agent accepted
    the session.
    """

    def setUp(self) -> None:
        self.agentHandler = Held()
        super().setUp()

    def opening(self) -> Any:
        """
        Ask for a channel to box:3000; the agent has the session, unanswered.
        """
        d = self.user.openChannel(b"direct-tcpip", 65536, 32768, direct(b"box", 3000))
        self.h.run()
        self.assertEqual([s.target for s in self.agent.sessions], ["tcp:3000"])
        self.assertNoResult(d)
        return d

    def test_confirmedOnAccept(self) -> None:
        """
        The agent's ACCEPT confirms the channel.
        """
        d = self.opening()
        self.agent.sessions[0].confirm()
        self.h.run()
        self.assertIsInstance(self.successResultOf(d), ForwardChannel)

    def test_serviceDown(self) -> None:
        """
        The agent's C{CONNECT_FAILED} reset is the channel's open failure,
        C{OPEN_CONNECT_FAILED} with the agent's words, and no debug message.
        """
        d = self.opening()
        self.agent.sessions[0].abortWith(ErrorCode.CONNECT_FAILED,
                                         "service on port 3000 refused the connection")
        self.h.run()
        refused = self.failureResultOf(d, ChannelRefused).value
        self.assertEqual((refused.code, refused.text),
                         (OPEN_CONNECT_FAILED, "service on port 3000 refused the connection"))
        self.assertEqual(self.conn.debugs, [])

    def test_noAnswer(self) -> None:
        """
        No answer within C{open_timeout}: the open fails saying so, and the
        agent's session is reset with C{CANCEL}.
        """
        d = self.opening()
        session = self.agent.sessions[0]
        self.clock.advance(SSHConfig().open_timeout - 0.5)
        self.assertNoResult(d)
        self.clock.advance(0.5)
        self.h.run()
        refused = self.failureResultOf(d, ChannelRefused).value
        self.assertEqual((refused.code, refused.text),
                         (OPEN_CONNECT_FAILED, "the agent did not answer within 15 s"))
        self.assertTrue(session.disconnected)


class OlderAgentTests(AgentCase):
    """
    An agent whose link did not announce C{accepts} (an older one) cannot
    answer: the channel is confirmed at once, as before.
    """

    def setUp(self) -> None:
        self.agentHandler = Held()
        # Both ends of the agent's link as an older peer: no accepts in the hellos.
        self.patch(link_twisted, "LinkConnection", partial(LinkConnection, accepts=False))
        super().setUp()

    def test_confirmedAtOnce(self) -> None:
        """
        The channel comes at once; the agent was not asked for an answer.
        """
        channel = self.user.openChannel(b"direct-tcpip", 65536, 32768, direct(b"box", 3000))
        self.assertIsInstance(channel, ForwardChannel)
        self.h.run()
        [session] = self.agent.sessions
        self.assertFalse(session.acceptOwed)
