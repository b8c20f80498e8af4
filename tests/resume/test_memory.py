"""
What suspended sessions hold: with many sessions of one end suspended, whatever their local
connections write, before and after the cut, and whatever the peer acknowledged, each session
holds at most its window of unacknowledged bytes, plus at most one read of its local connection
waiting for room (the read during which the session paused it).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet import error
from twisted.internet.interfaces import IPushProducer
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from nfltr.resume import MIN_RESUME_WINDOW, TOKEN_SIZE, Ack, ResumableStream, encode
from nfltr.resume.twisted import ResumableSession
from tests.resume.test_twisted import FakeSession

KiB = 1024
# The largest read of a local connection (nfltr's tuned transport reads up to 256 KiB).
READ = 256 * KiB
TIMEOUT = 30.0


@implementer(IPushProducer)
class LocalReader(Protocol):
    """
    A local connection over a resumable session: it writes one read at a time while the
    session has not paused it, as a TCP transport delivers reads to a splice.
    """

    def __init__(self) -> None:
        self.paused = False
        self.written = 0

    def connectionMade(self) -> None:
        self.transport.registerProducer(self, True)

    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False

    def stopProducing(self) -> None:
        self.paused = True

    def read(self, size: int) -> None:
        """
        One read of C{size} bytes, if not paused.
        """
        if not self.paused:
            self.transport.write(b"r" * size)
            self.written += size


class Suspended:
    """
    One end of a resumable session on a link, then cut from it.
    """

    def __init__(self, clock: Clock, window: int, number: int) -> None:
        self.local = LocalReader()
        self.session = ResumableSession(
            ResumableStream(window, token=number.to_bytes(TOKEN_SIZE, "big")), self.local,
            clock, TIMEOUT, lambda s: None, lambda s: None,
        )
        self.link = FakeSession()
        self.link.accept(self.session.side())

    def ack(self, fraction: float) -> None:
        """
        The peer acknowledges C{fraction} of what this end sent and it has not yet.
        """
        stream = self.session.stream
        offset = stream.acked + int((stream.sent - stream.acked) * fraction)
        if self.link.protocol is not None:
            self.link.protocol.dataReceived(encode(Ack(offset)))

    def cut(self) -> None:
        self.link.cut(Failure(error.ConnectionLost("the relay is gone")))


reads = st.lists(st.integers(1, READ), max_size=40)
window = st.sampled_from([MIN_RESUME_WINDOW, 3 * MIN_RESUME_WINDOW, 1024 * KiB])


class SuspendedMemoryTests(SynchronousTestCase):
    """
    The bytes suspended sessions hold are bounded by their windows.
    """

    def assertBounded(self, end: Suspended, window: int) -> None:
        session = end.session
        self.assertLessEqual(session.stream.retained, window)
        self.assertLessEqual(session.held, window + READ)
        self.assertEqual(session.held, end.local.written - session.stream.acked)

    @settings(max_examples=60, deadline=None)
    @given(window=window,
           sessions=st.lists(st.tuples(reads, st.floats(0, 1), reads), min_size=1, max_size=12))
    def test_bounded(self, window: int, sessions: list[tuple[list[int], float, list[int]]]
                     ) -> None:
        """
        Each of many sessions reads what its local connection writes while not paused, is
        partly acknowledged, is cut, and reads on while its local connection is not paused:
        none holds more than its window plus one read, and what is unacknowledged is at most
        the window; once suspended, a session reads nothing more.
        """
        clock = Clock()
        ends = [Suspended(clock, window, n) for n in range(len(sessions))]
        for end, (before, fraction, after) in zip(ends, sessions, strict=True):
            for size in before:
                end.local.read(size)
                self.assertBounded(end, window)
            end.ack(fraction)
            end.cut()
            self.assertTrue(end.local.paused, "a suspended session pauses its local side")
            held = end.session.held
            for size in after:
                end.local.read(size)
            self.assertEqual(end.session.held, held)
            self.assertBounded(end, window)
        self.assertLessEqual(sum(end.session.held for end in ends), len(ends) * (window + READ))

    def test_thousand(self) -> None:
        """
        1,000 suspended sessions, each filled to its window before the cut: together they hold
        1,000 windows, however much their local sides try to write after.
        """
        clock = Clock()
        ends = [Suspended(clock, MIN_RESUME_WINDOW, n) for n in range(1000)]
        for end in ends:
            while not end.local.paused:
                end.local.read(64 * KiB)
            end.cut()
            end.local.read(READ)
        self.assertEqual({end.session.held for end in ends}, {MIN_RESUME_WINDOW})
