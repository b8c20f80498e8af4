"""
What an idle session costs a link, in bytes Python holds for it (counted by
tracemalloc: memory, not a speed).  A relay holds two link sessions for each
session it forwards, idle ones included; L{tests.bench.test_replica_memory}
holds the whole replica path to its bound.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from twisted.internet.protocol import Protocol
from twisted.trial.unittest import SynchronousTestCase

import nfltr.link
from nfltr.link.twisted import LinkSession

from .twisted_helpers import LinkPair, RecordingHandler

#: Idle sessions counted.
SESSIONS = 200
#: Bytes both ends of a link may hold together per idle session (each end's
#: L{nfltr.link.LinkSession}, its credit state, their places in the
#: sessions tables).  Before sessions lost their instance dictionaries and
#: idle queues, about 3.7 KB.
LINK_PAIR_BYTES = 1280
_LINK_CODE = tracemalloc.Filter(True, str(Path(nfltr.link.__file__).parent / "*"))


class _Idle(Protocol):
    pass


class _Holding(RecordingHandler):
    """
    Records the sessions the peer opens and leaves them waiting.
    """

    def sessionRequested(self, session: LinkSession) -> None:
        self.sessions.append(session)


class FootprintTests(SynchronousTestCase):
    """
    Idle sessions over a link pair.
    """

    def _perSession(self, first: bytes, delivered: bool) -> float:
        """
        Open L{SESSIONS} sessions (with C{first} bytes; the listener accepts
        them at once if C{delivered}, else after the first bytes arrived),
        and return the bytes the link's code holds per session.
        """
        ends = [_Idle() for _ in range(2 * SESSIONS + 2)]
        handler = RecordingHandler(lambda session: ends.pop()) if delivered else _Holding()
        pair = LinkPair(listenerHandler=handler)
        pair.dialer.openSession("tcp:1", ends.pop(), first)  # the code paths' first use
        pair.run()
        gc.collect()
        tracemalloc.start()
        try:
            for _ in range(SESSIONS):
                pair.dialer.openSession("tcp:1", ends.pop(), first)
            pair.run()
            if not delivered:
                for session in handler.sessions[1:]:
                    session.accept(ends.pop())
            pair.run()
            gc.collect()
            # What the link's code allocated (not the protocols' attributes).
            snapshot = tracemalloc.take_snapshot().filter_traces([_LINK_CODE])
            held = sum(trace.size for trace in snapshot.traces)
        finally:
            tracemalloc.stop()
        return held / SESSIONS

    def test_idleSessions(self) -> None:
        """
        Idle sessions, accepted at once, cost both ends together at most
        L{LINK_PAIR_BYTES} each.
        """
        self.assertLessEqual(self._perSession(b"", True), LINK_PAIR_BYTES)

    def test_firstBytesQueued(self) -> None:
        """
        Sessions whose first bytes waited in their receive queue until they
        were accepted cost no more once the bytes were delivered: an empty
        queue is let go.
        """
        self.assertLessEqual(self._perSession(b"x" * 100, False), LINK_PAIR_BYTES)
