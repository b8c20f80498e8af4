"""
Tests for the relay's routing of resumable sessions (L{nfltr.relay.tcp_route.TCPRoute.
openResumable}, L{nfltr.relay.link_handler}): negotiated through the welcome, routed by the
rule of C{tcp:} sessions, nothing kept.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import ErrorCode
from nfltr.wire.messages import NOT_FOUND_CODE, NOT_FOUND_REASON, TcpShare, agent_hello
from nfltr.wire.resume import (
    RESUME_UNSUPPORTED,
    offers_resume,
    resumable_target,
    resume_target,
)
from tests.link.twisted_helpers import RecordingHandler

from .helpers import RelayHarness, lost_reason
from .test_link_handler import A2_KEY, A_KEY, B_KEY, Recorder


class ResumeRouteTests(SynchronousTestCase):
    """
    C{rtcp:} and C{resume:} sessions reach the connector's own agent, if it resumes sessions.
    """

    def setUp(self) -> None:
        self.h = RelayHarness()
        self.keyA = self.h.store.addKey(A_KEY, "acme")
        self.keyA2 = self.h.store.addKey(A2_KEY, "acme")
        self.keyB = self.h.store.addKey(B_KEY, "bravo")
        self.agentSide = RecordingHandler(lambda s: Recorder())

    def agent(self, resumes: bool, addressed: bool = False) -> None:
        app = agent_hello(self.keyA, "web", [TcpShare(3000, addressed=addressed)])
        if resumes:
            app["resume"] = True
        self.h.dial(app, self.agentSide)

    def open(self, key: str, target: str) -> Recorder:
        client = self.h.client(key)
        self.assertTrue(offers_resume(client.controls[0]))
        recorder = Recorder()
        client.link.openSession(target, recorder)
        self.h.run()
        return recorder

    def test_routed(self) -> None:
        """
        A connector of the agent's account opens C{rtcp:} and C{resume:} sessions: the agent
        sees C{rtcp:PORT} and C{resume:PORT}, the bytes pass both ways.
        """
        self.agent(resumes=True)
        first = self.open(self.keyA2, resumable_target("web", 3000))
        self.open(self.keyA2, resume_target("web", 3000))
        self.assertEqual([s.target for s in self.agentSide.sessions],
                         ["rtcp:3000", "resume:3000"])
        self.assertIsNone(first.lost)

    def test_otherAccount(self) -> None:
        """
        Another account's connector presenting a resume (or opening a resumable session) to
        the agent is refused as for a missing agent; the agent sees nothing.
        """
        self.agent(resumes=True)
        for target in (resume_target("web", 3000), resumable_target("web", 3000)):
            recorder = self.open(self.keyB, target)
            self.assertEqual(lost_reason(recorder.lost), (NOT_FOUND_CODE, NOT_FOUND_REASON))
        self.assertEqual(self.agentSide.sessions, [])

    def test_agentWithoutResume(self) -> None:
        """
        An agent whose hello did not say it resumes gets no resumable session: the connector
        is told so (and falls back to C{tcp:}).
        """
        self.agent(resumes=False)
        recorder = self.open(self.keyA, resumable_target("web", 3000))
        self.assertEqual(lost_reason(recorder.lost), (ErrorCode.REFUSED, RESUME_UNSUPPORTED))
        self.assertEqual(self.agentSide.sessions, [])

    def test_addressedPort(self) -> None:
        """
        A port the agent shares C{addressed} (its sessions name the client) gets no resumable
        session: the connector falls back to C{tcp:}, whose target names the client.
        """
        self.agent(resumes=True, addressed=True)
        recorder = self.open(self.keyA, resumable_target("web", 3000))
        self.assertEqual(lost_reason(recorder.lost), (ErrorCode.REFUSED, RESUME_UNSUPPORTED))
        self.assertEqual(self.agentSide.sessions, [])
