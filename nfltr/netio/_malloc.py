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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Mapping

# From glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 8 * 1024 * 1024
TRIM_THRESHOLD = 64 * 1024 * 1024


def tune_malloc(environ: Mapping[str, str] = os.environ, libc: object | None = None) -> bool:
    """
    Set glibc's mmap and trim thresholds (see the module), unless
    C{GLIBC_TUNABLES} already sets malloc tunables.

    @param libc: the C library (default: this process's, if it is glibc).
    @return: whether both were set.
    """
    if "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        return False
    if libc is None:
        libc = _glibc()
        if libc is None:
            return False
    mallopt = libc.mallopt  # type: ignore[attr-defined]
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
