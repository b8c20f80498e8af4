# -*- test-case-name: tests.sni.test_parser -*-
"""
An incremental, sans-I/O reader of the ClientHello at the start of a TLS
connection.

The router feeds L{ClientHelloParser.receive_data} every read from the
visitor, from the first byte on, until it returns a L{ClientHello}; until
then it returns L{NEED_DATA}.  The parser keeps every byte it was given,
unchanged and in order, in L{ClientHelloParser.buffered}: the router replays
them to the backend it chose, which then runs the TLS handshake as if it had
read them itself.  Nothing is consumed or rewritten.

Limits, checked from the headers before any body is buffered:

  - A record may carry at most L{MAX_RECORD_PAYLOAD} (2^14) bytes, the TLS
    plaintext limit (RFC 8446 section 5.1): a longer one is refused from its
    5-byte header, L{MAX_RECORD_SIZE} bytes in all.
  - The ClientHello message (its 4-byte handshake header included) may be
    at most L{MAX_HELLO_SIZE} bytes, what one record can carry: a longer one
    is refused from its handshake header.  So the hello fits one record, as
    every client sends it.
  - The message may still be split over several records (TLS allows it, and
    some clients behind censoring networks split the hello on purpose), at
    most L{MAX_HELLO_RECORDS} of them.  So the parser reads at most
    L{MAX_HELLO_WIRE_SIZE} bytes before it knows the answer; a read that
    completes the hello may bring more (the visitor's next bytes), which
    stay in C{buffered()} untouched.

The parser stops at the last byte of the hello: it neither waits for the
rest of the record that holds it nor looks at what follows.  Timing (the
handshake timeout) belongs to the caller.
"""

from __future__ import annotations

import struct
from enum import Enum
from typing import Final, Literal, NoReturn

from nfltr.wire.constants import TLS_RECORD_PAYLOAD

from ._errors import ClientHelloError, Reason
from ._hello import CLIENT_HELLO, ClientHello, parse_client_hello

#: The content type of a handshake record.
HANDSHAKE = 22
#: Record versions accepted: 0x0300 (SSL 3.0, as some clients still write
#: in their first record) to 0x0304.  The record version means nothing in
#: TLS 1.3 (0x0301 or 0x0303 in practice); the hello says what is offered.
TLS_MAJOR = 3
MAX_RECORD_MINOR = 4

RECORD_HEADER = struct.Struct("!BBBH")
RECORD_HEADER_SIZE = RECORD_HEADER.size
#: The most payload one TLS record may carry (2^14, RFC 8446 section 5.1).
MAX_RECORD_PAYLOAD = TLS_RECORD_PAYLOAD
#: The largest record, header included.
MAX_RECORD_SIZE = RECORD_HEADER_SIZE + MAX_RECORD_PAYLOAD

HANDSHAKE_HEADER = struct.Struct("!I")
HANDSHAKE_HEADER_SIZE = HANDSHAKE_HEADER.size
#: The largest ClientHello accepted, its handshake header included: what one
#: record can carry.
MAX_HELLO_SIZE = MAX_RECORD_PAYLOAD
#: The most records a ClientHello may be split over.
MAX_HELLO_RECORDS = 32
#: The most bytes the parser reads before it answers.
MAX_HELLO_WIRE_SIZE = MAX_HELLO_SIZE + MAX_HELLO_RECORDS * RECORD_HEADER_SIZE


class _NeedData(Enum):
    NEED_DATA = "NEED_DATA"

    def __repr__(self) -> str:
        return "NEED_DATA"


#: What L{ClientHelloParser.receive_data} returns until the hello is complete.
NEED_DATA: Final = _NeedData.NEED_DATA
NeedData = Literal[_NeedData.NEED_DATA]


def is_tls_start(prefix: bytes | bytearray) -> bool | None:
    """
    Tell whether a stream starting with C{prefix} can be TLS, from at most
    its first three bytes: a handshake record (0x16) of version 3.0 to 3.4.

    @return: C{True} if the first three bytes make a TLS handshake record's
        start, C{False} as soon as a byte rules it out (plain HTTP at its
        first byte, the link magic, an SSLv2-style hello), C{None} while
        more bytes are needed to tell.
    """
    if len(prefix) > 0 and prefix[0] != HANDSHAKE:
        return False
    if len(prefix) > 1 and prefix[1] != TLS_MAJOR:
        return False
    if len(prefix) > 2:  # noqa: PLR2004 - the third byte, the version's minor
        return prefix[2] <= MAX_RECORD_MINOR
    return None


