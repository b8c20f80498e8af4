"""
Tests for L{nfltr.relay.link_handler} and L{nfltr.relay.tcp_route}: the relay's
side of links, driven by real dialer links over iosim on a Clock.
"""

from __future__ import annotations

from twisted.internet import error
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link import ErrorCode, FrameType, LinkConfig, RefusalReason
from nfltr.link.twisted import SessionResetError
from nfltr.relay.tcp_route import AGENT_UNAVAILABLE
from nfltr.wire.messages import (
    NOT_FOUND_CODE,
    NOT_FOUND_REASON,
    client_target,
)
from tests.link.twisted_helpers import RecordingHandler, Streamer

from .helpers import RelayHarness, frames_of_type, lost_reason, without_token

KiB = 1024
A_KEY, A2_KEY, B_KEY = "aaaaaaaaaaaa", "a2a2a2a2a2a2", "bbbbbbbbbbbb"


def refused(reason: RefusalReason, message: str) -> dict[str, str]:
    return {"type": "refused", "reason": reason.value, "message": message}


class Recorder(Protocol):
    """
    Records what arrives on a session and how it ended.
    """

    def __init__(self) -> None:
        self.received = b""
        self.lost: Failure | None = None

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.lost = reason


class _Base(SynchronousTestCase):
    def setUp(self) -> None:
        self.h = RelayHarness()
        self.keyA = self.h.store.addKey(A_KEY, "acme")
        self.keyA2 = self.h.store.addKey(A2_KEY, "acme")
        self.keyB = self.h.store.addKey(B_KEY, "bravo")

    def assertRefusedAndClosed(self, dialer, reason: RefusalReason, message: str) -> None:
        self.assertEqual(dialer.controls, [refused(reason, message)])
        self.assertTrue(dialer.closed)
        kinds = [f[0] for f in frames_of_type(bytes(dialer.relayIO.written), FrameType.CONTROL)]
        self.assertTrue(kinds)
        goaways = frames_of_type(bytes(dialer.relayIO.written), FrameType.GOAWAY)
        self.assertEqual(len(goaways), 1)
        written = bytes(dialer.relayIO.written)
        self.assertLess(written.rindex(b"refused"), written.rindex(goaways[0]))


