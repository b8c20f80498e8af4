"""
Tests for L{nfltr.netio._malloc}.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.netio import tune_malloc
from nfltr.netio._malloc import (
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    MMAP_THRESHOLD,
    TRIM_THRESHOLD,
    _glibc,
)


class FakeMallopt:
    """
    Records C{mallopt} calls and answers C{result}.
    """

    def __init__(self, result: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.result = result

    def __call__(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.result


class FakeLibc:
    def __init__(self, result: int = 1) -> None:
        self.mallopt: Any = FakeMallopt(result)


class TuneMallocTests(SynchronousTestCase):
    """
    Both thresholds are set once, unless the environment sets tunables.
    """

    def test_sets(self) -> None:
        """
        The mmap threshold goes to 8 MiB and the trim threshold to 64 MiB.
        """
        libc = FakeLibc()
        self.assertTrue(tune_malloc({}, libc))
        self.assertEqual(libc.mallopt.calls, [
            (M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        ])
        self.assertEqual((MMAP_THRESHOLD, TRIM_THRESHOLD), (8 << 20, 64 << 20))

    def test_tunablesWin(self) -> None:
        """
        With malloc tunables in C{GLIBC_TUNABLES}, nothing is set.
        """
        libc = FakeLibc()
        environ = {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=1048576"}
        self.assertFalse(tune_malloc(environ, libc))
        self.assertEqual(libc.mallopt.calls, [])

    def test_refused(self) -> None:
        """
        A C{mallopt} that refuses is reported as not set.
        """
        self.assertFalse(tune_malloc({}, FakeLibc(result=0)))

    def test_thisProcess(self) -> None:
        """
        On glibc (this test machine) the real call succeeds.
        """
        if _glibc() is None:
            raise self.skipTest("not glibc")
        self.assertTrue(tune_malloc({}))
