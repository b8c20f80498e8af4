# -*- test-case-name: tests.resume.test_twisted -*-
"""
The agent's side of resumable sessions (L{nfltr.resume}): a C{rtcp:PORT} session is served as a
C{tcp:PORT} one but through a L{ResumableSession}, whose token the agent issues; a
C{resume:PORT} session presents a token, and is handed to the suspended session it names.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.protocol import Protocol
from twisted.logger import Logger

from nfltr.link import ErrorCode
from nfltr.link.twisted import LinkSession
from nfltr.resume import (
    DEFAULT_RESUME_TIMEOUT,
    RecordDecoder,
    RecordError,
    ResumableStream,
    Resume,
    ResumeRefused,
    ResumeTable,
    Token,
    encode,
)
from nfltr.resume.twisted import ResumableSession
from nfltr.wire.resume import RESUME_REFUSED


class AgentResumer:
    """
    The agent's resumable sessions.

    @ivar table: the sessions by token.
    """

    log = Logger()

    def __init__(self, clock: Any, timeout: float = DEFAULT_RESUME_TIMEOUT) -> None:
        self.clock = clock
        self.table = ResumeTable("", timeout)
        self._sessions: dict[ResumableStream, ResumableSession] = {}

    def serve(self, session: LinkSession, upper: Any, local: Any) -> None:
        """
        Accept a new resumable C{session}, running C{upper} (the splice end, or the TLS layer
        around it) over it; C{local} is the splice end of the service's connection.
        """
        stream = ResumableStream()
        token = self.table.add(stream)
        resumable = ResumableSession(stream, upper, self.clock, self.table.timeout,
                                     self._suspended, self._ended)
        resumable.local = local
        self._sessions[stream] = resumable
        session.accept(resumable.side(first=[encode(Token(token))]))

    def resume(self, session: LinkSession) -> None:
        """
        Accept a C{resume:} session: its first record names the session to resume.
        """
        session.accept(_ResumeRequest(self))

    def _resumed(self, request: _ResumeRequest, data: bytes) -> None:
        transport = request.transport
        try:
            records = request.decoder.feed(data)
        except RecordError:
            transport.abortWith(ErrorCode.PROTOCOL_ERROR, "bad resume")
            return
        if not records:
            return
        request.done = True
        first = records[0]
        if not isinstance(first, Resume):
            transport.abortWith(ErrorCode.PROTOCOL_ERROR, "bad resume")
            return
        try:
            stream, reply = self.table.resume(self.table.account, first.token, first.offset)
        except ResumeRefused as e:
            self.log.debug("refused a resume: {why}", why=str(e))
            transport.abortWith(ErrorCode.REFUSED, RESUME_REFUSED)
            return
        side = self._sessions[stream].side(first=reply, records=records[1:])
        transport.protocol = side
        side.makeConnection(transport)

    def _suspended(self, resumable: ResumableSession) -> None:
        self.table.suspend(resumable.stream, self.clock.seconds())

    def _ended(self, resumable: ResumableSession) -> None:
        self.table.remove(resumable.stream)
        self._sessions.pop(resumable.stream, None)


class _ResumeRequest(Protocol):
    """
    A C{resume:} session until its RESUME record arrived.
    """

    transport: Any

    def __init__(self, resumer: AgentResumer) -> None:
        self.resumer = resumer
        self.decoder = RecordDecoder()
        self.done = False

    def dataReceived(self, data: bytes) -> None:
        if not self.done:
            self.resumer._resumed(self, data)
