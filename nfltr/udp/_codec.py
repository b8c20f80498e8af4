# -*- test-case-name: tests.udp.test_codec -*-
"""
The datagram framing of a link datagram session: each datagram is written
as a 2-byte big-endian length then that many bytes, so message boundaries
survive the session's byte stream and no datagram exceeds
L{MAX_DATAGRAM} by construction.  Pure: no I/O.
"""

from __future__ import annotations

import struct

#: The largest datagram a datagram session carries (64 KiB less one byte:
#: every UDP payload fits; IPv4 allows 65,507 bytes).
MAX_DATAGRAM = 0xFFFF
LENGTH = struct.Struct("!H")


class DatagramTooLarge(ValueError):
    """
    Our caller asked to frame a datagram larger than L{MAX_DATAGRAM}.
    """


def encode_datagram(payload: bytes) -> bytes:
    """
    The bytes that carry C{payload} as one datagram.
    """
    if len(payload) > MAX_DATAGRAM:
        raise DatagramTooLarge(f"a datagram of {len(payload)} bytes (at most {MAX_DATAGRAM})")
    return LENGTH.pack(len(payload)) + payload


class DatagramDecoder:
    """
    Splits a datagram session's bytes back into datagrams, whatever the
    reads' boundaries.  It holds at most one partial datagram (2 +
    L{MAX_DATAGRAM} bytes) beyond what one read brings; no input is an
    error, since every length the header can say is allowed.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """
        Take C{data}; return the datagrams it completes, in order.
        """
        buffer = self._buffer
        buffer += data
        out: list[bytes] = []
        offset = 0
        end = len(buffer)
        head = LENGTH.size
        while end - offset >= head:
            (size,) = LENGTH.unpack_from(buffer, offset)
            if end - offset - head < size:
                break
            out.append(bytes(buffer[offset + head:offset + head + size]))
            offset += head + size
        if offset:
            del buffer[:offset]
        return out

    @property
    def pending(self) -> int:
        """
        Bytes held of a datagram not yet complete.
        """
        return len(self._buffer)
