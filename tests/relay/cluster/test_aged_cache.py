"""
Tests for L{nfltr.relay.cluster.aged_cache}: the bounded, aged memory the
replica's caches share (with a L{Clock}).
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.cluster.aged_cache import AgedCache

LIMIT = 60.0


class _Cache(AgedCache[str, int]):
    """
    An L{AgedCache} of numbers by name, whose numbers in C{banned} are not
    usable; its protected methods made public for the tests.
    """

    what = "test cache"

    def __init__(self, clock: Clock, entries: int = 10, limit: float = LIMIT) -> None:
        super().__init__(clock, entries=entries, limit=limit)
        self.banned: set[int] = set()

    keep = AgedCache._keep
    drop = AgedCache._drop
    recall = AgedCache._recall

    def _usable(self, value: int) -> bool:
        return value not in self.banned


class AgedCacheTests(SynchronousTestCase):
    """
    L{AgedCache}.
    """

    def setUp(self) -> None:
        self.clock = Clock()

    def test_keepAndRecall(self) -> None:
        """
        A value kept is recalled (counted), the latest kept for its key; a
        key dropped or never kept is not.
        """
        cache = _Cache(self.clock)
        cache.keep("a", 1)
        cache.keep("a", 2)
        cache.keep("b", 3)
        self.assertEqual(cache.recall("a"), 2)
        self.assertIsNone(cache.recall("c"))
        cache.drop("b")
        cache.drop("c")
        self.assertIsNone(cache.recall("b"))
        self.assertEqual((cache.recalled, len(cache)), (1, 1))

    def test_ageLimit(self) -> None:
        """
        A value is recalled for C{limit} seconds after it was last kept,
        then dropped; keeping it again starts its age again.
        """
        cache = _Cache(self.clock)
        cache.keep("a", 1)
        self.clock.advance(LIMIT / 2)
        cache.keep("a", 1)
        self.clock.advance(LIMIT)
        self.assertEqual(cache.recall("a"), 1)
        self.clock.advance(1)
        self.assertIsNone(cache.recall("a"))
        self.assertEqual(len(cache), 0)

    def test_bound(self) -> None:
        """
        At most C{entries} values: the least recently used (kept or
        recalled) goes first.
        """
        cache = _Cache(self.clock, entries=2)
        cache.keep("a", 1)
        cache.keep("b", 2)
        cache.recall("a")
        cache.keep("c", 3)
        self.assertEqual((cache.recall("a"), cache.recall("b"), cache.recall("c")), (1, None, 3))
        self.assertEqual(len(cache), 2)

    def test_unusable(self) -> None:
        """
        A young value its user says is not usable is not recalled, and
        dropped.
        """
        cache = _Cache(self.clock)
        cache.keep("a", 1)
        cache.banned.add(1)
        self.assertIsNone(cache.recall("a"))
        cache.banned.clear()
        self.assertIsNone(cache.recall("a"))
        self.assertEqual(cache.recalled, 0)

    def test_off(self) -> None:
        """
        A limit of 0 keeps nothing; no entry, or a negative limit, is
        refused, naming the cache.
        """
        off = _Cache(self.clock, limit=0)
        off.keep("a", 1)
        self.assertEqual(len(off), 0)
        self.assertIsNone(off.recall("a"))
        for entries, limit in ((0, LIMIT), (1, -1.0)):
            with self.assertRaises(ValueError) as raised:
                _Cache(self.clock, entries=entries, limit=limit)
            self.assertIn("the test cache needs", str(raised.exception))

    def test_firstInOutage(self) -> None:
        """
        L{AgedCache.firstInOutage} is true once per outage number.
        """
        cache = _Cache(self.clock)
        self.assertEqual([cache.firstInOutage(n) for n in (1, 1, 2, 2, 1)],
                         [True, False, True, False, True])