class AuthenticationTests(_Base):
    """
    The hello and the API key decide between welcome and refusal.
    """

    def test_agentWelcome(self) -> None:
        """
        An agent with a valid key gets C{welcome} with its account and name,
        stays connected, and is registered under its name.
        """
        agent = self.h.agent(self.keyA, "web", (3000, 3001))
        self.assertEqual(without_token(agent.controls), [
            {"type": "welcome", "account": "acme", "name": "web", "shares": []}
        ])
        self.assertFalse(agent.closed)
        entry = self.h.relay.directory.agent("web")
        self.assertIsNotNone(entry)
        self.assertEqual((entry.account, entry.keyid, entry.ports), ("acme", A_KEY, {3000, 3001}))

    def test_clientWelcome(self) -> None:
        """
        A client with a valid key gets C{welcome} with its account and no name, listing the
        C{resume} feature.
        """
        client = self.h.client(self.keyB)
        self.assertEqual(client.controls, [
            {"type": "welcome", "account": "bravo", "name": None, "shares": [],
             "features": ["resume"]}
        ])
        self.assertFalse(client.closed)
        self.assertIsNone(self.h.relay.directory.agent("web"))

    def test_invalidHello(self) -> None:
        """
        A malformed hello is refused as C{invalid} with the parser's message,
        then a GOAWAY, and the link is closed; the key is never checked.
        """
        self.h.store.hold = True
        dialer = self.h.dial({"role": "agent", "key": self.keyA, "name": "Not_A_Name"})
        [message] = dialer.controls
        self.assertEqual(message["reason"], "invalid")
        self.assertIn("invalid agent name 'Not_A_Name'", message["message"])
        self.assertRefusedAndClosed(dialer, RefusalReason.INVALID, message["message"])
        self.assertEqual(self.h.store.held, [])

    def test_unknownRole(self) -> None:
        """
        A hello with an unknown role is refused as C{invalid}.
        """
        dialer = self.h.dial({"role": "visitor", "key": self.keyA})
        self.assertRefusedAndClosed(dialer, RefusalReason.INVALID, "unknown role 'visitor'")

    def test_unknownKey(self) -> None:
        """
        A key the store does not know is refused as C{unauthorized}
        "invalid API key" and nothing is registered.
        """
        agent = self.h.agent("nfltr_cccccccccccc_" + "B" * 43)
        self.assertRefusedAndClosed(agent, RefusalReason.UNAUTHORIZED, "invalid API key")
        self.assertIsNone(self.h.relay.directory.agent("web"))

    def test_revokedKey(self) -> None:
        """
        A revoked key is refused as C{revoked}, naming the key id.
        """
        self.h.store.revoke(A_KEY)
        agent = self.h.agent(self.keyA)
        self.assertRefusedAndClosed(
            agent, RefusalReason.REVOKED, f"API key {A_KEY} was revoked"
        )
        self.assertIsNone(self.h.relay.directory.agent("web"))

    def test_storeFailure(self) -> None:
        """
        When the store cannot check the key, the dialer is refused as
        C{unavailable} and the failure is logged.
        """
        self.h.store.error = RuntimeError("disk on fire")
        client = self.h.client(self.keyA)
        [message] = client.controls
        self.assertEqual(message["reason"], "unavailable")
        self.assertTrue(client.closed)
        self.assertTrue(any("disk on fire" in str(e.get("log_failure")) for e in self.h.logged))

    def test_lostWhileVerifying(self) -> None:
        """
        A link lost while its key is being checked is neither welcomed nor
        registered when the answer comes.
        """
        self.h.store.hold = True
        agent = self.h.agent(self.keyA)
        agent.cut(error.ConnectionLost("gone"))
        self.h.store.release()
        self.h.run()
        self.assertEqual(agent.controls, [])
        self.assertIsNone(self.h.relay.directory.agent("web"))
        self.assertEqual(self.h.relay.directory.counts(), (0, 0))

    def test_keyNeverLogged(self) -> None:
        """
        Nothing the relay logs, for welcomes or refusals, contains an API key.
        """
        self.h.agent(self.keyA)
        self.h.client(self.keyA2)
        self.h.agent(self.keyB)  # name conflict
        self.h.client("nfltr_cccccccccccc_" + "B" * 43)
        self.assertTrue(self.h.logged)
        text = repr(self.h.logged) + "".join(self.h.messages())
        for key in (self.keyA, self.keyA2, self.keyB, "B" * 43):
            self.assertNotIn(key, text)

    def test_welcomeLineReadable(self) -> None:
        """
        The line logged when an agent connects lists its ports as plain
        text (C{3000, 3001}), and says C{none} for what it does not share:
        no Python list in what an operator reads.
        """
        self.h.agent(self.keyA, "web", (3000, 3001))
        [line] = [m for m in self.h.messages() if "connected from" in m]
        self.assertIn("sharing ports 3000, 3001, URLs none and public ports none", line)
        self.assertNotIn("[", line)


