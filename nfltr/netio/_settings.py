# -*- test-case-name: tests.netio.test_settings -*-
"""
The I/O settings of one nfltr process, read once from its environment by
L{nfltr.netio.tune_process} and carried from then on by the reactor it
returns (L{nfltr.netio.io_settings} reads them): its TCP transports adopt
them when they are made, its TLS factories when they are built.  There is
no process-wide copy to read.

Each is on by default and has a switch to turn it off, for measuring and
for working around a kernel or library that misbehaves:

  - C{NFLTR_WRITE_NOW=0}: TCP writes wait for the next reactor turn, as
    in stock Twisted, instead of going to the socket at once when nothing
    is queued (L{nfltr.netio.TunedReactor});
  - C{NFLTR_READ_SIZE=N}: bytes one C{recv()} may return (default 256 KiB;
    Twisted's is 64 KiB), also the queued bytes above which a TCP
    transport pauses its producer;
  - C{NFLTR_SEND_LIMIT=N}: bytes one queued C{send()} may offer (default
    1 MiB; Twisted's is 128 KiB);
  - C{NFLTR_MALLOC_TUNING=0}: leave glibc's malloc thresholds alone (see
    L{nfltr.netio.tune_malloc});
  - C{NFLTR_HEAP_TRIM=0}: keep the heap glibc holds free instead of giving
    it back to the kernel every few seconds (L{nfltr.netio.HeapTrimmer});
  - C{NFLTR_TLS_BATCH=0}: Twisted's own memory-BIO TLS (one record per
    C{SSL_write}, small writes held for a reactor turn) instead of
    L{nfltr.tls.BatchingTLSProtocol};
  - C{NFLTR_TLS_DIRECT=0}: that protocol's data path calls pyOpenSSL's
    C{recv}/C{send}/C{bio_read}/C{bio_write} instead of OpenSSL's functions
    directly (L{nfltr.tls._direct});
  - C{NFLTR_TLS_RELEASE_BUFFERS=0}: OpenSSL keeps each connection's record
    buffers while it is idle, instead of releasing them
    (C{SSL_MODE_RELEASE_BUFFERS}): about 20 KiB more per idle link, and no
    measurable gain in CPU here;
  - C{NFLTR_FAST_POLL=0}: Twisted's epoll reactor instead of
    L{nfltr.netio.EPollReactor} (set when a command starts).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB
#: Bounds of the sizes, so that a typo cannot starve or bloat a process.
MIN_SIZE = 4 * KIB
MAX_SIZE = 64 * MIB


@dataclass(frozen=True)
class IOSettings:
    """
    How a process does its socket and TLS I/O.

    @ivar write_now: send at once when a TCP transport has nothing queued.
    @ivar read_size: bytes one read may return.
    @ivar send_limit: bytes one queued send may offer the kernel.
    @ivar malloc_tuning: raise glibc's mmap and trim thresholds at start.
    @ivar heap_trim: give the free heap back to the kernel every few
        seconds (the commands and twistd plugins run a L{HeapTrimmer}).
    @ivar tls_batch: nfltr's batching TLS protocol rather than Twisted's.
    @ivar tls_direct: that protocol calls OpenSSL directly once the
        handshake is done.
    @ivar tls_release_buffers: let OpenSSL free a connection's record
        buffers while it is idle (less memory per idle connection).
    @ivar fast_poll: the commands run nfltr's epoll reactor, which skips
        Twisted's legacy log context around each I/O event.
    """

    write_now: bool = True
    read_size: int = 256 * KIB
    send_limit: int = 1 * MIB
    malloc_tuning: bool = True
    heap_trim: bool = True
    tls_batch: bool = True
    tls_direct: bool = True
    tls_release_buffers: bool = True
    fast_poll: bool = True

    def __post_init__(self) -> None:
        for name in ("read_size", "send_limit"):
            value = getattr(self, name)
            if type(value) is not int or not MIN_SIZE <= value <= MAX_SIZE:
                raise ValueError(f"{name} must be an integer in {MIN_SIZE}..{MAX_SIZE}: {value!r}")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> IOSettings:
        """
        The settings the C{NFLTR_*} variables of C{environ} give (see the
        module); unset variables keep the defaults.

        @raise ValueError: a variable has a value that is not understood.
        """
        defaults = cls()
        return cls(
            write_now=_flag(environ, "NFLTR_WRITE_NOW", defaults.write_now),
            read_size=_size(environ, "NFLTR_READ_SIZE", defaults.read_size),
            send_limit=_size(environ, "NFLTR_SEND_LIMIT", defaults.send_limit),
            malloc_tuning=_flag(environ, "NFLTR_MALLOC_TUNING", defaults.malloc_tuning),
            heap_trim=_flag(environ, "NFLTR_HEAP_TRIM", defaults.heap_trim),
            tls_batch=_flag(environ, "NFLTR_TLS_BATCH", defaults.tls_batch),
            tls_direct=_flag(environ, "NFLTR_TLS_DIRECT", defaults.tls_direct),
            tls_release_buffers=_flag(
                environ, "NFLTR_TLS_RELEASE_BUFFERS", defaults.tls_release_buffers
            ),
            fast_poll=_flag(environ, "NFLTR_FAST_POLL", defaults.fast_poll),
        )


_TRUE = frozenset(("1", "true", "yes", "on"))
_FALSE = frozenset(("0", "false", "no", "off"))


def _flag(environ: Mapping[str, str], name: str, default: bool) -> bool:
    raw = environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"{name}={raw!r}: give 1 or 0")


def _size(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: give a number of bytes") from None
    if not MIN_SIZE <= value <= MAX_SIZE:
        raise ValueError(f"{name}={value}: give {MIN_SIZE} to {MAX_SIZE} bytes")
    return value
