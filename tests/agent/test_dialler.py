"""
Tests for L{nfltr.agent.RelayDialler}: a real dialer link against the test
relay's real listener link, joined by iosim on a Clock.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error
from twisted.logger import LogLevel
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import NON_HEALING, WELCOME_TIMEOUT, DiallerObserver, RelayDialler
from nfltr.backoff import ReconnectSchedule
from nfltr.link import ErrorCode, RefusalReason, refusal
from nfltr.link.twisted import LinkProtocol, LinkSession, SessionResetError
from nfltr.tls import client_creator, ensure_self_signed, server_context_factory
from nfltr.wire.messages import NOT_FOUND_CODE, agent_hello, welcome
from nfltr.wire.moving import MOVE_GRACE, moving_message

from .helpers import LogCapture, Network, Recorder, TestRelay

KEY = "nfk_secret-key-never-logged"


class Observer(DiallerObserver):
    """
    Records what the dialler reports.
    """

    def __init__(self) -> None:
        self.ups: list[tuple[LinkProtocol, dict[str, Any]]] = []
        self.downs = 0
        self.fatal: list[str] = []
        self.sessions: list[LinkSession] = []

    def relayUp(self, link: LinkProtocol, welcome: dict[str, Any]) -> None:
        self.ups.append((link, welcome))

    def relayDown(self) -> None:
        self.downs += 1

    def relayFatal(self, message: str) -> None:
        self.fatal.append(message)

    def sessionRequested(self, session: LinkSession) -> None:
        self.sessions.append(session)
        session.accept(Recorder(b"from the agent"))


class DiallerFixture:
    """
    A dialler, its observer, the test relay and a no-jitter schedule.
    """

    def __init__(self, case: SynchronousTestCase, policy: Any = None, tls: Any = None) -> None:
        self.network = Network()
        self.relay = TestRelay(self.network) if policy is None else TestRelay(self.network, policy)
        self.endpoint = self.relay.endpoint(tls)
        self.observer = Observer()
        self.logs = LogCapture(case)
        self.dialler = RelayDialler(
            self.endpoint, self.network.clock, agent_hello(KEY, "box", []), self.observer,
            "relay.example:8443", schedule=ReconnectSchedule(rand=lambda: 0.0),
        )

    def start(self) -> None:
        self.dialler.start()
        self.network.run()


class WelcomeTests(SynchronousTestCase):
    """
    The relay's welcome.
    """

    def test_welcomed(self) -> None:
        """
        The dialler sends our hello and reports the relay's welcome with the
        link it arrived on; the link is then the dialler's C{link}.
        """
        f = DiallerFixture(self)
        f.start()
        self.assertEqual(len(f.observer.ups), 1)
        link, message = f.observer.ups[0]
        self.assertIs(f.dialler.link, link)
        self.assertEqual(message, welcome("acme", "box"))
        self.assertEqual(f.relay.hellos[0]["key"], KEY)
        self.assertEqual(f.relay.hellos[0]["role"], "agent")
        self.assertEqual(f.endpoint.attempts, 1)

    def test_oneInfoLineNoKey(self) -> None:
        """
        Coming up is one info line naming the relay and the account; the API
        key appears in no log event.
        """
        f = DiallerFixture(self)
        f.start()
        self.assertEqual(f.logs.lines(), [])
        infos = [e for e in f.logs.events if "connected to the relay" in e.get("log_format", "")]
        self.assertEqual(len(infos), 1)
        self.assertIn("relay.example:8443", f.logs.allText())
        self.assertIn("acme", f.logs.allText())
        self.assertNotIn(KEY, f.logs.allText())
        self.assertNotIn(KEY, repr(f.logs.events))

    def test_sessionsGoToObserver(self) -> None:
        """
        A session the relay opens on the welcomed link reaches the observer.
        """
        f = DiallerFixture(self)
        f.start()
        relayLink = f.relay.links[0]
        peer = Recorder()
        relayLink.openSession("tcp:22", peer)
        f.network.run()
        self.assertEqual([s.target for s in f.observer.sessions], ["tcp:22"])
        self.assertEqual(peer.received, b"from the agent")

    def test_noAnswer(self) -> None:
        """
        A relay that never answers our hello is dropped after
        L{WELCOME_TIMEOUT} seconds, with a warning saying so, and dialled
        again.
        """
        f = DiallerFixture(self, policy=lambda app: None)
        f.start()
        f.network.advance(WELCOME_TIMEOUT - 0.01)
        self.assertEqual(f.endpoint.attempts, 1)
        f.network.advance(0.01)
        self.assertIsNone(f.dialler.link)
        warnings = f.logs.lines()
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("did not answer our hello", warnings[0])
        f.network.advance(0.25)
        self.assertEqual(f.endpoint.attempts, 2)


class RefusalTests(SynchronousTestCase):
    """
    Refusals that cannot heal stop the dialler; others are retried.
    """

    def test_nonHealingStops(self) -> None:
        """
        Each refusal in L{NON_HEALING} stops the dialler once, with
        C{relay refused: TEXT}; it never dials again.
        """
        self.assertEqual(
            set(NON_HEALING),
            {RefusalReason.UNAUTHORIZED, RefusalReason.REVOKED, RefusalReason.CONFLICT,
             RefusalReason.INVALID, RefusalReason.VERSION, RefusalReason.LIMIT},
        )
        for reason in NON_HEALING:
            f = DiallerFixture(self, policy=lambda app, r=reason: (r, "API key abc was revoked"))
            f.start()
            f.network.advance(3600)
            self.assertEqual(f.observer.fatal, ["relay refused: API key abc was revoked"], reason)
            self.assertEqual(f.endpoint.attempts, 1)
            self.assertEqual(f.observer.ups, [])
            self.assertEqual(f.dialler.fatal, "relay refused: API key abc was revoked")

    def test_healingRetries(self) -> None:
        """
        A refusal that may heal (the relay cannot check keys now) is retried
        after 250 ms, with one warning for the repeated cause.
        """
        answers = [(RefusalReason.UNAVAILABLE, "try again later")] * 3

        def policy(app: dict[str, Any]) -> Any:
            return answers.pop(0) if answers else welcome("acme", "box")

        f = DiallerFixture(self, policy=policy)
        f.start()
        self.assertEqual(f.endpoint.attempts, 1)
        f.network.advance(0.2499)
        self.assertEqual(f.endpoint.attempts, 1)
        f.network.advance(0.0001)
        self.assertEqual(f.endpoint.attempts, 2)
        f.network.advance(0.52, step=0.01)
        self.assertEqual(f.endpoint.attempts, 4)
        self.assertEqual(len(f.observer.ups), 1)
        self.assertEqual(f.observer.fatal, [])
        warnings = f.logs.lines()
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("refused the link: try again later", warnings[0])

    def test_refusedWhileUp(self) -> None:
        """
        A refusal on a welcomed link (the key was revoked meanwhile) stops
        the dialler: the link goes down and is not dialled again.
        """
        f = DiallerFixture(self)
        f.start()
        from nfltr.link import refusal

        f.relay.links[0].sendControl(refusal(RefusalReason.REVOKED, "API key abc was revoked"))
        f.network.advance(100)
        self.assertEqual(f.observer.fatal, ["relay refused: API key abc was revoked"])
        self.assertEqual(f.observer.downs, 1)
        self.assertIsNone(f.dialler.link)
        self.assertEqual(f.endpoint.attempts, 1)

    def test_pinMismatchStops(self) -> None:
        """
        A relay whose certificate does not match C{--relay-pin} stops the
        dialler with the fingerprint message, without a retry.
        """
        identity = ensure_self_signed(self.mktemp(), "relay")
        wrong = "sha256:" + "00" * 32
        tls = (
            server_context_factory(identity.cert, identity.key),
            client_creator("relay.example", pin=wrong),
        )
        f = DiallerFixture(self, tls=tls)
        f.start()
        f.network.advance(100)
        self.assertEqual(
            f.observer.fatal,
            [f"relay certificate fingerprint {identity.fingerprint} does not match --pin {wrong}"],
        )
        self.assertEqual(f.endpoint.attempts, 1)

    def test_rightPinWelcomed(self) -> None:
        """
        Over TLS with the right pin the dialler is welcomed as without TLS.
        """
        identity = ensure_self_signed(self.mktemp(), "relay")
        tls = (
            server_context_factory(identity.cert, identity.key),
            client_creator("relay.example", pin=identity.fingerprint),
        )
        f = DiallerFixture(self, tls=tls)
        f.start()
        self.assertEqual(len(f.observer.ups), 1)
        self.assertEqual(f.observer.fatal, [])


class ReconnectTests(SynchronousTestCase):
    """
    Lost links and failed attempts are retried on the schedule.
    """

    def test_reconnectAfterLoss(self) -> None:
        """
        A welcomed link that is cut is reported down, dialled again 250 ms
        later and reported up again; sessions on the lost link end with an
        error.
        """
        f = DiallerFixture(self)
        f.start()
        peer = Recorder()
        f.relay.links[0].openSession("tcp:22", peer)
        f.network.run()
        f.endpoint.cut()
        self.assertEqual(f.observer.downs, 1)
        self.assertIsNone(f.dialler.link)
        assert peer.lost is not None
        self.assertFalse(peer.lost.check(error.ConnectionDone))
        f.network.advance(0.2499)
        self.assertEqual(f.endpoint.attempts, 1)
        f.network.advance(0.0001)
        self.assertEqual(f.endpoint.attempts, 2)
        self.assertEqual(len(f.observer.ups), 2)
        self.assertIs(f.dialler.link, f.observer.ups[1][0])
        lost = [line for line in f.logs.lines() if "lost the link" in line]
        self.assertEqual(len(lost), 1)

    def test_unreachableSchedule(self) -> None:
        """
        While nobody listens, attempts follow the schedule: 8 at 250 ms
        intervals, then 0.5 s, then 1 s; one warning in all.
        """
        f = DiallerFixture(self)
        f.endpoint.refuse = True
        f.start()
        times = []
        for _ in range(12):
            before = f.endpoint.attempts
            waited = 0.0
            while f.endpoint.attempts == before:
                f.network.advance(0.125)
                waited += 0.125
            times.append(waited)
        self.assertEqual(times, [0.25] * 8 + [0.5, 1.0, 1.0, 1.0])
        warnings = f.logs.lines()
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("cannot reach the relay at relay.example:8443: connection refused",
                      warnings[0])

    def test_newCauseLogged(self) -> None:
        """
        During an outage a different cause of failure is logged again.
        """
        f = DiallerFixture(self)
        f.endpoint.refuse = True
        f.start()
        f.network.advance(1)
        f.endpoint.refuse = False
        f.relay.policy = lambda app: (RefusalReason.UNAVAILABLE, "busy")
        f.network.advance(1)
        warnings = f.logs.lines()
        self.assertEqual(len(warnings), 2, warnings)
        self.assertIn("busy", warnings[1])

    def test_stop(self) -> None:
        """
        C{stop} closes the welcomed link, fires once it is closed, and no
        attempt follows.
        """
        f = DiallerFixture(self)
        f.start()
        d = f.dialler.stop()
        f.network.run()
        self.assertIsNone(self.successResultOf(d))
        self.assertEqual(f.observer.downs, 1)
        f.network.advance(100)
        self.assertEqual(f.endpoint.attempts, 1)
        self.assertEqual(f.observer.fatal, [])

    def test_stopWhileWaiting(self) -> None:
        """
        C{stop} during the wait between attempts cancels the next attempt.
        """
        f = DiallerFixture(self)
        f.endpoint.refuse = True
        f.start()
        self.successResultOf(f.dialler.stop())
        f.network.advance(100)
        self.assertEqual(f.endpoint.attempts, 1)

    def test_stopAbortsStuckClose(self) -> None:
        """
        A link whose clean close does not finish is aborted 2 s after
        C{stop}.
        """
        f = DiallerFixture(self)
        f.start()
        link = f.dialler.link
        assert link is not None
        link.transport.loseConnection = lambda: None  # the close hangs
        d = f.dialler.stop()
        f.network.advance(1.9)
        self.assertNoResult(d)
        f.network.advance(0.1)
        self.successResultOf(d)

    def test_sessionBeforeWelcomeRefused(self) -> None:
        """
        A session the relay opens before it welcomed us is refused as not
        found, and the observer never sees it.
        """
        f = DiallerFixture(self, policy=lambda app: None)
        f.start()
        peer = Recorder()
        f.relay.links[0].openSession("tcp:22", peer)
        f.network.run()
        assert peer.lost is not None
        self.assertTrue(peer.lost.check(SessionResetError))
        self.assertEqual(peer.lost.value.code, NOT_FOUND_CODE)
        self.assertEqual(f.observer.sessions, [])


class DrainTests(SynchronousTestCase):
    """
    C{stop(drainTimeout)} lets the sessions in flight finish first.
    """

    def setUp(self) -> None:
        self.f = DiallerFixture(self)
        self.f.start()
        self.relayLink = self.f.relay.links[0]
        self.peer = Recorder()
        self.relayLink.openSession("tcp:22", self.peer)
        self.f.network.run()
        self.assertEqual(self.peer.received, b"from the agent")

    def test_sessionFinishes(self) -> None:
        """
        C{stop} with a drain timeout sends a GOAWAY (the relay can open no
        more sessions) and says so in the log, but the session in flight
        goes on carrying bytes both ways; once it ended cleanly the link
        closes, C{stop} fires, and no attempt follows.
        """
        f = self.f
        d = f.dialler.stop(drainTimeout=30)
        f.network.run()
        self.assertNoResult(d)
        self.assertFalse(self.relayLink.canOpen())
        [session] = f.observer.sessions
        agentSide = session.protocol
        session.write(b", still")
        self.peer.transport.write(b"to the agent")
        f.network.run()
        self.assertEqual(self.peer.received, b"from the agent, still")
        self.assertEqual(agentSide.received, b"to the agent")
        self.assertNoResult(d)
        self.peer.transport.loseConnection()
        f.network.run()
        self.successResultOf(d)
        assert self.peer.lost is not None
        self.assertTrue(self.peer.lost.check(error.ConnectionDone), self.peer.lost)
        f.network.advance(100)
        self.assertEqual(f.endpoint.attempts, 1)
        self.assertIn("stopping: draining 1 session(s), up to 30s", f.logs.lines(LogLevel.info))

    def test_timeout(self) -> None:
        """
        A session still open when the drain timeout ends is reset
        (C{GOING_AWAY}), and then C{stop} fires.
        """
        f = self.f
        d = f.dialler.stop(drainTimeout=5)
        f.network.advance(4.9)
        self.assertNoResult(d)
        self.assertIsNone(self.peer.lost)
        f.network.advance(0.1)
        self.successResultOf(d)
        assert self.peer.lost is not None
        self.assertTrue(self.peer.lost.check(SessionResetError), self.peer.lost)
        self.assertEqual(
            (self.peer.lost.value.code, self.peer.lost.value.reason),
            (ErrorCode.GOING_AWAY, "drain timeout"),
        )

    def test_noDrainTimeout(self) -> None:
        """
        Without a drain timeout C{stop} closes the link at once, ending the
        session in flight with an error.
        """
        f = self.f
        d = f.dialler.stop()
        f.network.run()
        self.successResultOf(d)
        assert self.peer.lost is not None
        self.assertFalse(self.peer.lost.check(error.ConnectionDone))

    def test_relayGoingAway(self) -> None:
        """
        A GOAWAY from the relay: the observer hears the link is down, the
        dialler dials again at once (no backoff) and the new link is
        welcomed, while the session in flight on the old link goes on; when
        it finishes, the old link closes and nothing else happens.
        """
        f = self.f
        self.relayLink.drain()
        f.network.run()
        self.assertEqual(f.endpoint.attempts, 2)
        self.assertEqual(f.observer.downs, 1)
        self.assertEqual(len(f.observer.ups), 2)
        self.assertIs(f.dialler.link, f.observer.ups[1][0])
        [session] = f.observer.sessions
        session.write(b", still")
        f.network.run()
        self.assertEqual(self.peer.received, b"from the agent, still")
        self.peer.transport.loseConnection()
        f.network.run()
        assert self.peer.lost is not None
        self.assertTrue(self.peer.lost.check(error.ConnectionDone), self.peer.lost)
        f.network.advance(100)
        self.assertEqual((f.endpoint.attempts, f.observer.downs), (2, 1))
        self.assertEqual(f.logs.lines(), [])
        info = f.logs.lines(LogLevel.info)
        self.assertIn(
            "the relay at relay.example:8443 is going away: 1 session(s) finish on its link; "
            "dialling again", info,
        )
        self.assertIn("reconnected to the relay at relay.example:8443 (account acme)", info)

    def test_relayAsksToMove(self) -> None:
        """
        A C{moving} message: the dialler dials again at once while the old
        link still takes new sessions; once the new link is welcomed, the
        old one goes on taking them for the move grace, then the dialler
        drains it itself (a GOAWAY: the relay can open no more there) and
        the session in flight on it still finishes.
        """
        f = self.f
        self.relayLink.sendControl(moving_message())
        f.network.run()
        self.assertEqual((f.endpoint.attempts, f.observer.downs, len(f.observer.ups)), (2, 1, 2))
        self.assertIs(f.dialler.link, f.observer.ups[1][0])
        late = Recorder()
        self.relayLink.openSession("tcp:22", late)
        f.network.run()
        self.assertEqual(late.received, b"from the agent")
        f.network.advance(MOVE_GRACE - 0.01)
        self.assertTrue(self.relayLink.canOpen())
        f.network.advance(0.01)
        self.assertFalse(self.relayLink.canOpen())
        session = f.observer.sessions[0]
        session.write(b", still")
        f.network.run()
        self.assertEqual(self.peer.received, b"from the agent, still")
        for peer in (self.peer, late):
            peer.transport.loseConnection()
        f.network.run()
        assert self.peer.lost is not None
        self.assertTrue(self.peer.lost.check(error.ConnectionDone), self.peer.lost)
        self.assertEqual(f.endpoint.attempts, 2)
        self.assertIn(
            "the relay at relay.example:8443 is going away: 1 session(s) in flight; its link "
            "takes sessions until another relay welcomes us; dialling again",
            f.logs.lines(LogLevel.info),
        )

    def test_stopWhileMoving(self) -> None:
        """
        C{stop} before another relay welcomed us: the old link is drained
        with the rest, C{stop} fires once it closed, and nothing follows.
        """
        f = self.f
        f.endpoint.refuse = True
        self.relayLink.sendControl(moving_message())
        f.network.run()
        d = f.dialler.stop(drainTimeout=30)
        f.network.run()
        self.assertFalse(self.relayLink.canOpen())
        self.peer.transport.loseConnection()
        f.network.run()
        self.successResultOf(d)
        f.network.advance(100)
        self.assertEqual(f.endpoint.attempts, 2)

    def test_stopWhileRelayDrains(self) -> None:
        """
        C{stop} with a drain timeout while the relay drains the old link:
        the new link closes, the old link's session in flight still
        finishes, and C{stop} fires once both links are closed.
        """
        f = self.f
        self.relayLink.drain()
        f.network.run()
        d = f.dialler.stop(drainTimeout=30)
        f.network.run()
        self.assertNoResult(d)
        self.peer.transport.loseConnection()
        f.network.run()
        self.successResultOf(d)
        assert self.peer.lost is not None
        self.assertTrue(self.peer.lost.check(error.ConnectionDone), self.peer.lost)
        f.network.advance(100)
        self.assertEqual(f.endpoint.attempts, 2)

    def test_refusalThenGoAway(self) -> None:
        """
        A refusal followed by its GOAWAY (as the relay turns a link away) is
        a refusal, retried on the schedule, not a drain that dials again at
        once.
        """
        f = self.f
        self.relayLink.sendControl(refusal(RefusalReason.UNAVAILABLE, "busy"))
        self.relayLink.drain(0)
        f.network.run()
        self.assertEqual(f.endpoint.attempts, 1)
        f.network.advance(0.25)
        self.assertEqual(f.endpoint.attempts, 2)
