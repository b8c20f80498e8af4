"""
Tests for L{nfltr.ws.endpoints.AutoEndpoint}: which transport the next
attempt uses after a failure.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, error
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from nfltr.ws.endpoints import AutoEndpoint


class FailingEndpoint:
    """
    An endpoint whose connections fail with C{failure}.
    """

    def __init__(self, failure: Exception) -> None:
        self.failure = failure
        self.attempts = 0

    def connect(self, factory: Any) -> defer.Deferred[Any]:
        self.attempts += 1
        return defer.fail(self.failure)


class SwitchTests(SynchronousTestCase):
    """
    A refused TCP connection says nothing about middleboxes; other failures
    before a link is established do.
    """

    def setUp(self) -> None:
        self.events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(self.events.append)
        self.addCleanup(globalLogPublisher.removeObserver, self.events.append)

    def attempt(self, auto: AutoEndpoint) -> None:
        self.failureResultOf(auto.connect(object()))

    def test_refusedStays(self) -> None:
        """
        Connections refused (nobody listens: the relay is down) keep the
        raw link, and nothing is logged about transports.
        """
        link = FailingEndpoint(error.ConnectionRefusedError("refused"))
        websocket = FailingEndpoint(error.ConnectionRefusedError("refused"))
        auto = AutoEndpoint(link, websocket)
        for _ in range(4):
            self.attempt(auto)
        self.assertEqual((link.attempts, websocket.attempts), (4, 0))
        self.assertEqual(self.events, [])

    def test_cancelledStays(self) -> None:
        """
        An attempt cancelled (the agent stops while dialling) teaches
        nothing either: no switch, no line.
        """
        cancelled = [defer.CancelledError(), error.ConnectingCancelledError(None)]
        auto = AutoEndpoint(*(FailingEndpoint(e) for e in cancelled))
        for failure in cancelled:
            auto.endpoints[0] = FailingEndpoint(failure)
            self.attempt(auto)
            self.assertEqual(auto.current, 0)
        self.assertEqual(self.events, [])

    def test_otherFailureSwitches(self) -> None:
        """
        A connection that fails otherwise (cut, timed out: a middlebox may
        be in the way) makes the next attempt use WebSocket, with one line.
        """
        link = FailingEndpoint(error.ConnectionLost("cut"))
        websocket = FailingEndpoint(error.ConnectionLost("cut"))
        auto = AutoEndpoint(link, websocket)
        self.attempt(auto)
        self.attempt(auto)
        self.assertEqual((link.attempts, websocket.attempts), (1, 1))
        self.assertEqual(len(self.events), 2)
