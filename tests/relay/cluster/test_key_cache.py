"""
Tests for L{nfltr.relay.cluster.key_cache}: the keys a holding replica
checked, remembered for a directory outage (with a L{Clock}).
"""

from __future__ import annotations

from dataclasses import replace

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.cluster.key_cache import KeyCache
from nfltr.store import KeyInfo

LIMIT = 60.0
KEY = "nfltr_0123456789ab_" + "A" * 43
OTHER = "nfltr_ba9876543210_" + "B" * 43
INFO = KeyInfo("0123456789ab", "acme", None, 0.0)
OTHER_INFO = KeyInfo("ba9876543210", "acme", None, 0.0)


class KeyCacheTests(SynchronousTestCase):
    """
    L{KeyCache}.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.revoked: set[str] = set()

    def cache(self, entries: int = 10, limit: float = LIMIT) -> KeyCache:
        return KeyCache(self.clock, self.revoked.__contains__, entries=entries, limit=limit)

    def test_recall(self) -> None:
        """
        A key verified is recalled by its plaintext (not kept: only its
        digest), counted; another key, or one never verified, is not.
        """
        cache = self.cache()
        cache.remember(KEY, INFO)
        self.assertEqual(cache.recall(KEY), INFO)
        self.assertIsNone(cache.recall(OTHER))
        self.assertIsNone(cache.recall(KEY[:-1] + "B"))
        self.assertEqual(cache.recalled, 1)
        self.assertNotIn(KEY, repr(cache.__dict__))

    def test_invalidForgotten(self) -> None:
        """
        A key the directory says is unknown or revoked is forgotten.
        """
        cache = self.cache()
        cache.remember(KEY, INFO)
        cache.remember(KEY, None)
        self.assertIsNone(cache.recall(KEY))
        cache.remember(KEY, INFO)
        cache.remember(KEY, replace(INFO, revoked_at=1.0))
        self.assertIsNone(cache.recall(KEY))
        self.assertEqual(len(cache), 0)

    def test_revokedSeen(self) -> None:
        """
        A key the relay has seen revoked is never recalled (its entry is
        dropped) nor remembered, whenever the revocation was seen.
        """
        cache = self.cache()
        cache.remember(KEY, INFO)
        self.revoked.add(INFO.keyid)
        self.assertIsNone(cache.recall(KEY))
        self.assertEqual(len(cache), 0)
        cache.remember(KEY, INFO)  # a check that started before the revocation was seen
        self.assertEqual(len(cache), 0)
        self.assertIsNone(cache.recall(KEY))

    def test_bound(self) -> None:
        """
        At most C{entries} keys: the least recently used goes first.
        """
        cache = self.cache(entries=1)
        cache.remember(KEY, INFO)
        cache.remember(OTHER, OTHER_INFO)
        self.assertEqual(len(cache), 1)
        self.assertIsNone(cache.recall(KEY))
        self.assertEqual(cache.recall(OTHER), OTHER_INFO)

    def test_ageLimit(self) -> None:
        """
        A key is recalled for C{limit} seconds after it was verified, then
        dropped; a limit of 0 keeps nothing; bad bounds are refused.
        """
        cache = self.cache()
        cache.remember(KEY, INFO)
        self.clock.advance(LIMIT)
        self.assertEqual(cache.recall(KEY), INFO)
        self.clock.advance(1)
        self.assertIsNone(cache.recall(KEY))
        off = self.cache(limit=0)
        off.remember(KEY, INFO)
        self.assertEqual(len(off), 0)
        with self.assertRaises(ValueError):
            self.cache(entries=0)
        with self.assertRaises(ValueError):
            self.cache(limit=-1)