class AgentNameTests(_Base):
    """
    A name belongs to one live agent; its account may replace it.
    """

    def test_nameHeldByAnotherAccount(self) -> None:
        """
        An agent of another account asking for a live agent's name is
        refused as C{conflict}; the first agent keeps the name.
        """
        first = self.h.agent(self.keyA, "web")
        second = self.h.agent(self.keyB, "web")
        self.assertRefusedAndClosed(
            second, RefusalReason.CONFLICT, "name web is leased to another account"
        )
        self.assertFalse(first.closed)
        self.assertIs(self.h.relay.directory.agent("web").holder, first.relayHandler)

    def test_sameAccountReplaces(self) -> None:
        """
        A new agent of the same account takes the name: the old link is told
        C{conflict} "replaced by a newer connection" and closed, and clients'
        sessions go to the new agent, also after the old link is gone.
        """
        oldHandler = RecordingHandler(lambda s: Recorder())
        newHandler = RecordingHandler(lambda s: Recorder())
        old = self.h.agent(self.keyA, "web", handler=oldHandler)
        new = self.h.agent(self.keyA2, "web", handler=newHandler)
        self.assertEqual(
            old.controls[-1], refused(RefusalReason.CONFLICT, "replaced by a newer connection")
        )
        self.assertTrue(old.closed)
        self.assertEqual(without_token(new.controls), [
            {"type": "welcome", "account": "acme", "name": "web", "shares": []}
        ])
        self.assertIs(self.h.relay.directory.agent("web").holder, new.relayHandler)
        client = self.h.client(self.keyA)
        client.link.openSession(client_target("web", 3000), Recorder())
        self.h.run()
        self.assertEqual(len(newHandler.sessions), 1)
        self.assertEqual(oldHandler.sessions, [])

    def test_drainingAgentHandsOverItsName(self) -> None:
        """
        An agent that drains (GOAWAY) frees its name at once: its successor
        takes it without the draining link being told "replaced" or losing
        the session it is finishing, and new sessions go to the successor.
        """
        oldHandler = RecordingHandler(lambda s: Recorder())
        newHandler = RecordingHandler(lambda s: Recorder())
        old = self.h.agent(self.keyA, "web", handler=oldHandler)
        client = self.h.client(self.keyA)
        inFlight = Recorder()
        client.link.openSession(client_target("web", 3000), inFlight)
        self.h.run()
        self.assertEqual(len(oldHandler.sessions), 1)
        old.link.drain()
        self.h.run()
        self.assertIsNone(self.h.relay.directory.agent("web"))
        new = self.h.agent(self.keyA2, "web", handler=newHandler)
        self.assertEqual(without_token(new.controls), [
            {"type": "welcome", "account": "acme", "name": "web", "shares": []}
        ])
        self.assertNotIn(
            refused(RefusalReason.CONFLICT, "replaced by a newer connection"), old.controls
        )
        self.assertIsNone(inFlight.lost)
        client.link.openSession(client_target("web", 3000), Recorder())
        self.h.run()
        self.assertEqual(len(newHandler.sessions), 1)
        self.assertEqual(len(oldHandler.sessions), 1)

    def test_disconnectLeavesNameLeased(self) -> None:
        """
        When an agent's link ends, its name is no live agent's and "agent
        NAME (account A) disconnected" is logged, but the name stays its
        account's for the lease time: another account's agent is refused,
        then welcomed once the lease ended.
        """
        first = self.h.agent(self.keyA, "web")
        first.link.transport.loseConnection()
        self.h.run()
        self.assertIsNone(self.h.relay.directory.agent("web"))
        self.assertIn("agent web (account acme) disconnected", self.h.messages())
        refused = self.h.agent(self.keyB, "web")
        self.assertRefusedAndClosed(
            refused, RefusalReason.CONFLICT, "name web is leased to another account"
        )
        self.h.clock.advance(self.h.relay.directory.leases.leaseTime)
        second = self.h.agent(self.keyB, "web")
        self.assertEqual(second.controls[0]["type"], "welcome")


