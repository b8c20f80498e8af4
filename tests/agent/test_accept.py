"""
The agent's answer to a session the relay opened asking for it (link
C{WANT_ACCEPT}): ACCEPT once the service took the connection, the
C{CONNECT_FAILED} reset otherwise.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import ErrorCode
from nfltr.link.twisted import SessionResetError

from .helpers import Recorder
from .test_service import AgentFixture


def waiting(f: AgentFixture, target: str) -> tuple[Any, list[Any]]:
    """
    Open C{target} from the relay asking for the agent's answer; what the
    wait gave so far.
    """
    session = f.link.openSession(target, Recorder(), wantAccept=True)
    results: list[Any] = []
    session.whenAccepted().addBoth(results.append)
    return session, results


class AcceptTests(SynchronousTestCase):
    """
    The agent accepts a session once it reached the service.
    """

    def test_acceptedOnceConnected(self) -> None:
        """
        While the agent still dials the service nothing is answered; the
        service's acceptance is the session's.
        """
        attempts: list[Any] = []

        class Slow:
            dial = attempts.append

        f = AgentFixture(self, e2ee=False)
        real, f.agent.sessions.connector = f.agent.sessions.connector, Slow()
        session, results = waiting(f, "tcp:3000")
        f.network.run()
        self.assertEqual(len(attempts), 1)
        self.assertEqual(results, [])
        self.assertTrue(f.link.connection.awaits_accept(session.sessionId))
        real.dial(attempts[0])
        f.network.run()
        self.assertEqual(results, [None])

    def test_serviceDown(self) -> None:
        """
        A service that refuses: the answer is the C{CONNECT_FAILED} reset,
        with the agent's words, and no ACCEPT.
        """
        f = AgentFixture(self, e2ee=False)
        _, results = waiting(f, "tcp:3001")
        f.network.run()
        [failure] = results
        self.assertTrue(failure.check(SessionResetError), failure)
        self.assertEqual((failure.value.code, failure.value.reason),
                         (ErrorCode.CONNECT_FAILED,
                          "service on port 3001 refused the connection"))

    def test_notFound(self) -> None:
        """
        A port the agent does not share: the not-found reset answers.
        """
        f = AgentFixture(self, e2ee=False)
        _, results = waiting(f, "tcp:4000")
        f.network.run()
        self.assertTrue(results[0].check(SessionResetError))
