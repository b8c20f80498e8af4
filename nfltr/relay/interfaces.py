# -*- test-case-name: tests.relay.test_holders -*-
"""
What the relay's parts promise each other, as zope Interfaces (as
magic-wormhole's transit relay reaches its session machine only through
C{ITransitClient}).

  - L{IAgentHolder}: who holds an agent: a native agent's link
    (L{nfltr.relay.link_handler.RelayLinkHandler}), an SSH connection
    (L{nfltr.relay.ssh._user.RelayUser}); later an agent on another replica.  It
    claims, replaces and releases its names only through the relay's one
    claim place (L{nfltr.relay.agents.Relay}: C{claimAgent},
    C{publishShares}, C{releaseAgent}, C{withdrawShares}), which refuses the
    holder it replaces; it opens sessions towards its service, is turned
    away with a reason, and reports its figures for the metrics.
  - L{ISessionOpener}: the one TCP route (L{nfltr.relay.tcp_route.TCPRoute}):
    what a client's session towards an agent's port goes through, whether
    the client is a native link (C{tcp-connect}) or an SSH C{-L}/C{-W}.
  - L{IShareRoutes}: the shares reachable by name on the TLS port.
  - L{IRemoteRoutes}: the routes to agents other replicas of a cluster hold
    (L{nfltr.relay.cluster.routes.RemoteRoutes}).
  - L{IPresence}: what the claim place tells the replicas that share a
    directory about the agents and shares it holds
    (L{nfltr.relay.cluster.presence}).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from twisted.internet.interfaces import IProtocol, ITransport
from zope.interface import Attribute, Interface

from nfltr.wire.resume import PLAIN

if TYPE_CHECKING:
    from collections.abc import Sequence

    from twisted.internet.defer import Deferred

    from nfltr.link import RefusalReason
    from nfltr.link.twisted import LinkSession
    from nfltr.sni.twisted import Route
    from nfltr.streams import SpliceEnd

Kind = Literal["link", "ssh", "replica"]
#: The holder kinds: a native agent's link, an SSH connection, an agent
#: another replica holds (reached over the replica link).
LINK: Kind = "link"
SSH: Kind = "ssh"
REPLICA: Kind = "replica"
KINDS: tuple[Kind, ...] = (LINK, SSH, REPLICA)


@dataclass(frozen=True)
class HolderFigures:
    """
    What a holder reports for the metrics, now.

    @ivar kind: L{LINK} or L{SSH}.
    @ivar sessions: sessions open towards the agent.
    @ivar bytesIn: bytes received on its connection, framing (and, for SSH,
        encryption) included.
    @ivar bytesOut: bytes sent on it, likewise.
    @ivar rtt: the last round-trip time measured on it, in seconds; L{None}
        when none was (yet, or ever: SSH connections).
    @ivar since: when it connected, in the relay clock's seconds.
    @ivar address: its peer's address (C{HOST:PORT}), if known.
    @ivar dataLinks: its extra data connections (a native agent's).
    """

    kind: Kind
    sessions: int
    bytesIn: int
    bytesOut: int
    rtt: float | None
    since: float
    address: str | None = None
    dataLinks: int = 0


class IAgentHolder(Interface):
    """
    Who holds an agent (a native link, an SSH connection): see the module.
    Every authenticated connection is one (the relay lists it under its key
    and may turn it away), whether it holds an agent name, shares, or
    nothing yet.
    """

    kind = Attribute("L{LINK}, L{SSH} or L{REPLICA}: what kind of connection holds the agent.")

    def canOpen() -> bool:
        """
        Whether L{openSession} may succeed now.
        """

    def openSession(target: str, protocol: IProtocol, firstBytes: bytes = b"",
                    wantAccept: bool = False) -> ITransport:
        """
        Open a session towards the agent's service (C{tcp:PORT},
        C{http:NAME}, C{share:NAME@VISITOR}) and connect C{protocol} to it
        at once: it may write before the agent answers.  C{firstBytes} go
        first.  With C{wantAccept}, the session returned provides
        L{nfltr.streams.windowed.IAcceptedSession}: its C{whenAccepted()}
        fires once the agent took the session (at once for a holder that
        cannot tell), or fails with its refusal.

        @return: the session, C{protocol}'s transport.
        @raise nfltr.link.twisted.LinkUnavailable: it cannot be opened now
            (the connection is draining, gone, or at its session limit; no
            such share or port).
        """

    def refuse(reason: RefusalReason, message: str) -> None:
        """
        Turn the connection away: tell its peer C{message} (for C{reason})
        in its protocol's way, give up its names (their leases run) and
        close.  Called by the relay when the holder's key is revoked, and
        with C{conflict} L{nfltr.relay.names.REPLACED} when a newer holder
        of the same account takes one of its names over.  Once done, later
        calls do nothing more.
        """

    def figures() -> HolderFigures:
        """
        Its figures now, for the metrics; from memory, at once.
        """


class ISessionOpener(Interface):
    """
    The one TCP route: opens a client's session towards an agent's TCP
    port under the ownership rule, for every client kind.
    """

    def openTCP(
        account: str, name: str, port: int, lostReason: str, plainOnly: bool = False,
        client: str | None = None, wantAccept: bool = False,
    ) -> IProtocol:
        """
        Open a session to port C{port} of agent C{name} for a client of
        C{account}, spliced to the protocol returned, which the caller
        connects to the client's side (a link session, an SSH channel).
        When the client's side ends with an error, the agent's session is
        reset naming C{lostReason}.  With C{plainOnly} (an SSH client, which
        cannot end the agent's TLS), only ports shared without end-to-end
        TLS may be reached.  C{client}, the client's C{HOST:PORT}, goes in
        the target if the agent asked for it (it writes PROXY headers).
        The outcome is counted (kind C{tcp}).  With C{wantAccept}, the
        protocol returned (a L{nfltr.relay.tcp_route.SessionEnd}) has
        C{accepted}: a Deferred that fires once the agent took the session
        (see L{IAgentHolder.openSession}); connect it only then.

        @raise nfltr.relay.tcp_route.RouteRefused: with the code and words
            for the client: the same for another account's agent, a missing
            agent and a port not shared.
        """

    def openOn(holder: IAgentHolder, target: str, clientEnd: SpliceEnd) -> SpliceEnd:
        """
        Open session C{target} towards C{holder}'s service (the holder of a
        public port: C{public:PORT@VISITOR}), spliced to C{clientEnd}, which
        the caller connects to the client's side and returns.  The outcome
        is counted (kind C{tcp}).

        @raise nfltr.relay.tcp_route.RouteRefused: the holder cannot open
            a session now.
        """


class IShareRoutes(Interface):
    """
    The shares reachable by name on the TLS port.
    """

    def route(name: str) -> Route | None:
        """
        The route of the share called C{name} (L{Splice} to its backend, or
        L{HandOver} to a protocol that ends its TLS), or L{None} if there is
        none now.  C{name} is one DNS label, lowercase (internationalised names
        as their C{xn--} A-label): what precedes the share domain in the
        server name.  Called once per visitor connection, on the reactor
        thread: answer at once, from memory.
        """


class IPresence(Interface):
    """
    What the relay's one claim place (L{nfltr.relay.agents.Relay}) tells the
    other replicas of a cluster about the agents and shares this relay
    holds: L{nfltr.relay.cluster.presence.RedisPresence} writes it to the
    shared directory; a relay of its own tells nobody
    (L{nfltr.relay.cluster.presence.NoPresence}).  Every call returns at
    once: writing happens in the background, and a failure never reaches
    the holder.
    """

    replica = Attribute("This replica's id (empty for a relay of its own).")

    def agentClaimed(entry: Any, shares: Sequence[str]) -> None:
        """
        C{entry} (an L{nfltr.relay.directory.AgentEntry}) holds its name on
        this replica now (its holder publishes the shares called C{shares});
        with a C{group}, other replicas may hold members of it too.
        """

    def agentReleased(entry: Any) -> None:
        """
        C{entry} (an L{nfltr.relay.directory.AgentEntry}) gave its name up
        (the last of its group's members on this replica).
        """

    def sharesPublished(account: str, shares: Sequence[tuple[str, str]],
                        plain: Sequence[str] = (), group: str | None = None) -> None:
        """
        A holder of C{account} publishes C{shares} (name, mode) on this
        replica now, in the load-balancing C{group} if any (other replicas
        may hold members too); those named in C{plain} are served in plain
        HTTP on the HTTP port too.
        """

    def sharesWithdrawn(names: Sequence[str]) -> None:
        """
        The shares C{names} are no longer published here.
        """

    def memberHealth(kind: str, name: str, withdrawn: bool) -> None:
        """
        Whether every member of the load-balancing group that holds the
        agent (C{kind} C{agent}) or share (C{share}) C{name} here withdrew
        its service (health checks failing; L{nfltr.relay.groups}): other
        replicas forward no visitor here while it did.  Nothing for a name
        without a group, or one not held here.
        """


class IRemoteRoutes(Interface):
    """
    The routes to agents other replicas of a cluster hold (the directory
    says which), for the clients of this one.
    """

    def routeTCP(session: LinkSession, key: str, account: str, name: str, port: int,
                 kind: str = PLAIN, client: str | None = None) -> None:
        """
        Route C{session}, a client's (of C{account}, logged in with C{key})
        to C{name}:C{port}, an agent this replica does not hold: accept it
        spliced to a session at the replica that holds it, or refuse it in
        the one TCP route's words; now or later.  C{kind}: C{tcp}, or a
        resumable session's C{rtcp} or C{resume} (L{nfltr.wire.resume}).
        C{client}: the client's C{HOST:PORT}, passed on for an agent that
        writes PROXY headers.
        """

    def openSSH(account: str, credential: str, name: str, port: int, lostReason: str,
                client: str | None) -> Deferred[SpliceEnd]:
        """
        Open an SSH client's session (of C{account}, which logged in with
        C{credential}: C{publickey:BLOB} or C{password:KEY}; from C{client})
        to C{name}:C{port}, an agent this replica does not hold, on a port
        shared without end-to-end TLS: the end to connect the client's
        channel to, or a L{nfltr.relay.tcp_route.RouteRefused} failure in
        the one TCP route's words (the holding replica checks the
        credential again and may still reset the session).
        """
