"""
The Twisted adapter's side of an OPEN's acceptance: L{LinkSession.whenAccepted}
for the opener, L{LinkSession.accept} and L{LinkSession.confirm} for the
receiver, over a real pair of links (iosim, L{Clock}).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import CancelledError
from twisted.internet.protocol import Protocol
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import ErrorCode
from nfltr.link.twisted import LinkSession, SessionResetError

from .twisted_helpers import LinkPair, RecordingHandler


class Held(RecordingHandler):
    """
    Attaches a protocol to each session without accepting it: the test
    decides.
    """

    def sessionRequested(self, session: LinkSession) -> None:
        self.sessions.append(session)
        session.accept(Protocol(), confirm=False)


def opened(pair: LinkPair, wantAccept: bool = True) -> tuple[LinkSession, list[Any]]:
    """
    The dialer opens a session; what its whenAccepted gave so far.
    """
    session = pair.dialer.openSession("tcp:80", Protocol(), wantAccept=wantAccept)
    results: list[Any] = []
    session.whenAccepted().addBoth(results.append)
    pair.run()
    return session, results


class WhenAcceptedTests(SynchronousTestCase):
    """
    The opener learns whether the peer took the session.
    """

    def test_acceptedAtOnce(self) -> None:
        """
        A receiver that attaches a protocol the usual way accepts at once.
        """
        pair = LinkPair(listenerHandler=RecordingHandler(lambda s: Protocol()))
        _, results = opened(pair)
        self.assertEqual(results, [None])

    def test_confirmedLater(self) -> None:
        """
        A receiver that holds the answer is waited for, until it confirms.
        """
        handler = Held()
        pair = LinkPair(listenerHandler=handler)
        session, results = opened(pair)
        self.assertEqual(results, [])
        self.assertTrue(pair.dialer.connection.awaits_accept(session.sessionId))
        handler.sessions[0].confirm()
        pair.run()
        self.assertEqual(results, [None])
        self.assertFalse(pair.dialer.connection.awaits_accept(session.sessionId))

    def test_refused(self) -> None:
        """
        A receiver's reset fails the wait with its code and reason.
        """
        handler = Held()
        pair = LinkPair(listenerHandler=handler)
        _, results = opened(pair)
        handler.sessions[0].abortWith(ErrorCode.CONNECT_FAILED, "service on port 80 refused")
        pair.run()
        [failure] = results
        error = failure.trap(SessionResetError) and failure.value
        self.assertEqual((error.code, error.reason),
                         (ErrorCode.CONNECT_FAILED, "service on port 80 refused"))

    def test_refusedByDefault(self) -> None:
        """
        A handler that refuses (the default one) fails the wait too.
        """
        pair = LinkPair()
        _, results = opened(pair)
        self.assertEqual(results[0].value.code, ErrorCode.REFUSED)

    def test_notAsked(self) -> None:
        """
        A session opened without C{wantAccept} is taken as accepted at once,
        and the receiver sends no ACCEPT.
        """
        handler = Held()
        pair = LinkPair(listenerHandler=handler)
        _, results = opened(pair, wantAccept=False)
        self.assertEqual(results, [None])
        handler.sessions[0].confirm()
        self.assertEqual(pair.listener.connection.data_to_send(), b"")

    def test_cancel(self) -> None:
        """
        Cancelling the wait resets the session with C{CANCEL}; the receiver
        sees the reset.
        """
        handler = Held()
        pair = LinkPair(listenerHandler=handler)
        session = pair.dialer.openSession("tcp:80", Protocol(), wantAccept=True)
        d = session.whenAccepted()
        pair.run()
        d.cancel()
        self.failureResultOf(d, CancelledError)
        pair.run()
        self.assertFalse(pair.listener.connection.is_open(handler.sessions[0].sessionId))
        self.assertFalse(pair.dialer.connection.is_open(session.sessionId))

    def test_afterTheEnd(self) -> None:
        """
        Asked after the session ended, the wait fails with its end.
        """
        handler = Held()
        pair = LinkPair(listenerHandler=handler)
        session, _ = opened(pair)
        handler.sessions[0].abortWith(ErrorCode.CONNECT_FAILED, "down")
        pair.run()
        self.failureResultOf(session.whenAccepted(), SessionResetError)
