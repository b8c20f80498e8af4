# -*- test-case-name: tests.relay.test_holders -*-
"""
The one TCP route (L{TCPRoute}, an L{ISessionOpener}): a client's session
towards an agent's TCP port, for native clients (C{tcp-connect}, over a
link), SSH clients (C{ssh -L}/C{-W}, over a C{direct-tcpip} channel) and
the visitors of public ports (L{nfltr.relay.public_listener}) alike,
opened through the agent's holder (L{IAgentHolder.openSession}).

The client's side and the agent's are spliced (L{nfltr.streams}): bytes,
backpressure and half-close travel both ways.  When one side's session is reset (the agent
could not reach its service, the client gave up), the other side's session
is reset with the same code and reason (through L{nfltr.wire.peerText}: one
peer's words reach the other as one short printable line), so the client
learns why; when one side's link is lost, the other side's session is reset
with C{CANCEL}.
"""

from __future__ import annotations

from twisted.internet import error
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.link import ErrorCode
from nfltr.link.twisted import LinkUnavailable, SessionResetError
from nfltr.streams import SpliceEnd
from nfltr.streams.windowed import IAcceptedSession
from nfltr.wire import peerText
from nfltr.wire.messages import NOT_FOUND_CODE, NOT_FOUND_REASON, agent_target
from nfltr.wire.resume import RESUME_UNSUPPORTED, agent_resume_target

from .counters import AGENT_UNAVAILABLE as UNAVAILABLE_OUTCOME
from .counters import NOT_FOUND, ROUTED, TCP, RelayCounters
from .directory import AgentEntry, Directory
from .interfaces import IAgentHolder, ISessionOpener

AGENT_UNAVAILABLE = "agent unavailable (draining, or at its session limit)"
#: What a client that cannot end the agent's TLS (an SSH client) is told
#: for a port shared end-to-end encrypted.
E2EE_ONLY = "{name}:{port} is shared end-to-end encrypted: reach it with nfltr tcp-connect " \
            "(the agent shares it to SSH clients with --e2ee false)"


class SessionEnd(SpliceEnd):
    """
    One end of a spliced pair of link sessions.  Ends the other session the
    way this one ended: cleanly, with the same reset, or with C{CANCEL}
    naming C{lostReason}.

    @ivar lostReason: the reason given to the other side when this side's
        session ends with an error that is not a reset.
    """

    #: With C{wantAccept} (L{TCPRoute.openOn}), on the client's end: fires
    #: once the agent's end was accepted, or fails with its refusal.
    accepted: Deferred[None] | None = None

    def __init__(self, lostReason: str) -> None:
        super().__init__()
        self.lostReason = lostReason

    def connectionLost(self, reason: Failure = error.ConnectionDone) -> None:  # type: ignore[assignment]
        """
        Pass a reset on with its code and reason, then close as a splice end
        does.
        """
        other = self.other
        if not reason.check(error.ConnectionDone) and other is not None and (
            other.connected and not other.closed
        ):
            abortWith = getattr(other.transport, "abortWith", None)
            if abortWith is not None:
                value = reason.value
                if isinstance(value, SessionResetError):
                    code, why = value.code, peerText(value.reason)
                else:
                    code, why = ErrorCode.CANCEL, self.lostReason
                self.leaveOther()
                # Closed first: the other end's connectionLost, which the
                # abort may call at once, must not act on this end.
                self.closed = True
                abortWith(code, why)
        super().connectionLost(reason)


