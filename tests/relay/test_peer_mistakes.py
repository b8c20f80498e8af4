"""
Tests for what the relay's link handler (L{nfltr.relay.link_handler}) does with
a peer's mistakes: no traceback, peers' strings logged only through
L{nfltr.wire.peerText}, repeated lines from one source throttled
(L{nfltr.wire.LogThrottle}), malformed targets refused with a clear reason
on a link that stays up.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import DIALER, LISTENER, ErrorCode, FrameType, LinkConnection, RefusalReason
from nfltr.link._frames import header
from nfltr.link.twisted import LinkProtocol
from nfltr.relay.link_handler import Relay, RelayLinkHandler
from nfltr.wire import DEFAULT_BURST, PEER_TEXT_LIMIT
from nfltr.wire.messages import agent_hello, client_hello

from .helpers import FakeStore, lost_reason
from .test_link_handler import Recorder

A_KEY = "aaaaaaaaaaaa"
GARBAGE_KEY = "not-a-key"
#: A frame no link may send: DATA on session 0.
BAD_FRAME = header(FrameType.DATA, 0, 1) + b"x"


def dialer_bytes(app: dict[str, Any]) -> bytes:
    """
    What a dialer with hello C{app} writes first: its preamble and hello.
    """
    return LinkConnection(DIALER, clock=lambda: 0.0, app_hello=app).data_to_send()


class _RawLinks(SynchronousTestCase):
    """
    Links to a relay fed raw bytes over a L{StringTransport}, with every
    log event (the handlers', the link's, Twisted's) recorded.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.store = FakeStore()
        self.key = self.store.addKey(A_KEY, "acme")
        self.relay = Relay(self.store, self.clock)
        self.events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(self.events.append)
        self.addCleanup(globalLogPublisher.removeObserver, self.events.append)

    def connect(self, host: str = "192.0.2.7") -> tuple[LinkProtocol, StringTransport]:
        link = LinkProtocol(LISTENER, RelayLinkHandler(self.relay), self.clock)
        transport = StringTransport(peerAddress=_address(host))
        link.makeConnection(transport)
        return link, transport

    def assertNoTraceback(self) -> None:
        critical = [formatEvent(e) for e in self.events
                    if "log_failure" in e or e.get("log_level") == LogLevel.critical]
        self.assertEqual(critical, [])

    def texts(self) -> list[str]:
        return [formatEvent(e) for e in self.events]


def _address(host: str) -> Any:
    from twisted.internet.address import IPv4Address

    return IPv4Address("TCP", host, 40000)


class KeyAndBadFrameTests(_RawLinks):
    """
    A hello and a protocol violation in one write: the link fails while the
    hello is handled, and the key's verdict may come after that.
    """

    def test_garbageKeyVerdictAfterFailure(self) -> None:
        """
        A hello with a garbage key and a bad frame in one read, the store
        answering after the link failed: nothing is logged as a failure
        (no traceback), nothing raises, and the connection is closed.
        """
        self.store.hold = True
        link, transport = self.connect()
        link.dataReceived(dialer_bytes(client_hello(GARBAGE_KEY)) + BAD_FRAME)
        self.store.release()
        self.assertNoTraceback()
        self.assertTrue(transport.disconnecting)

    def test_garbageKeyVerdictAtOnce(self) -> None:
        """
        The same with a store that answers at once, while the failing read
        is still being handled.
        """
        link, transport = self.connect()
        link.dataReceived(dialer_bytes(client_hello(GARBAGE_KEY)) + BAD_FRAME)
        self.assertNoTraceback()
        self.assertTrue(transport.disconnecting)

    def test_invalidHelloAndBadFrame(self) -> None:
        """
        A hello the relay refuses outright (a malformed agent name) and a
        bad frame in one read: no exception escapes the read, nothing is
        logged as a failure.
        """
        link, transport = self.connect()
        hello = {"role": "agent", "key": self.key, "name": "Not_A_Name"}
        link.dataReceived(dialer_bytes(hello) + BAD_FRAME)
        self.assertNoTraceback()
        self.assertTrue(transport.disconnecting)

    def test_validKeyAndBadFrame(self) -> None:
        """
        A valid agent's hello and a bad frame in one read: the agent is not
        registered, and nothing is logged as a failure.
        """
        self.store.hold = True
        link, _ = self.connect()
        link.dataReceived(dialer_bytes(agent_hello(self.key, "web", [])) + BAD_FRAME)
        self.store.release()
        self.assertNoTraceback()
        self.assertIsNone(self.relay.directory.agent("web"))
        self.assertEqual(self.relay.directory.counts(), (0, 0))


class PeerTextTests(_RawLinks):
    """
    A peer's strings reach the log as one short printable line.
    """

    def test_refusalTextCapped(self) -> None:
        """
        A hello whose role is a long string with line breaks and escape
        sequences is refused; the logged line holds no control character
        and at most L{PEER_TEXT_LIMIT} characters of it.
        """
        role = "\x1b[2J\nforged line " + "r" * 5000
        link, _ = self.connect()
        link.dataReceived(dialer_bytes({"role": role, "key": self.key}))
        [line] = [t for t in self.texts() if t.startswith("refused")]
        self.assertNotIn("\n", line)
        self.assertNotIn("\x1b", line)
        self.assertLess(len(line), 2 * PEER_TEXT_LIMIT + 100)

    def test_controlTypeNamed(self) -> None:
        """
        An unexpected control message's type is logged as text (through
        peerText), not as a Python repr, with the peer's address.
        """
        link, _ = self.connect()
        conn = LinkConnection(DIALER, clock=lambda: 0.0, app_hello=client_hello(self.key))
        link.dataReceived(conn.data_to_send())
        conn.receive_data(_written(link))
        conn.send_control({"type": "x-unknown", "secret": "not logged"})
        link.dataReceived(conn.data_to_send())
        [line] = [t for t in self.texts() if t.startswith("ignored control message")]
        self.assertEqual(line, "ignored control message x-unknown from 192.0.2.7:40000")


def _written(link: LinkProtocol) -> bytes:
    transport = link.transport
    data = transport.value()
    transport.clear()
    return bytes(data)


class ThrottleTests(_RawLinks):
    """
    Refusals logged per source are throttled.
    """

    def test_refusalsFromOneSourceThrottled(self) -> None:
        """
        50 refused connections from one address log the burst, then
        nothing until the throttle's interval passed, then one line
        saying how many were left out; another address is logged apart.
        """
        for _ in range(50):
            link, _ = self.connect("192.0.2.7")
            link.dataReceived(dialer_bytes(client_hello(GARBAGE_KEY)))
        refused = [t for t in self.texts() if t.startswith("refused")]
        self.assertEqual(len(refused), DEFAULT_BURST)
        link, _ = self.connect("198.51.100.1")
        link.dataReceived(dialer_bytes(client_hello(GARBAGE_KEY)))
        self.assertEqual(len([t for t in self.texts() if t.startswith("refused")]),
                         DEFAULT_BURST + 1)
        self.clock.advance(self.relay.logThrottle.interval)
        link, _ = self.connect("192.0.2.7")
        link.dataReceived(dialer_bytes(client_hello(GARBAGE_KEY)))
        last = [t for t in self.texts() if t.startswith("refused")][-1]
        self.assertIn("45 similar lines left out", last)
        self.assertEqual(self.relay.counters.refusals[RefusalReason.UNAUTHORIZED.value], 52)


class BadTargetTests(SynchronousTestCase):
    """
    A client's OPEN whose target is malformed is reset with the parser's
    reason; the link stays up.
    """

    def test_malformedTargets(self) -> None:
        """
        C{tcp:web:²} (a digit C{str.isdigit} takes and C{int} refuses),
        other scripts' digits, a port out of range, an empty name, a bad
        name, a missing port, another kind: each gets a RESET C{REFUSED}
        "bad target ..." or "invalid ...", the client's link stays up and
        takes the next session, and nothing is logged as a failure.
        """
        from .helpers import RelayHarness

        events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        h = RelayHarness()
        h.logged = events
        key = h.store.addKey(A_KEY, "acme")
        client = h.client(key)
        targets = ["tcp:web:\u00b2", "tcp:web:\u0663\u0660", "tcp:web:99999", "tcp::80",
                   "tcp:Web_1:80", "tcp:web", "sctp:web:53", "tcp:web:-1", "tcp:web:80\n",
                   "udp:web:\u00b2", "udp:Web_1:53", "udp:53", "udp:web:0"]
        reasons = []
        for target in targets:
            recorder = Recorder()
            client.link.openSession(target, recorder)
            h.run()
            reasons.append(lost_reason(recorder.lost))
        for target, (code, reason) in zip(targets, reasons, strict=True):
            self.assertEqual(code, ErrorCode.REFUSED, target)
            self.assertTrue(reason.startswith(("bad target", "invalid")), (target, reason))
            self.assertNotIn("\n", reason)
        self.assertFalse(client.closed)
        self.assertEqual(
            [e for e in events if "log_failure" in e or e.get("log_level") == LogLevel.critical],
            [],
        )


class EchoedReasonTests(SynchronousTestCase):
    """
    A RESET's reason the relay passes from one peer to another goes
    through peerText.
    """

    def test_agentResetReasonEchoedSafely(self) -> None:
        """
        An agent resetting a client's session with a long reason holding
        escape sequences and line breaks: the client gets the same code and
        the reason as one short printable line.
        """
        from ..link.twisted_helpers import RecordingHandler
        from .helpers import RelayHarness

        reason = "\x1b[2J\nforged " + "r" * 900

        class Resetting(RecordingHandler):
            def sessionRequested(self, session: Any) -> None:
                session.refuse(ErrorCode.CONNECT_FAILED, reason)

        h = RelayHarness()
        key = h.store.addKey(A_KEY, "acme")
        h.agent(key, "web", handler=Resetting())
        client = h.client(key)
        recorder = Recorder()
        client.link.openSession("tcp:web:3000", recorder, b"x")
        h.run()
        code, echoed = lost_reason(recorder.lost)
        self.assertEqual(code, ErrorCode.CONNECT_FAILED)
        self.assertNotIn("\n", echoed)
        self.assertNotIn("\x1b", echoed)
        self.assertLessEqual(len(echoed), PEER_TEXT_LIMIT)
        self.assertTrue(echoed.startswith("\\x1b[2J\\x0aforged rrr"), echoed)