class ClientHelloParser:
    """
    Reads the ClientHello from the bytes a TLS connection starts with.

    @ivar _buffer: every byte received, in order (what C{buffered()} gives).
    @ivar _next: the offset in C{_buffer} of the next record header to read,
        while no record is open.
    @ivar _spans: the C{(start, stop)} offsets in C{_buffer} of the payloads
        of the records read so far; the last one is the open record's, whose
        payload may not all have arrived.
    @ivar _open: a record header was read and its payload is being received.
    @ivar _earlier: the payload bytes of the records before the open one.
    @ivar _hello_size: the size of the ClientHello message, its handshake
        header included, once that header was read.
    @ivar _result: the hello, once complete.
    @ivar _error: the error raised, once one was: raised again on any input.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._next = 0
        self._spans: list[tuple[int, int]] = []
        self._open = False
        self._earlier = 0
        self._hello_size: int | None = None
        self._result: ClientHello | None = None
        self._error: ClientHelloError | None = None

    @property
    def result(self) -> ClientHello | None:
        """
        The hello, once complete; C{None} before.
        """
        return self._result

    def buffered(self) -> bytes:
        """
        Every byte received so far, unchanged and in order: the hello's
        records and whatever followed them in the same reads, or after.
        """
        return bytes(self._buffer)

    def receive_data(self, data: bytes) -> ClientHello | NeedData:
        """
        Take the next bytes read from the connection.

        C{b""} means the connection ended: before a complete hello, that is
        an error.  Once the hello is complete, later data is only appended
        to C{buffered()} (the caller should pause reading and replay), and
        the same hello is returned.

        @return: the L{ClientHello} once its last byte arrived, else
            L{NEED_DATA}.
        @raise ClientHelloError: the bytes are not a usable ClientHello, or
            the connection ended before one was complete.  Nothing else is
            ever raised, on any input.
        """
        if self._error is not None:
            raise ClientHelloError(self._error.reason, self._error.detail)
        if self._result is not None:
            self._buffer += data
            return self._result
        if not data:
            self._fail(ClientHelloError(Reason.TRUNCATED, "connection ended before the hello"))
        self._buffer += data
        try:
            return self._advance()
        except ClientHelloError as e:
            self._fail(e)

    def _fail(self, error: ClientHelloError) -> NoReturn:
        self._error = error
        raise error

    def _advance(self) -> ClientHello | NeedData:
        """
        Read record headers and payload as far as the buffer goes.
        """
        size = len(self._buffer)
        while True:
            if not self._open:
                if size - self._next < RECORD_HEADER_SIZE:
                    if not self._spans and is_tls_start(self._buffer) is False:
                        raise _not_tls(self._buffer)
                    return NEED_DATA
                self._openRecord()
            start, stop = self._spans[-1]
            available = self._earlier + min(size, stop) - start
            if self._hello_size is None and available >= HANDSHAKE_HEADER_SIZE:
                self._readHandshakeHeader()
            if self._hello_size is not None and available >= self._hello_size:
                return self._finish(self._hello_size)
            if size < stop:
                return NEED_DATA
            # The open record is complete but the hello is not: on to the next.
            self._open = False
            self._earlier += stop - start
            self._next = stop

    def _openRecord(self) -> None:
        """
        Check the record header at C{_next} and open its record.
        """
        first = not self._spans
        ctype, major, minor, length = RECORD_HEADER.unpack_from(self._buffer, self._next)
        if ctype != HANDSHAKE or major != TLS_MAJOR or minor > MAX_RECORD_MINOR:
            if first:
                raise _not_tls(self._buffer)
            raise ClientHelloError(
                Reason.BAD_RECORD,
                f"record {len(self._spans) + 1} of the hello is type {ctype} "
                f"version {major}.{minor}",
            )
        if length > MAX_RECORD_PAYLOAD:
            raise ClientHelloError(
                Reason.RECORD_TOO_LARGE, f"record of {length} bytes (limit {MAX_RECORD_PAYLOAD})"
            )
        if length == 0:
            raise ClientHelloError(Reason.BAD_RECORD, "empty handshake record")
        if len(self._spans) == MAX_HELLO_RECORDS:
            raise ClientHelloError(
                Reason.TOO_FRAGMENTED, f"hello split over more than {MAX_HELLO_RECORDS} records"
            )
        start = self._next + RECORD_HEADER_SIZE
        self._spans.append((start, start + length))
        self._open = True

    def _readHandshakeHeader(self) -> None:
        """
        Check the handshake header, the first 4 payload bytes.
        """
        (header,) = HANDSHAKE_HEADER.unpack(self._gather(HANDSHAKE_HEADER_SIZE))
        kind, length = header >> 24, header & 0xFFFFFF
        if kind != CLIENT_HELLO:
            raise ClientHelloError(
                Reason.NOT_CLIENT_HELLO, f"first handshake message is type {kind}"
            )
        size = HANDSHAKE_HEADER_SIZE + length
        if size > MAX_HELLO_SIZE:
            raise ClientHelloError(
                Reason.HELLO_TOO_LARGE, f"hello of {size} bytes (limit {MAX_HELLO_SIZE})"
            )
        self._hello_size = size

    def _finish(self, size: int) -> ClientHello:
        """
        Decode the complete hello of C{size} bytes.
        """
        self._result = parse_client_hello(self._gather(size, skip=HANDSHAKE_HEADER_SIZE))
        return self._result

    def _gather(self, count: int, skip: int = 0) -> bytes:
        """
        The first C{count} payload bytes but the first C{skip}, joined across
        records (the caller made sure they arrived): one copy, through views
        of the buffer.
        """
        views = []
        count -= skip
        with memoryview(self._buffer) as buffer:
            for start, stop in self._spans:
                begin = start + min(skip, stop - start)
                skip -= begin - start
                take = min(count, stop - begin)
                if take:
                    views.append(buffer[begin : begin + take])
                    count -= take
                if not count:
                    break
            try:
                return b"".join(views)
            finally:
                # While a slice lives the buffer cannot grow: release them now rather
                # than rely on their being freed on return.
                for view in views:
                    view.release()


def _not_tls(prefix: bytearray) -> ClientHelloError:
    return ClientHelloError(Reason.NOT_TLS, f"stream starts with {bytes(prefix[:8])!r}")