class RouteRefused(Exception):
    """
    A client's TCP session is not routed.

    @ivar code: the link error code for a client over a link (the
        not-found code, or C{GOING_AWAY} for an agent that cannot take
        sessions now: not the service's refusal, C{CONNECT_FAILED}, which
        only the agent can report).
    @ivar reason: the words for the client.
    """

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@implementer(ISessionOpener)
class TCPRoute:
    """
    The relay's one TCP route; see the module.

    @ivar directory: the connected agents.
    @ivar counters: where outcomes are counted.
    """

    def __init__(self, directory: Directory, counters: RelayCounters) -> None:
        self.directory = directory
        self.counters = counters

    def openTCP(
        self, account: str, name: str, port: int, lostReason: str, plainOnly: bool = False,
        client: str | None = None, wantAccept: bool = False,
    ) -> SpliceEnd:
        """
        See L{ISessionOpener.openTCP}.
        """
        entry = self.directory.reachable(name, account, port)
        if entry is None:
            self.counters.session(TCP, NOT_FOUND)
            raise RouteRefused(NOT_FOUND_CODE, NOT_FOUND_REASON)
        return self.openEntry(entry, port, lostReason, plainOnly, client, wantAccept)

    def openEntry(
        self, entry: AgentEntry, port: int, lostReason: str, plainOnly: bool = False,
        client: str | None = None, wantAccept: bool = False,
    ) -> SpliceEnd:
        """
        Open a session to port C{port} of the agent C{entry} (found under the
        ownership rule: here by L{openTCP}, or for an agent another replica
        holds by L{nfltr.relay.cluster.routes}), spliced to the protocol
        returned; see L{openTCP}.
        """
        name = entry.name
        if plainOnly and port not in entry.plain:
            raise RouteRefused(ErrorCode.REFUSED, E2EE_ONLY.format(name=name, port=port))
        target = agent_target(port, client if port in entry.addressed else None)
        return self.openOn(entry.holder, target, SessionEnd(lostReason), wantAccept)

    def openResumable(
        self, account: str, kind: str, name: str, port: int, lostReason: str,
    ) -> SpliceEnd:
        """
        Open a resumable session (C{kind} C{rtcp}) or a resumption (C{resume}) to port C{port}
        of the agent C{name}, under the rule of L{openTCP}: the agent of C{account} only, which
        is what binds a resume token to its account. An agent that does not resume sessions,
        or a port it shares C{addressed} (its sessions name the client, for a PROXY header),
        refuses it with L{RESUME_UNSUPPORTED} (the connector falls back to plain sessions).
        """
        entry = self.directory.reachable(name, account, port)
        if entry is None:
            self.counters.session(TCP, NOT_FOUND)
            raise RouteRefused(NOT_FOUND_CODE, NOT_FOUND_REASON)
        return self.openResumableEntry(entry, kind, port, lostReason)

    def openResumableEntry(
        self, entry: AgentEntry, kind: str, port: int, lostReason: str,
    ) -> SpliceEnd:
        """
        Open a resumable session or a resumption to port C{port} of the agent C{entry} (found
        under the ownership rule: here by L{openResumable}, or for an agent another replica
        holds by L{nfltr.relay.cluster.routes}); see L{openResumable}.
        """
        if not entry.resumes or port in entry.addressed:
            raise RouteRefused(ErrorCode.REFUSED, RESUME_UNSUPPORTED)
        return self.openOn(entry.holder, agent_resume_target(kind, port), SessionEnd(lostReason))

    def openOn(self, holder: IAgentHolder, target: str, clientEnd: SpliceEnd,
               wantAccept: bool = False) -> SpliceEnd:
        """
        See L{ISessionOpener.openOn}; with C{wantAccept}, C{clientEnd}'s
        C{accepted} waits for the agent's answer (L{SessionEnd.accepted}).
        """
        agentEnd = SessionEnd("agent link lost")
        clientEnd.other, agentEnd.other = agentEnd, clientEnd
        try:
            session = holder.openSession(target, agentEnd, wantAccept=wantAccept)
        except LinkUnavailable:
            agentEnd.closed = True
        else:
            if wantAccept and isinstance(clientEnd, SessionEnd):
                clientEnd.accepted = IAcceptedSession(session).whenAccepted()
        if agentEnd.closed:
            # Unavailable, or its connection went away while the open was
            # being prepared.
            if isinstance(clientEnd, SessionEnd) and clientEnd.accepted is not None:
                clientEnd.accepted.addErrback(lambda _: None)  # told as RouteRefused
            self.counters.session(TCP, UNAVAILABLE_OUTCOME)
            raise RouteRefused(ErrorCode.GOING_AWAY, AGENT_UNAVAILABLE)
        self.counters.session(TCP, ROUTED)
        return clientEnd
