"""
Tests for L{nfltr.resume.twisted}, L{nfltr.agent._resume} and L{nfltr.client._resume}: a
connector's and an agent's L{ResumableSession} joined through fake link sessions on a Clock,
cut, resumed and timed out.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error, interfaces
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.test.proto_helpers import StringTransport
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from nfltr.agent._resume import AgentResumer
from nfltr.client._resume import ConnectorResumer
from nfltr.link import ErrorCode
from nfltr.link.twisted import SessionResetError
from nfltr.resume import (
    MAX_SENT_DATA,
    MIN_RESUME_WINDOW,
    ResumableStream,
    Resume,
    Token,
    encode,
)
from nfltr.resume.twisted import ResumableSession, is_final
from nfltr.wire.resume import RESUME_REFUSED, resume_target

from ..link.twisted_helpers import LinkPair, RecordingHandler

TIMEOUT = 5.0
DONE = Failure(error.ConnectionDone())


class FakeSession(StringTransport):
    """
    A link session: what is written reaches the peer session's protocol when L{pump}ed.
    """

    def __init__(self) -> None:
        super().__init__()
        self.protocol: Any = None
        self.peer: FakeSession | None = None
        self.aborted: tuple[int, str] | None = None

    def accept(self, protocol: Any) -> None:
        self.protocol = protocol
        protocol.makeConnection(self)

    def abortWith(self, code: int, reason: str) -> None:
        self.aborted = (code, reason)
        self.cut(Failure(SessionResetError(code, reason)))

    def abortConnection(self) -> None:
        self.cut(Failure(error.ConnectionAborted()))

    def cut(self, reason: Failure) -> None:
        for session in (self, self.peer):
            if session is not None and session.protocol is not None:
                protocol, session.protocol = session.protocol, None
                protocol.connectionLost(reason)


def pump(*sessions: FakeSession) -> None:
    moved = True
    while moved:
        moved = False
        for session in sessions:
            data = session.value()
            if data and session.peer is not None and session.peer.protocol is not None:
                session.clear()
                session.peer.protocol.dataReceived(data)
                moved = True


def pair() -> tuple[FakeSession, FakeSession]:
    a, b = FakeSession(), FakeSession()
    a.peer, b.peer = b, a
    return a, b


class Upper(Protocol):
    """
    The protocol over a resumable session: records what arrives and how it ended.
    """

    def __init__(self) -> None:
        self.received = b""
        self.lost: Failure | None = None

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Failure = DONE) -> None:
        self.lost = reason


class AbortRecorder(StringTransport):
    """
    A local connection's transport that records an abort.
    """

    aborted = False

    def abortConnection(self) -> None:
        self.aborted = True


class Local:
    """
    A local connection's splice end.
    """

    def __init__(self) -> None:
        self.connected = True
        self.transport = AbortRecorder()

    @property
    def aborted(self) -> bool:
        return self.transport.aborted


class ResumableSessionTests(SynchronousTestCase):
    """
    A session's local side sees its bytes once, in order, across a cut, or a reset after the
    resume timeout.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.resumer = AgentResumer(self.clock, TIMEOUT)
        self.agentUpper, self.clientUpper = Upper(), Upper()
        self.clientLocal = Local()
        self.suspended: list[ResumableSession] = []
        self.client = ResumableSession(ResumableStream(MIN_RESUME_WINDOW), self.clientUpper,
                                       self.clock, TIMEOUT, self.suspended.append,
                                       lambda s: None)
        self.client.local = self.clientLocal
        self.agentLocal = Local()
        self.linkA, self.linkB = pair()
        self.linkA.accept(self.client.side())
        self.resumer.serve(self.linkB, self.agentUpper, self.agentLocal)
        pump(self.linkA, self.linkB)

    def resume(self) -> None:
        self.linkA, self.linkB = pair()
        self.linkA.accept(self.client.side(first=self.client.stream.present()))
        self.resumer.resume(self.linkB)
        pump(self.linkA, self.linkB)

    def test_interfaces(self) -> None:
        """
        A resumable session is a transport, a push producer and a consumer.
        """
        for interface in (interfaces.ITransport, interfaces.IPushProducer,
                          interfaces.IConsumer):
            self.assertTrue(verifyObject(interface, self.client))

    def test_cutAndResume(self) -> None:
        """
        Bytes written both ways before, during and after a cut that loses what was in
        flight arrive once, in order, after the resume; neither local side saw an end.
        """
        self.client.write(b"one ")
        self.agentUpper.transport.write(b"ONE ")
        pump(self.linkA, self.linkB)
        self.client.write(b"lost ")
        self.linkA.cut(Failure(error.ConnectionLost()))
        self.assertEqual(self.suspended, [self.client])
        self.client.write(b"two")
        self.agentUpper.transport.write(b"TWO")
        self.clock.advance(TIMEOUT - 1)
        self.resume()
        self.assertEqual(self.agentUpper.received, b"one lost two")
        self.assertEqual(self.clientUpper.received, b"ONE TWO")
        self.assertIsNone(self.agentUpper.lost)
        self.assertIsNone(self.clientUpper.lost)
        self.clock.advance(TIMEOUT)
        self.assertIsNone(self.clientUpper.lost, "the resume cancelled the timeout")

    def test_cleanEnd(self) -> None:
        """
        Both ends finishing end both sessions cleanly.
        """
        self.client.loseConnection()
        self.agentUpper.transport.loseConnection()
        pump(self.linkA, self.linkB)
        self.assertTrue(self.clientUpper.lost and self.clientUpper.lost.check(
            error.ConnectionDone))
        self.assertTrue(self.agentUpper.lost and self.agentUpper.lost.check(
            error.ConnectionDone))
        self.assertEqual(len(self.resumer.table), 0)

    def test_timeout(self) -> None:
        """
        A session not resumed within the timeout resets both local connections.
        """
        self.linkA.cut(Failure(error.ConnectionLost()))
        self.clock.advance(TIMEOUT)
        self.assertTrue(self.clientLocal.aborted)
        self.assertTrue(self.agentLocal.aborted)
        self.assertFalse(self.clientUpper.lost is None or self.clientUpper.lost.check(
            error.ConnectionDone))
        self.assertEqual(len(self.resumer.table), 0)

    def test_refusedResume(self) -> None:
        """
        A resume with a token the agent does not know is refused with C{resume refused};
        the agent's suspended session is untouched and resumes afterwards.
        """
        self.linkA.cut(Failure(error.ConnectionLost()))
        _, peer = pair()
        self.resumer.resume(peer)
        peer.protocol.dataReceived(encode(Resume(b"x" * 16, 0)))
        self.assertEqual(peer.aborted, (ErrorCode.REFUSED, RESUME_REFUSED))
        self.resume()
        self.client.write(b"after")
        pump(self.linkA, self.linkB)
        self.assertEqual(self.agentUpper.received, b"after")

    def test_final(self) -> None:
        """
        The agent's refusal of a resume, an agent without resumption and a service that
        could not be reached end a session for good; a lost link or the relay's not found
        do not.
        """
        self.assertTrue(is_final(Failure(SessionResetError(ErrorCode.REFUSED, RESUME_REFUSED))))
        self.assertTrue(is_final(Failure(SessionResetError(ErrorCode.CONNECT_FAILED, "x"))))
        self.assertFalse(is_final(Failure(SessionResetError(ErrorCode.REFUSED, "no such"))))
        self.assertFalse(is_final(Failure(error.ConnectionLost())))

    def test_move(self) -> None:
        """
        A session moved off its link (C{move}: the link drains) is suspended at once, its
        old link session reset (the agent suspends its end too), and resumed on a new link:
        bytes written both ways before, in flight and after arrive once, in order, and
        neither local side saw an end.
        """
        self.client.write(b"one ")
        self.agentUpper.transport.write(b"ONE ")
        pump(self.linkA, self.linkB)
        self.client.write(b"flight ")
        self.agentUpper.transport.write(b"FLIGHT ")
        self.assertTrue(self.client.move())
        self.assertEqual(self.suspended, [self.client])
        self.assertIsNone(self.linkA.protocol)
        self.assertIsNone(self.linkB.protocol)
        self.client.write(b"two")
        self.resume()
        self.agentUpper.transport.write(b"TWO")
        pump(self.linkA, self.linkB)
        self.assertEqual(self.agentUpper.received, b"one flight two")
        self.assertEqual(self.clientUpper.received, b"ONE FLIGHT TWO")
        self.assertIsNone(self.agentUpper.lost)
        self.assertIsNone(self.clientUpper.lost)
        self.assertFalse(self.clientLocal.aborted or self.agentLocal.aborted)

    def test_moveResumedBeforeTheOldEnds(self) -> None:
        """
        The resume of a moved session may reach the agent before the old link session's
        reset (they travel on two links): the agent takes the new link session and drops
        the old one, and the bytes still arrive once, in order.
        """
        self.client.write(b"one ")
        pump(self.linkA, self.linkB)
        oldAgentSide = self.linkB
        self.linkA.peer = None  # the reset does not reach the agent before the resume
        self.agentUpper.transport.write(b"ONE ")
        self.assertTrue(self.client.move())
        self.resume()
        self.assertIsNone(oldAgentSide.protocol, "the agent dropped the old link session")
        self.client.write(b"two")
        self.agentUpper.transport.write(b"TWO")
        pump(self.linkA, self.linkB)
        self.assertEqual(self.agentUpper.received, b"one two")
        self.assertEqual(self.clientUpper.received, b"ONE TWO")
        self.assertIsNone(self.agentUpper.lost)
        self.assertIsNone(self.clientUpper.lost)

    def test_notMoved(self) -> None:
        """
        A session that is suspended already, or ended, is not moved.
        """
        self.linkA.cut(Failure(error.ConnectionLost()))
        self.assertFalse(self.client.move())
        self.resume()
        self.client.loseConnection()
        self.agentUpper.transport.loseConnection()
        pump(self.linkA, self.linkB)
        self.assertFalse(self.client.move())