class RoutingTests(_Base):
    """
    Clients reach their own account's agents, and nothing else.
    """

    def test_ownerReachesAgent(self) -> None:
        """
        A client of the agent's account reaches the shared port: the agent
        sees C{tcp:PORT}, and 1 MiB each way arrives intact, followed by a
        clean end, through the relay's splice.
        """
        size = 1024 * KiB
        agentSide: list[Streamer] = []

        def accept(session):
            agentSide.append(Streamer(2, size, 1, size))
            return agentSide[-1]

        agentHandler = RecordingHandler(accept)
        self.h.agent(self.keyA, "web", (3000,), handler=agentHandler)
        client = self.h.client(self.keyA2)
        clientSide = Streamer(1, size, 2, size)
        client.link.openSession(client_target("web", 3000), clientSide)
        self.h.run()
        self.assertEqual([s.target for s in agentHandler.sessions], ["tcp:3000"])
        self.assertTrue(clientSide.verified())
        self.assertTrue(agentSide[0].verified())
        self.assertTrue(clientSide.lost.check(error.ConnectionDone))
        self.assertTrue(agentSide[0].lost.check(error.ConnectionDone))

    def test_refusalsAreIdentical(self) -> None:
        """
        Another account's agent, a missing agent and a port the agent does
        not share get byte-identical RESET frames (each the first session of
        a fresh link), with the not-found code and reason; the agent sees no
        session.
        """
        agentHandler = RecordingHandler(lambda s: Recorder())
        self.h.agent(self.keyA, "web", (3000,), handler=agentHandler)
        attempts = [(self.keyB, "web", 3000), (self.keyA, "nope", 3000), (self.keyA, "web", 3001)]
        resets, ends = [], []
        for key, name, port in attempts:
            client = self.h.client(key)
            before = len(client.relayIO.written)
            recorder = Recorder()
            client.link.openSession(client_target(name, port), recorder)
            self.h.run()
            resets.append(frames_of_type(bytes(client.relayIO.written[before:]), FrameType.RESET))
            ends.append(lost_reason(recorder.lost))
        self.assertEqual(len(resets[0]), 1)
        self.assertEqual(resets[0], resets[1])
        self.assertEqual(resets[0], resets[2])
        self.assertEqual(ends, [(NOT_FOUND_CODE, NOT_FOUND_REASON)] * 3)
        self.assertEqual(agentHandler.sessions, [])

    def test_sessionsWaitForWelcome(self) -> None:
        """
        A session a client opens before its key is checked waits, then is
        routed once the key is accepted.
        """
        agentHandler = RecordingHandler(lambda s: Streamer(None, 0, 5, 100))
        self.h.agent(self.keyA, "web", handler=agentHandler)
        self.h.store.hold = True
        client = self.h.client(self.keyA)
        opener = Streamer(5, 100)
        client.link.openSession(client_target("web", 3000), opener)
        self.h.run()
        self.assertEqual(agentHandler.sessions, [])
        self.h.store.release()
        self.h.run()
        self.assertEqual(len(agentHandler.sessions), 1)
        self.assertEqual(client.controls[0]["type"], "welcome")
        self.assertTrue(opener.lost.check(error.ConnectionDone))

    def test_sessionsBeforeRefusalRefused(self) -> None:
        """
        Sessions waiting on a key that turns out invalid are refused with the
        not-found RESET, and the link with C{unauthorized}.
        """
        self.h.agent(self.keyA, "web")
        self.h.store.hold = True
        client = self.h.client("nfltr_cccccccccccc_" + "B" * 43)
        recorder = Recorder()
        client.link.openSession(client_target("web", 3000), recorder)
        self.h.run()
        self.h.store.release()
        self.h.run()
        self.assertEqual(lost_reason(recorder.lost), (NOT_FOUND_CODE, NOT_FOUND_REASON))
        self.assertRefusedAndClosed(client, RefusalReason.UNAUTHORIZED, "invalid API key")

    def test_agentSessionsRefused(self) -> None:
        """
        A session an agent opens toward the relay is refused.
        """
        agent = self.h.agent(self.keyA)
        recorder = Recorder()
        agent.link.openSession("tcp:web:3000", recorder)
        self.h.run()
        self.assertEqual(
            lost_reason(recorder.lost), (ErrorCode.REFUSED, "agents cannot open sessions")
        )
        self.assertFalse(agent.closed)

    def test_badTarget(self) -> None:
        """
        A target that is not C{tcp:NAME:PORT} is refused with the parser's
        message; the link stays up.
        """
        client = self.h.client(self.keyA)
        recorder = Recorder()
        client.link.openSession("http:web", recorder)
        self.h.run()
        self.assertEqual(lost_reason(recorder.lost), (ErrorCode.REFUSED, "bad target 'http:web'"))
        self.assertFalse(client.closed)

    def test_agentResetReachesClient(self) -> None:
        """
        When the agent resets its session (its service refused), the client's
        session is reset with the agent's code and reason.
        """

        class Refusing(RecordingHandler):
            def sessionRequested(self, session):
                session.refuse(ErrorCode.CONNECT_FAILED, "connection refused by localhost:3000")

        self.h.agent(self.keyA, handler=Refusing())
        client = self.h.client(self.keyA)
        recorder = Recorder()
        client.link.openSession(client_target("web", 3000), recorder, b"hello")
        self.h.run()
        self.assertTrue(recorder.lost.check(SessionResetError))
        self.assertEqual(
            lost_reason(recorder.lost),
            (ErrorCode.CONNECT_FAILED, "connection refused by localhost:3000"),
        )

    def test_clientResetReachesAgent(self) -> None:
        """
        When the client aborts its session, the agent's session is reset too.
        """
        agentSide = Recorder()
        self.h.agent(self.keyA, handler=RecordingHandler(lambda s: agentSide))
        client = self.h.client(self.keyA)
        opener = Recorder()
        session = client.link.openSession(client_target("web", 3000), opener, b"x")
        self.h.run()
        session.abortConnection()
        self.h.run()
        self.assertEqual(agentSide.received, b"x")
        self.assertEqual(lost_reason(agentSide.lost), (ErrorCode.CANCEL, "aborted"))

    def test_agentLinkLost(self) -> None:
        """
        When the agent's link is cut mid-session, the client's session ends
        with a C{CANCEL} reset, never a clean end.
        """
        agentSide = Recorder()
        agent = self.h.agent(self.keyA, handler=RecordingHandler(lambda s: agentSide))
        client = self.h.client(self.keyA)
        recorder = Recorder()
        client.link.openSession(client_target("web", 3000), recorder, b"x")
        self.h.run()
        agent.cut(error.ConnectionLost("cable pulled"))
        self.h.run()
        self.assertEqual(lost_reason(recorder.lost), (ErrorCode.CANCEL, "agent link lost"))
        self.assertFalse(client.closed)

    def test_agentGoingAway(self) -> None:
        """
        An agent whose link is draining is no longer routed to: a client's
        new session gets the one refusal for unreachable agents.
        """
        sessionAlive = Recorder()
        agent = self.h.agent(self.keyA, handler=RecordingHandler(lambda s: sessionAlive))
        client = self.h.client(self.keyA)
        client.link.openSession(client_target("web", 3000), Recorder())  # keeps the link open
        self.h.run()
        agent.link.drain()
        self.h.run()
        recorder = Recorder()
        client.link.openSession(client_target("web", 3000), recorder)
        self.h.run()
        self.assertEqual(lost_reason(recorder.lost), (NOT_FOUND_CODE, NOT_FOUND_REASON))


    def test_agentAtSessionLimit(self) -> None:
        """
        An agent whose link takes no more sessions (its session limit): the
        client's session is reset with C{GOING_AWAY} "agent unavailable",
        not with the code that says the service refused.
        """
        self.h.agent(self.keyA, handler=RecordingHandler(lambda s: Recorder()),
                     config=LinkConfig(max_sessions=1))
        client = self.h.client(self.keyA)
        first, second = Recorder(), Recorder()
        client.link.openSession(client_target("web", 3000), first)
        client.link.openSession(client_target("web", 3000), second)
        self.h.run()
        self.assertIsNone(first.lost)
        self.assertEqual(lost_reason(second.lost), (ErrorCode.GOING_AWAY, AGENT_UNAVAILABLE))


