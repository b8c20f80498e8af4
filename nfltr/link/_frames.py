# -*- test-case-name: tests.link.test_frames -*-
"""
The link's wire format: the preamble, the frame header and frame encoders,
and an incremental frame decoder.

Every frame is a 10-byte header followed by its payload::

    type (u8) | flags (u8) | session id (u32) | payload length (u32)

all in network byte order.  A length over L{MAX_PAYLOAD} and an unknown type
are rejected from the header, before any byte of the body is buffered.

The decoder slices frames that lie wholly inside one received chunk and only
joins the bytes of a frame that spans chunks, so its memory is bounded by one
frame and its cost is linear in the input.  The payload of a DATA frame of
at least L{VIEW_MIN} bytes that lies wholly inside the chunk is a
C{memoryview} of it, not a copy: L{nfltr.link.LinkConnection} joins the
payloads of consecutive DATA frames of one session into one string (a
single one is copied alone), so its events carry C{bytes} as before, with
one copy of each byte as before, and one event per run of frames.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from ._errors import ErrorCode, RemoteProtocolError

MAGIC = b"\x89NFLTR\r\n"
VERSION = 1
PREAMBLE = MAGIC + bytes([VERSION])
PREAMBLE_SIZE = len(PREAMBLE)

HEADER = struct.Struct("!BBII")
HEADER_SIZE = HEADER.size
MAX_PAYLOAD = 65536
MAX_TARGET = 1024
MAX_REASON = 1024

_U16 = struct.Struct("!H")
_U32 = struct.Struct("!I")
_GOAWAY = struct.Struct("!II")
_RESET = _U32
PING_SIZE = 8
#: The smallest DATA payload the decoder hands out as a view of the chunk
#: rather than a copy (a smaller one is cheaper to copy than to view).
VIEW_MIN = 4096


class FrameType(IntEnum):
    """
    The frame types.  Their numbers are part of the wire format.
    """

    OPEN = 1
    DATA = 2
    FIN = 3
    RESET = 4
    WINDOW = 5
    PING = 6
    PONG = 7
    GOAWAY = 8
    CONTROL = 9
    ACCEPT = 10


#: OPEN flag: answer this OPEN with ACCEPT or RESET before any DATA or FIN.
#: Set only towards a peer whose hello said C{accepts}; the only flag.
WANT_ACCEPT = 0x01

_KNOWN_TYPES = frozenset(int(t) for t in FrameType)

# Types whose payload has one fixed size: checked from the header.
_DATA = int(FrameType.DATA)
_FIXED_SIZE: dict[int, int] = {
    FrameType.FIN: 0,
    FrameType.ACCEPT: 0,
    FrameType.WINDOW: 4,
    FrameType.PING: PING_SIZE,
    FrameType.PONG: PING_SIZE,
}
_MIN_SIZE: dict[int, int] = {
    FrameType.OPEN: 2,
    FrameType.RESET: 4,
    FrameType.GOAWAY: 8,
}


class Frame(NamedTuple):
    """
    One decoded frame; C{payload} is still raw (a large DATA frame's is a
    C{memoryview} of the chunk it came in: see the module).
    """

    type: int
    flags: int
    session_id: int
    payload: bytes


# Per-frame helpers: tuple_new builds a Frame (or another NamedTuple) without
# the Python-level __new__ that calling the class goes through; pack_header
# encodes a header (type, flags, session id, length) without header()'s call.
tuple_new = tuple.__new__
pack_header = HEADER.pack


def check_header(ftype: int, length: int) -> None:
    """
    Validate a frame header before its body is read.

    @raise RemoteProtocolError: C{UNKNOWN_FRAME_TYPE} or C{FRAME_SIZE_ERROR}.
    """
    if ftype not in _KNOWN_TYPES:
        raise RemoteProtocolError(ErrorCode.UNKNOWN_FRAME_TYPE, f"unknown frame type {ftype}")
    if length > MAX_PAYLOAD:
        raise RemoteProtocolError(
            ErrorCode.FRAME_SIZE_ERROR,
            f"{FrameType(ftype).name} frame declares {length} bytes, over {MAX_PAYLOAD}",
        )
    fixed = _FIXED_SIZE.get(ftype)
    if fixed is not None and length != fixed:
        raise RemoteProtocolError(
            ErrorCode.FRAME_SIZE_ERROR,
            f"{FrameType(ftype).name} frame must carry {fixed} bytes, not {length}",
        )
    minimum = _MIN_SIZE.get(ftype, 0)
    if length < minimum:
        raise RemoteProtocolError(
            ErrorCode.FRAME_SIZE_ERROR,
            f"{FrameType(ftype).name} frame must carry at least {minimum} bytes, not {length}",
        )


class DecodeError(Exception):
    """
    Internal: carries the frames decoded before a bad header.
    """

    def __init__(self, frames: list[Frame], error: RemoteProtocolError) -> None:
        super().__init__(error)
        self.frames = frames
        self.error = error


class FrameDecoder:
    """
    Turns a byte stream into L{Frame}s.

    A frame that spans chunks is held as its header and the pieces of its
    body as they came (a chunk wholly inside a body is kept as it is, not
    copied), joined once when the last piece arrives.

    @ivar _head: the bytes of an incomplete header, or the whole header of
        the frame whose body is being collected.
    @ivar _length: that frame's body length once its header is complete and
        valid, else C{-1}.
    @ivar _body: the pieces of its body received so far, C{bytes} (at most
        L{_MAX_PIECES} and one joined piece: a peer that trickles a frame
        cannot make it cost more than its size and a few small objects).
    @ivar _have: their total size.
    @ivar viewed: the last L{feed} returned DATA payloads that are views of
        its chunk (see the module): they must be copied before the chunk's
        owner may reuse it, and not be kept (a view holds the whole chunk).
    """

    _MAX_PIECES = 64

    def __init__(self) -> None:
        self._head = bytearray()
        self._length = -1
        self._body: list[bytes] = []
        self._have = 0
        self.viewed = False

    def buffered(self) -> int:
        """
        How many bytes of an incomplete frame are held.
        """
        return len(self._head) + self._have

    def feed(self, data: bytes | memoryview) -> list[Frame]:
        """
        Decode every frame completed by C{data}: finish the frame held from
        earlier chunks, slice out every whole frame, keep the rest.

        C{data} may be a C{memoryview} of a buffer its owner reuses once the
        caller is done with the frames: then every payload but a large DATA
        frame's (a view: see the module) is copied, and so is every byte
        kept for a later call.

        @raise DecodeError: a header was invalid; carries the frames decoded
            before it.
        """
        frames: list[Frame] = []
        view = None
        lent = type(data) is not bytes
        try:
            pos = 0
            if self._head:
                pos = self._finish_partial(data, frames)
                if pos < 0:
                    return frames
            end = len(data)
            unpack = HEADER.unpack_from
            append = frames.append
            while end - pos >= HEADER_SIZE:
                ftype, flags, sid, length = unpack(data, pos)
                if ftype != _DATA or length > MAX_PAYLOAD:
                    check_header(ftype, length)
                body = pos + HEADER_SIZE
                if body + length > end:
                    self._keep(data, pos, length)
                    return frames
                pos = body + length
                if length >= VIEW_MIN and ftype == _DATA:
                    if view is None:
                        view = memoryview(data)
                    append(tuple_new(Frame, (ftype, flags, sid, view[body:pos])))
                elif lent:
                    append(tuple_new(Frame, (ftype, flags, sid, bytes(data[body:pos]))))
                else:
                    append(tuple_new(Frame, (ftype, flags, sid, data[body:pos])))
            if pos < end:
                self._head = bytearray(data[pos:])
        except RemoteProtocolError as e:
            raise DecodeError(frames, e) from None
        finally:
            self.viewed = view is not None
        return frames

    def _keep(self, data: bytes | memoryview, pos: int, length: int) -> None:
        """
        Hold the frame at C{pos}, of C{length} bytes, that C{data} does not
        complete (a copy of its bytes: C{data} may be lent).
        """
        body = pos + HEADER_SIZE
        self._head = bytearray(data[pos:body])
        self._length = length
        if body < len(data):
            rest = data[body:]
            self._body.append(rest if isinstance(rest, bytes) else bytes(rest))
            self._have = len(data) - body

    def _finish_partial(self, data: bytes | memoryview, frames: list[Frame]) -> int:
        """
        Complete the frame held from earlier chunks; return where C{data}'s
        unread part starts, or C{-1} if C{data} was used up.  A piece of a
        lent C{data} is copied (see L{feed}).
        """
        head = self._head
        pos = 0
        if self._length < 0:
            pos = HEADER_SIZE - len(head)
            head += data[:pos]
            if len(head) < HEADER_SIZE:
                return -1
            ftype, _, _, length = HEADER.unpack_from(head)
            check_header(ftype, length)
            self._length = length
        need = self._length - self._have
        piece = data[pos : pos + need]  # data itself if it lies wholly in the body
        body = self._body
        if piece:
            body.append(piece if isinstance(piece, bytes) else bytes(piece))
            self._have += len(piece)
        if self._have < self._length:
            if len(body) > self._MAX_PIECES:
                self._body = [b"".join(body)]
            return -1
        ftype, flags, sid, _ = HEADER.unpack_from(head)
        frames.append(Frame(ftype, flags, sid, b"".join(body)))
        self._head = bytearray()
        self._length = -1
        self._body = []
        self._have = 0
        return pos + need


def header(ftype: FrameType, session_id: int, length: int, flags: int = 0) -> bytes:
    """
    Encode one frame header.
    """
    return HEADER.pack(ftype, flags, session_id, length)


def encode_open(session_id: int, target: bytes, first: bytes = b"", flags: int = 0) -> bytes:
    """
    OPEN: u16 target length, target, then the session's first bytes;
    C{flags} L{WANT_ACCEPT} or 0.
    """
    payload = _U16.pack(len(target)) + target + first
    return header(FrameType.OPEN, session_id, len(payload), flags) + payload


def decode_open(payload: bytes) -> tuple[bytes, bytes]:
    """
    Split an OPEN payload into its target and first bytes.

    @raise RemoteProtocolError: C{FRAME_SIZE_ERROR} or C{PROTOCOL_ERROR}.
    """
    (size,) = _U16.unpack_from(payload)
    if size == 0 or size > MAX_TARGET:
        raise RemoteProtocolError(
            ErrorCode.PROTOCOL_ERROR, f"OPEN target length {size} outside 1..{MAX_TARGET}"
        )
    if 2 + size > len(payload):
        raise RemoteProtocolError(
            ErrorCode.FRAME_SIZE_ERROR, f"OPEN target length {size} exceeds the frame"
        )
    return payload[2 : 2 + size], payload[2 + size :]


def encode_accept(session_id: int) -> bytes:
    """
    ACCEPT: the answer to an OPEN flagged L{WANT_ACCEPT}; no payload.
    """
    return header(FrameType.ACCEPT, session_id, 0)


def encode_fin(session_id: int) -> bytes:
    """
    FIN: the sender will send no more DATA on this session.
    """
    return header(FrameType.FIN, session_id, 0)


def _reason_bytes(reason: str) -> bytes:
    raw = reason.encode("utf-8", "replace")[:MAX_REASON]
    return raw.decode("utf-8", "ignore").encode("utf-8")


def encode_reset(session_id: int, code: int, reason: str = "") -> bytes:
    """
    RESET: u32 error code, UTF-8 reason (at most L{MAX_REASON} bytes).
    """
    payload = _RESET.pack(code) + _reason_bytes(reason)
    return header(FrameType.RESET, session_id, len(payload)) + payload


def decode_coded(payload: bytes, offset: int) -> tuple[int, str]:
    """
    Read the u32 code at C{offset} and the UTF-8 reason after it (its first
    L{MAX_REASON} bytes).
    """
    (code,) = _U32.unpack_from(payload, offset)
    # At most MAX_REASON bytes of it, as a sender sends: a longer one is a
    # peer's attempt to make us hold or log more.
    start = offset + 4
    reason = bytes(payload[start : start + MAX_REASON]).decode("utf-8", "replace")
    return code, reason


def encode_window(session_id: int, increment: int) -> bytes:
    """
    WINDOW: u32 credit increment; session 0 means the connection budget.
    """
    return header(FrameType.WINDOW, session_id, 4) + _U32.pack(increment)


def decode_u32(payload: bytes) -> int:
    """
    Read a WINDOW frame's increment.
    """
    (value,) = _U32.unpack_from(payload)
    return int(value)


def encode_ping(opaque: bytes, pong: bool = False) -> bytes:
    """
    PING or PONG with 8 opaque bytes, which a PONG echoes.
    """
    ftype = FrameType.PONG if pong else FrameType.PING
    return header(ftype, 0, PING_SIZE) + opaque


def encode_goaway(last_session_id: int, code: int, reason: str = "") -> bytes:
    """
    GOAWAY: u32 last peer-initiated session id accepted, u32 code, reason.
    """
    payload = _GOAWAY.pack(last_session_id, code) + _reason_bytes(reason)
    return header(FrameType.GOAWAY, 0, len(payload)) + payload


def decode_goaway(payload: bytes) -> tuple[int, int, str]:
    """
    Read a GOAWAY payload.
    """
    (last,) = _U32.unpack_from(payload)
    code, reason = decode_coded(payload, 4)
    return int(last), code, reason


def encode_control(payload: bytes) -> bytes:
    """
    CONTROL: one typed control message (see C{_control}).
    """
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"control message of {len(payload)} bytes is over {MAX_PAYLOAD}")
    return header(FrameType.CONTROL, 0, len(payload)) + payload


def classify_prefix(data: bytes) -> bool | None:
    """
    Tell a link from other traffic (HTTP) by the first bytes of a stream.

    @return: C{True} if C{data} starts like a link preamble, C{False} if it
        cannot be one, C{None} if more bytes are needed to tell.
    """
    n = min(len(data), len(MAGIC))
    if data[:n] != MAGIC[:n]:
        return False
    return True if n == len(MAGIC) else None
