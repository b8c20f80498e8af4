# -*- test-case-name: tests.test_tls_direct -*-
"""
The data path of a memory-BIO TLS connection without pyOpenSSL's per-call
overhead.

pyOpenSSL's C{Connection.recv}, C{send}, C{bio_read} and C{bio_write} each
allocate a fresh buffer, copy out of it, check three helper objects and
raise C{WantReadError} whenever OpenSSL has nothing more: two exceptions,
four allocations and five copies per TCP read on a relay hop.  L{DirectIO}
calls the same OpenSSL functions through the C{cffi} handles pyOpenSSL
itself uses (C{OpenSSL._util}, private: taken from
L{nfltr.netio.internals}, which lists them, and L{available} says whether
they are there), into buffers it keeps:

  - L{DirectIO.feed} puts received ciphertext into the read BIO;
  - L{DirectIO.read} decrypts every complete record into one buffer and
    returns the plaintext as one string, or lends a view of the buffer;
  - L{DirectIO.write} encrypts one whole application write
    (C{SSL_write}; nfltr's contexts clear partial writes);
  - L{DirectIO.drain} returns the send BIO's bytes, or offers them to a
    sender straight from the buffer, copying only what it did not take.

L{keep_buffers} clears C{SSL_MODE_RELEASE_BUFFERS} on one connection, the
one connection setting pyOpenSSL has no call for.

Only the steady state goes this way.  Any other result is turned into the
exception pyOpenSSL's own call would have raised, at once (before anything
else touches the connection), and handed back in a L{Problem} with the
plaintext decrypted before it: errors, C{close_notify} and alerts behave
exactly as before.

One set of buffers serves the whole process (the reactor thread): every
method copies out before it returns, and none calls back into Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nfltr.netio.internals import openssl_ffi as _ffi
from nfltr.netio.internals import openssl_lib as _lib
from nfltr.wire.constants import TLS_RECORD_PAYLOAD

_NEEDED = ("SSL_read", "SSL_write", "SSL_get_error", "BIO_read", "BIO_write",
           "SSL_ERROR_WANT_READ")
_AVAILABLE = _lib is not None and all(hasattr(_lib, name) for name in _NEEDED)
_WANT_READ = _lib.SSL_ERROR_WANT_READ if _AVAILABLE else 2

#: The most plaintext one record carries: what one C{SSL_read} returns.
RECORD_SIZE = TLS_RECORD_PAYLOAD
#: Plaintext gathered before it is copied out (and the buffer reused).
READ_BUFFER = 1 << 19
#: Ciphertext read from the send BIO at once.
SEND_BUFFER = 1 << 20


def keep_buffers(connection: Any) -> bool:
    """
    Make the pyOpenSSL C{connection} keep its record buffers while idle
    (clear C{SSL_MODE_RELEASE_BUFFERS} on it alone: its context, shared,
    cannot change once used).

    @return: whether it could (this pyOpenSSL has the handles).
    """
    if _lib is None or not hasattr(_lib, "SSL_clear_mode"):
        return False
    _lib.SSL_clear_mode(connection._ssl, _lib.SSL_MODE_RELEASE_BUFFERS)
    return True


def available() -> bool:
    """
    Whether this pyOpenSSL exposes the handles L{DirectIO} needs.
    """
    return _AVAILABLE


class Problem(Exception):
    """
    OpenSSL returned something other than success (or, for a read, "needs
    more input").

    @ivar error: the exception pyOpenSSL raises for it (C{WantReadError},
        C{ZeroReturnError}, C{SysCallError}, C{Error}, ...).
    @ivar data: plaintext decrypted before it (for L{DirectIO.read}).
    """

    def __init__(self, error: Exception, data: bytes = b"") -> None:
        super().__init__(error)
        self.error = error
        self.data = data


class _Buffers:
    """
    The process's scratch buffers (allocated on first use).
    """

    def __init__(self) -> None:
        self.read: Any = None
        self.send: Any = None

    def readBuffer(self) -> Any:
        if self.read is None:
            self.read = _ffi.new("char[]", READ_BUFFER)
        return self.read

    def sendBuffer(self) -> Any:
        if self.send is None:
            self.send = _ffi.new("char[]", SEND_BUFFER)
        return self.send


_buffers = _Buffers()


class DirectIO:
    """
    The data path of one pyOpenSSL C{Connection} made with memory BIOs.
    """

    __slots__ = ("connection", "_ssl", "_into", "_from")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self._ssl = connection._ssl
        self._into = connection._into_ssl
        self._from = connection._from_ssl

    def feed(self, data: bytes | memoryview) -> None:
        """
        Give received ciphertext to OpenSSL.

        @raise Problem: the read BIO refused it (never, for a memory BIO).
        """
        n = len(data)
        if n:
            result = _lib.BIO_write(self._into, _ffi.from_buffer(data), n)
            if result != n:
                raise Problem(OSError(f"the read BIO took {result} of {n} bytes"))

    def read(self, lend: bool = False) -> bytes | memoryview:
        """
        Decrypt every complete record waiting in the read BIO.

        @param lend: return a view of the process's read buffer rather than
            a copy, when the plaintext fits it (the caller's reader must be
            done with it before any other read: see
            L{nfltr.netio.ITransientReader}).
        @return: their plaintext, as one string (empty when none is
            complete), or lent.
        @raise Problem: with the plaintext decrypted before it (a copy).
        """
        ssl = self._ssl
        buf = _buffers.readBuffer()
        sslRead = _lib.SSL_read
        room = READ_BUFFER
        offset = 0
        pieces: list[bytes] = []
        while True:
            if room - offset < RECORD_SIZE:
                pieces.append(_ffi.buffer(buf, offset)[:])
                offset = 0
            result = sslRead(ssl, buf + offset, room - offset)
            if result > 0:
                offset += result
                continue
            wanted = _lib.SSL_get_error(ssl, result) == _WANT_READ
            if lend and wanted and offset and not pieces:
                return memoryview(_ffi.buffer(buf, offset))
            data = _ffi.buffer(buf, offset)[:] if offset else b""
            if pieces:
                pieces.append(data)
                data = b"".join(pieces)
            if wanted:
                return data
            raise Problem(self._error(result), data)

    def write(self, data: bytes | memoryview) -> None:
        """
        Encrypt C{data} (not empty) into the send BIO.

        @raise Problem: OpenSSL did not take it all (C{result} says why:
            C{SSL_ERROR_WANT_READ} during a handshake, or an error).
        """
        n = len(data)
        view = _ffi.from_buffer(data)
        sent = 0
        while sent < n:
            result = _lib.SSL_write(self._ssl, view + sent, n - sent)
            if result <= 0:
                raise Problem(self._error(result))
            sent += result

    def drain(self, send: Callable[[memoryview], int] | None = None) -> bytes:
        """
        Take everything out of the send BIO.

        @param send: offered each piece straight from the buffer (a socket's
            C{send}); returns how much it took.  What it did not take, and
            everything once it took less than offered, is returned.
        @return: the bytes still to be written (all of them without C{send}).
        """
        buf = _buffers.sendBuffer()
        bioRead = _lib.BIO_read
        source = self._from
        left: list[bytes] = []
        while True:
            result = bioRead(source, buf, SEND_BUFFER)
            if result <= 0:
                break
            view = _ffi.buffer(buf, result)
            if send is not None and not left:
                taken = send(memoryview(view))
                if taken < result:
                    left.append(view[taken:])
            else:
                left.append(view[:])
            if result < SEND_BUFFER:
                break
        if not left:
            return b""
        return left[0] if len(left) == 1 else b"".join(left)

    def _error(self, result: int) -> Exception:
        """
        The exception pyOpenSSL raises for C{result} of the call just made
        (its own function reads and clears OpenSSL's error queue).
        """
        try:
            self.connection._raise_ssl_error(self._ssl, result)
        except Exception as e:  # noqa: BLE001 - handed to the caller
            # Without its traceback: that would hold this frame, and through
            # it the caller's, which holds the exception (a cycle per
            # connection end for the garbage collector).
            return e.with_traceback(None)
        return OSError(f"OpenSSL returned {result} and no error")
