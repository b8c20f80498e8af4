# -*- test-case-name: tests.store.test_redis_leases -*-
"""
Tests for the name leases of a Redis directory
(L{nfltr.store.RedisStore.lease_table}): a real C{redis-server} on a unix
socket, the real reactor.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import DeferredList
from twisted.trial import unittest
from zope.interface.verify import verifyObject

from nfltr.store import INameLeaseTable, LeaseTaken, RedisStore, StoreCorrupt, parse_redis_url
from tests.redis_helpers import REDIS_SERVER, SKIP_REASON, redis_command, start_redis

TIMEOUT = 1.0


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


class LeaseTableTests(unittest.TestCase):
    """
    L{nfltr.store.INameLeaseTable} in Redis.
    """

    if REDIS_SERVER is None:
        skip = SKIP_REASON

    async def setUp(self) -> None:  # type: ignore[override]
        self.server = await start_redis(self)
        self.table = self.makeTable()

    def makeTable(self) -> INameLeaseTable:
        store = RedisStore(_reactor(), parse_redis_url(self.server.url),
                           command_timeout=TIMEOUT)
        self.addCleanup(store.close)
        return store.lease_table()

    async def ttl(self, name: str) -> int:
        """
        The lease key's time to live, in milliseconds (-2: no key).
        """
        return int(await redis_command(self.server, "PTTL", f"nfltr:lease:{name}"))

    def test_interface(self) -> None:
        """
        The table provides L{INameLeaseTable}.
        """
        self.assertTrue(verifyObject(INameLeaseTable, self.table))

    async def test_reserveAllOrNothing(self) -> None:
        """
        Names are reserved for an account all at once: if another account
        holds one, the reservation fails naming it and nothing changes.
        """
        await self.table.reserve(["blog"], "acme", "r1", 60)
        with self.assertRaises(LeaseTaken) as caught:
            await self.table.reserve(["web", "blog"], "bravo", "r2", 60)
        self.assertEqual(caught.exception.name, "blog")
        self.assertIsNone(await self.table.holder("web"))
        await self.table.reserve(["web", "blog"], "acme", "r2", 60)
        self.assertEqual(await self.table.holder("web"), "acme")

    async def test_oneWinner(self) -> None:
        """
        Two relays reserving a name for two accounts at the same moment:
        exactly one gets it.
        """
        other = self.makeTable()
        results = await DeferredList([
            self.table.reserve(["web"], "acme", "r1", 60),
            other.reserve(["web"], "bravo", "r2", 60),
        ], consumeErrors=True)
        self.assertEqual(sorted(ok for ok, _ in results), [False, True])
        failure = next(result for ok, result in results if not ok)
        self.assertTrue(failure.check(LeaseTaken))

    async def test_leaseRunsAfterTheLastRelay(self) -> None:
        """
        While relays hold a name its key lives their time to live; when the
        last of them releases it, the lease time; released by every relay
        with a lease time of 0, the lease ends at once.
        """
        await self.table.reserve(["web"], "acme", "r1", 60)
        await self.table.reserve(["web"], "acme", "r2", 60)
        self.assertGreater(await self.ttl("web"), 50_000)
        self.assertTrue(await self.table.release("web", "acme", "r1", 3600))
        self.assertLessEqual(await self.ttl("web"), 60_000)
        self.assertTrue(await self.table.release("web", "acme", "r2", 3600))
        self.assertGreater(await self.ttl("web"), 3_000_000)
        with self.assertRaises(LeaseTaken):
            await self.table.reserve(["web"], "bravo", "r3", 60)
        await self.table.reserve(["api"], "acme", "r1", 60)
        await self.table.release("api", "acme", "r1", 0)
        self.assertEqual(await self.ttl("api"), -2)
        await self.table.reserve(["api"], "bravo", "r1", 60)

    async def test_releaseOthers(self) -> None:
        """
        A release for an account that does not hold the name changes nothing.
        """
        await self.table.reserve(["web"], "acme", "r1", 60)
        self.assertFalse(await self.table.release("web", "bravo", "r1", 0))
        self.assertEqual(await self.table.holder("web"), "acme")

    async def test_corrupt(self) -> None:
        """
        A lease key of the wrong type fails with L{StoreCorrupt}.
        """
        await redis_command(self.server, "SET", "nfltr:lease:web", "junk")
        with self.assertRaises(StoreCorrupt):
            await self.table.reserve(["web"], "acme", "r1", 60)
