"""
Tests for L{nfltr.wire.resume}: the negotiation and targets of resumable sessions.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire.messages import MessageError, client_target, welcome
from nfltr.wire.resume import (
    RESUMABLE,
    RESUME_FEATURE,
    RESUMING,
    agent_resume_target,
    agent_resumes,
    offers_resume,
    parse_agent_resume_target,
    parse_client_resume_target,
    resumable_target,
    resume_target,
)

names = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
ports = st.integers(1, 65535)


class NegotiationTests(SynchronousTestCase):
    """
    Resumption is used only when both the relay and the agent said they have it.
    """

    def test_offers(self) -> None:
        """
        A welcome listing the feature offers resumption; one without features (an older
        relay), with other features, or with a malformed list does not.
        """
        self.assertTrue(offers_resume({"features": ["update", RESUME_FEATURE]}))
        self.assertFalse(offers_resume(welcome("acme", None)))
        self.assertFalse(offers_resume({"features": ["update"]}))
        self.assertFalse(offers_resume({"features": RESUME_FEATURE}))

    def test_agentResumes(self) -> None:
        """
        An agent resumes sessions only if its hello says C{"resume": true}.
        """
        self.assertTrue(agent_resumes({"resume": True}))
        self.assertFalse(agent_resumes({}))
        self.assertFalse(agent_resumes({"resume": 1}))


class TargetTests(SynchronousTestCase):
    """
    The resumable targets read back as written, and do not collide with C{tcp:}.
    """

    @given(names, ports)
    def test_clientRoundTrip(self, name: str, port: int) -> None:
        """
        C{rtcp:} and C{resume:} targets read back as their kind, agent and port; a plain
        C{tcp:} target is not one of them.
        """
        self.assertEqual(parse_client_resume_target(resumable_target(name, port)),
                         (RESUMABLE, name, port))
        self.assertEqual(parse_client_resume_target(resume_target(name, port)),
                         (RESUMING, name, port))
        self.assertIsNone(parse_client_resume_target(client_target(name, port)))

    @given(st.sampled_from([RESUMABLE, RESUMING]), ports)
    def test_agentRoundTrip(self, kind: str, port: int) -> None:
        """
        The targets the relay opens on an agent's link read back.
        """
        self.assertEqual(parse_agent_resume_target(agent_resume_target(kind, port)),
                         (kind, port))

    def test_bad(self) -> None:
        """
        A resumable kind with a bad port or name is a L{MessageError}; another kind is not
        resumable.
        """
        for target in ("rtcp:a:0", "resume:a:x", "rtcp:-a:80", "resume:a:70000"):
            self.assertRaises(MessageError, parse_client_resume_target, target)
        self.assertRaises(MessageError, parse_agent_resume_target, "rtcp:0")
        self.assertIsNone(parse_agent_resume_target("tcp:80"))
        self.assertRaises(ValueError, agent_resume_target, "tcp", 80)
