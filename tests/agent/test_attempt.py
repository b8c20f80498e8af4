"""
Tests for L{nfltr.agent._attempt}: what the agent says when a session's bytes were altered on
the way.
"""

from __future__ import annotations

from typing import Any, cast

from OpenSSL import SSL
from twisted.internet import error
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import TcpEnd
from nfltr.agent._attempt import SessionAttempt
from nfltr.agent._log_limit import Quiet
from nfltr.resume.twisted import RecordsBroken
from nfltr.tls import TunnelTLSBroken

from .helpers import LogCapture

BAD_MAC = [("SSL routines", "", "decryption failed or bad record mac")]


class LostTests(SynchronousTestCase):
    """
    L{SessionAttempt.lost}: one warning for bytes altered on the way, none otherwise.
    """

    def lines(self, *reasons: BaseException) -> list[str]:
        logs = LogCapture(self)
        failed: list[Any] = []
        attempt = SessionAttempt(5432, TcpEnd(), cast(Any, None),
                                 lambda *args: failed.append(args), Quiet(Clock()))
        for reason in reasons:
            attempt.lost(Failure(reason))
        self.assertEqual(failed, [], "losing a session is not a failure to reach the service")
        return logs.lines()

    def test_tlsBroken(self) -> None:
        """
        A session whose end-to-end TLS broke after its handshake: one line that says the bytes
        were altered, with OpenSSL's words; a burst of them stays one line.
        """
        self.assertEqual(self.lines(TunnelTLSBroken(BAD_MAC), TunnelTLSBroken(BAD_MAC)), [
            "a session to port 5432: its end-to-end TLS failed (decryption failed or bad record "
            "mac): its bytes were altered between the connector and here; the session was reset",
        ])

    def test_recordsBroken(self) -> None:
        """
        A resumable session whose records broke: one line.
        """
        self.assertEqual(self.lines(RecordsBroken("bad resumable session: unknown record type 9")),
                         ["a session to port 5432: bad resumable session: unknown record type 9: "
                          "altered on the way; the session was reset"])

    def test_others(self) -> None:
        """
        A clean end, a lost link, a handshake that failed: nothing (a handshake's failure is
        the connector's to explain).
        """
        self.assertEqual(self.lines(error.ConnectionDone(), error.ConnectionLost(),
                                    SSL.Error(BAD_MAC)), [])
