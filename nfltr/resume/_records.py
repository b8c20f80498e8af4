# -*- test-case-name: tests.resume.test_records -*-
"""
The records a resumable session carries inside its link session's bytes.

A resumable session does not send its application's bytes raw: it wraps them in records, so that
each end can acknowledge what it received and, after a link was lost, say where to resume. The
relay in the middle splices the bytes of the two link sessions as it does for a plain session;
only the two ends read records. The format is section 18 of C{docs/link-protocol.md}.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from nfltr.link import MAX_PAYLOAD

RECORD_DATA = 1
RECORD_ACK = 2
RECORD_FIN = 3
RECORD_RESUME = 4
RECORD_TOKEN = 5
RECORD_ABORT = 6

# The largest DATA record's payload, and the size of a record header (type u8, length u32).
MAX_RECORD_DATA = 65536
RECORD_HEADER_SIZE = 5
# The largest DATA payload an end sends: with its header, a record fills one link DATA frame
# (the link's MAX_PAYLOAD), so the receiving end reads each record whole from one frame.  It
# accepts records up to MAX_RECORD_DATA (those of an end before this limit).
MAX_SENT_DATA = MAX_PAYLOAD - RECORD_HEADER_SIZE
# A resume token: random, 128 bits.
TOKEN_SIZE = 16
OFFSET_SIZE = 8

# The payload size of each record type but DATA.
_FIXED_SIZES = {
    RECORD_ACK: OFFSET_SIZE,
    RECORD_FIN: OFFSET_SIZE,
    RECORD_RESUME: TOKEN_SIZE + OFFSET_SIZE,
    RECORD_TOKEN: TOKEN_SIZE,
    RECORD_ABORT: 0,
}
_HEADER = struct.Struct("!BI")
_OFFSET = struct.Struct("!Q")


class RecordError(Exception):
    """
    The bytes of a resumable session are not a valid record sequence (or break its rules).
    """


@dataclass(frozen=True)
class Data:
    """
    Application bytes; their offsets follow those of the DATA before them.
    """

    data: bytes


@dataclass(frozen=True)
class Ack:
    """
    The sender has received the peer's bytes up to (not including) C{offset}.
    """

    offset: int


@dataclass(frozen=True)
class Fin:
    """
    The sender's stream ends at C{offset}: it sends no more DATA.
    """

    offset: int


@dataclass(frozen=True)
class Resume:
    """
    The first record of a resumed session: the session's C{token} (from the connector, the token
    presented; from the agent, the token of the next suspension) and the offset received.
    """

    token: bytes
    offset: int


@dataclass(frozen=True)
class Token:
    """
    The agent's first record on a new session: the token to present after a suspension.
    """

    token: bytes


@dataclass(frozen=True)
class Abort:
    """
    The sender's end was reset (its local connection failed, or it gave up): the session is
    over, it will not resume. A link RESET without it suspends the session.
    """


Record = Data | Ack | Fin | Resume | Token | Abort


def encode(record: Record) -> bytes:
    """
    The bytes of C{record}.
    """
    if isinstance(record, Data):
        if not 0 < len(record.data) <= MAX_RECORD_DATA:
            raise ValueError("a DATA record holds 1 to MAX_RECORD_DATA bytes")
        return _HEADER.pack(RECORD_DATA, len(record.data)) + record.data
    if isinstance(record, Ack | Fin):
        kind = RECORD_ACK if isinstance(record, Ack) else RECORD_FIN
        return _HEADER.pack(kind, OFFSET_SIZE) + _OFFSET.pack(record.offset)
    if isinstance(record, Resume):
        _check_token(record.token)
        return (_HEADER.pack(RECORD_RESUME, TOKEN_SIZE + OFFSET_SIZE) + record.token
                + _OFFSET.pack(record.offset))
    if isinstance(record, Abort):
        return _HEADER.pack(RECORD_ABORT, 0)
    _check_token(record.token)
    return _HEADER.pack(RECORD_TOKEN, TOKEN_SIZE) + record.token


def encode_data(data: bytes) -> list[bytes]:
    """
    C{data} as DATA records of at most L{MAX_RECORD_DATA} bytes each.
    """
    return [encode(Data(data[i:i + MAX_RECORD_DATA]))
            for i in range(0, len(data), MAX_RECORD_DATA)]


def data_record(payload: bytes | memoryview) -> bytes:
    """
    The DATA record of C{payload} (1 to L{MAX_RECORD_DATA} bytes, not checked: the per-write
    path of L{encode}), in one copy of it.
    """
    return _HEADER.pack(RECORD_DATA, len(payload)) + payload


def _check_token(token: bytes) -> None:
    if len(token) != TOKEN_SIZE:
        raise ValueError("a resume token is TOKEN_SIZE bytes")


class RecordDecoder:
    """
    Records from bytes that arrive in any pieces. The header of each record is checked as soon
    as it is complete, before its payload is read.

    By default each record comes out whole: the decoder holds at most one incomplete record
    (a header and L{MAX_RECORD_DATA} bytes).  With C{pieces}, a DATA record's payload comes out
    as it arrives, as L{Data} records of its pieces (their bytes, in order, are the payload):
    the decoder then holds at most a header or a record of fixed size (29 bytes), and copies
    each payload byte once.

    @ivar left: with C{pieces}, the bytes of a DATA record's payload still to come.
    @ivar buffer: the bytes of an incomplete record (with C{pieces}: of its header, or of a
        record of fixed size).
    """

    def __init__(self, pieces: bool = False) -> None:
        self.pieces = pieces
        self.left = 0
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[Record]:
        """
        The records that C{data} completes (with C{pieces}: and the DATA pieces it holds), in
        order.

        @raise RecordError: an unknown type or a length out of its type's bounds.
        """
        if self.pieces:
            return self._pieces(data)
        # Records are read where they lie (one copy of each payload); only an incomplete
        # record's bytes wait in the buffer for the next piece.
        if self.buffer:
            self.buffer += data
            data = bytes(self.buffer)
            self.buffer.clear()
        records: list[Record] = []
        pos, size = 0, len(data)
        while size - pos >= RECORD_HEADER_SIZE:
            kind, length = _HEADER.unpack_from(data, pos)
            _check_header(kind, length)
            end = pos + RECORD_HEADER_SIZE + length
            if size < end:
                break
            records.append(_parse(kind, bytes(data[pos + RECORD_HEADER_SIZE:end])))
            pos = end
        if pos < size:
            self.buffer += memoryview(data)[pos:]
        return records

    def _pieces(self, data: bytes) -> list[Record]:
        records: list[Record] = []
        buffer = self.buffer
        pos, size = 0, len(data)
        while pos < size:
            if self.left:
                end = min(size, pos + self.left)
                records.append(Data(data[pos:end]))
                self.left -= end - pos
                pos = end
            elif buffer:
                pos = self._complete(data, pos, records)
            elif size - pos < RECORD_HEADER_SIZE:
                buffer += data[pos:]
                pos = size
            else:
                kind, length = _HEADER.unpack_from(data, pos)
                _check_header(kind, length)
                pos += RECORD_HEADER_SIZE
                if kind == RECORD_DATA:
                    self.left = length
                elif size - pos < length:
                    buffer += data[pos - RECORD_HEADER_SIZE:]
                    pos = size
                else:
                    records.append(_parse(kind, bytes(data[pos:pos + length])))
                    pos += length
        return records

    def _complete(self, data: bytes, pos: int, records: list[Record]) -> int:
        """
        Take from C{data} at C{pos} what the buffered header (and its record, if not DATA)
        needs; return where the rest of C{data} starts.
        """
        buffer = self.buffer
        if len(buffer) < RECORD_HEADER_SIZE:
            got = data[pos:pos + RECORD_HEADER_SIZE - len(buffer)]
            buffer += got
            pos += len(got)
            if len(buffer) < RECORD_HEADER_SIZE:
                return pos
            kind, length = _HEADER.unpack_from(buffer)
            _check_header(kind, length)
            if kind == RECORD_DATA:
                self.left = length
                buffer.clear()
                return pos
        kind, length = _HEADER.unpack_from(buffer)
        got = data[pos:pos + RECORD_HEADER_SIZE + length - len(buffer)]
        buffer += got
        pos += len(got)
        if len(buffer) == RECORD_HEADER_SIZE + length:
            records.append(_parse(kind, bytes(buffer[RECORD_HEADER_SIZE:])))
            buffer.clear()
        return pos

    def reset(self) -> None:
        """
        Forget an incomplete record (the link that carried it is gone).
        """
        self.buffer.clear()
        self.left = 0


def _check_header(kind: int, length: int) -> None:
    if kind == RECORD_DATA:
        if not 0 < length <= MAX_RECORD_DATA:
            raise RecordError("DATA record length out of bounds")
        return
    expected = _FIXED_SIZES.get(kind)
    if expected is None:
        raise RecordError(f"unknown record type {kind}")
    if length != expected:
        raise RecordError(f"record type {kind} of a wrong size")


def _parse(kind: int, payload: bytes) -> Record:
    if kind == RECORD_DATA:
        return Data(payload)
    if kind == RECORD_ACK:
        return Ack(_OFFSET.unpack(payload)[0])
    if kind == RECORD_FIN:
        return Fin(_OFFSET.unpack(payload)[0])
    if kind == RECORD_RESUME:
        return Resume(payload[:TOKEN_SIZE], _OFFSET.unpack_from(payload, TOKEN_SIZE)[0])
    if kind == RECORD_ABORT:
        return Abort()
    return Token(payload)