class TokenFirst(Protocol):
    """
    An agent's end of a resumable session, as far as a connector's move needs: it sends
    the session's token first.
    """

    def connectionMade(self) -> None:
        self.transport.write(encode(Token(b"t" * 16)))


class ConnectorMoveTests(SynchronousTestCase):
    """
    tcp-connect moves its resumable sessions off a link whose relay sent GOAWAY once a new
    link is up.
    """

    def test_movedToTheNewLink(self) -> None:
        """
        A session over a link that got GOAWAY is reset there and resumed on the new link
        (a C{resume:} session, its RESUME first); a session over a link that did not is
        left alone.
        """
        clock = Clock()
        old = LinkPair(listenerHandler=RecordingHandler(lambda s: TokenFirst()), clock=clock)
        new = LinkPair(listenerHandler=RecordingHandler(lambda s: Protocol()), clock=clock)
        links = [old.dialer]
        resumer = ConnectorResumer(clock, "web", 22, TIMEOUT, lambda: links[-1])
        moving = resumer.open(old.dialer, Upper(), Local())
        old.run()
        resumer.relayUp()
        self.assertIsNotNone(moving.link, "not draining: not moved")
        old.listener.drain()
        old.run()
        links.append(new.dialer)
        resumer.relayUp()
        old.run()
        new.run()
        [oldSession] = old.listenerHandler.sessions
        self.assertTrue(oldSession.disconnected)
        [resumed] = new.listenerHandler.sessions
        self.assertEqual(resumed.target, resume_target("web", 22))
        self.assertIsNotNone(moving.link)
        self.assertFalse(moving.ended)


