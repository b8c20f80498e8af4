# -*- test-case-name: tests.agent.test_shares -*-
"""
The visitor sessions a share serves (L{Visits}), so that a share a reload
removed or changed (L{nfltr.agent.EntryUpdater}) can end them: each HTTP
visitor connection at its next response's end (L{IDrainable}), and those
still open after the drain timeout at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nfltr.link import ErrorCode

if TYPE_CHECKING:
    from nfltr.http import IDrainable

#: Sessions held before the first look for those that ended.
FIRST_PRUNE = 64
#: Why a share's session is reset once its drain timeout is over.
RETIRED_REASON = "the share was removed or changed"


class Visits:
    """
    One share's visitor sessions, each with its proxy (what drains it) or
    L{None} (a splice: nothing to drain).  A session that ended is let go
    when more come: each time the count doubles, those that ended are
    dropped, so it holds about twice the sessions in flight at most.
    """

    def __init__(self) -> None:
        self._sessions: dict[Any, IDrainable | None] = {}
        self._pruneAt = FIRST_PRUNE

    def __len__(self) -> int:
        return len(self.live())

    def add(self, session: Any, proxy: IDrainable | None = None) -> None:
        """
        Hold C{session} (a L{nfltr.link.twisted.LinkSession}), served by
        C{proxy}.
        """
        sessions = self._sessions
        if len(sessions) >= self._pruneAt:
            self._sessions = sessions = {s: p for s, p in sessions.items() if not s.disconnected}
            self._pruneAt = max(FIRST_PRUNE, 2 * len(sessions))
        sessions[session] = proxy

    def live(self) -> list[tuple[Any, IDrainable | None]]:
        """
        The sessions that have not ended, with their proxies.
        """
        return [(s, p) for s, p in self._sessions.items() if not s.disconnected]

    def drain(self) -> None:
        """
        End each HTTP visitor connection at its next response's end
        (L{IDrainable.drain}); splices go on.
        """
        for _, proxy in self.live():
            if proxy is not None:
                proxy.drain()

    def abort(self) -> None:
        """
        Reset every session still open, and let them go.
        """
        sessions, self._sessions = self.live(), {}
        for session, _ in sessions:
            session.abortWith(ErrorCode.CANCEL, RETIRED_REASON)
