"""
Tests of what an SSH client is told while the relay's directory cannot
answer (L{nfltr.relay.ssh._server}, L{nfltr.relay.ssh._user}):

  - a login whose key cannot be checked is refused, and the client is told
    why in a banner (OpenSSH prints it above its "Permission denied"), over
    the real transport in memory (C{twisted.test.iosim});
  - C{ssh -R} of a name this relay cannot tell is the account's (another
    account may lease it in the directory) is refused, or withdrawn when the
    reservation finds the directory away after the answer; a name this
    relay's own table shows as the account's is published (the cache
    answers, as for native agents).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ed25519
from twisted.conch.ssh import common, keys
from twisted.internet.defer import Deferred, fail
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.test import iosim
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from nfltr.relay.link_handler import NAMES_UNAVAILABLE
from nfltr.relay.shared_leases import SharedLeases
from nfltr.relay.shares import ShareRegistry
from nfltr.relay.ssh._auth import STORE_UNAVAILABLE, SSHIdentity
from nfltr.relay.ssh._user import RelayUser, SSHHub
from nfltr.ssh import SSHConfig
from nfltr.store import INameLeaseTable, StoreUnavailable
from nfltr.tls import ShareCA, ensure_relay_pki
from tests.relay.helpers import RelayHarness

from .test_requests import KeyAuth, LoginClient, relayFactory
from .test_server import FakeConnection, forward

LEASE = 60.0
AWAY = "Redis did not answer within 5 s"


class BannerAuth(KeyAuth):
    """
    A public-key login that records the banners it is shown.
    """

    def __init__(self, user: bytes, instance: Any, key: keys.Key) -> None:
        super().__init__(user, instance, key)
        self.banners: list[bytes] = []

    def ssh_USERAUTH_BANNER(self, packet: bytes) -> None:
        message, _ = common.getNS(packet)
        self.banners.append(message)


class BannerClient(LoginClient):
    """
    L{LoginClient} with a L{BannerAuth}.
    """

    def connectionSecure(self) -> None:
        self.auth = BannerAuth(b"laptop", self.conn, self.key)
        self.requestService(self.auth)


class LoginWhileAwayTests(SynchronousTestCase):
    """
    A login the store cannot check, over the real transport.
    """

    def test_toldWhy(self) -> None:
        """
        The key's account cannot be found (the store is unavailable, the key
        not remembered): the login fails, and the client is shown a banner
        with L{STORE_UNAVAILABLE}, once.
        """
        clock = Clock()
        user = keys.Key(ed25519.Ed25519PrivateKey.generate())
        factory = relayFactory(SSHConfig(), clock, user)
        factory.hub.relay.store.error = StoreUnavailable(AWAY)
        factory.hub.relay.storeHealth.log = Logger(observer=lambda event: None)
        factory.startFactory()
        client, _, pump = iosim.connectedServerAndClient(
            lambda: factory.buildProtocol(None), lambda: BannerClient(user))
        pump.flush()
        self.assertFalse(client.conn.started)
        self.assertEqual(client.auth.banners, [f"{STORE_UNAVAILABLE}\r\n".encode()])


@implementer(INameLeaseTable)
class AwayTable:
    """
    A directory's lease table that cannot answer: every call fails with
    L{StoreUnavailable}, at once, or when L{answer} is called if C{hold}.
    """

    def __init__(self) -> None:
        self.hold = False
        self.held: list[Deferred[Any]] = []

    def _away(self) -> Deferred[Any]:
        if not self.hold:
            return fail(StoreUnavailable(AWAY))
        d: Deferred[Any] = Deferred()
        self.held.append(d)
        return d

    def reserve(self, names: Sequence[str], account: str, relay: str,
                ttl: float) -> Deferred[None]:
        return self._away()

    def release(self, name: str, account: str, relay: str, lease_time: float) -> Deferred[bool]:
        return self._away()

    def holder(self, name: str) -> Deferred[str | None]:
        return self._away()

    def answer(self) -> None:
        """
        The held calls fail.
        """
        held, self.held = self.held, []
        for d in held:
            d.errback(StoreUnavailable(AWAY))


class ClaimsWhileAwayTests(SynchronousTestCase):
    """
    C{ssh -R} on a relay whose directory's lease table cannot answer.
    """

    def setUp(self) -> None:
        clock = Clock()
        pki = ensure_relay_pki(Path(self.mktemp()), [], share_domain="localhost")
        self.table = AwayTable()
        self.leases = SharedLeases(self.table, clock, LEASE, "r1")
        registry = ShareRegistry(ShareCA.load(pki, "localhost"), clock, {"localhost"},
                                 self.leases)
        self.h = RelayHarness(shares=registry, clock=clock)
        self.health = self.leases.health = self.h.relay.storeHealth
        self.health.log = Logger(observer=lambda event: None)
        self.hub = SSHHub(self.h.relay, SSHConfig(), clock, lambda: ("relay.test", 2222))

    def user(self) -> RelayUser:
        user = RelayUser(SSHIdentity("alice", "laptop", "ssh:alice"), self.hub)
        user.conn = FakeConnection()
        return user

    def test_newNamesRefused(self) -> None:
        """
        The outage known: a share name and an agent name this relay has no
        lease of for the account are refused at once (OpenSSH is answered
        no), the display saying why; nothing is published.
        """
        self.health.failed(StoreUnavailable(AWAY))
        user = self.user()
        self.assertFalse(user.global_tcpip_forward(forward(b"blog", 80)))
        self.assertEqual(user.notes[-1], f"refused -R blog:80: {NAMES_UNAVAILABLE}")
        self.assertFalse(user.global_tcpip_forward(forward(b"localhost", 0)))
        self.assertEqual(user.notes[-1], f"refused -R localhost:0: {NAMES_UNAVAILABLE}")
        self.assertIsNone(self.h.relay.shares.route("blog"))
        self.assertIsNone(self.h.relay.directory.agent("laptop"))
        self.assertEqual(len(user.forwards), 0)

    def test_leasedHereStands(self) -> None:
        """
        A share name and an agent name whose lease this relay still keeps for
        the account (an earlier connection held them) are published during
        the outage, and stay.
        """
        for name in ("blog", "laptop"):
            self.leases.claim(name, "alice", 0)
            self.leases.release(name, "alice", 0)
        self.assertFalse(self.health.available)  # the releases found the directory away
        user = self.user()
        self.assertTrue(user.global_tcpip_forward(forward(b"blog", 80)))
        self.assertIsNot(user.global_tcpip_forward(forward(b"localhost", 0)), False)
        self.assertIsNotNone(self.h.relay.shares.route("blog"))
        self.assertIsNotNone(self.h.relay.directory.agent("laptop"))
        self.assertEqual(len(user.forwards), 2)

    def test_outageFoundByTheReservation(self) -> None:
        """
        The outage not known yet: C{-R} is answered yes (conch answers at
        once); when the reservation finds the directory away, the new name
        is withdrawn and the display says why.
        """
        self.table.hold = True
        user = self.user()
        self.assertTrue(user.global_tcpip_forward(forward(b"blog", 80)))
        self.assertIsNotNone(self.h.relay.shares.route("blog"))
        self.table.answer()
        self.assertIsNone(self.h.relay.shares.route("blog"))
        self.assertEqual(len(user.forwards), 0)
        self.assertEqual(user.notes[-1], f"withdrawn -R blog:80: {NAMES_UNAVAILABLE}")
        self.assertIsNone(self.leases.holder("blog", 0))
