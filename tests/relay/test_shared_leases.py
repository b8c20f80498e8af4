"""
Tests for L{nfltr.relay.shared_leases} (and the L{ILeases} contract of both
tables): leases kept in a real Redis directory (C{redis-server} on a unix
socket, the real reactor; skipped, with the reason, without one); and the
native agent's wait for its names' reservation, on a L{Clock}.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.trial import unittest
from zope.interface.verify import verifyObject

from nfltr.relay.leases import ILeases, Leases, NameLeased
from nfltr.relay.link_handler import NAMES_UNAVAILABLE
from nfltr.relay.names import name_taken_message
from nfltr.relay.shared_leases import MIN_HELD_TTL, SharedLeases
from nfltr.relay.store_health import StoreHealth
from nfltr.store import RedisStore, StoreUnavailable, parse_redis_url
from tests.redis_helpers import REDIS_SERVER, SKIP_REASON, redis_command, start_redis

from .helpers import RelayHarness

LEASE = 3600.0
TIMEOUT = 1.0


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


class LeasesInterfaceTests(unittest.SynchronousTestCase):
    """
    The in-memory table provides L{ILeases} and answers a reservation at
    once.
    """

    def test_memory(self) -> None:
        """
        L{Leases} provides L{ILeases}; C{reserve} has fired when it returns:
        with the names free for the account, or with L{NameLeased} naming the
        first that is not.
        """
        leases = Leases(LEASE)
        self.assertTrue(verifyObject(ILeases, leases))
        leases.claim("blog", "acme", 0)
        self.assertIsNone(self.successResultOf(leases.reserve(["web", "blog"], "acme", 1)))
        failure = self.failureResultOf(leases.reserve(["web", "blog"], "bravo", 1), NameLeased)
        self.assertEqual(failure.value.args, ("blog",))


class SharedLeasesTests(unittest.TestCase):
    """
    L{SharedLeases} on a real Redis directory.
    """

    if REDIS_SERVER is None:
        skip = SKIP_REASON

    async def setUp(self) -> None:  # type: ignore[override]
        self.server = await start_redis(self)
        self.health = StoreHealth("the test directory", _reactor())
        self.warnings: list[dict[str, Any]] = []
        self.health.log = Logger(observer=self.warnings.append)

    def relay(self, relay: str) -> SharedLeases:
        """
        The lease table of one relay process (C{relay}: its mark).
        """
        store = RedisStore(_reactor(), parse_redis_url(self.server.url),
                           command_timeout=TIMEOUT)
        self.addCleanup(store.close)
        return SharedLeases(store.lease_table(), _reactor(), LEASE, relay, self.health)

    async def field(self, name: str, field: str) -> Any:
        return await redis_command(self.server, "HGET", f"nfltr:lease:{name}", field)

    def test_interface(self) -> None:
        """
        L{SharedLeases} provides L{ILeases}; its renewals come a third of the
        held time apart, the held time the lease time but never below
        L{MIN_HELD_TTL}.
        """
        leases = self.relay("r1")
        self.assertTrue(verifyObject(ILeases, leases))
        self.assertEqual((leases.heldTTL, leases.renewal), (LEASE, 300.0))
        short = SharedLeases(leases.table, Clock(), 0)
        self.assertEqual((short.heldTTL, short.renewal), (MIN_HELD_TTL, MIN_HELD_TTL / 3))

    async def test_otherRelay(self) -> None:
        """
        A name an agent of one account holds through one relay cannot be
        reserved for another account through another relay, which knew
        nothing of it; the same account can.
        """
        first, second = self.relay("r1"), self.relay("r2")
        await first.reserve(["web"], "acme", 0)
        first.claim("web", "acme", 0)
        self.assertIsNone(second.holder("web", 0))
        with self.assertRaises(NameLeased) as caught:
            await second.reserve(["api", "web"], "bravo", 0)
        self.assertEqual(caught.exception.args, ("web",))
        await second.reserve(["api", "web"], "acme", 0)

    async def test_restart(self) -> None:
        """
        A name whose last holder left keeps its lease in the directory: the
        same relay restarted (a new process, a new mark) refuses it to
        another account, and gives it to its own.
        """
        before = self.relay("r1")
        await before.reserve(["web"], "acme", 0)
        before.claim("web", "acme", 0)
        self.assertTrue(before.release("web", "acme", 1))
        await before.renew()  # the release went out: nothing left to take off
        self.assertIsNone(await self.field("web", "relay:r1"))
        after = self.relay("r1-restarted")
        with self.assertRaises(NameLeased):
            await after.reserve(["web"], "bravo", 0)
        await after.reserve(["web"], "acme", 0)

    async def test_renewal(self) -> None:
        """
        A renewal keeps the relay's mark on the names it has holders of and
        takes it off those reserved but never claimed.
        """
        leases = self.relay("r1")
        await leases.reserve(["web", "api"], "acme", 0)
        leases.claim("web", "acme", 0)
        await redis_command(self.server, "PEXPIRE", "nfltr:lease:web", "5000")
        await leases.renew()
        self.assertEqual(await self.field("web", "relay:r1"), b"1")
        self.assertGreater(
            int(await redis_command(self.server, "PTTL", "nfltr:lease:web")), 60_000)
        self.assertIsNone(await self.field("api", "relay:r1"))
        self.assertEqual(await self.field("api", "account"), b"acme")

    async def test_directoryAway(self) -> None:
        """
        While the directory does not answer, a name this relay's own table
        shows as the account's is reserved from that table; another fails
        with L{StoreUnavailable} and marks the store down, one warning.
        """
        leases = self.relay("r1")
        await leases.reserve(["web"], "acme", 0)
        leases.claim("web", "acme", 0)
        await self.server.stop()
        now = _reactor().seconds()
        await leases.reserve(["web"], "acme", now)
        with self.assertRaises(StoreUnavailable):
            await leases.reserve(["api"], "acme", now)
        self.assertFalse(self.health.available)
        self.assertEqual(len(self.warnings), 1)


class HeldLeases(Leases):
    """
    An in-memory table whose reservations wait until the test answers
    them, as a shared table's wait for the directory.
    """

    def __init__(self) -> None:
        super().__init__(LEASE)
        self.held: list[tuple[list[str], Deferred[None]]] = []

    def reserve(self, names: Sequence[str], account: str, now: float) -> Deferred[None]:
        d: Deferred[None] = Deferred()
        self.held.append((list(names), d))
        return d


class ReservationTests(unittest.SynchronousTestCase):
    """
    A native agent's names are reserved before they are claimed; the link
    handler waits for the reservation.
    """

    def setUp(self) -> None:
        self.h = RelayHarness()
        self.h.relay.storeHealth.log = Logger(observer=lambda event: None)
        self.leases = HeldLeases()
        self.h.relay.directory.leases = self.leases
        self.key = self.h.store.addKey("aaaaaaaaaaaa", "acme")

    def test_waits(self) -> None:
        """
        Until the reservation of its name is answered the agent is neither
        welcomed nor registered; then it is.
        """
        agent = self.h.agent(self.key, "web")
        [(names, d)] = self.leases.held
        self.assertEqual((names, agent.controls), (["web"], []))
        self.assertIsNone(self.h.relay.directory.agent("web"))
        d.callback(None)
        self.h.run()
        self.assertEqual(agent.controls[0]["type"], "welcome")
        self.assertIsNotNone(self.h.relay.directory.agent("web"))

    def test_refusals(self) -> None:
        """
        A name another account holds (L{NameLeased}) is refused in the words
        of a local conflict; a directory that does not answer, with the
        message to try later; a key revoked meanwhile, as revoked.
        """
        answers = [
            (NameLeased("web"), {"type": "refused", "reason": "conflict",
                                 "message": name_taken_message("web")}),
            (StoreUnavailable("gone"), {"type": "refused", "reason": "unavailable",
                                        "message": NAMES_UNAVAILABLE}),
        ]
        for error, expected in answers:
            agent = self.h.agent(self.key, "web")
            self.leases.held.pop()[1].errback(error)
            self.h.run()
            self.assertEqual(agent.controls, [expected])
            self.assertIsNone(self.h.relay.directory.agent("web"))
        self.h.relay.storeHealth.answered()  # the directory is back
        agent = self.h.agent(self.key, "web")
        self.h.relay.directory.markRevoked("aaaaaaaaaaaa")
        self.leases.held.pop()[1].callback(None)
        self.h.run()
        self.assertEqual(agent.controls[0]["reason"], "revoked")

    def test_lostMeanwhile(self) -> None:
        """
        An agent whose link ended while its names were being reserved is
        not registered when the answer comes.
        """
        agent = self.h.agent(self.key, "web")
        agent.cut(ConnectionDone())
        self.leases.held.pop()[1].callback(None)
        self.h.run()
        self.assertIsNone(self.h.relay.directory.agent("web"))
        self.assertEqual(self.h.relay.directory.counts(), (0, 0))
