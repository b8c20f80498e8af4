# -*- test-case-name: tests.relay.test_shares -*-
"""
The share URLs an agent publishes, and where the TLS port sends their
visitors.

An agent's hello lists its shares (L{nfltr.wire.messages.HttpShare}); once its
key is verified the handler calls L{ShareRegistry.publish}, which checks
every name (the ownership rule of L{nfltr.relay.names}, a name that is the
relay's own),
signs the C{e2ee} shares' requests with the share CA, then installs one route
per share, all or none:

  - C{e2ee} and C{passthrough}: the visitor's raw bytes are spliced to a
    session C{share:NAME@VISITOR} on the agent's link (L{AgentShareBackend}):
    the relay reads nothing but the ClientHello;
  - C{inspect}: the relay ends TLS with a certificate for the share (key in
    memory) and proxies HTTP (L{nfltr.http}), adding C{X-Forwarded-For} and
    C{Forwarded}, over sessions C{http:NAME} on the agent's link.

A share that asks for plain HTTP (C{plain}, not for C{passthrough}) is also
served on the relay's HTTP port by the same kind of proxy
(L{ShareRegistry.plainRoute}, used by L{nfltr.relay.vhost}).

A route belongs to the link that published it: a newer agent of the same
account publishing the same name takes the route over, and a link that ends
removes only the routes it still holds.  An C{inspect} share whose service
speaks h2c keeps a pool of h2c sessions (L{nfltr.http.h2c}); when the share
is withdrawn or taken over, they are closed once their streams are done
(an idle one at once) and the pool makes no more; when one member of its
group leaves, they take no new stream and close the same way, the next
stream getting a session on a member left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from twisted.internet import defer, interfaces
from twisted.internet.error import ConnectionRefusedError
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.http import Gate, HTTPProxyFactory
from nfltr.link import RefusalReason
from nfltr.link.twisted import LinkUnavailable
from nfltr.sni.twisted import HandOver, ISpliceBackend, Route, Splice
from nfltr.streams import TokenBucket
from nfltr.tls import ShareCA, ShareCertError
from nfltr.wire import format_address
from nfltr.wire.h2limits import DEFAULT_H2_LIMITS
from nfltr.wire.messages import E2EE, INSPECT, OPEN, HttpShare, http_target, share_target
from nfltr.wire.policy import Denial, SharePolicy

from .certs import RelayCertificate
from .counters import AGENT_UNAVAILABLE, HTTP, NOT_ALLOWED, ROUTED, SHARE, RelayCounters
from .groups import HolderGroup, HolderHealth
from .interfaces import IShareRoutes
from .leases import ILeases, Leases
from .names import ClaimRefused, check_name_free
from .share_policy import AllowListFactory, allowed, enforcement_problem
from .share_routes import ShareRoutes

HTTPS_PORT = 443
HTTP_PORT = 80


class ShareRefused(ClaimRefused):
    """
    A hello's shares cannot be published; the text says why, for the agent.
    """


@implementer(ISpliceBackend)
class AgentShareBackend:
    """
    Splices a share's visitors to sessions on the agent's link.

    @ivar link: returns the agent's link (L{None} once it is gone).
    """

    def __init__(
        self, name: str, link: Callable[[], Any], policy: SharePolicy = OPEN,
        counters: RelayCounters | None = None,
    ) -> None:
        self.name = name
        self.link = link
        self.policy = policy
        self.counters = counters or RelayCounters()

    def connect(self, protocol: interfaces.IProtocol, visitor: Any) -> None:
        """
        See L{ISpliceBackend.connect}.  A visitor outside the share's allow
        list is turned away here, before anything reaches the agent.
        """
        if not allowed(self.policy, visitor):
            self.counters.session(SHARE, NOT_ALLOWED)
            protocol.connectionLost(Failure(ConnectionRefusedError("not on the allow list")))
            return
        link = self.link()
        try:
            if link is None:
                raise LinkUnavailable("the agent's link is gone")
            link.openSession(share_target(self.name, format_address(visitor)), protocol)
        except LinkUnavailable as e:
            self.counters.session(SHARE, AGENT_UNAVAILABLE)
            protocol.connectionLost(Failure(ConnectionRefusedError(str(e))))
            return
        self.counters.session(SHARE, ROUTED)


class LinkSessionBackend:
    """
    The backend of the relay's HTTP proxy for a share: each connection is a
    new session C{http:NAME} on the agent's link.
    """

    def __init__(
        self, name: str, link: Callable[[], Any], counters: RelayCounters | None = None,
        visitor: str | None = None,
    ) -> None:
        """
        @param visitor: the visitor whose connection the sessions serve, named
            in their targets (a share declared C{addressed}), if any.
        """
        self.name = name
        self.link = link
        self.counters = counters or RelayCounters()
        self.visitor = visitor

    def connect(self, protocol: interfaces.IProtocol) -> defer.Deferred[Any]:
        """
        Open a session for C{protocol}; fails if the agent's link is gone
        or draining.
        """
        link = self.link()
        try:
            if link is None:
                raise LinkUnavailable("the agent's link is gone")
            link.openSession(http_target(self.name, self.visitor), protocol)
        except LinkUnavailable as e:
            self.counters.session(HTTP, AGENT_UNAVAILABLE)
            return defer.fail(ConnectionRefusedError(str(e)))
        self.counters.session(HTTP, ROUTED)
        return defer.succeed(protocol)


@dataclass(eq=False)
class ShareEntry:
    """
    One published share.

    @ivar holder: the link handler that published it.
    @ivar route: where the TLS port sends its visitors.
    @ivar plain: serves it in plain HTTP on the HTTP port, if it asked.
    @ivar share: what the agent asked for (its policy, its credentials' kinds).
    @ivar members: the holders that publish it (a load-balancing group's, in
        turn; else C{holder} alone); C{holder} is the first of them.
    @ivar proxy: an C{inspect} share's HTTP proxy (its h2c sessions, if its
        service speaks h2c).
    """

    name: str
    account: str
    mode: str
    holder: Any
    route: Route
    plain: interfaces.IProtocolFactory | None = None
    share: HttpShare | None = None
    members: HolderGroup[Any] | None = None
    proxy: HTTPProxyFactory | None = None

    def retire(self) -> None:
        """
        Withdrawn or taken over: its h2c sessions close once their streams
        are done, and no more are made.
        """
        if self.proxy is not None:
            self.proxy.retire()

    def memberLeft(self) -> None:
        """
        A member left: its h2c sessions take no new stream (some are on the
        member's link) and close once their streams are done.
        """
        if self.proxy is not None and self.proxy.services is not None:
            self.proxy.services.drain()


@implementer(IShareRoutes)
class ShareRegistry:
    """
    The shares of one relay: leases, routes, certificates.

    @ivar counters: the relay's running totals (shared with its L{Relay}).
    @ivar inspectRate: requests per second and burst each share may take
        through the relay's HTTP proxy (C{inspect}, plain HTTP); L{None}:
        no limit.
    @ivar port: the HTTPS port share URLs name.
    @ivar httpPort: the HTTP port's, if there is one.
    """

    def __init__(
        self, ca: ShareCA | None, clock: interfaces.IReactorTime, own: Iterable[str],
        leases: ILeases | None = None, static: ShareRoutes | None = None,
        operator: RelayCertificate | None = None,
    ) -> None:
        """
        @param ca: signs share certificates (L{None}: only fixed routes).
        @param own: the relay's own names: no share may be called so.
        @param static: fixed routes (see L{add}).
        @param operator: the operator's certificate (C{--cert}); it serves
            the C{inspect} shares it covers.
        """
        self.operator = operator
        self.ca = ca
        self.clock = clock
        self.own = frozenset(own)
        self.leases: ILeases = leases if leases is not None else Leases()
        self.port = HTTPS_PORT
        self.httpPort: int | None = None
        self.inspectRate: tuple[float, int] | None = None
        #: The limits of HTTP/2 on inspect shares (the relay ends TLS).
        self.h2limits = DEFAULT_H2_LIMITS
        self.counters = RelayCounters()
        self.static = static if static is not None else ShareRoutes()
        self._entries: dict[str, ShareEntry] = {}
        #: The holders that withdrew their service (set by the relay).
        self.health = HolderHealth()

    def add(self, name: str, backend: Any) -> None:
        """
        A fixed route, outside any agent's shares and leases (see
        L{ShareRoutes.add}); published shares win over it.
        """
        self.static.add(name, backend)

    def url(self, name: str) -> str:
        """
        The public URL of the share C{name}.
        """
        assert self.ca is not None
        port = "" if self.port == HTTPS_PORT else f":{self.port}"
        return f"https://{self.ca.fqdn(name)}{port}/"

    def plainURL(self, name: str) -> str:
        """
        The plain-HTTP URL of the share C{name} on the HTTP port.
        """
        assert self.ca is not None
        port = "" if self.httpPort in (None, HTTP_PORT) else f":{self.httpPort}"
        return f"http://{self.ca.fqdn(name)}{port}/"

    def plainRoute(self, host: str) -> interfaces.IProtocolFactory | None:
        """
        The plain-HTTP proxy of the share whose host name is C{host}, if it
        asked for one.
        """
        name = self.shareName(host)
        return None if name is None else self.plainOf(name)

    def shareName(self, host: str) -> str | None:
        """
        The share name a host name under the share domain names, if it does.
        """
        if self.ca is None or not host.endswith("." + self.ca.domain):
            return None
        return host[: -len(self.ca.domain) - 1]

    def plainOf(self, name: str) -> interfaces.IProtocolFactory | None:
        """
        The plain-HTTP proxy of the share C{name}, if it is published here
        and asked for one.
        """
        entry = self._entries.get(name)
        return None if entry is None else entry.plain

    def route(self, name: str) -> Route | None:
        """
        See L{nfltr.relay.tls_port.IShareRoutes.route}.
        """
        entry = self._entries.get(name)
        return self.static.route(name) if entry is None else entry.route

    def holderOf(self, name: str) -> Any:
        """
        The holder that publishes the share C{name} now, if any.
        """
        entry = self._entries.get(name)
        return None if entry is None else entry.holder

    def holdersOf(self, name: str) -> list[Any]:
        """
        The holders that publish the share C{name} now (a group's members).
        """
        entry = self._entries.get(name)
        return [] if entry is None or entry.members is None else list(entry.members.members)

    def withdrawn(self, name: str) -> bool:
        """
        Whether the share C{name} is published here and every holder of it
        withdrew its service.
        """
        entry = self._entries.get(name)
        return entry is not None and entry.members is not None and entry.members.withdrawn()

    def groupWithdrawn(self, name: str) -> bool:
        """
        Whether the share C{name} is a load-balancing group's here and every
        member of it here withdrew its service (other replicas' members may
        serve its visitors).
        """
        entry = self._entries.get(name)
        return (entry is not None and entry.members is not None
                and entry.members.group is not None and entry.members.withdrawn())

    def joins(self, name: str, account: str, group: str | None) -> bool:
        """
        Whether a holder of C{account} publishing C{name} in C{group} joins
        the holders there (the same account and group) instead of replacing
        them.
        """
        entry = self._entries.get(name)
        return (group is not None and entry is not None and entry.account == account
                and entry.members is not None and entry.members.group == group)

    def heldBy(self, holder: Any) -> list[str]:
        """
        The names of the shares C{holder} publishes now.
        """
        return sorted(n for n, e in self._entries.items()
                      if e.members is not None and holder in e.members.members)

    def publish(
        self, holder: Any, account: str, shares: Sequence[HttpShare],
        link: Callable[[], Any], group: str | None = None,
    ) -> list[dict[str, Any]]:
        """
        Publish C{shares} for C{holder} (a link handler of C{account}
        whose link C{link} returns): all of them or, with L{ShareRefused},
        none.  A share the same account publishes in the same C{group}
        gets C{holder} as one more member, used in turn
        (L{nfltr.relay.groups}); the route its first member made serves
        them all.

        @return: the C{shares} of the welcome message.
        """
        now = self.clock.seconds()
        ca = self.ca
        if ca is None:
            raise ShareRefused(RefusalReason.UNAVAILABLE, "this relay does not publish share URLs")
        for share in shares:
            problem = enforcement_problem(share)
            if problem is not None:
                raise ShareRefused(RefusalReason.INVALID, problem)
            if ca.fqdn(share.name) in self.own:
                why = f"share name {share.name} is reserved: it is the relay's own"
                raise ShareRefused(RefusalReason.CONFLICT, why)
            try:
                check_name_free(self.leases, share.name, account, now)
            except ClaimRefused as e:
                raise ShareRefused(e.reason, str(e)) from None
        answers, entries, joined = [], [], []
        for share in shares:
            answer = self._answer(ca, share)
            answers.append(answer)
            if self.joins(share.name, account, group):
                joined.append(self._entries[share.name])
                continue
            entries.append(self._entry(ca, share, account, holder, link, group))
        for entry in joined:
            assert entry.members is not None
            if holder not in entry.members.members:
                self.leases.claim(entry.name, account, now)
                entry.members.add(holder)
        for entry in entries:
            self.leases.claim(entry.name, account, now)
            old = self._entries.get(entry.name)
            if old is not None:
                for _ in old.members.members if old.members is not None else [old.holder]:
                    self.leases.release(old.name, old.account, now)
                old.retire()
            self._entries[entry.name] = entry
        return answers

    def _entry(self, ca: ShareCA, share: HttpShare, account: str, holder: Any,
               link: Callable[[], Any], group: str | None) -> ShareEntry:
        """
        The entry of C{share}, newly published by C{holder} (in C{group}):
        its route and plain-HTTP proxy, which reach its members in turn.
        """
        members: HolderGroup[Any] = HolderGroup(group, holder, lambda h: h, self.health)
        pick = _picker(members, link, holder)
        route, proxy = self._route(ca, share, pick, members)
        plain = None
        if share.plain:
            backend = LinkSessionBackend(share.name, pick, self.counters)
            plain = AllowListFactory(
                HTTPProxyFactory(
                    backend, self.clock, scheme=b"http",
                    gate=_gate(share, self.inspectRate, self.clock, members),
                    hosts=[ca.fqdn(share.name)],
                    backendFor=self._visitorBackend(share, pick),
                ),
                share.policy,
            )
        return ShareEntry(share.name, account, share.mode, holder, route, plain, share, members,
                          proxy)

    def withdraw(self, holder: Any, name: str | None = None) -> list[str]:
        """
        Remove C{holder} from the shares it publishes (only the one called
        C{name}, if given); their leases start running.  A share whose
        group keeps other members stays, served by them.

        @return: the names withdrawn.
        """
        now = self.clock.seconds()
        names = [n for n, e in self._entries.items()
                 if e.members is not None and holder in e.members.members and name in (None, n)]
        for withdrawn in names:
            entry = self._entries[withdrawn]
            assert entry.members is not None
            entry.members.remove(holder)
            self.leases.release(withdrawn, entry.account, now)
            if not entry.members.members:
                del self._entries[withdrawn]
                entry.retire()
                continue
            if entry.holder is holder:
                entry.holder = entry.members.members[0]
            entry.memberLeft()
        return names

    def _route(self, ca: ShareCA, share: HttpShare, link: Callable[[], Any],
               members: HolderGroup[Any]) -> tuple[Route, HTTPProxyFactory | None]:
        """
        Where the TLS port sends C{share}'s visitors, and its HTTP proxy if
        the relay ends their TLS (C{inspect}).
        """
        if share.mode != INSPECT:
            return Splice(AgentShareBackend(share.name, link, share.policy, self.counters)), None
        proxy = HTTPProxyFactory(
            LinkSessionBackend(share.name, link, self.counters), self.clock,
            gate=_gate(share, self.inspectRate, self.clock, members), hosts=[ca.fqdn(share.name)],
            backendFor=self._visitorBackend(share, link), h2=True, h2limits=self.h2limits,
            # An h2c service: HTTP/2 in the sessions, which the agent splices to it.
            h2c=share.h2c_host is not None, host=(share.h2c_host or "").encode() or None,
        )
        if self._operatorCovers(ca, share.name):
            assert self.operator is not None
            creator = self.operator.tls
        else:
            creator = ca.issue(share.name)
        tls = TLSMemoryBIOFactory(creator, False, proxy, clock=self.clock)
        tls.noisy = False
        return HandOver(AllowListFactory(tls, share.policy)), proxy

    def _visitorBackend(
        self, share: HttpShare, link: Callable[[], Any],
    ) -> Callable[[str | None], LinkSessionBackend] | None:
        """
        For a share declared C{addressed} (its agent writes PROXY headers),
        the backend of each visitor connection, whose sessions name it.
        """
        if not share.addressed:
            return None
        return lambda visitor: LinkSessionBackend(share.name, link, self.counters, visitor)

    def _answer(self, ca: ShareCA, share: HttpShare) -> dict[str, Any]:
        """
        The welcome's part about C{share}: its URL and, for the agent to
        tell visitors how to trust it, an e2ee share's signed chain, or an
        inspect share's CA (or that the operator's C{--cert} serves it).

        @raise ShareRefused: an e2ee share's request cannot be signed.
        """
        answer: dict[str, Any] = {
            "name": share.name, "mode": share.mode, "url": self.url(share.name)
        }
        if share.plain:
            answer["plain_url"] = self.plainURL(share.name)
        if share.mode == E2EE:
            assert share.csr is not None
            try:
                answer["cert"] = ca.sign(share.csr, share.name)
            except ShareCertError as e:
                raise ShareRefused(RefusalReason.INVALID, f"share {share.name}: {e}") from None
        elif share.mode == INSPECT and self._operatorCovers(ca, share.name):
            answer["operator_cert"] = True
        elif share.mode == INSPECT:
            answer["ca"] = ca.pem
        return answer

    def _operatorCovers(self, ca: ShareCA, name: str) -> bool:
        """
        Whether the operator's certificate (C{--cert}) serves share C{name}.
        """
        return self.operator is not None and self.operator.covers(ca.fqdn(name))

    def sharesOf(self, account: str) -> list[tuple[str, str, str]]:
        """
        The name, mode and URL of each share C{account} publishes now.
        """
        return sorted((e.name, e.mode, self.url(e.name)) for e in self._entries.values()
                      if e.account == account)

    def entries(self) -> list[ShareEntry]:
        """
        The published shares, by name (for the API, L{nfltr.relay.api}).
        """
        return [self._entries[name] for name in sorted(self._entries)]

    def __len__(self) -> int:
        return len(self._entries)


def _picker(members: HolderGroup[Any], link: Callable[[], Any],
            holder: Any) -> Callable[[], Any]:
    """
    What the routes of a share call for the holder of each new session:
    C{link} (the publisher's own way to its link) while it is the only
    member and has not withdrawn; else the member in turn
    (L{HolderGroup.pick}), L{None} when every member withdrew.
    """
    def pick() -> Any:
        chosen = members.pick()
        return link() if chosen is holder else chosen

    return pick


def _gate(share: HttpShare, rate: tuple[float, int] | None, clock: Any,
          members: HolderGroup[Any] | None = None) -> Gate:
    """
    The relay's check of each request of C{share} it proxies: the share's
    policy (an open one too: it refuses duplicate credential headers),
    the request rate (C{rate}: per second and burst, counted per share, so
    per agent) if there is one, and whether any of its C{members} serves
    it (else 503: every one withdrew its service).
    """
    policy = share.policy
    bucket = None if rate is None else TokenBucket(rate[0], rate[1], clock.seconds())

    def gate(headers: Sequence[tuple[bytes, bytes]], visitor: str | None) -> Denial | None:
        if members is not None and members.withdrawn():
            return WITHDRAWN
        denial = policy.gate(headers, visitor)
        if denial is None and bucket is not None and not bucket.take(clock.seconds()):
            return TOO_MANY
        return denial

    return gate


#: The answer to a request over an inspected share's rate.
TOO_MANY = Denial(429, ((b"retry-after", b"1"),))
#: The answer to a request of a share whose every agent withdrew its
#: service (failing health checks).
WITHDRAWN = Denial(503, ((b"retry-after", b"5"),))
