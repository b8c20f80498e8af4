"""
The acceptance of an OPEN (docs/link-protocol.md, sections 4 to 6 and 8):
the hello's C{accepts}, the OPEN flag C{WANT_ACCEPT}, the C{ACCEPT} frame and
its rules, between new peers and with peers that do not announce it.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import (
    DIALER,
    LISTENER,
    DataReceived,
    ErrorCode,
    FrameType,
    LinkConnection,
    LocalProtocolError,
    RemoteProtocolError,
    SessionAccepted,
    SessionOpened,
    SessionReset,
)
from nfltr.link._control import parse_hello
from nfltr.link._frames import WANT_ACCEPT, encode_accept, encode_open

from .helpers import ConnectionPair, assert_link_error, raw_frame


def pair(dialer_accepts: bool = True, listener_accepts: bool = True) -> ConnectionPair:
    """
    An established pair; a side that does not accept announces nothing, as
    an older peer.
    """
    p = ConnectionPair()
    clock = p.clock
    p.dialer = LinkConnection(DIALER, clock=clock, accepts=dialer_accepts)
    p.listener = LinkConnection(LISTENER, clock=clock, accepts=listener_accepts)
    p.conns = {DIALER: p.dialer, LISTENER: p.listener}
    return p.establish()


def opened(p: ConnectionPair, want: bool = True) -> tuple[int, SessionOpened]:
    """
    The dialer opens a session to "tcp:80" (asking for its acceptance if
    C{want}); the listener's event for it.
    """
    sid = p.dialer.open_session("tcp:80", b"", want_accept=want)
    events = p.send(DIALER)
    [event] = [e for e in events if isinstance(e, SessionOpened)]
    return sid, event


class NegotiationTests(SynchronousTestCase):
    """
    The flag is set only towards a peer whose hello said C{accepts}.
    """

    def test_hello(self) -> None:
        """
        This side's hello says C{accepts}; a hello without it, or with
        false, announces nothing; another value is a C{PROTOCOL_ERROR}.
        """
        p = pair()
        self.assertTrue(p.dialer.peer.accepts)
        self.assertTrue(p.listener.peer.accepts)
        base = {"type": "hello", "role": "dialer", "window": 65536, "budget": 65536,
                "max_sessions": 1, "keepalive": {"interval": 5, "timeout": 10}}
        self.assertFalse(parse_hello(base, DIALER).accepts)
        self.assertFalse(parse_hello({**base, "accepts": False}, DIALER).accepts)
        self.assertTrue(parse_hello({**base, "accepts": True}, DIALER).accepts)
        e = self.assertRaises(RemoteProtocolError, parse_hello, {**base, "accepts": 1}, DIALER)
        self.assertEqual(e.code, ErrorCode.PROTOCOL_ERROR)

    def test_newPeers(self) -> None:
        """
        Between two new peers, a session opened wanting acceptance carries
        the flag, waits for the ACCEPT, and the ACCEPT is reported.
        """
        p = pair()
        sid, event = opened(p)
        self.assertEqual(p.taps[DIALER].frames[-1].flags, WANT_ACCEPT)
        self.assertTrue(event.want_accept)
        self.assertTrue(p.dialer.awaits_accept(sid))
        self.assertTrue(p.listener.accept_session(sid))
        self.assertFalse(p.listener.accept_session(sid))  # once only
        events = p.send(LISTENER)
        self.assertEqual(events, [SessionAccepted(sid)])
        self.assertFalse(p.dialer.awaits_accept(sid))
        self.assertEqual(p.taps[LISTENER].frames[-1][:3], (FrameType.ACCEPT, 0, sid))

    def test_notWanted(self) -> None:
        """
        A session opened without asking is flagged nothing and awaits
        nothing, as before.
        """
        p = pair()
        sid, event = opened(p, want=False)
        self.assertEqual(p.taps[DIALER].frames[-1].flags, 0)
        self.assertFalse(event.want_accept)
        self.assertFalse(p.dialer.awaits_accept(sid))
        self.assertFalse(p.listener.accept_session(sid))
        self.assertEqual(p.listener.data_to_send(), b"")

    def test_oldListener(self) -> None:
        """
        Towards a peer whose hello did not say C{accepts}, the OPEN has no
        flag and nothing is awaited: an old peer never sees the flag.
        """
        p = pair(listener_accepts=False)
        self.assertFalse(p.dialer.peer.accepts)
        sid, event = opened(p)
        self.assertEqual(p.taps[DIALER].frames[-1].flags, 0)
        self.assertFalse(event.want_accept)
        self.assertFalse(p.dialer.awaits_accept(sid))

    def test_oldReceiverIgnoresFlag(self) -> None:
        """
        A side that did not announce C{accepts} ignores flags on an OPEN, as
        section 3 says of every flag, and sends no ACCEPT.
        """
        p = pair(listener_accepts=False)
        events = p.inject(LISTENER, raw_frame(FrameType.OPEN, 1, b"\x00\x06tcp:80",
                                              flags=WANT_ACCEPT))
        [event] = events
        self.assertFalse(event.want_accept)
        self.assertFalse(p.listener.accept_session(1))
        p.listener.send_data(1, b"hi")
        self.assertEqual([f.type for f in p.sent_by(LISTENER)][-1], FrameType.DATA)


class AnswerTests(SynchronousTestCase):
    """
    The receiver of a flagged OPEN answers it exactly once, before its DATA
    or FIN.
    """

    def test_acceptBeforeData(self) -> None:
        """
        DATA or FIN sent before the application accepted the session is
        preceded by the ACCEPT it owes.
        """
        for send in (lambda c, s: c.send_data(s, b"hi"), lambda c, s: c.send_fin(s)):
            p = pair()
            sid, _ = opened(p)
            send(p.listener, sid)
            types = [f.type for f in p.sent_by(LISTENER)]
            self.assertEqual(types[-2], FrameType.ACCEPT)
            self.assertEqual(types.count(FrameType.ACCEPT), 1)
            self.assertFalse(p.listener.accept_session(sid))

    def test_resetIsTheAnswer(self) -> None:
        """
        A session reset before it was accepted is answered by the RESET
        alone; the opener reports the reset.
        """
        p = pair()
        sid, _ = opened(p)
        p.listener.reset_session(sid, ErrorCode.CONNECT_FAILED, "service down")
        events = p.send(LISTENER)
        self.assertEqual(events, [SessionReset(sid, ErrorCode.CONNECT_FAILED, "service down",
                                               True)])
        self.assertNotIn(FrameType.ACCEPT, [f.type for f in p.taps[LISTENER].frames])
        self.assertFalse(p.listener.accept_session(sid))

    def test_refusedOpen(self) -> None:
        """
        A flagged OPEN the link refuses (its session limit) is answered by
        its RESET, not by an ACCEPT.
        """
        p = pair()
        p.listener.goaway()
        p.send(LISTENER)
        events = p.inject(LISTENER, encode_open(1, b"tcp:80", flags=WANT_ACCEPT))
        self.assertEqual(events, [])
        self.assertEqual([f.type for f in p.sent_by(LISTENER)][-1], FrameType.RESET)

    def test_acceptUnknown(self) -> None:
        """
        Accepting a session that was never opened is the caller's mistake.
        """
        p = pair()
        self.assertRaises(LocalProtocolError, p.listener.accept_session, 1)


class ReceiveTests(SynchronousTestCase):
    """
    What the opener does with an ACCEPT, by the state of its session.
    """

    def test_unflagged(self) -> None:
        """
        An ACCEPT for a session opened without the flag is a link
        C{PROTOCOL_ERROR}.
        """
        p = pair()
        sid, _ = opened(p, want=False)
        assert_link_error(self, p.dialer, [encode_accept(sid)], ErrorCode.PROTOCOL_ERROR)

    def test_peerOpened(self) -> None:
        """
        An ACCEPT for a session the peer opened is a link C{PROTOCOL_ERROR}.
        """
        p = pair()
        sid, _ = opened(p)
        assert_link_error(self, p.listener, [encode_accept(sid)], ErrorCode.PROTOCOL_ERROR)

    def test_twice(self) -> None:
        """
        A second ACCEPT is a link C{PROTOCOL_ERROR}.
        """
        p = pair()
        sid, _ = opened(p)
        p.inject(DIALER, encode_accept(sid))
        assert_link_error(self, p.dialer, [encode_accept(sid)], ErrorCode.PROTOCOL_ERROR)

    def test_afterData(self) -> None:
        """
        An ACCEPT after the peer's DATA (or FIN) on the session is a link
        C{PROTOCOL_ERROR}: the promise was to answer first.
        """
        for frame in (raw_frame(FrameType.DATA, 1, b"x"), raw_frame(FrameType.FIN, 1)):
            p = pair()
            sid, _ = opened(p)
            self.assertEqual(sid, 1)
            events = p.inject(DIALER, frame)
            self.assertTrue(events)
            assert_link_error(self, p.dialer, [encode_accept(sid)], ErrorCode.PROTOCOL_ERROR)

    def test_gone(self) -> None:
        """
        An ACCEPT for a session already gone (reset by this side) is
        dropped.
        """
        p = pair()
        sid, _ = opened(p)
        p.dialer.reset_session(sid)
        p.dialer.data_to_send()
        self.assertEqual(p.inject(DIALER, encode_accept(sid)), [])
        self.assertEqual(p.dialer.data_to_send(), b"")

    def test_neverOpened(self) -> None:
        """
        An ACCEPT for an id never opened is C{UNKNOWN_SESSION}, and on
        session 0 a C{PROTOCOL_ERROR}, as for FIN.
        """
        p = pair()
        assert_link_error(self, p.dialer, [encode_accept(7)], ErrorCode.UNKNOWN_SESSION)
        p = pair()
        assert_link_error(self, p.dialer, [encode_accept(0)], ErrorCode.PROTOCOL_ERROR)

    def test_size(self) -> None:
        """
        An ACCEPT with a payload is a link C{FRAME_SIZE_ERROR}, from its
        header.
        """
        p = pair()
        sid, _ = opened(p)
        assert_link_error(self, p.dialer, [raw_frame(FrameType.ACCEPT, sid, b"x")],
                          ErrorCode.FRAME_SIZE_ERROR)

    def test_dataAfterAccept(self) -> None:
        """
        After its ACCEPT, the session carries data both ways as before.
        """
        p = pair()
        sid, _ = opened(p)
        p.listener.accept_session(sid)
        p.listener.send_data(sid, b"hello")
        events = p.send(LISTENER)
        self.assertEqual(events, [SessionAccepted(sid), DataReceived(sid, b"hello")])


class GoldenTests(SynchronousTestCase):
    """
    The bytes of the spec's examples.
    """

    def test_accept(self) -> None:
        """
        ACCEPT on session 1 is C{0a 00 00000001 00000000}; a flagged OPEN
        has C{01} in its flags byte.
        """
        self.assertEqual(encode_accept(1).hex(), "0a0000000001" + "00000000")
        self.assertEqual(encode_open(1, b"tcp:80", flags=WANT_ACCEPT)[:2].hex(), "0101")
        self.assertEqual(WANT_ACCEPT, 0x01)
        self.assertEqual(FrameType.ACCEPT, 10)
