"""
Tests of an SSH connection's claim to its agent name (L{nfltr.relay.ssh._user}
C{_claimAgent}): the relay's one ownership rule, shared with native agents
(L{nfltr.relay.names}), on a relay with real dialer links
(L{tests.relay.helpers.RelayHarness}) and a L{Clock}.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

from twisted.internet import error
from twisted.internet.defer import Deferred, fail
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.leases import Leases, NameLeased
from nfltr.relay.names import name_taken_message
from nfltr.relay.shares import ShareRegistry
from nfltr.relay.ssh._auth import SSHIdentity
from nfltr.relay.ssh._user import RelayUser, SSHHub
from nfltr.ssh import SSHConfig
from nfltr.tls import ShareCA, ensure_relay_pki
from tests.relay.helpers import RelayHarness

from .test_server import FakeConnection, forward

LEASE = 60.0
ALICE, BOB = "aaaaaaaaaaaa", "bbbbbbbbbbbb"


class ClaimTests(SynchronousTestCase):
    """
    SSH connections (C{ssh -R 0:...} as C{NAME@relay}) and native agents
    under one lease per name.
    """

    def setUp(self) -> None:
        clock = Clock()
        pki = ensure_relay_pki(Path(self.mktemp()), [], share_domain="localhost")
        registry = ShareRegistry(ShareCA.load(pki, "localhost"), clock, {"localhost"},
                                 Leases(LEASE))
        self.h = RelayHarness(shares=registry, clock=clock)
        self.alice = self.h.store.addKey(ALICE, "alice")
        self.bob = self.h.store.addKey(BOB, "bob")
        self.hub = SSHHub(self.h.relay, SSHConfig(), clock, lambda: ("relay.test", 2222))

    def user(self, account: str, name: str = "blog",
             credential: str | None = None) -> tuple[RelayUser, FakeConnection]:
        user = RelayUser(SSHIdentity(account, name, credential or f"ssh:{account}"), self.hub)
        user.conn = FakeConnection()
        return user, user.conn

    def tcp(self, user: RelayUser) -> int | None:
        """
        C{-R 0:localhost:22}: the port the relay allocated, or None if
        refused.
        """
        answer = user.global_tcpip_forward(forward(b"localhost", 0))
        if answer is False:
            return None
        (port,) = struct.unpack(">L", answer[1])
        return int(port)

    def test_sshLeaseOutlivesTheConnection(self) -> None:
        """
        Alice's SSH connection holding C{blog} ends: Bob can take C{blog}
        neither over SSH nor as a native agent while her lease lives, and
        hears the same words both ways; Alice's native agent gets it back.
        """
        alice, _ = self.user("alice")
        self.assertIsNotNone(self.tcp(alice))
        alice.logout()
        bob, _ = self.user("bob")
        self.assertIsNone(self.tcp(bob))
        taken = name_taken_message("blog")
        self.assertIn(f"refused -R localhost:0: {taken}: log in as another user name",
                      bob.notes[-1])
        native = self.h.agent(self.bob, "blog")
        self.assertEqual(native.controls[0]["message"], name_taken_message("blog"))
        back = self.h.agent(self.alice, "blog")
        self.assertEqual(back.controls[0]["type"], "welcome")

    def test_nativeLeaseHoldsAgainstSSH(self) -> None:
        """
        Alice's native agent C{blog} away for a moment (its link cut):
        Bob's SSH connection cannot claim C{blog}; Alice's can; after the
        lease ends without her, Bob's can.
        """
        native = self.h.agent(self.alice, "blog")
        native.cut(error.ConnectionLost("wifi"))
        self.h.run()
        bob, _ = self.user("bob")
        self.assertIsNone(self.tcp(bob))
        alice, _ = self.user("alice")
        self.assertIsNotNone(self.tcp(alice))
        alice.logout()
        self.h.clock.advance(LEASE)
        self.assertIsNotNone(self.tcp(bob))
        self.assertEqual(self.h.relay.directory.agent("blog").account, "bob")

    def test_ownConnectedAgentNotReplaced(self) -> None:
        """
        An SSH connection never replaces a connected agent of its own
        account under its name; it is told to log in as another name.
        """
        native = self.h.agent(self.alice, "blog")
        alice, _ = self.user("alice")
        self.assertIsNone(self.tcp(alice))
        self.assertIn("agent name blog is connected already", alice.notes[-1])
        self.assertIn("log in as another user name", alice.notes[-1])
        self.assertFalse(native.closed)

    def test_revokedAfterItsAgentEnded(self) -> None:
        """
        A connection whose TCP forward was cancelled (its agent name given
        up) but which still publishes a share URL is still disconnected
        when the API key it logged in with is revoked.
        """
        user, conn = self.user("alice", credential=ALICE)
        port = self.tcp(user)
        assert port is not None
        self.assertTrue(user.global_tcpip_forward(forward(b"notes", 80)))
        self.assertTrue(user.global_cancel_tcpip_forward(forward(b"localhost", port)))
        self.assertIsNone(self.h.relay.directory.agent("blog"))
        self.assertEqual(self.h.relay.revoke(ALICE), 1)
        self.assertEqual(conn.disconnects, [f"API key {ALICE} was revoked".encode()])
        self.assertEqual(self.h.relay.shares.sharesOf("alice"), [])


class DirectoryLeases(Leases):
    """
    This relay's table, with a shared table's verdict beside it: the names
    in C{elsewhere} are another account's in the directory.
    """

    def __init__(self) -> None:
        super().__init__(LEASE)
        self.elsewhere: set[str] = set()

    def reserve(self, names: Sequence[str], account: str, now: float) -> Deferred[None]:
        for name in names:
            if name in self.elsewhere:
                return fail(NameLeased(name))
        return super().reserve(names, account, now)


class DirectoryClaimTests(SynchronousTestCase):
    """
    C{ssh -R} is answered before the name is reserved in a shared lease
    table (conch replies at once): a name another account holds there is
    withdrawn after the answer, and the status display says why.
    """

    def setUp(self) -> None:
        clock = Clock()
        pki = ensure_relay_pki(Path(self.mktemp()), [], share_domain="localhost")
        self.leases = DirectoryLeases()
        self.leases.elsewhere.add("blog")
        registry = ShareRegistry(ShareCA.load(pki, "localhost"), clock, {"localhost"},
                                 self.leases)
        self.h = RelayHarness(shares=registry, clock=clock)
        self.hub = SSHHub(self.h.relay, SSHConfig(), clock, lambda: ("relay.test", 2222))
        self.user = RelayUser(SSHIdentity("alice", "blog", "ssh:alice"), self.hub)
        self.user.conn = FakeConnection()

    def test_agentName(self) -> None:
        """
        A TCP forward under an agent name the directory gives another
        account: the name is released again, its lease here dropped, the
        forward forgotten.
        """
        answer = self.user.global_tcpip_forward(forward(b"localhost", 0))
        self.assertIsNot(answer, False)
        (port,) = struct.unpack(">L", answer[1])
        self.assertIsNone(self.h.relay.directory.agent("blog"))
        self.assertEqual(len(self.user.forwards), 0)
        self.assertEqual(self.user.notes[-1].split(": ", 1)[1],
                         f"{name_taken_message('blog')}")
        self.assertIn(f"withdrawn -R localhost:{port}", self.user.notes[-1])
        self.assertIsNone(self.leases.holder("blog", 0))

    def test_share(self) -> None:
        """
        A share the directory gives another account is withdrawn: no route
        is left, and no lease here that would refuse its owner; a share the
        directory does not give away is kept.
        """
        self.assertTrue(self.user.global_tcpip_forward(forward(b"blog", 80)))
        self.assertIsNone(self.h.relay.shares.route("blog"))
        self.assertIsNone(self.leases.holder("blog", 0))
        self.assertIn(name_taken_message("blog"), self.user.notes[-1])
        self.assertTrue(self.user.global_tcpip_forward(forward(b"notes", 80)))
        self.assertIsNotNone(self.h.relay.shares.route("notes"))