class Deliveries(Upper):
    """
    An L{Upper} that also records the size of each delivery.
    """

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def dataReceived(self, data: bytes) -> None:
        super().dataReceived(data)
        self.sizes.append(len(data))


class Serving(RecordingHandler):
    """
    An agent's link handler that gives each session to C{serve}.
    """

    def __init__(self, serve: Any) -> None:
        super().__init__()
        self.serve = serve

    def sessionRequested(self, session: Any) -> None:
        self.sessions.append(session)
        self.serve(session)


class OverLinkTests(SynchronousTestCase):
    """
    Over real link sessions, each record travels whole in one link frame.
    """

    def test_recordPerFrame(self) -> None:
        """
        Writes of 64 KiB, 200,000 and 100 bytes reach the agent's protocol as the payloads of
        records of at most L{MAX_SENT_DATA} bytes, each in one delivery (one link frame,
        taken whole), in order.
        """
        clock = Clock()
        resumer = AgentResumer(clock, TIMEOUT)
        agentUpper = Deliveries()
        links = LinkPair(
            listenerHandler=Serving(lambda s: resumer.serve(s, agentUpper, Local())), clock=clock)
        connector = ConnectorResumer(clock, "web", 22, TIMEOUT, lambda: links.dialer)
        clientUpper = Upper()
        connector.open(links.dialer, clientUpper, Local())
        links.run()
        writes = [b"a" * 65536, bytes(range(200)) * 1000, b"c" * 100]
        for data in writes:
            clientUpper.transport.write(data)
        links.run()
        self.assertEqual(agentUpper.received, b"".join(writes))
        self.assertEqual(agentUpper.sizes, [MAX_SENT_DATA, 5, *[MAX_SENT_DATA] * 3,
                                            200_000 - 3 * MAX_SENT_DATA, 100])
