"""
Tests for L{nfltr.netio._malloc}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.netio import HeapTrimmer, tune_malloc
from nfltr.netio._malloc import (
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    MMAP_THRESHOLD,
    TRIM_INTERVAL,
    TRIM_SLACK,
    TRIM_THRESHOLD,
    _glibc,
    trimmable_libc,
)

from ..test_import_effects import run_python


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


class FakeInfo:
    def __init__(self, libc: TrimLibc) -> None:
        self.fordblks = libc.free


class TrimLibc:
    """
    C{mallinfo2} reports C{free} bytes; C{malloc_trim} records its calls and
    leaves C{left} free.
    """

    def __init__(self, free: int, left: int = 0) -> None:
        self.free = free
        self.left = left
        self.trims: list[int] = []

    def mallinfo2(self) -> FakeInfo:
        return FakeInfo(self)

    def malloc_trim(self, pad: int) -> int:
        self.trims.append(pad)
        self.free = self.left
        return 1


class HeapTrimmerTests(SynchronousTestCase):
    """
    L{HeapTrimmer} gives the free heap back once an interval, when there is
    more than its slack to give.
    """

    def test_trimsAboveSlack(self) -> None:
        """
        Each interval it looks; with more than the slack free it calls
        C{malloc_trim(0)}, with less it leaves the heap alone.
        """
        clock, libc = Clock(), TrimLibc(free=TRIM_SLACK + 1)
        trimmer = HeapTrimmer(clock, libc)
        trimmer.startService()
        clock.advance(TRIM_INTERVAL - 0.1)
        self.assertEqual(libc.trims, [])
        clock.advance(0.1)
        self.assertEqual((libc.trims, trimmer.trims), ([0], 1))
        libc.free = TRIM_SLACK
        clock.advance(TRIM_INTERVAL)
        self.assertEqual(libc.trims, [0])
        libc.free = 50 << 20
        clock.advance(TRIM_INTERVAL)
        self.assertEqual(libc.trims, [0, 0])

    def test_stops(self) -> None:
        """
        Stopped, it schedules nothing more.
        """
        clock, libc = Clock(), TrimLibc(free=TRIM_SLACK + 1)
        trimmer = HeapTrimmer(clock, libc)
        trimmer.startService()
        trimmer.stopService()
        self.assertEqual(clock.getDelayedCalls(), [])
        clock.advance(10 * TRIM_INTERVAL)
        self.assertEqual(libc.trims, [])

    def test_defaults(self) -> None:
        """
        It looks every 10 seconds and leaves 4 MiB alone.
        """
        self.assertEqual((TRIM_INTERVAL, TRIM_SLACK), (10.0, 4 << 20))

    def test_trimmableLibc(self) -> None:
        """
        A C library without C{mallinfo2} or C{malloc_trim} (older glibc,
        another libc) cannot be used.
        """
        self.assertIsNone(trimmable_libc(FakeLibc()))
        if _glibc() is not None:
            self.assertIsNotNone(trimmable_libc())


#: Run in a fresh interpreter: a load's worth of 256 KiB buffers (served
#: from the heap under nfltr's thresholds) is freed, but for one more
#: buffer made after them (so above them in the heap: no free chunk is
#: large enough for it), so that the trim threshold cannot release them;
#: RSS (KiB) before and after one trim.
GIVE_BACK = """
import sys
from nfltr.netio import HeapTrimmer, tune_malloc
from nfltr.netio._malloc import trimmable_libc
from twisted.internet.task import Clock

def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))

assert tune_malloc({})
buffers = [b"x" * (256 * 1024) for _ in range(256)]
pin = b"x" * (512 * 1024)
del buffers
before = rss()
trimmer = HeapTrimmer(Clock(), trimmable_libc())
print(before, trimmer.trim(), rss())
"""


class GiveBackTests(SynchronousTestCase):
    """
    The trim gives a real process's freed buffers back to the kernel.
    """

    def test_freedBuffersLeave(self) -> None:
        """
        64 MiB of freed 256 KiB buffers stay resident under the tuned
        thresholds until the trimmer runs; then at least 48 MiB of them
        leave.
        """
        if trimmable_libc() is None:
            raise self.skipTest("not glibc 2.33 or later")
        before, trimmed, after = run_python(GIVE_BACK).split()
        self.assertEqual(trimmed, "True")
        self.assertGreater(int(before) - int(after), 48 * 1024)
