# -*- test-case-name: tests.resume.test_stream -*-
"""
One end of a resumable session, sans-I/O.

The end numbers the bytes it sends, keeps those the peer has not acknowledged (at most its
window: a writer whose bytes would go beyond it must wait for C{room}), acknowledges what it
receives, and after a lost link resends from the offset the peer says it has received. It reads
and returns bytes; the adapters move them between the local TCP connection and a link session.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from ._records import (
    MAX_RECORD_DATA,
    MAX_SENT_DATA,
    OFFSET_SIZE,
    RECORD_ACK,
    RECORD_DATA,
    RECORD_HEADER_SIZE,
    Abort,
    Ack,
    Data,
    Fin,
    Record,
    RecordDecoder,
    RecordError,
    Resume,
    Token,
    data_record,
    encode,
)

_LENGTH = struct.Struct("!I")
_HEADER = struct.Struct("!BI")
# An ACK record: type, length, offset.
_ACK_RECORD = struct.Struct("!BIQ")

# The default bytes an end keeps for its peer until acknowledged: the session's window.
DEFAULT_RESUME_WINDOW = 1048576
# The smallest window: two of the largest reads a local TCP connection delivers at once.
MIN_RESUME_WINDOW = 2 * MAX_RECORD_DATA


class ResumeRefused(Exception):
    """
    A resume attempt that this end refuses; the session it names is left as it was.
    """


class Phase(Enum):
    """
    Where an end is: C{OPEN} on a link, C{SUSPENDED} without one, C{RESUMING} on a new link
    waiting for the agent's L{Resume}. An end that is L{ResumableStream.done} stays resumable
    until its link session closes cleanly: its peer may not know yet that it is done.
    """

    OPEN = "open"
    SUSPENDED = "suspended"
    RESUMING = "resuming"


@dataclass
class Received:
    """
    What bytes from the link produced: C{data} for the local connection, C{reply} for the link,
    C{ended} once the peer's stream ended (all its bytes are in C{data} by then), C{aborted}
    once the peer reset the session (for good: the local connection is reset too).
    """

    data: list[bytes] = field(default_factory=list)
    reply: list[bytes] = field(default_factory=list)
    ended: bool = False
    aborted: bool = False


# Per record, a global: an Enum member read through its class is a slow attribute lookup.
_OPEN = Phase.OPEN


class ResumableStream:
    """
    One end of a resumable session.

    @ivar sent: the offset of the next byte this end will write.
    @ivar acked: the peer has received every byte before this offset.
    @ivar received: this end has received every byte of the peer's before this offset.
    @ivar next_ack: C{received} at which this end acknowledges next (a quarter of its window
        after its last ACK).
    @ivar token: the token to present after a suspension, or C{None} before the agent sent one
        (until then the session cannot resume).
    @ivar presented: on the agent, the token the connector presented for the last resume, until
        the connector's first record shows it received the new one (its answer may have been
        lost with the link: the connector then presents the same token again).
    """

    def __init__(self, window: int = DEFAULT_RESUME_WINDOW, token: bytes | None = None) -> None:
        if window < MIN_RESUME_WINDOW:
            raise ValueError("a resume window is at least MIN_RESUME_WINDOW bytes")
        self.window = window
        self.token = token
        self.presented: bytes | None = None
        self.sent = 0
        self.acked = 0
        self.received = 0
        self.phase = Phase.OPEN
        self.aborted = False
        self.next_ack = window // 4
        self._retained: deque[bytes | memoryview] = deque()
        self._fin_at: int | None = None
        self._fin_acked = False
        self._peer_fin = False
        self._decoder = RecordDecoder(pieces=True)

    # Sending.

    @property
    def retained(self) -> int:
        """
        Bytes kept for the peer until it acknowledges them.
        """
        return self.sent - self.acked

    @property
    def room(self) -> int:
        """
        Bytes this end may still write before the peer acknowledges more.
        """
        return self.window - self.retained

    def write(self, data: bytes | memoryview) -> list[bytes]:
        """
        Number C{data} and keep it until acknowledged (as it is: bytes that never change);
        return the records for the link, each to be written alone, each fitting one link frame
        (none while suspended: they leave on resume).

        @raise ValueError: C{data} is over L{room}, or the stream was finished.
        """
        n = len(data)
        if n > self.window - self.sent + self.acked:
            raise ValueError("a write beyond the resume window")
        if self._fin_at is not None:
            raise ValueError("a write after finish")
        self.sent += n
        if n <= MAX_SENT_DATA:
            # One record (a link frame): the common case, in one copy of the bytes.
            self._retained.append(data)
            return [_HEADER.pack(RECORD_DATA, n) + data] if self.phase is _OPEN else []
        # Records of MAX_SENT_DATA, each kept as a view of its own record's payload (no
        # second copy; what is kept is what was sent, record headers aside).
        view, out, pack = memoryview(data), [], _HEADER.pack
        for i in range(0, n, MAX_SENT_DATA):
            piece = view[i:i + MAX_SENT_DATA]
            record = pack(RECORD_DATA, len(piece)) + piece
            self._retained.append(memoryview(record)[RECORD_HEADER_SIZE:])
            out.append(record)
        return out if self.phase is _OPEN else []

    def number(self, data: bytes) -> bytes | None:
        """
        The fast path of L{write}: if C{data} makes one record (at most L{MAX_SENT_DATA} bytes,
        within L{room}) on an open stream not finished, number and keep it and return the
        record's header (the record is that header, then C{data}: the caller sends them
        together without joining them).  Otherwise L{None}, and nothing was done: use L{write}.
        """
        n = len(data)
        if (n > MAX_SENT_DATA or n > self.window - self.sent + self.acked
                or self._fin_at is not None or self.phase is not _OPEN):
            return None
        self.sent += n
        self._retained.append(data)
        return _HEADER.pack(RECORD_DATA, n)

    def finish(self) -> list[bytes]:
        """
        End this end's stream; return the FIN record for the link (kept until acknowledged),
        the first time only (a resume sends it again if the peer missed it).
        """
        if self._fin_at is not None:
            return []
        self._fin_at = self.sent
        return [encode(Fin(self._fin_at))] if self.phase is Phase.OPEN else []

    # Receiving.

    def take(self, data: bytes) -> bytes | None:
        """
        The fast path of L{receive}: if C{data} is nothing but application bytes on an open
        stream (one DATA record or a piece of one), number them and return them
        (the caller then sends L{ack} once C{received} reached L{next_ack}); if it is one
        ACK of bytes sent, apply it and return C{b""} (the caller then sees whether the room
        it made lets more be written).  Otherwise L{None}, and nothing was done: hand C{data}
        to L{receive}, which applies every rule.
        """
        if self.phase is not _OPEN or self.aborted or self._peer_fin:
            return None
        decoder = self._decoder
        left = decoder.left
        n = len(data)
        if left:
            if n > left:
                return None
            decoder.left = left - n
        else:
            if n <= RECORD_HEADER_SIZE or decoder.buffer:
                return None
            if data[0] != RECORD_DATA:
                return self._take_ack(data)
            # A DATA record alone, or its first piece (the link cut it where its credit ran
            # out): the rest comes as the next pieces.
            length = _LENGTH.unpack_from(data, 1)[0]
            n -= RECORD_HEADER_SIZE
            if not n <= length <= MAX_RECORD_DATA:
                return None
            decoder.left = length - n
            data = data[RECORD_HEADER_SIZE:]
        self.presented = None
        self.received += n
        return data

    def _take_ack(self, data: bytes) -> bytes | None:
        # An ACK alone, of bytes sent (not of our FIN: receive sees to what that ends).
        if len(data) != _ACK_RECORD.size or data[0] != RECORD_ACK:
            return None
        _, length, offset = _ACK_RECORD.unpack_from(data)
        if length != OFFSET_SIZE or not self.acked <= offset <= self.sent:
            return None
        self.presented = None
        self._trim(offset)
        return b""

    def ack(self) -> list[bytes]:
        """
        The ACK record of what this end received, for the link.
        """
        self.next_ack = self.received + self.window // 4
        return [_ACK_RECORD.pack(RECORD_ACK, OFFSET_SIZE, self.received + self._peer_fin)]

    def receive(self, data: bytes) -> Received:
        """
        Handle bytes of the link session.

        @raise RecordError: the peer broke the record rules (the session must end with a reset).
        """
        return self.receive_records(self._decoder.feed(data))

    def receive_records(self, records: list[Record]) -> Received:
        """
        Handle records already decoded (those after the L{Resume} an agent read itself).
        """
        result = Received()
        for record in records:
            self._handle(record, result)
        if self.received >= self.next_ack and self.phase is Phase.OPEN:
            self._ack(result)
        return result

    def _handle(self, record: Record, result: Received) -> None:
        if self.phase is Phase.RESUMING:
            self._handle_resume(record, result)
            return
        if self.phase is not Phase.OPEN or self.aborted:
            raise RecordError("a record on a session that is not open")
        self.presented = None
        if isinstance(record, Data):
            if self._peer_fin:
                raise RecordError("DATA after FIN")
            self.received += len(record.data)
            result.data.append(record.data)
        elif isinstance(record, Ack):
            if not self.acked <= record.offset <= self._end:
                raise RecordError("an ACK of bytes never sent")
            self._trim(record.offset)
        elif isinstance(record, Fin):
            if record.offset != self.received or self._peer_fin:
                raise RecordError("a FIN at another offset than the bytes received")
            self._peer_fin = True
            result.ended = True
            self._ack(result)
        elif isinstance(record, Abort):
            result.aborted = self.aborted = True
        else:
            self._handle_token(record)

    def _handle_resume(self, record: Record, result: Received) -> None:
        if not isinstance(record, Resume):
            raise RecordError("a resumed session starts with RESUME")
        self._resumed(record.offset)
        self.token = record.token
        self._ack(result)
        result.reply.extend(self._resend())

    def _handle_token(self, record: Record) -> None:
        if not isinstance(record, Token):
            raise RecordError("RESUME on an open session")
        if self.token is not None:
            raise RecordError("a second TOKEN")
        self.token = record.token

    @property
    def position(self) -> int:
        """
        What this end acknowledges: the bytes received, plus one once the peer's FIN arrived.
        """
        return self.received + self._peer_fin

    @property
    def _end(self) -> int:
        # The highest position the peer may acknowledge: our bytes, plus one for our FIN.
        return self.sent + (self._fin_at is not None)

    def _ack(self, result: Received) -> None:
        result.reply.extend(self.ack())

    def _trim(self, position: int) -> None:
        offset = min(position, self.sent)
        drop = offset - self.acked
        while drop:
            head = self._retained[0]
            if len(head) <= drop:
                self._retained.popleft()
                drop -= len(head)
                self.acked += len(head)
            else:
                self._retained[0] = head[drop:]
                self.acked += drop
                drop = 0
        if position > self.sent:
            self._fin_acked = True

    @property
    def done(self) -> bool:
        """
        Both streams ended and the peer acknowledged our FIN: this end closes its link session
        with a (link) FIN.
        """
        return self._fin_acked and self._peer_fin

    def peer_closed(self) -> None:
        """
        The link session ended cleanly from the peer's side (a link FIN): the peer was done, so
        it received everything this end sent, our FIN included.

        @raise RecordError: the peer's own stream had not ended.
        """
        if not self._peer_fin:
            raise RecordError("the link session ended before the peer's FIN")
        if self._fin_at is None:
            raise RecordError("the link session ended before this end's FIN was sent")
        self._trim(self._end)

    def abort(self) -> list[bytes]:
        """
        Reset the session for good: the ABORT record for the link (then the link RESET), on
        a link whether open or resuming (a connector that gives up before reading the agent's
        answer to its RESUME: the agent resumed the session, and must end it too).
        """
        self.aborted = True
        return [] if self.phase is Phase.SUSPENDED else [encode(Abort())]

    # Suspension and resumption.

    def suspend(self) -> None:
        """
        The link is lost: keep everything, send nothing until resumed.
        """
        self.phase = Phase.SUSPENDED
        self._decoder.reset()

    def present(self) -> list[bytes]:
        """
        The connector's first bytes on the new link session: its token and offset received.

        @raise ValueError: the session has no token yet, or is not suspended.
        """
        if self.token is None or self.phase is not Phase.SUSPENDED or self.aborted:
            raise ValueError("only a suspended session with a token resumes")
        self.phase = Phase.RESUMING
        return [encode(Resume(self.token, self.position))]

    def accepts(self, token: bytes) -> bool:
        """
        Whether C{token} resumes this session: its current token, or the one presented for a
        resume the connector has not confirmed yet.
        """
        return token in (self.token, self.presented)

    def resume(self, peer_offset: int, token: bytes, new_token: bytes) -> list[bytes]:
        """
        The agent's answer to a connector's L{Resume} of C{token}: the next suspension's token,
        the offset it has received, then every byte the connector has not received.

        @raise ResumeRefused: C{token} is not one L{accepts}, or C{peer_offset} is beyond what
            this end sent or before what the peer acknowledged; the session is left as it was.
        """
        if not self.accepts(token) or self.aborted:
            raise ResumeRefused("no session has this token")
        self._check_offset(peer_offset)
        self.suspend()
        self._resumed(peer_offset)
        self.presented = token
        self.token = new_token
        return [encode(Resume(new_token, self.position)), *self._resend()]

    def _check_offset(self, peer_offset: int) -> None:
        if peer_offset > self._end:
            raise ResumeRefused("an offset beyond the bytes sent")
        if peer_offset < self.acked:
            raise ResumeRefused("an offset before the bytes acknowledged")

    def _resumed(self, peer_offset: int) -> None:
        try:
            self._check_offset(peer_offset)
        except ResumeRefused as e:
            raise RecordError(str(e)) from e
        self.phase = Phase.OPEN
        self.next_ack = self.received + self.window // 4
        self._trim(peer_offset)

    def _resend(self) -> list[bytes]:
        out = [data_record(piece) for piece in self._retained]
        if self._fin_at is not None and not self._fin_acked:
            out.append(encode(Fin(self._fin_at)))
        return out
