"""
Tests for L{nfltr.relay.leases}.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.leases import SWEEP_EVERY, Leases, NameLeased


class LeasesTests(SynchronousTestCase):
    """
    A share name stays its account's while published and for the lease time after.
    """

    def test_heldWhilePublished(self) -> None:
        """
        While an account publishes a name, another account cannot claim it,
        however long it lasts; the same account can, again.
        """
        leases = Leases(10)
        leases.claim("blog", "acme", 0)
        self.assertRaises(NameLeased, leases.claim, "blog", "bravo", 1000)
        leases.claim("blog", "acme", 1000)
        self.assertEqual(leases.holder("blog", 5000), "acme")

    def test_leaseRunsAfterLastRelease(self) -> None:
        """
        After the last publication ends the lease runs for the lease time:
        another account is refused until it ends, then may take the name.
        """
        leases = Leases(10)
        leases.claim("blog", "acme", 0)
        leases.claim("blog", "acme", 0)
        leases.release("blog", "acme", 5)
        self.assertRaises(NameLeased, leases.claim, "blog", "bravo", 100)
        leases.release("blog", "acme", 100)
        self.assertRaises(NameLeased, leases.claim, "blog", "bravo", 109.9)
        leases.claim("blog", "bravo", 110)
        self.assertEqual(leases.holder("blog", 110), "bravo")
        self.assertRaises(NameLeased, leases.check, "blog", "acme", 111)

    def test_reclaimWithinLease(self) -> None:
        """
        The owner reconnecting within the lease gets its name back.
        """
        leases = Leases(10)
        leases.claim("blog", "acme", 0)
        leases.release("blog", "acme", 1)
        leases.claim("blog", "acme", 5)
        self.assertEqual(leases.holder("blog", 1000), "acme")

    def test_forget(self) -> None:
        """
        C{forget} drops an account's lease that has no holder left, and
        nothing else: a held name, another account's.
        """
        leases = Leases(10)
        leases.claim("blog", "acme", 0)
        leases.forget("blog", "acme")
        self.assertEqual(leases.holder("blog", 1), "acme")
        leases.release("blog", "acme", 1)
        leases.forget("blog", "bravo")
        self.assertEqual(leases.holder("blog", 1), "acme")
        leases.forget("blog", "acme")
        self.assertIsNone(leases.holder("blog", 1))
        self.assertEqual(len(leases), 0)

    def test_zeroLease(self) -> None:
        """
        With a lease time of 0 a name is free as soon as it is released.
        """
        leases = Leases(0)
        leases.claim("blog", "acme", 0)
        leases.release("blog", "acme", 1)
        leases.claim("blog", "bravo", 1)

    def test_strayRelease(self) -> None:
        """
        Releasing a name one does not hold changes nothing.
        """
        leases = Leases(10)
        leases.claim("blog", "acme", 0)
        leases.release("blog", "bravo", 1)
        leases.release("shop", "acme", 1)
        self.assertEqual(leases.holder("blog", 1000), "acme")

    def test_sweptBounded(self) -> None:
        """
        Ended leases are forgotten: the table does not grow with names that
        expired.
        """
        leases = Leases(1)
        for i in range(SWEEP_EVERY * 3):
            leases.claim(f"n{i}", "acme", i * 10)
            leases.release(f"n{i}", "acme", i * 10)
        self.assertLessEqual(len(leases), SWEEP_EVERY)