class RevokeTests(_Base):
    """
    L{Relay.revoke} closes every link of a key, and keeps it out.
    """

    def test_revokeClosesLinksOfKey(self) -> None:
        """
        Revoking a key sends C{revoked} "API key ID was revoked" to its agent
        and its client, closes both, frees the agent's name, and leaves other
        keys' links alone.
        """
        agent = self.h.agent(self.keyA, "web")
        client = self.h.client(self.keyA)
        other = self.h.client(self.keyA2)
        self.assertEqual(self.h.relay.revoke(A_KEY), 2)
        self.h.run()
        message = refused(RefusalReason.REVOKED, f"API key {A_KEY} was revoked")
        self.assertEqual(agent.controls[-1], message)
        self.assertEqual(client.controls[-1], message)
        self.assertTrue(agent.closed)
        self.assertTrue(client.closed)
        self.assertFalse(other.closed)
        self.assertIsNone(self.h.relay.directory.agent("web"))
        self.assertIn(f"API key {A_KEY} was revoked: closing 2 link(s)", self.h.messages())

    def test_revokeCutsSessions(self) -> None:
        """
        A client's sessions in flight end with an error when its key is
        revoked.
        """
        self.h.agent(self.keyA2, handler=RecordingHandler(lambda s: Recorder()))
        client = self.h.client(self.keyA)
        recorder = Recorder()
        client.link.openSession(client_target("web", 3000), recorder, b"x")
        self.h.run()
        self.h.relay.revoke(A_KEY)
        self.h.run()
        self.assertIsNotNone(recorder.lost)
        self.assertFalse(recorder.lost.check(error.ConnectionDone))

    def test_revokedWhileVerifying(self) -> None:
        """
        A key revoked while a link's check of it is in flight (the store still
        answered "valid") is refused as C{revoked}.
        """
        self.h.store.hold = True
        agent = self.h.agent(self.keyA)
        self.h.relay.revoke(A_KEY)
        self.h.store.release()
        self.h.run()
        self.assertRefusedAndClosed(
            agent, RefusalReason.REVOKED, f"API key {A_KEY} was revoked"
        )
