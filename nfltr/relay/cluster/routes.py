# -*- test-case-name: tests.relay.cluster -*-
"""
The forwarding replica's side: visitors of agents and shares this replica
does not hold, carried over the replica link to the replica the directory
says holds them.

  - L{RemoteRoutes.routeTCP}: a client's session for an agent that is not
    here: the agent's presence record names its replica (and, as a first
    filter, its account and ports: a session the record already rules out
    is refused here, in the one TCP route's words); the session is opened
    through a L{ReplicaHolder} by the one TCP route
    (L{nfltr.relay.tcp_route.TCPRoute.openEntry}) and carries the client's
    key, which the holding replica checks again.  A resumable session
    (C{rtcp}) or a resumption (C{resume}) goes the same way
    (L{nfltr.relay.tcp_route.TCPRoute.openResumableEntry}); whether the
    agent resumes sessions is the holding replica's to say.  The client's
    address travels with a plain session, for an agent that writes PROXY
    headers.
  - L{RemoteRoutes.openSSH}: an SSH client's C{ssh -L}/C{-W} channel, the
    same way, with the public key it logged in with (or the API key it gave
    as its password), to ports shared without end-to-end TLS only.
  - L{ClusterShareRoutes}: the TLS port's routing table: this replica's
    shares first; any other name waits for a look-up in the directory
    (a L{Later} route; the visitor is not read meanwhile): a share another
    replica publishes is spliced to L{RemoteShareBackend}, which forwards
    the visitor's raw bytes, in every mode (the holding replica ends an
    C{inspect} share's TLS itself, with the key it holds, and applies its
    policy); a name no replica publishes gets the C{unrecognized_name}
    alert, as on one relay, counted alike; a name the directory cannot
    look up is closed without an answer (it may exist elsewhere).

A load-balancing group's record names every replica that holds a member
(L{nfltr.relay.cluster.presence}): a visitor goes to them in turn
(L{RemoteRoutes.link}), to the next when one cannot be reached (a replica
that was killed refuses the dial at once, or does not answer within the
dial timeout), so a dead replica's members cost no visitor once its link is
found gone, and leave the record within the presence TTL.  This replica's
own members come first: a visitor reaches the cluster's routes only when
no member is held here, or every one here withdrew its service (health
checks failing; a replica whose every member withdrew says so in the
record, and is left out).

While no replica holds a member that serves (every one withdrew), a
visitor gets what one relay answers, through every replica: a replica
whose members all withdrew answers its own visitors itself (an C{inspect}
or plain-HTTP share's C{503}, after the look-up found nobody to forward
to); a replica that holds none carries an C{inspect} or plain-HTTP
share's visitor to a replica whose members withdrew
(L{SharePresence.withdrawn}), whose proxy answers the C{503} (only it can
end the share's TLS: it holds the key); an C{e2ee} or C{passthrough}
share's visitor is closed, as on one relay.

The visitor waits for the lookup and the link (bounded: the directory's
command timeout, L{nfltr.relay.cluster.peers.DIAL_TIMEOUT} per replica
tried); whatever fails, the visitor is refused (a share whose every member
here withdrew: with this replica's own answer), never held.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.interfaces import IAddress, IProtocol, IReactorTime
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.link import ErrorCode
from nfltr.link.twisted import LinkProtocol, LinkSession, LinkUnavailable
from nfltr.sni.twisted import REFUSE, HandOver, ISpliceBackend, Later, Refuse, Route, Splice
from nfltr.store import StoreUnavailable
from nfltr.streams import SpliceEnd
from nfltr.wire import format_address
from nfltr.wire.messages import (
    E2EE,
    INSPECT,
    NOT_FOUND_CODE,
    NOT_FOUND_REASON,
    PASSTHROUGH,
    share_target,
)
from nfltr.wire.resume import PLAIN

from ..agents import Relay
from ..counters import AGENT_UNAVAILABLE as UNAVAILABLE_OUTCOME
from ..counters import NOT_FOUND, ROUTED, SHARE, TCP
from ..directory import AgentEntry
from ..interfaces import IRemoteRoutes, IShareRoutes
from ..shares import ShareRegistry
from ..tcp_route import AGENT_UNAVAILABLE, RouteRefused
from .holder import ReplicaHolder, plain_target
from .peers import Peers, PeerUnreachable
from .presence import AGENT, AgentPresence, RedisPresence, SharePresence
from .presence import SHARE as SHARE_RECORD

CANNOT_LOOK_UP = "the relay cannot look agents up now; try again later"
#: Names of groups whose turn is kept (L{RemoteRoutes.link}), at most.
TURNS_KEPT = 4096
#: The share modes whose visitors another replica carries (as raw bytes: the
#: holding replica ends an inspect share's TLS itself).
FORWARDED_MODES = (E2EE, PASSTHROUGH, INSPECT)


@implementer(IRemoteRoutes)
class RemoteRoutes:
    """
    Routes to the agents and shares other replicas hold; see the module.
    """

    log = Logger()

    def __init__(self, relay: Relay, presence: RedisPresence, peers: Peers,
                 clock: IReactorTime) -> None:
        """
        The sessions forwarded are counted in C{peers.counters}.
        """
        self.relay = relay
        self.presence = presence
        self.peers = peers
        self.clock = clock
        # The next turn of each name forwarded to a group (the least recently used forgotten).
        self._turns: OrderedDict[tuple[str, str], int] = OrderedDict()

    def others(self, record: AgentPresence | SharePresence) -> list[str]:
        """
        The replicas other than this one that hold what C{record} names.
        """
        return [r for r in record.replicas() if r != self.presence.replica]

    def link(self, kind: str, name: str, replicas: list[str]) -> Deferred[LinkProtocol]:
        """
        A link to one of C{replicas}, which hold C{kind} (C{agent},
        C{share}) C{name} (a group's members' replicas): each call for the
        name starts at the next one in turn; one that cannot be reached
        (L{PeerUnreachable}) is passed over for the next.
        """
        if not replicas:
            return fail(PeerUnreachable("no other replica holds it"))
        order = replicas
        if len(replicas) > 1:
            turns, key = self._turns, (kind, name)
            turn = turns.pop(key, 0)
            turns[key] = turn + 1
            if len(turns) > TURNS_KEPT:
                turns.popitem(last=False)
            start = turn % len(replicas)
            order = replicas[start:] + replicas[:start]

        async def first() -> LinkProtocol:
            for replica in order[:-1]:
                try:
                    return await self.peers.link(replica)
                except PeerUnreachable:
                    continue
            return await self.peers.link(order[-1])

        return Deferred.fromCoroutine(first())

    def routeTCP(self, session: LinkSession, key: str, account: str, name: str,
                 port: int, kind: str = PLAIN, client: str | None = None) -> None:
        """
        Route a client's session (of C{account}, which logged in with
        C{key}; of C{kind}: C{tcp}, C{rtcp}, C{resume}; from C{client}'s
        C{HOST:PORT}) to C{name}:C{port}, held by another replica or by none.
        """
        def opened(found: tuple[LinkProtocol, AgentPresence]) -> None:
            link, record = found
            holder = ReplicaHolder(link, name, key, self.clock.seconds())
            entry = _entry(name, record, holder, addressed=kind == PLAIN)
            route = self.relay.tcp
            try:
                if kind == PLAIN:
                    end = route.openEntry(entry, port, "client link lost", client=client)
                else:
                    end = route.openResumableEntry(entry, kind, port, "client link lost")
            except RouteRefused as e:
                session.refuse(e.code, e.reason)
                return
            self.peers.counters.forwarded["tcp"] += 1
            session.accept(end)

        def refused(failure: Failure) -> None:
            failure.trap(RouteRefused)
            assert isinstance(failure.value, RouteRefused)
            session.refuse(failure.value.code, failure.value.reason)

        self._reach(account, name, port).addCallbacks(opened, refused)

    def openSSH(self, account: str, credential: str, name: str, port: int, lostReason: str,
                client: str | None) -> Deferred[SpliceEnd]:
        """
        See L{IRemoteRoutes.openSSH}.
        """
        def opened(found: tuple[LinkProtocol, AgentPresence]) -> SpliceEnd:
            link, record = found
            holder = ReplicaHolder(link, name, None, self.clock.seconds(), ssh=credential)
            # wantAccept: the SSH channel is confirmed once the agent took the session.
            end = self.relay.tcp.openEntry(_entry(name, record, holder, True), port, lostReason,
                                           plainOnly=True, client=client, wantAccept=True)
            self.peers.counters.forwarded["ssh"] += 1
            return end

        return self._reach(account, name, port).addCallback(opened)

    def _reach(self, account: str, name: str, port: int,
               ) -> Deferred[tuple[LinkProtocol, AgentPresence]]:
        """
        A replica link to the replica that holds C{name}, and the agent's
        presence record; a L{RouteRefused} failure in the one TCP route's
        words for an agent the record rules out for C{account} and C{port}
        (the holding replica checks again), or one that cannot be reached.
        """
        def found(record: AgentPresence | None) -> Any:
            if (record is None or not self.others(record)
                    or record.account != account or port not in record.ports):
                self.relay.counters.session(TCP, NOT_FOUND)
                raise RouteRefused(NOT_FOUND_CODE, NOT_FOUND_REASON)
            return self.link(AGENT, name, self.others(record)).addCallback(
                lambda link: (link, record))

        def failed(failure: Failure) -> Failure:
            if failure.check(RouteRefused):
                return failure
            self.log.debug("session to {name}:{port} not forwarded: {error}", name=name,
                           port=port, error=failure.getErrorMessage())
            self.relay.counters.session(TCP, UNAVAILABLE_OUTCOME)
            why = CANNOT_LOOK_UP if failure.check(StoreUnavailable) else AGENT_UNAVAILABLE
            return Failure(RouteRefused(ErrorCode.GOING_AWAY, why))

        return self.presence.agent(name).addCallback(found).addErrback(failed)


def _entry(name: str, record: AgentPresence, holder: ReplicaHolder,
           addressed: bool) -> AgentEntry:
    """
    The agent C{record} describes, reached through C{holder}.  If
    C{addressed} (a plain session), every port is named C{addressed}, so
    that the client's address travels: the holding replica, which knows
    which ports want it (PROXY headers), passes it on or drops it.  It
    resumes: the holding replica refuses a resumable session its agent
    cannot take.
    """
    return AgentEntry(name, record.account, "", record.ports, holder, plain=record.plain,
                      addressed=record.ports if addressed else frozenset(), resumes=True)


def withdrawn_others(routes: RemoteRoutes, record: SharePresence) -> list[str]:
    """
    The replicas other than this one whose every member of C{record}'s
    group withdrew its service: they answer its visitors as one relay does.
    """
    return [r for r in record.withdrawn if r != routes.presence.replica]


def publishers(routes: RemoteRoutes, record: SharePresence) -> list[str]:
    """
    The replicas other than this one that publish C{record}'s share, its
    members serving or withdrawn; none: no replica publishes it (a record
    that names only this one, which does not, is on its way out).
    """
    return [r for r in (*record.replicas(), *record.withdrawn) if r != routes.presence.replica]


@implementer(ISpliceBackend)
class RemoteShareBackend:
    """
    A share this replica does not publish, which the directory's C{record}
    says another replica does: its visitor goes to a replica that publishes
    it.  While no replica holds a member that serves, an C{inspect} share's
    goes to one whose members withdrew, which ends its TLS and answers
    C{503}; an C{e2ee} or C{passthrough} share's is closed, as on one relay.
    """

    def __init__(self, name: str, routes: RemoteRoutes, record: SharePresence) -> None:
        self.name = name
        self.routes = routes
        self.record = record

    def connect(self, protocol: IProtocol, visitor: IAddress) -> None:
        """
        See L{ISpliceBackend.connect}: over a replica link.
        """
        routes, record = self.routes, self.record
        counters = routes.relay.counters

        def opened(link: LinkProtocol) -> None:
            holder = ReplicaHolder(link, self.name, None, routes.clock.seconds())
            holder.openSession(share_target(self.name, format_address(visitor)), protocol)
            counters.session(SHARE, ROUTED)
            routes.peers.counters.forwarded["share"] += 1

        def failed(failure: Failure) -> None:
            counters.session(SHARE, UNAVAILABLE_OUTCOME)
            protocol.connectionLost(Failure(ConnectionRefusedError(failure.getErrorMessage())))

        replicas = []
        if record.mode in FORWARDED_MODES:
            replicas = routes.others(record)
            if not replicas and record.mode == INSPECT:
                replicas = withdrawn_others(routes, record)
        if not replicas:
            counters.session(SHARE, NOT_FOUND)
            protocol.connectionLost(Failure(ConnectionRefusedError("no replica serves the share")))
            return
        routes.link(SHARE_RECORD, self.name, replicas).addCallback(opened).addErrback(failed)


@implementer(ISpliceBackend)
class UnansweredShareBackend:
    """
    A share name this replica does not publish, which the directory could
    not look up (C{why}): it may be published elsewhere, so its visitor is
    refused as every visitor of a name the replica cannot look up is: closed
    without an answer (no C{unrecognized_name}, which would say there is no
    such share).
    """

    def __init__(self, routes: RemoteRoutes, why: str) -> None:
        self.routes = routes
        self.why = why

    def connect(self, protocol: IProtocol, visitor: IAddress) -> None:
        """
        See L{ISpliceBackend.connect}: refused at once.
        """
        self.routes.relay.counters.session(SHARE, UNAVAILABLE_OUTCOME)
        protocol.connectionLost(Failure(ConnectionRefusedError(self.why)))


class ForwardedPlainFactory(Factory):
    """
    The visitors of the plain-HTTP URL of the share C{name}, which the
    replica at the other end of C{link} publishes: each connection, its
    bytes as they came (the first request's head included), spliced to a
    C{plain:NAME@VISITOR} session there.
    """

    noisy = False

    def __init__(self, link: LinkProtocol, name: str, routes: RemoteRoutes) -> None:
        self.link = link
        self.name = name
        self.routes = routes

    def buildProtocol(self, addr: IAddress | None) -> SpliceEnd | None:
        """
        The visitor's end, spliced to a session on the link; L{None} (the
        connection is closed) if the link cannot open one.
        """
        visitor, remote = SpliceEnd(), SpliceEnd()
        visitor.other, remote.other = remote, visitor
        holder = ReplicaHolder(self.link, self.name, None, self.routes.clock.seconds())
        try:
            holder.openSession(plain_target(self.name, format_address(addr)), remote)
        except LinkUnavailable:
            return None
        self.routes.peers.counters.forwarded["share"] += 1
        return visitor


class ClusterPlainRoutes:
    """
    The HTTP port's choice on a replica (a L{nfltr.relay.vhost.Chooser}):
    this replica's plain-HTTP shares first (unless every holder here
    withdrew its service); a host under the share domain
    that names none of them waits for the directory: a share another
    replica publishes in plain HTTP is forwarded there
    (L{ForwardedPlainFactory}), to a replica whose members withdrew if no
    replica holds one that serves (its proxy answers 503); anything else
    is redirected to HTTPS, as on one relay.
    """

    def __init__(self, shares: ShareRegistry, routes: RemoteRoutes) -> None:
        self.shares = shares
        self.routes = routes

    def __call__(self, host: str) -> Any:
        """
        A factory, L{None} (the redirect), or a Deferred of either.
        """
        local = self.shares.plainRoute(host)
        name = self.shares.shareName(host)
        if name is None or (local is not None and not self.shares.groupWithdrawn(name)):
            return local
        routes = self.routes

        def found(record: SharePresence | None) -> Any:
            if record is None or not record.plain:
                return local  # the redirect
            replicas = routes.others(record)
            if not replicas and local is None:
                replicas = withdrawn_others(routes, record)  # they answer 503
            if not replicas:
                return local  # here, every holder withdrew: its 503; else the redirect
            return routes.link(SHARE_RECORD, name, replicas).addCallback(
                lambda link: ForwardedPlainFactory(link, name, routes))

        def failed(failure: Failure) -> Any:
            routes.log.debug("plain-HTTP visitor of {name} not forwarded: {error}", name=name,
                             error=failure.getErrorMessage())
            return local

        return routes.presence.share(name).addCallback(found).addErrback(failed)


@implementer(IShareRoutes)
class ClusterShareRoutes:
    """
    The TLS port's routing table on a replica: the local one first, then
    the cluster's.
    """

    def __init__(self, local: IShareRoutes, routes: RemoteRoutes) -> None:
        self.local = local
        self.routes = routes

    def route(self, name: str) -> Route | None:
        """
        See L{IShareRoutes.route}: a share not published here goes where
        the directory says, after a look-up (L{Later}; see L{_remote}); a
        group's share whose every member here withdrew its service goes to
        the other replicas' members, after a look-up too; with none that
        serves (or no answer), to this replica's own route, which answers
        as one relay does (an C{inspect} share's C{503}).
        """
        route = self.local.route(name)
        shares = self.routes.relay.shares
        if route is not None and (shares is None or not shares.groupWithdrawn(name)):
            return route
        if route is None or isinstance(route, Later):
            return Later(self._remote(name))
        return Later(self._elsewhere(name, route))

    def _remote(self, name: str) -> Deferred[HandOver | Splice | Refuse]:
        """
        The route of a share this replica does not publish: to the replicas
        the directory says publish it; the C{unrecognized_name} refusal, as
        on one relay, if none does; closed without an answer if the
        directory cannot say (L{UnansweredShareBackend}).
        """
        routes = self.routes

        def found(record: SharePresence | None) -> HandOver | Splice | Refuse:
            if record is None or not publishers(routes, record):
                return REFUSE
            return Splice(RemoteShareBackend(name, routes, record))

        def failed(failure: Failure) -> HandOver | Splice | Refuse:
            routes.log.debug("visitor of {name} not forwarded: {error}", name=name,
                             error=failure.getErrorMessage())
            return Splice(UnansweredShareBackend(routes, failure.getErrorMessage()))

        return routes.presence.share(name).addCallbacks(found, failed)

    def _elsewhere(self, name: str, local: HandOver | Splice | Refuse,
                   ) -> Deferred[HandOver | Splice | Refuse]:
        """
        The route of a share whose every member here withdrew: to another
        replica's members that serve, if the directory names any; else
        C{local}.
        """
        routes = self.routes

        def found(record: SharePresence | None) -> HandOver | Splice | Refuse:
            if record is None or record.mode not in FORWARDED_MODES or not routes.others(record):
                return local
            return Splice(RemoteShareBackend(name, routes, record))

        def failed(failure: Failure) -> HandOver | Splice | Refuse:
            routes.log.debug("visitor of {name} not forwarded: {error}", name=name,
                             error=failure.getErrorMessage())
            return local

        return routes.presence.share(name).addCallbacks(found, failed)
