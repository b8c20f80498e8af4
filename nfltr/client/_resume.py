# -*- test-case-name: tests.resume.test_twisted -*-
"""
tcp-connect's side of resumable sessions (L{nfltr.resume}): with a relay that offers them, each
accepted connection runs over a L{ResumableSession}; a suspended one is resumed on the next
link (or the same one, once the agent is back), tried again every L{RESUME_RETRY} seconds
until its resume timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.logger import Logger

from nfltr.link.twisted import LinkProtocol, LinkSession, LinkUnavailable
from nfltr.resume import RESUME_RETRY, ResumableStream
from nfltr.resume.twisted import ResumableSession
from nfltr.wire.resume import resumable_target, resume_target


class ConnectorResumer:
    """
    The connector's resumable sessions to one agent's port.

    @ivar link: the link new sessions and resumes go over, or L{None}.
    """

    log = Logger()

    def __init__(self, clock: Any, agent: str, port: int, timeout: float,
                 pick: Callable[[], LinkProtocol | None]) -> None:
        self.clock = clock
        self.timeout = timeout
        self.target = resumable_target(agent, port)
        self.resumeTarget = resume_target(agent, port)
        self.pick = pick
        self.suspended: dict[ResumableSession, Any] = {}
        self.live: set[ResumableSession] = set()

    def open(self, link: LinkProtocol, upper: Any, local: Any) -> ResumableSession:
        """
        Open a new resumable session on C{link}, running C{upper} over it.
        """
        resumable = ResumableSession(ResumableStream(), upper, self.clock, self.timeout,
                                     self._suspended, self._ended)
        resumable.local = local
        self.live.add(resumable)
        link.openSession(self.target, resumable.side())
        return resumable

    def relayUp(self) -> None:
        """
        A new link is up: resume every suspended session now, and move there those that run
        over a link whose relay goes away (a GOAWAY: it drains), so they do not hold it until
        its drain timeout.
        """
        for resumable in list(self.live):
            if resumable.link is not None and _draining(resumable.link.transport):
                resumable.move()
        for resumable in list(self.suspended):
            self._try(resumable)

    def _suspended(self, resumable: ResumableSession) -> None:
        call = self.suspended.pop(resumable, None)
        if call is not None and call.active():
            call.cancel()
        self.suspended[resumable] = self.clock.callLater(RESUME_RETRY, self._try, resumable)

    def _try(self, resumable: ResumableSession) -> None:
        call = self.suspended.pop(resumable, None)
        if call is not None and call.active():
            call.cancel()
        if resumable.ended or resumable.link is not None:
            return
        link = self.pick()
        if link is None:
            self.suspended[resumable] = self.clock.callLater(RESUME_RETRY, self._try, resumable)
            return
        try:
            link.openSession(self.resumeTarget, resumable.side(first=resumable.stream.present()))
        except LinkUnavailable:
            resumable.stream.suspend()
            self.suspended[resumable] = self.clock.callLater(RESUME_RETRY, self._try, resumable)

    def _ended(self, resumable: ResumableSession) -> None:
        self.live.discard(resumable)
        call = self.suspended.pop(resumable, None)
        if call is not None and call.active():
            call.cancel()


def _draining(session: Any) -> bool:
    """
    Whether the link of link session C{session} heard its relay go away.
    """
    if not isinstance(session, LinkSession):
        return False
    connection = session.link.connection
    return connection is not None and connection.goaway_received
