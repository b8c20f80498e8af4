# -*- test-case-name: tests.http.test_chunked -*-
"""
Where a chunked body ends (RFC 9112 section 7.1), sans I/O and without
copying it: L{ChunkedBody.feed} is given what arrived and says how much of
it belongs to the body for sure, so the stream path
(L{nfltr.http._stream}) forwards the body's bytes as they came, never a
line before it is whole and checked, and knows where the next message
starts.

Strict, as the next hop must read the body the same way: a chunk size is
1 to L{MAX_SIZE_DIGITS} hex digits, an extension is C{;} right after
it then visible characters, spaces or tabs (no whitespace before the
C{;}, which h11 and others refuse), each line (size, trailer field) ends with CRLF
and is at most L{MAX_LINE} bytes, the chunk data is followed by CRLF, the
trailer section takes at most L{MAX_TRAILER} bytes.  Anything else raises
L{ChunkError}.
"""

from __future__ import annotations

import re

#: Hex digits a chunk size may have (2^60 bytes: no real chunk is larger).
MAX_SIZE_DIGITS = 15
#: Bytes a chunk-size line or a trailer field line may take, CRLF included.
MAX_LINE = 4096
#: Bytes the trailer section may take.
MAX_TRAILER = 16 * 1024

_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,%d})(?:;[\x20-\x7e\x80-\xff\t]*)?" % MAX_SIZE_DIGITS)
_TRAILER_LINE = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\x20-\x7e\x80-\xff\t]*")

# States.
_SIZE, _DATA, _DATA_END, _TRAILER, _DONE = range(5)


class ChunkError(Exception):
    """
    A chunked body that is not well formed.
    """


class ChunkedBody:
    """
    The framing of one chunked body; see the module.

    @ivar done: the body ended (its final CRLF was fed).
    """

    def __init__(self) -> None:
        self._state = _SIZE
        self._left = 0
        self._trailer = 0
        self.done = False

    def feed(self, data: bytes, start: int = 0) -> int:
        """
        Read C{data} from C{start} on.

        @return: the index in C{data} where the body's settled bytes end.
            If L{done}, the body ended there.  Otherwise what follows it is
            the start of a line not yet whole (at most L{MAX_LINE} bytes):
            it is not the body's yet, and must come again, first, with the
            bytes that follow it.
        @raise ChunkError: the body is malformed.
        """
        at, end = start, len(data)
        while at < end and not self.done:
            if self._state == _DATA:
                take = min(self._left, end - at)
                at += take
                self._left -= take
                if not self._left:
                    self._state = _DATA_END
                continue
            after = self._readLine(data, at, end)
            if after is None:
                break
            at = after
        return at

    def _readLine(self, data: bytes, at: int, end: int) -> int | None:
        """
        Read a line (size, the CRLF after data, trailer) from C{at}: the
        index after it, or L{None} if it is not whole yet.
        """
        if self._state == _DATA_END and not b"\r\n".startswith(data[at:min(end, at + 2)]):
            raise ChunkError("chunk data longer than its size")
        newline = data.find(b"\n", at, min(end, at + MAX_LINE))
        if newline < 0:
            if end - at >= MAX_LINE:
                raise ChunkError("a chunk line too long")
            return None
        if data[newline - 1:newline] != b"\r" or newline == at:
            raise ChunkError("a chunk line without CRLF")
        self._lineDone(data[at:newline - 1])
        return newline + 1

    def _lineDone(self, line: bytes) -> None:
        state = self._state
        if state == _DATA_END:
            if line:
                raise ChunkError("chunk data longer than its size")
            self._state = _SIZE
        elif state == _SIZE:
            match = _SIZE_LINE.fullmatch(line)
            if match is None or b"\r" in line:
                raise ChunkError("a malformed chunk size")
            self._left = int(match.group(1), 16)
            self._state = _DATA if self._left else _TRAILER
        else:
            self._trailer += len(line) + 2
            if self._trailer > MAX_TRAILER:
                raise ChunkError("a trailer section too large")
            if not line:
                self.done = True
                self._state = _DONE
            elif _TRAILER_LINE.fullmatch(line) is None:
                raise ChunkError("a malformed trailer field")
