# -*- test-case-name: tests.netio.test_malloc -*-
"""
glibc's malloc thresholds for a process that moves data in buffers of a
few hundred KiB.

By default glibc serves an allocation above its mmap threshold (128 KiB,
raised dynamically up to 32 MiB) with fresh pages from C{mmap}, and gives
freed memory at the top of the heap back above its trim threshold; a
256 KiB read buffer or a joined batch of frames then faults in new pages
each time (about 200 µs a MiB here).  L{tune_malloc} sets both thresholds
once, at process start: C{M_MMAP_THRESHOLD} 8 MiB and C{M_TRIM_THRESHOLD}
64 MiB (setting either also turns glibc's dynamic adjustment off).  A
process keeps up to the trim threshold of freed heap for reuse.

Without glibc (musl, macOS) nothing is done.  C{GLIBC_TUNABLES}
(C{glibc.malloc.mmap_threshold}, C{glibc.malloc.trim_threshold}) set in the
environment win: they are left as they are.

A high trim threshold keeps a load's freed buffers for the next load, and
so keeps them after the load too: after a bulk transfer a relay held
twice its idle memory (docs/benchmarks.md, "Memory").  L{HeapTrimmer}
gives them back once the process has some to give: every
L{TRIM_INTERVAL} seconds, when glibc holds more than L{TRIM_SLACK} bytes
free, it calls C{malloc_trim(0)}, which releases the free pages of every
arena, those between live allocations included (the trim threshold only
ever releases the top of the main heap).  Under a steady load that costs
refaulting what was given back, at most once an interval.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Mapping
from typing import Any

from twisted.application.service import Service
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger

# From glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 8 * 1024 * 1024
TRIM_THRESHOLD = 64 * 1024 * 1024
#: How often L{HeapTrimmer} looks, and the free heap it leaves alone.
TRIM_INTERVAL = 10.0
TRIM_SLACK = 4 * 1024 * 1024

_log = Logger()


def tune_malloc(environ: Mapping[str, str] = os.environ, libc: Any = None) -> bool:
    """
    Set glibc's mmap and trim thresholds (see the module), unless
    C{GLIBC_TUNABLES} already sets malloc tunables.

    @param libc: the C library (default: this process's, if it is glibc):
        a C{ctypes.CDLL}, or an object with its functions (typed L{Any}, as
        C{ctypes} resolves a library's functions by name at run time).
    @return: whether both were set.
    """
    if "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        return False
    if libc is None:
        libc = _glibc()
        if libc is None:
            return False
    mallopt = libc.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    )


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        version = libc.gnu_get_libc_version
    except (OSError, AttributeError):
        return None  # not glibc
    version.restype = ctypes.c_char_p
    return libc if version() else None


class _MallInfo2(ctypes.Structure):
    """
    glibc's C{struct mallinfo2} (2.33 and later).
    """

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost",
    )]


def trimmable_libc(libc: Any = None) -> Any:
    """
    C{libc} (default: this process's, if it is glibc) with C{mallinfo2}
    and C{malloc_trim} typed, or L{None} if it lacks either.
    """
    if libc is None:
        libc = _glibc()
        if libc is None:
            return None
    try:
        info, trim = libc.mallinfo2, libc.malloc_trim
    except AttributeError:
        return None
    info.argtypes, info.restype = (), _MallInfo2
    trim.argtypes, trim.restype = (ctypes.c_size_t,), ctypes.c_int
    return libc


class HeapTrimmer(Service):
    """
    Gives the heap glibc holds free back to the kernel (see the module).

    @ivar clock: schedules the looks.
    @ivar libc: the C library (L{trimmable_libc}).
    @ivar interval: seconds between looks.
    @ivar slack: free bytes left alone.
    @ivar trims: how many times it trimmed.
    """

    name = "heap-trimmer"

    def __init__(
        self, clock: IReactorTime, libc: Any, interval: float = TRIM_INTERVAL,
        slack: int = TRIM_SLACK,
    ) -> None:
        self.clock = clock
        self.libc = libc
        self.interval = interval
        self.slack = slack
        self.trims = 0
        self._call: IDelayedCall | None = None

    def startService(self) -> None:
        super().startService()
        self._call = self.clock.callLater(self.interval, self._look)

    def stopService(self) -> None:
        super().stopService()
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def free(self) -> int:
        """
        Bytes glibc holds free in its arenas now (C{mallinfo2}'s
        C{fordblks}).
        """
        return int(self.libc.mallinfo2().fordblks)

    def trim(self) -> bool:
        """
        Trim now if more than C{slack} bytes are free; whether it did.
        """
        free = self.free()
        if free <= self.slack:
            return False
        self.libc.malloc_trim(0)
        self.trims += 1
        _log.debug("heap trimmed: {free} bytes were free, {left} are", free=free,
                   left=self.free())
        return True

    def _look(self) -> None:
        self._call = self.clock.callLater(self.interval, self._look)
        self.trim()
