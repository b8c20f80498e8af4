"""
Tests for the replica link's pieces that need no second process: the
replica holder (L{nfltr.relay.cluster.holder}), its targets, the
visitor addresses the holding replica reads
(L{nfltr.relay.cluster.listener}), resumable sessions forwarded from
one replica to another (L{nfltr.relay.cluster.routes}), and the holding
replica's keys while the directory is away
(L{nfltr.relay.cluster.key_cache}).  The whole path, with real processes,
is C{tests.integration.test_replicas}.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock, deferLater
from twisted.internet.testing import StringTransport
from twisted.logger import Logger
from twisted.test.iosim import FakeTransport, connect
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from nfltr.link import DIALER, LISTENER, ErrorCode
from nfltr.link.twisted import (
    LinkHandler,
    LinkProtocol,
    LinkSession,
    LinkUnavailable,
    SessionResetError,
)
from nfltr.relay.agents import Relay
from nfltr.relay.cluster.holder import (
    ReplicaHolder,
    parse_plain_target,
    parse_replica_tcp_target,
    plain_target,
    replica_tcp_target,
    without_key,
)
from nfltr.relay.cluster.key_cache import KeyCache
from nfltr.relay.cluster.listener import (
    CANNOT_CHECK,
    CANNOT_CHECK_SSH,
    ReplicaLinkHandler,
    visitor_address,
)
from nfltr.relay.cluster.peers import Peers, PeerUnreachable
from nfltr.relay.cluster.presence import RedisPresence
from nfltr.relay.cluster.routes import RemoteRoutes
from nfltr.relay.cluster.ssh_key_cache import SSHKeyCache
from nfltr.relay.interfaces import KINDS, REPLICA, HolderFigures, IAgentHolder, IRemoteRoutes
from nfltr.relay.tcp_route import AGENT_UNAVAILABLE, RouteRefused
from nfltr.resume.twisted import is_final
from nfltr.store import IPresenceTable, StoreUnavailable, parse_ssh_public_key
from nfltr.wire.messages import (
    NOT_FOUND_CODE,
    NOT_FOUND_REASON,
    MessageError,
    TcpShare,
    agent_hello,
    client_target,
)
from nfltr.wire.resume import RESUME_UNSUPPORTED, offers_resume, resumable_target, resume_target
from tests.link.test_twisted_accept import Held
from tests.link.twisted_helpers import RecordingHandler
from tests.relay.helpers import RelayHarness, lost_reason
from tests.relay.test_link_handler import A2_KEY, A_KEY, Recorder

KEY = "nfltr_0123456789ab_" + "A" * 43
#: An ed25519 public key, base64 (as an SSH login's credential carries it).
BLOB = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
NAMES = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)


class HolderTests(SynchronousTestCase):
    """
    L{ReplicaHolder}, the third holder kind.
    """

    def holder(self, key: str | None = KEY) -> ReplicaHolder:
        link = LinkProtocol(DIALER, LinkHandler(), Clock())
        return ReplicaHolder(link, "web", key, 5.0)

    def test_interface(self) -> None:
        """
        It provides L{IAgentHolder}, of kind C{replica} (one of L{KINDS}),
        and reports its link's figures.
        """
        holder = self.holder()
        self.assertTrue(verifyObject(IAgentHolder, holder))
        self.assertIn(REPLICA, KINDS)
        self.assertEqual(holder.figures(), HolderFigures(REPLICA, 0, 0, 0, None, 5.0))

    def test_unavailable(self) -> None:
        """
        A link that is not established opens nothing; a TCP session without
        the client's key cannot be carried.
        """
        self.assertFalse(self.holder().canOpen())
        with self.assertRaises(LinkUnavailable):
            self.holder().openSession("tcp:22", object())
        with self.assertRaises(LinkUnavailable):
            self.holder(None).openSession("tcp:22", object())
        with self.assertRaises(LinkUnavailable):
            self.holder(None).openSession("resume:22", object())


class TargetTests(SynchronousTestCase):
    """
    The replica link's TCP target.
    """

    @given(st.sampled_from(["tcp", "rtcp", "resume"]), NAMES, st.integers(1, 65535))
    def test_roundTrip(self, kind: str, name: str, port: int) -> None:
        """
        What is written is read back, for each kind of client session (plain, resumable, a
        resumption).
        """
        self.assertEqual(parse_replica_tcp_target(replica_tcp_target(name, port, KEY, kind)),
                         (kind, name, port, KEY, None))

    @given(st.sampled_from(["tcp", "ssh"]), NAMES, st.integers(1, 65535),
           st.sampled_from(["1.2.3.4:5", "[::1]:80"]))
    def test_clientRoundTrip(self, kind: str, name: str, port: int, client: str) -> None:
        """
        A client's address after an C{@} is read back, for a plain session and an SSH
        client's (whose credential names how it logged in).
        """
        key = f"publickey:{BLOB}" if kind == "ssh" else KEY
        self.assertEqual(
            parse_replica_tcp_target(replica_tcp_target(name, port, key, kind, client)),
            (kind, name, port, key, client))

    def test_plainTarget(self) -> None:
        """
        A plain-HTTP visitor's target names the share and the visitor; other
        targets are not one; a bad name is refused.
        """
        self.assertEqual(plain_target("blog", "1.2.3.4:5"), "plain:blog@1.2.3.4:5")
        self.assertEqual(parse_plain_target("plain:blog@[::1]:5"), ("blog", "[::1]:5"))
        self.assertIsNone(parse_plain_target("share:blog@1.2.3.4:5"))
        with self.assertRaises(MessageError):
            parse_plain_target("plain:Not_A_Name@1.2.3.4:5")

    def test_sshCredentials(self) -> None:
        """
        An SSH client's credential is C{publickey:BLOB} or C{password:KEY}; anything else
        is refused, without the secret in the message; an open session shows neither the
        credential nor the client's address.
        """
        target = replica_tcp_target("web", 22, f"password:{KEY}", "ssh", "1.2.3.4:5")
        self.assertEqual(target, f"replica-ssh:web:22:password:{KEY}@1.2.3.4:5")
        self.assertEqual(without_key(target), "replica-ssh:web:22")
        for credential in (KEY, f"other:{KEY}", "publickey:", f"publickey:{KEY}:x"):
            with self.assertRaises(MessageError) as caught:
                parse_replica_tcp_target(f"replica-ssh:web:22:{credential}@1.2.3.4:5")
            self.assertNotIn(KEY, str(caught.exception))
        with self.assertRaises(MessageError):
            parse_replica_tcp_target(f"replica-tcp:web:22:{KEY}@")

    def test_kinds(self) -> None:
        """
        The kinds are spelled as on a client's link, after C{replica-}; no other kind is
        written.
        """
        self.assertEqual(replica_tcp_target("web", 22, KEY), f"replica-tcp:web:22:{KEY}")
        self.assertEqual(replica_tcp_target("web", 22, KEY, "rtcp"), f"replica-rtcp:web:22:{KEY}")
        self.assertEqual(replica_tcp_target("web", 22, KEY, "resume"),
                         f"replica-resume:web:22:{KEY}")
        with self.assertRaises(ValueError):
            replica_tcp_target("web", 22, KEY, "share")

    @given(st.text(max_size=80))
    def test_anyText(self, text: str) -> None:
        """
        Any text is a target, not one, or a L{MessageError}; a bad target's
        message never holds what followed its port (the key).
        """
        try:
            parse_replica_tcp_target(f"replica-tcp:{text}")
        except MessageError as e:
            self.assertNotIn(KEY, str(e))

    def test_withoutKey(self) -> None:
        """
        An open session shows its target without the key; other targets are
        shown as they are.
        """
        self.assertEqual(without_key(replica_tcp_target("web", 22, KEY)), "replica-tcp:web:22")
        self.assertEqual(without_key(replica_tcp_target("web", 22, KEY, "resume")),
                         "replica-resume:web:22")
        self.assertEqual(without_key("share:blog@1.2.3.4:5"), "share:blog@1.2.3.4:5")

    def test_others(self) -> None:
        """
        Other targets are not replica TCP targets; a malformed one is refused
        without its key.
        """
        self.assertIsNone(parse_replica_tcp_target("tcp:web:22"))
        self.assertIsNone(parse_replica_tcp_target("share:blog@1.2.3.4:5"))
        self.assertIsNone(parse_replica_tcp_target("rtcp:web:22"))
        for kind in ("tcp", "rtcp", "resume"):
            with self.assertRaises(MessageError) as caught:
                parse_replica_tcp_target(f"replica-{kind}:web:x:{KEY}")
            self.assertNotIn(KEY, str(caught.exception))


class VisitorAddressTests(SynchronousTestCase):
    """
    The visitor address in a forwarded share target.
    """

    def test_addresses(self) -> None:
        """
        IPv4 and bracketed IPv6 addresses are read; anything else is not.
        """
        self.assertEqual(visitor_address("10.1.2.3:4567"), IPv4Address("TCP", "10.1.2.3", 4567))
        self.assertEqual(visitor_address("[::1]:80"), IPv6Address("TCP", "::1", 80))
        for bad in ("host:80", "10.1.2.3", "", "[::1]:x"):
            self.assertIsNone(visitor_address(bad))


@implementer(IPresenceTable)
class _Records:
    """
    Presence records in memory: C{agent:web} names replica C{a} (acme's, port 3000).
    """

    def __init__(self) -> None:
        self.records = {("agent", "web"): {"replica": "a", "account": "acme", "ports": "3000"}}

    def announce(self, kind: str, name: str, fields: dict[str, str], ttl: float,
                 replica: str, claim: bool) -> Deferred[bool]:
        return succeed(True)

    def withdraw(self, kind: str, name: str, replica: str) -> Deferred[bool]:
        return succeed(True)

    def lookup(self, kind: str, name: str) -> Deferred[dict[str, str] | None]:
        return succeed(self.records.get((kind, name)))


class _Holding(ReplicaLinkHandler):
    """
    The holding replica's handler, recording the targets it was asked to open.
    """

    def __init__(self, relay: Relay, targets: list[str], keys: KeyCache) -> None:
        super().__init__(relay, keys)
        self.targets = targets

    def sessionRequested(self, session: LinkSession) -> None:
        self.targets.append(session.target)
        super().sessionRequested(session)
        self.targets.append(session.target)


class AcrossReplicasCase(SynchronousTestCase):
    """
    Replica C{b} (C{self.forwarding}) forwards to replica C{a} (C{self.holding}), which
    holds agent C{web} of acme.
    """

    def setUp(self) -> None:
        self.holding = RelayHarness()
        self.forwarding = RelayHarness(self.holding.store, clock=self.holding.clock)
        self.keyA = self.holding.store.addKey(A_KEY, "acme")
        self.keyA2 = self.holding.store.addKey(A2_KEY, "acme")
        self.agentSide = RecordingHandler(lambda s: Recorder())
        self.reachable = True
        #: Each forwarded session's target as it came and as it shows once handled.
        self.targets: list[str] = []
        clock = self.holding.clock
        self.keys = KeyCache(clock, self.holding.relay.directory.isRevoked, limit=60)
        peers = Peers(lambda replica: succeed("127.0.0.1:1"), self.dial, 1, clock)
        presence = RedisPresence(_Records(), "b", clock)
        self.forwarding.relay.remote = RemoteRoutes(self.forwarding.relay, presence, peers, clock)

    def dial(self, address: str, handler: LinkHandler) -> Deferred[LinkProtocol]:
        """
        The forwarding replica's dial: a replica link to the holding replica's handler.
        """
        clock = self.holding.clock
        if not self.reachable:
            # As a dial fails: later, not in the call.
            return deferLater(clock, 1, lambda: fail(PeerUnreachable("no answer")))
        dialer = LinkProtocol(DIALER, handler, clock, appHello={"role": "replica"})
        listener = LinkProtocol(LISTENER, _Holding(self.holding.relay, self.targets, self.keys),
                                clock)
        self.holding.pumps.append(connect(
            listener, FakeTransport(listener, isServer=True), dialer,
            FakeTransport(dialer, isServer=False), greet=False, clock=clock))
        self.holding.run()
        return dialer.whenEstablished()

    def agent(self, resumes: bool, share: TcpShare | None = None) -> None:
        app = agent_hello(self.keyA, "web", [share or TcpShare(3000)])
        if resumes:
            app["resume"] = True
        self.holding.dial(app, self.agentSide)

    def open(self, target: str, first: bytes = b"") -> Recorder:
        """
        Open C{target} from a connector of acme on the forwarding replica, which offers
        resumption; pump both replicas until quiet.
        """
        client = self.forwarding.client(self.keyA2)
        self.assertTrue(offers_resume(client.controls[0]))
        recorder = Recorder()
        client.link.openSession(target, recorder, first)
        self.pump()
        return recorder

    def pump(self) -> None:
        """
        Pump both replicas' links, and let time pass, until nothing moves.
        """
        for _ in range(100):
            self.forwarding.run()
            self.holding.run()
            self.holding.clock.advance(1)
            if not any(pump.pump() for pump in [*self.forwarding.pumps, *self.holding.pumps]):
                break



class ResumableAcrossReplicasTests(AcrossReplicasCase):
    """
    A connector's C{rtcp:} and C{resume:} sessions on replica C{b} for an agent replica C{a}
    holds: carried over the replica link (L{RemoteRoutes}, L{ReplicaHolder}) and opened on
    the agent's link by the holding replica (L{ReplicaLinkHandler}), which alone decides.
    """

    def test_forwarded(self) -> None:
        """
        C{rtcp:web:3000} and C{resume:web:3000} on replica C{b} reach the agent on replica
        C{a} as C{rtcp:3000} and C{resume:3000}, first bytes included, and bytes pass both
        ways; the replica link carried them as C{replica-rtcp:} and C{replica-resume:}, the
        key out of what an open session shows.
        """
        self.agent(resumes=True)
        first = self.open(resumable_target("web", 3000), b"hello")
        resumed = self.open(resume_target("web", 3000), b"resume")
        self.assertEqual([s.target for s in self.agentSide.sessions],
                         ["rtcp:3000", "resume:3000"])
        agentEnds = [s.protocol for s in self.agentSide.sessions]
        self.assertEqual([end.received for end in agentEnds], [b"hello", b"resume"])
        agentEnds[0].transport.write(b"back")
        self.pump()
        self.assertEqual(first.received, b"back")
        self.assertIsNone(first.lost)
        self.assertIsNone(resumed.lost)
        self.assertEqual(self.targets, [
            f"replica-rtcp:web:3000:{self.keyA2}", "replica-rtcp:web:3000",
            f"replica-resume:web:3000:{self.keyA2}", "replica-resume:web:3000",
        ])

    def test_agentWithoutResume(self) -> None:
        """
        An agent on the holding replica that does not resume sessions: the holding replica
        refuses the forwarded C{rtcp:} session, and the connector is told in its words (it
        falls back to C{tcp:}).
        """
        self.agent(resumes=False)
        recorder = self.open(resumable_target("web", 3000))
        self.assertEqual(lost_reason(recorder.lost), (ErrorCode.REFUSED, RESUME_UNSUPPORTED))
        self.assertEqual(self.agentSide.sessions, [])

    def test_holderUnreachable(self) -> None:
        """
        A resume for an agent whose replica does not answer (it was killed; its presence
        record is still there) is reset with C{GOING_AWAY}: not a final end, so the connector
        keeps the session suspended and tries again.
        """
        self.agent(resumes=True)
        self.reachable = False
        recorder = self.open(resume_target("web", 3000), b"resume")
        assert recorder.lost is not None
        self.assertEqual(lost_reason(recorder.lost), (ErrorCode.GOING_AWAY, AGENT_UNAVAILABLE))
        self.assertFalse(is_final(recorder.lost))
        self.assertEqual(self.agentSide.sessions, [])


class SSHAcrossReplicasCase(AcrossReplicasCase):
    """
    L{AcrossReplicasCase} with SSH clients of acme on replica C{b}: their key is
    registered to acme, and the agent's presence record says port 3000 is shared plain.
    """

    line = f"ssh-ed25519 {BLOB}"

    def setUp(self) -> None:
        super().setUp()
        self.records = _Records()
        self.records.records["agent", "web"]["plain"] = "3000"
        presence = RedisPresence(self.records, "b", self.holding.clock)
        remote = self.forwarding.relay.remote
        assert isinstance(remote, RemoteRoutes)
        remote.presence = presence
        self.holding.store.sshKeys[self.line] = "acme"

    def openSSH(self, account: str, credential: str,
                transport: StringTransport | None = None) -> Deferred[Any]:
        """
        Open a channel's session for a client of C{account} that logged in with
        C{credential}; its end is connected to C{transport} (a new one by default) as
        soon as it comes, as the SSH connection connects its channel.
        """
        remote = self.forwarding.relay.remote
        assert remote is not None
        d = remote.openSSH(account, credential, "web", 3000, "SSH channel lost", "1.2.3.4:5")

        def connect(end: Any) -> Any:
            # The agent's answer (what an SSH channel's confirmation waits for): kept here.
            self.answers: list[Any] = []
            end.accepted.addBoth(self.answers.append)
            end.makeConnection(transport or StringTransport())
            return end

        d.addCallback(connect)
        self.pump()
        return d


class SSHAcrossReplicasTests(SSHAcrossReplicasCase):
    """
    An SSH client's C{-L}/C{-W} channel on replica C{b} for an agent replica C{a} holds
    (L{RemoteRoutes.openSSH}), and a plain session's client address, carried over the
    replica link; the holding replica finds the account itself.
    """

    def test_interface(self) -> None:
        """
        L{RemoteRoutes} provides L{IRemoteRoutes}.
        """
        self.assertTrue(verifyObject(IRemoteRoutes, self.forwarding.relay.remote))

    def test_publicKey(self) -> None:
        """
        A client logged in with a public key registered to acme reaches acme's agent: the
        holding replica opens C{tcp:3000@CLIENT} for an agent that writes PROXY headers,
        and bytes pass both ways.
        """
        self.agent(False, TcpShare(3000, e2ee=False, addressed=True))
        end = self.successResultOf(self.openSSH("acme", f"publickey:{BLOB}"))
        end.dataReceived(b"hello")
        self.pump()
        [session] = self.agentSide.sessions
        self.assertEqual(session.target, "tcp:3000@1.2.3.4:5")
        self.assertEqual(session.protocol.received, b"hello")
        self.assertEqual(self.targets, [
            f"replica-ssh:web:3000:publickey:{BLOB}@1.2.3.4:5", "replica-ssh:web:3000"])

    def test_password(self) -> None:
        """
        A client logged in with an API key as its password reaches its agent; one that does
        not write PROXY headers is not told the client's address.
        """
        self.agent(False, TcpShare(3000, e2ee=False))
        self.successResultOf(self.openSSH("acme", f"password:{self.keyA2}"))
        self.assertEqual([s.target for s in self.agentSide.sessions], ["tcp:3000"])

    def test_otherAccount(self) -> None:
        """
        Another account is refused on the forwarding replica in the one TCP route's words;
        when a forged record names its account, the holding replica, which asks its own
        store about the key, resets the session in the same words; an unknown key too.
        """
        self.agent(False, TcpShare(3000, e2ee=False))
        failure = self.failureResultOf(self.openSSH("other", f"publickey:{BLOB}"), RouteRefused)
        self.assertEqual(failure.value.reason, NOT_FOUND_REASON)
        self.holding.store.sshKeys[self.line] = "other"
        self.records.records["agent", "web"]["account"] = "other"
        for credential in (f"publickey:{BLOB}", "publickey:AAAA", f"password:{KEY}"):
            transport = _Aborting()
            self.successResultOf(self.openSSH("other", credential, transport))
            self.assertEqual(transport.aborted, (NOT_FOUND_CODE, NOT_FOUND_REASON), credential)
        self.assertEqual(self.agentSide.sessions, [])

    def test_e2eeOnly(self) -> None:
        """
        A port shared end-to-end encrypted is refused to an SSH client on the forwarding
        replica, in the words one relay uses.
        """
        self.agent(False)
        self.records.records["agent", "web"]["plain"] = ""
        failure = self.failureResultOf(self.openSSH("acme", f"publickey:{BLOB}"), RouteRefused)
        self.assertIn("end-to-end encrypted", failure.value.reason)
        self.assertEqual(self.agentSide.sessions, [])

    def test_clientAddressOfPlainSession(self) -> None:
        """
        A connector's plain session on replica C{b} carries its address to an agent on
        replica C{a} that writes PROXY headers.
        """
        self.agent(False, TcpShare(3000, addressed=True))
        self.open("tcp:web:3000")
        [session] = self.agentSide.sessions
        self.assertTrue(session.target.startswith("tcp:3000@"), session.target)
        self.assertNotIn("@", self.targets[1])


class SSHAcceptAcrossReplicasTests(SSHAcrossReplicasCase):
    """
    The forwarding replica learns the agent's answer to an SSH client's session (the end's
    C{accepted}, which the SSH channel's confirmation waits for): the holding replica
    accepts the replica link's session once the agent accepted its own, and passes a
    refusal back with the agent's code and words.
    """

    def setUp(self) -> None:
        super().setUp()
        self.agentSide = Held()
        self.agent(False, TcpShare(3000, e2ee=False))

    def opened(self) -> tuple[Any, list[Any]]:
        end = self.successResultOf(self.openSSH("acme", f"publickey:{BLOB}"))
        self.assertEqual([s.target for s in self.agentSide.sessions], ["tcp:3000"])
        return end, self.answers

    def test_accepted(self) -> None:
        """
        Nothing is answered until the agent accepts; then the forwarding replica knows.
        """
        _, results = self.opened()
        self.assertEqual(results, [])
        self.agentSide.sessions[0].confirm()
        self.pump()
        self.assertEqual(results, [None])

    def test_serviceDown(self) -> None:
        """
        The agent's C{CONNECT_FAILED} reset reaches the forwarding replica as the refusal.
        """
        _, results = self.opened()
        self.agentSide.sessions[0].abortWith(ErrorCode.CONNECT_FAILED,
                                             "service on port 3000 refused the connection")
        self.pump()
        [failure] = results
        self.assertTrue(failure.check(SessionResetError), failure)
        self.assertEqual((failure.value.code, failure.value.reason),
                         (ErrorCode.CONNECT_FAILED, "service on port 3000 refused the connection"))


class SSHKeysWhileStoreAwayTests(SSHAcrossReplicasCase):
    """
    The holding replica's check of a forwarded SSH client's public key while the
    directory cannot answer (L{SSHKeyCache}): a key it checked before and has not seen
    removed is taken; any other is refused with L{CANNOT_CHECK_SSH} (an SSH login's
    words, not API keys'), as without the cache.
    """

    def setUp(self) -> None:
        super().setUp()
        relay = self.holding.relay
        self.sshKeys = relay.sshKeys = SSHKeyCache(self.holding.clock, relay.storeHealth,
                                                   limit=60)
        self.sshKeys.log = relay.storeHealth.log = Logger(observer=lambda event: None)
        self.agent(False, TcpShare(3000, e2ee=False))

    def refused(self) -> tuple[int, str] | None:
        """
        How a channel of acme's key is reset, if it is (L{None}: it opened).
        """
        transport = _Aborting()
        self.successResultOf(self.openSSH("acme", f"publickey:{BLOB}", transport))
        return transport.aborted

    def test_knownKey(self) -> None:
        """
        A key checked by the holding replica before the outage opens channels during it,
        recalled from memory.
        """
        self.assertIsNone(self.refused())
        self.holding.store.error = StoreUnavailable("Redis at the test is not reachable")
        self.assertIsNone(self.refused())
        self.assertEqual((len(self.agentSide.sessions), self.sshKeys.recalled), (2, 1))

    def test_unknownKey(self) -> None:
        """
        A key the holding replica never checked is refused while the directory is away.
        """
        self.holding.store.error = StoreUnavailable("Redis at the test is not reachable")
        self.assertEqual(self.refused(), (ErrorCode.GOING_AWAY, CANNOT_CHECK_SSH))
        self.assertEqual(self.agentSide.sessions, [])

    def test_removedSeen(self) -> None:
        """
        A key the relay has seen removed (announced or polled: L{Relay.sshKeyRemoved}) is
        not taken from memory during the outage.
        """
        self.assertIsNone(self.refused())
        self.holding.relay.sshKeyRemoved(parse_ssh_public_key(self.line).fingerprint)
        self.holding.store.error = StoreUnavailable("Redis at the test is not reachable")
        self.assertEqual(self.refused(), (ErrorCode.GOING_AWAY, CANNOT_CHECK_SSH))
        self.assertEqual(len(self.agentSide.sessions), 1)


class _Aborting(StringTransport):
    """
    A client's transport that records the reset passed on to it.
    """

    aborted: tuple[int, str] | None = None

    def abortWith(self, code: int, reason: str) -> None:
        self.aborted = (code, reason)
        self.loseConnection()

    def unregisterProducer(self) -> None:
        """
        As a session does: nothing to unregister is not an error.
        """
        self.producer = None


class KeysWhileStoreAwayTests(AcrossReplicasCase):
    """
    The holding replica's check of a forwarded session's key while the directory cannot
    answer (L{KeyCache}): a key it checked before and has not seen revoked is taken; any
    other is refused with L{CANNOT_CHECK}, as without the cache.
    """

    def session(self, client: Any) -> Recorder:
        recorder = Recorder()
        client.link.openSession(client_target("web", 3000), recorder)
        self.pump()
        return recorder

    def away(self) -> None:
        self.holding.store.error = StoreUnavailable("Redis at the test is not reachable")

    def test_knownKey(self) -> None:
        """
        A key checked by the holding replica before the outage opens sessions during it,
        recalled from memory (the directory is not asked), with one info line per outage.
        """
        self.agent(resumes=False)
        client = self.forwarding.client(self.keyA2)
        self.assertIsNone(self.session(client).lost)
        events: list[dict[str, Any]] = []
        self.patch(ReplicaLinkHandler, "log", Logger(observer=events.append))
        self.away()
        for _ in range(2):
            self.assertIsNone(self.session(client).lost)
        self.assertEqual(len(self.agentSide.sessions), 3)
        self.assertEqual(self.keys.recalled, 2)
        infos = [e for e in events if e["log_level"].name == "info"]
        self.assertEqual(len(infos), 1)
        self.assertIn("checked within 60 s", infos[0]["log_format"].format(**infos[0]))

    def test_unknownKey(self) -> None:
        """
        A key the holding replica never checked is refused while the directory is away, in
        the words used without a cache.
        """
        self.agent(resumes=False)
        client = self.forwarding.client(self.keyA2)
        self.away()
        recorder = self.session(client)
        self.assertEqual(lost_reason(recorder.lost), (ErrorCode.GOING_AWAY, CANNOT_CHECK))
        self.assertEqual(self.agentSide.sessions, [])

    def test_revokedSeen(self) -> None:
        """
        A key the relay has seen revoked (announced or polled: L{Relay.revoke}) is never
        taken from memory, whether the revocation came before the outage or during it; its
        entry is dropped.
        """
        self.agent(resumes=False)
        client = self.forwarding.client(self.keyA2)
        other = self.forwarding.client(self.keyA)
        self.assertIsNone(self.session(client).lost)
        self.assertIsNone(self.session(other).lost)
        self.holding.relay.revoke(A2_KEY)  # before the outage
        self.away()
        self.assertEqual(lost_reason(self.session(client).lost),
                         (ErrorCode.GOING_AWAY, CANNOT_CHECK))
        self.holding.relay.revoke(A_KEY)  # during it
        self.assertEqual(lost_reason(self.session(other).lost),
                         (ErrorCode.GOING_AWAY, CANNOT_CHECK))
        self.assertEqual(len(self.keys), 0)
        self.assertEqual(len(self.agentSide.sessions), 2)
