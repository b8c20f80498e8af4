"""
Tests for L{nfltr.relay.interfaces} and the relay's one claim place
(L{nfltr.relay.agents.Relay}): the agent behaviour every holder kind owes
(L{IAgentHolder}: a native agent's link, an SSH connection), written once
in L{HolderBehaviour} and run per kind, as magic-wormhole's transit relay
runs its behaviour tests per transport; a real relay with real dialer links
over iosim and SSH connections' avatars on a L{Clock}.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, ClassVar

from twisted.internet import error
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.link import RefusalReason
from nfltr.relay.agents import revoked_message
from nfltr.relay.interfaces import LINK, SSH, IAgentHolder, ISessionOpener, IShareRoutes
from nfltr.relay.leases import Leases
from nfltr.relay.metrics import metrics_registry
from nfltr.relay.names import REPLACED, name_connected_message
from nfltr.relay.share_routes import ShareRoutes
from nfltr.relay.shares import ShareRegistry
from nfltr.relay.ssh._auth import SSHIdentity
from nfltr.relay.ssh._user import ChannelRefused, RelayUser, SSHHub
from nfltr.sni.twisted import Splice
from nfltr.ssh import SSHConfig
from nfltr.tls import ShareCA, ensure_relay_pki
from nfltr.wire.messages import (
    NOT_FOUND_CODE,
    NOT_FOUND_REASON,
    PASSTHROUGH,
    HttpShare,
    TcpShare,
    agent_hello,
    client_target,
)
from tests.relay.ssh.test_server import FakeConnection, direct, forward

from ..link.twisted_helpers import RecordingHandler
from .helpers import Dialer, RelayHarness, lost_reason
from .test_link_handler import Recorder
from .test_metrics import samples

LEASE = 60.0
#: Accounts and the ids of their keys (API keys and SSH credentials alike).
ACCOUNTS = {"acme": "aaaaaaaaaaaa", "bravo": "bbbbbbbbbbbb"}


class Held:
    """
    One holder in a test, whatever its kind: what it was told, whether it
    is gone, what was opened towards it.
    """

    holder: Any

    def told(self) -> list[str]:
        raise NotImplementedError

    def closed(self) -> bool:
        raise NotImplementedError

    def leave(self) -> None:
        """
        Its connection ends (not a refusal: a cable pulled, a Ctrl-C).
        """
        raise NotImplementedError

    def opened(self) -> list[str]:
        """
        The targets of the sessions opened towards it.
        """
        raise NotImplementedError


class HeldLink(Held):
    def __init__(self, h: RelayHarness, dialer: Dialer, handler: RecordingHandler) -> None:
        self.h, self.dialer, self.handler = h, dialer, handler
        self.holder = dialer.relayHandler

    def told(self) -> list[str]:
        self.h.run()
        return [c["message"] for c in self.dialer.controls if c["type"] == "refused"]

    def closed(self) -> bool:
        self.h.run()
        return self.dialer.closed

    def leave(self) -> None:
        self.dialer.cut(error.ConnectionLost("cable pulled"))
        self.h.run()

    def opened(self) -> list[str]:
        self.h.run()
        return [s.target for s in self.handler.sessions]


class HeldSSH(Held):
    def __init__(self, user: RelayUser, conn: FakeConnection) -> None:
        self.holder, self.conn = user, conn

    def told(self) -> list[str]:
        return [why.decode() for why in self.conn.disconnects]

    def closed(self) -> bool:
        return bool(self.holder.gone)

    def leave(self) -> None:
        self.holder.logout()  # what conch calls when the connection ends

    def opened(self) -> list[str]:
        targets = []
        for _channel, extra in self.conn.opened:
            (length,) = struct.unpack_from(">L", extra)
            (port,) = struct.unpack_from(">L", extra, 4 + length)
            address = extra[4 : 4 + length].decode()
            targets.append(f"tcp:{port}" if address == "localhost" else f"share:{address}")
        return targets


class Kind:
    """
    Makes holders of one kind on a test's relay.
    """

    name: ClassVar[str]

    def __init__(self, case: HolderCase) -> None:
        self.case = case

    def agent(self, account: str, name: str, port: int = 3000) -> Held:
        """
        A holder of C{account} holding agent C{name}, sharing C{port}
        (without end-to-end TLS, so that SSH clients may reach it too).
        """
        raise NotImplementedError

    def share(self, account: str, name: str, agent: str = "box") -> Held:
        """
        A holder of C{account} publishing the share C{name}.
        """
        raise NotImplementedError


class LinkKind(Kind):
    name = LINK

    def dial(self, account: str, app: dict[str, Any]) -> Held:
        handler = RecordingHandler(lambda s: Recorder())
        dialer = self.case.h.dial(app, handler)
        return HeldLink(self.case.h, dialer, handler)

    def agent(self, account: str, name: str, port: int = 3000) -> Held:
        key = self.case.keys[account]
        return self.dial(account, agent_hello(key, name, [TcpShare(port, e2ee=False)]))

    def share(self, account: str, name: str, agent: str = "box") -> Held:
        key = self.case.keys[account]
        return self.dial(account, agent_hello(key, agent, [], [HttpShare(name, 443, PASSTHROUGH)]))


class SSHKind(Kind):
    name = SSH

    def user(self, account: str, name: str) -> HeldSSH:
        user = RelayUser(SSHIdentity(account, name, ACCOUNTS[account]), self.case.hub)
        user.conn = FakeConnection()
        return HeldSSH(user, user.conn)

    def agent(self, account: str, name: str, port: int = 3000) -> Held:
        held = self.user(account, name)
        held.holder.global_tcpip_forward(forward(b"localhost", port))
        return held

    def share(self, account: str, name: str, agent: str = "box") -> Held:
        held = self.user(account, agent)
        held.holder.global_tcpip_forward(forward(name.encode(), 443))
        return held


KINDS: dict[str, type[Kind]] = {LINK: LinkKind, SSH: SSHKind}


class HolderCase(SynchronousTestCase):
    """
    A relay with a share registry, its SSH hub, and a key per account.
    """

    def setUp(self) -> None:
        clock = Clock()
        pki = ensure_relay_pki(Path(self.mktemp()), [], share_domain="localhost")
        self.registry = ShareRegistry(ShareCA.load(pki, "localhost"), clock, {"localhost"},
                                      Leases(LEASE))
        self.h = RelayHarness(shares=self.registry, clock=clock)
        self.relay = self.h.relay
        self.keys = {account: self.h.store.addKey(keyid, account)
                     for account, keyid in ACCOUNTS.items()}
        self.hub = SSHHub(self.relay, SSHConfig(), clock, lambda: ("relay.test", 2222))

    def visit(self, share: str) -> None:
        """
        One visitor of C{share}, through its route on the TLS port.
        """
        route = self.registry.route(share)
        assert isinstance(route, Splice)
        route.backend.connect(Protocol(), IPv4Address("TCP", "127.0.0.1", 1))


class InterfaceTests(HolderCase):
    """
    The relay's parts provide the interfaces they declare.
    """

    def test_verified(self) -> None:
        """
        Both kinds of holder provide L{IAgentHolder}, the TCP route
        L{ISessionOpener}, the share registry and a fixed table
        L{IShareRoutes}.
        """
        for kind in (LinkKind(self), SSHKind(self)):
            held = kind.agent("acme", f"a-{kind.name}")
            self.assertTrue(verifyObject(IAgentHolder, held.holder))
            self.assertEqual(held.holder.kind, kind.name)
        self.assertTrue(verifyObject(ISessionOpener, self.relay.tcp))
        self.assertTrue(verifyObject(IShareRoutes, self.registry))
        self.assertTrue(verifyObject(IShareRoutes, ShareRoutes()))


class HolderBehaviour:
    """
    What every kind of agent holder does; mixed into a test case per kind
    (C{kind}).
    """

    kind: ClassVar[type[Kind]]
    h: RelayHarness
    relay: Any
    registry: ShareRegistry
    assertEqual: Any
    assertIs: Any
    assertIsNone: Any
    assertTrue: Any
    assertFalse: Any
    assertRaises: Any
    visit: Any

    def make(self) -> Kind:
        return self.kind(self)

    def assertNameFree(self, name: str, share: bool = False) -> None:
        """
        C{name} (an agent name, or a share's) has no holder and no route
        now, and stays C{acme}'s: C{bravo}'s holder (of this kind) is
        refused it, C{acme}'s next one takes it.
        """
        kind = self.make()
        self.assertIsNone(self.relay.directory.agent(name))
        self.assertIsNone(self.registry.route(name))
        if share:
            kind.share("bravo", name, "other")
            self.assertIsNone(self.registry.holderOf(name))
            mine = kind.share("acme", name)
            self.assertIs(self.registry.holderOf(name), mine.holder)
        else:
            kind.agent("bravo", name)
            self.assertIsNone(self.relay.directory.agent(name))
            mine = kind.agent("acme", name)
            self.assertIs(self.relay.directory.agent(name).holder, mine.holder)

    def test_claim(self) -> None:
        """
        A holder's agent is registered under its name, account and ports.
        """
        held = self.make().agent("acme", "web", 3000)
        entry = self.relay.directory.agent("web")
        self.assertIs(entry.holder, held.holder)
        self.assertEqual((entry.account, entry.ports, entry.plain),
                         ("acme", {3000}, {3000}))

    def test_replacedByNewerAgent(self) -> None:
        """
        A newer native agent of the account taking the agent name over
        replaces the holder, which is told C{REPLACED} and closed; once the
        newer one leaves, the name is free for the account.
        """
        old = self.make().agent("acme", "web")
        new = LinkKind(self).agent("acme", "web")
        self.assertEqual(old.told(), [REPLACED])
        self.assertTrue(old.closed())
        self.assertIs(self.relay.directory.agent("web").holder, new.holder)
        new.leave()
        self.assertNameFree("web")

    def test_notReplacedBySSH(self) -> None:
        """
        An SSH connection of the account does not take the agent name of a
        connected holder: it is told why, the holder keeps the name.
        """
        old = self.make().agent("acme", "web")
        late = SSHKind(self).agent("acme", "web")
        self.assertIn(name_connected_message("web"), late.holder.notes[-1])
        self.assertEqual(old.told(), [])
        self.assertIs(self.relay.directory.agent("web").holder, old.holder)

    def shareTakenOver(self, newer: type[Kind]) -> None:
        old = self.make().share("acme", "insp", "one")
        self.assertIs(self.registry.holderOf("insp"), old.holder)
        new = newer(self).share("acme", "insp", "two")
        self.assertEqual(old.told(), [REPLACED])
        self.assertTrue(old.closed())
        self.assertIs(self.registry.holderOf("insp"), new.holder)
        self.visit("insp")
        self.assertEqual(old.opened(), [])
        [target] = new.opened()
        self.assertTrue(target.startswith("share:insp"), target)
        self.assertEqual(new.told(), [])
        new.leave()
        self.assertNameFree("insp", share=True)

    def test_shareTakenOverByLink(self) -> None:
        """
        A native agent of the account publishing the holder's share name
        replaces the holder: told C{REPLACED}, closed; visitors reach the
        newer one; once it leaves, the name has no route and is free for
        the account.
        """
        self.shareTakenOver(LinkKind)

    def test_shareTakenOverBySSH(self) -> None:
        """
        The same for an SSH connection of the account publishing it
        (C{ssh -R NAME:443:...}).
        """
        self.shareTakenOver(SSHKind)

    def test_refuse(self) -> None:
        """
        A holder refused is told the words once, closed, and gives up its
        agent name and shares.
        """
        held = self.make().agent("acme", "web")
        held.holder.refuse(RefusalReason.LIMIT, "go away")
        held.holder.refuse(RefusalReason.LIMIT, "go away")
        self.assertEqual(held.told(), ["go away"])
        self.assertTrue(held.closed())
        self.assertIsNone(self.relay.directory.agent("web"))

    def test_release(self) -> None:
        """
        A holder whose connection ends gives its names up, which stay the
        account's for the lease time.
        """
        held = self.make().share("acme", "blog", "web")
        held.leave()
        self.assertNameFree("blog", share=True)
        agent = self.make().agent("acme", "laptop")
        agent.leave()
        self.assertNameFree("laptop")
        self.h.clock.advance(LEASE)
        taken = self.make().agent("bravo", "web")
        self.assertIs(self.relay.directory.agent("web").holder, taken.holder)

    def test_revoke(self) -> None:
        """
        Revoking the key a holder logged in with tells it so, closes it and
        frees its name.
        """
        held = self.make().agent("acme", "web")
        self.assertEqual(self.relay.revoke(ACCOUNTS["acme"]), 1)
        self.assertEqual(held.told(), [revoked_message(ACCOUNTS["acme"])])
        self.assertTrue(held.closed())
        self.assertIsNone(self.relay.directory.agent("web"))

    def test_routeTCP(self) -> None:
        """
        A native client and an SSH client (C{-L}) of the account reach the
        holder's port through the one TCP route; those of another account
        are refused with the not-found words; each outcome is counted.
        """
        held = self.make().agent("acme", "web", 3000)
        linkEnds, sshRefusals = [], []
        for account in ("acme", "bravo"):
            client = self.h.client(self.keys[account])
            recorder = Recorder()
            client.link.openSession(client_target("web", 3000), recorder)
            self.h.run()
            linkEnds.append(lost_reason(recorder.lost))
            ssh = SSHKind(self).user(account, "x")
            try:
                ssh.holder.openChannel(b"direct-tcpip", 65536, 32768, direct(b"web", 3000))
            except ChannelRefused as e:
                sshRefusals.append((account, e.text))
        self.assertEqual(linkEnds, [None, (NOT_FOUND_CODE, NOT_FOUND_REASON)])
        self.assertEqual(sshRefusals, [("bravo", NOT_FOUND_REASON)])
        self.assertEqual(held.opened(), ["tcp:3000", "tcp:3000"])
        counted = self.relay.counters.sessions
        self.assertEqual((counted["tcp", "routed"], counted["tcp", "not_found"]), (2, 2))

    def test_figures(self) -> None:
        """
        A holder reports its kind, when it connected, the sessions open
        towards it, its bytes and round-trip time; the metrics show exactly
        those.
        """
        self.h.clock.advance(5)
        held = self.make().agent("acme", "web", 3000)
        before = held.holder.figures()
        self.assertEqual((before.kind, before.since, before.sessions),
                         (self.kind.name, 5.0, 0))
        client = self.h.client(self.keys["acme"])
        client.link.openSession(client_target("web", 3000), Recorder())
        self.h.run()
        figures = held.holder.figures()
        self.assertEqual(figures.sessions, 1)
        registry = metrics_registry(_Service(self.relay))
        seen = samples(registry)
        agent = (("agent", "web"),)
        self.assertEqual(seen[("nfltr_agent_sessions_open", agent)], 1)
        self.assertEqual(
            seen[("nfltr_agent_link_bytes_total", (*agent, ("direction", "in")))],
            figures.bytesIn)
        self.assertEqual(
            seen[("nfltr_agent_link_bytes_total", (*agent, ("direction", "out")))],
            figures.bytesOut)
        self.assertEqual(
            seen[("nfltr_agent_connected_since_seconds", (*agent, ("kind", self.kind.name)))],
            5.0)
        self.assertEqual(("nfltr_agent_link_rtt_seconds", agent) in seen,
                         figures.rtt is not None)


class _Service:
    """
    What the metrics read of a relay service.
    """

    def __init__(self, relay: Any) -> None:
        self.relay = relay
        self.router = None
        self.tlsAdmission = None
        self.httpAdmission = None


class LinkHolderTests(HolderBehaviour, HolderCase):
    """
    L{HolderBehaviour} for native agents' links.
    """

    kind = LinkKind


class SSHHolderTests(HolderBehaviour, HolderCase):
    """
    L{HolderBehaviour} for SSH connections.
    """

    kind = SSHKind

