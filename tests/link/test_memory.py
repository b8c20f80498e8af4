"""
Tests for L{nfltr.link.memory.LinkMemory}, alone and shared by real links.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import LISTENER, ErrorCode
from nfltr.link.memory import DEFAULT_LINK_MEMORY, MIN_LINK_MEMORY, LinkMemory
from nfltr.link.twisted import LinkOverloaded, SessionResetError

from .twisted_helpers import BoundedPair, RecordingHandler, Streamer, Trickler

KiB = 1024
MiB = 1024 * KiB


class Holder:
    """
    Stands for a link: records when the account says it was relieved.
    """

    def __init__(self) -> None:
        self.relieved = 0

    def memoryRelieved(self) -> None:
        self.relieved += 1


class AccountTests(SynchronousTestCase):
    """
    The account's arithmetic, its fair shares and its validation.
    """

    def test_counts(self) -> None:
        """
        The total, the holders and the peak follow the changes reported.
        """
        memory = LinkMemory(None)
        a, b = Holder(), Holder()
        memory.change(a, 0, 100)
        memory.change(b, 0, 50)
        memory.change(a, 100, 0)
        self.assertEqual((memory.held, memory.holders, memory.peak), (50, 1, 150))
        memory.forget(b, 50)
        self.assertEqual((memory.held, memory.holders), (0, 0))

    def test_noLimitNeverPressed(self) -> None:
        """
        Without a limit nothing is pressed, however much is held.
        """
        self.assertFalse(LinkMemory(None).change(Holder(), 0, 1 << 40))

    def test_defaultAndValidation(self) -> None:
        """
        The default limit is 256 MiB; a limit below 1 MiB, or not an
        integer, is refused.
        """
        self.assertEqual(LinkMemory().limit, DEFAULT_LINK_MEMORY)
        self.assertEqual(DEFAULT_LINK_MEMORY, 256 * MiB)
        for bad in (MIN_LINK_MEMORY - 1, 0, float(MiB), "1048576"):
            self.assertRaises(ValueError, LinkMemory, bad)

    def test_fairShare(self) -> None:
        """
        Over the limit, only a link over an equal share of it is pressed: one
        holding 900 KiB of a 1 MiB limit, not one holding 200 KiB.
        """
        memory = LinkMemory(MiB)
        big, small = Holder(), Holder()
        self.assertFalse(memory.change(small, 0, 200 * KiB))
        self.assertTrue(memory.change(big, 0, 900 * KiB))
        self.assertFalse(memory.change(small, 200 * KiB, 210 * KiB))
        self.assertEqual(memory.pressed, 1)

    def test_hysteresis(self) -> None:
        """
        A pressed link stays pressed until the total is under 3/4 of the
        limit (or it holds under half its share).
        """
        memory = LinkMemory(MiB)
        link = Holder()
        self.assertTrue(memory.change(link, 0, MiB + 1))
        self.assertTrue(memory.change(link, MiB + 1, 800 * KiB))
        self.assertFalse(memory.change(link, 800 * KiB, 700 * KiB))

    def test_othersRelieved(self) -> None:
        """
        When the total falls under the low water (3/4 of the limit), every
        link pressed is told, once, to check again; it then is not pressed.
        """
        memory = LinkMemory(MiB)
        big, other = Holder(), Holder()
        memory.change(other, 0, 400 * KiB)
        self.assertTrue(memory.change(big, 0, 700 * KiB))
        memory.change(other, 400 * KiB, 100 * KiB)
        self.assertEqual(big.relieved, 0)
        memory.change(other, 100 * KiB, 0)
        self.assertEqual((big.relieved, memory.pressed), (1, 0))
        self.assertFalse(memory.change(big, 700 * KiB, 700 * KiB))


class SharedByLinksTests(SynchronousTestCase):
    """
    Links that share an account: the one whose peer does not read is
    pressed (its writers paused, new sessions refused with OVERLOADED), the
    others are served; everything is returned when the links end.
    """

    def setUp(self) -> None:
        self.memory = LinkMemory(MIN_LINK_MEMORY)
        self.stuck = BoundedPair(
            dialerHandler=RecordingHandler(lambda session: Streamer(None, 0)),
            listenerHandler=RecordingHandler(lambda session: Streamer(None, 0)),
            listenerMemory=self.memory,
        )
        self.fine = BoundedPair(
            listenerHandler=RecordingHandler(lambda session: Streamer(None, 0)),
            listenerMemory=self.memory,
        )
        self.stuck.peerReads[LISTENER] = False
        self.writers = [Trickler(self.stuck.clock, 2 * MiB) for _ in range(20)]
        for n, writer in enumerate(self.writers):
            self.stuck.listener.openSession(f"down:{n}", writer)
        self.stuck.run()

    def test_pressed(self) -> None:
        """
        The link whose peer reads nothing holds over the limit and is
        pressed; its writers are paused.
        """
        self.assertGreater(self.memory.held, MIN_LINK_MEMORY)
        self.assertTrue(self.stuck.listener.pressed)
        self.assertFalse(self.fine.listener.pressed)
        self.assertTrue(all(w.paused for w in self.writers))

    def test_newSessionsRefused(self) -> None:
        """
        A session the pressed link's peer opens is reset with OVERLOADED, and
        one it would open itself raises LinkOverloaded; the other link takes
        a session as usual.
        """
        refused = Streamer(None, 0)
        self.stuck.dialer.openSession("more", refused)
        self.stuck.peerReads[LISTENER] = False
        self.stuck.run()
        self.assertRaises(LinkOverloaded, self.stuck.listener.openSession, "x", Streamer(None, 0))
        self.assertFalse(self.stuck.listener.canOpen())
        self.assertEqual(self.memory.refused, 2)
        accepted = Streamer(7, 1000)
        self.fine.dialer.openSession("ok", accepted)
        self.fine.run()
        self.assertEqual(len(self.fine.listenerHandler.sessions), 1)
        self.stuck.peerReads[LISTENER] = True
        self.stuck.run()
        assert refused.lost is not None
        self.assertEqual(refused.lost.value.code, ErrorCode.OVERLOADED)
        self.assertIsInstance(refused.lost.value, SessionResetError)

    def test_returned(self) -> None:
        """
        Once the peer reads again the writers finish and the link is no
        longer pressed; when the links end, the account is back at 0.
        """
        self.stuck.peerReads[LISTENER] = True
        self.stuck.run()
        self.assertFalse(self.stuck.listener.pressed)
        self.assertTrue(all(w.sent == 2 * MiB for w in self.writers))
        self.assertEqual(self.memory.held, 0)
        for pair in (self.stuck, self.fine):
            pair.dialer.transport.loseConnection()
            pair.run()
        self.assertEqual((self.memory.held, self.memory.holders, self.memory.pressed), (0, 0, 0))

    def test_lostWhilePressed(self) -> None:
        """
        A pressed link that is cut gives back all it held at once.
        """
        self.stuck.listener.transport.abortConnection()
        self.stuck.run()
        self.assertEqual((self.memory.held, self.memory.pressed), (0, 0))

