# -*- test-case-name: tests.relay.test_link_handler -*-
"""
What the relay does with each link: authenticate the dialer, register
agents, route clients' sessions to agents, and turn away revoked keys.

A link's life, in L{RelayLinkHandler}::

    hello ──▶ verifying ──▶ agent | client ──▶ closed
                   └──────────▶ closed (refused)

On the dialer's hello the relay checks the C{app} fields
(L{nfltr.wire.messages.parse_dialer_hello}) and the API key (in the store, off
the reactor thread) and, for an agent, reserves its names
(L{nfltr.relay.leases.ILeases.reserve}), then answers with one control message: C{welcome}, or
C{refused} followed by a GOAWAY and the end of the connection.  Sessions a
client opens before its welcome wait for the verdict.

A handler is an L{IAgentHolder} (of kind C{link}): its names and shares go
through the relay's one claim place (L{nfltr.relay.agents.Relay}), which
follows L{nfltr.relay.names} for the SSH port too; its clients' sessions
take the one TCP route (L{Relay.tcp}).  A link stays under its key until it
is gone, draining or not, so L{Relay.revoke} reaches it; a peer's drain
lasts at most L{Relay.peerDrainTimeout}.  A peer's mistakes are answered,
never raised (a hello and a bad frame in one read:
L{RelayLinkHandler._linkDown}); its strings are logged through
L{nfltr.wire.peerText}, refusals per source through L{Relay.logThrottle}.
"""

from __future__ import annotations

import secrets
from contextlib import suppress
from typing import Any

from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.link import ErrorCode, RefusalReason, State, refusal
from nfltr.link.twisted import LinkHandler, LinkProtocol, LinkSession, LinkUnavailable
from nfltr.store import KeyInfo, StoreUnavailable
from nfltr.wire import format_address, peerText
from nfltr.wire.constants import MAX_DATA_LINKS
from nfltr.wire.health import HEALTH
from nfltr.wire.messages import (
    AGENT,
    DATA,
    NOT_FOUND_CODE,
    NOT_FOUND_REASON,
    DialerHello,
    MessageError,
    parse_client_target,
    parse_dialer_hello,
    welcome,
)
from nfltr.wire.resume import PLAIN, agent_resumes, client_welcome, parse_client_resume_target
from nfltr.wire.udp import PUBLIC_UDP_PORTS, UdpShare, parse_udp_shares
from nfltr.wire.update import UPDATE

from .agent_health import apply_health
from .agent_update import apply_update
from .agents import Relay, revoked_message
from .directory import AgentEntry
from .interfaces import LINK, HolderFigures, IAgentHolder
from .leases import NameLeased
from .log_text import listed
from .names import ClaimRefused, name_taken_message
from .public_ports import PortRequest, lease_name
from .public_udp import publish_udp
from .tcp_route import RouteRefused
from .udp_route import is_udp_target, route_udp

INVALID_KEY = "invalid API key"
STORE_UNAVAILABLE = "the relay cannot check API keys now; try again later"
NAMES_UNAVAILABLE = "the relay cannot check names now; try again later"
AGENT_SESSIONS_REFUSED = "agents cannot open sessions"

HELLO, VERIFYING, AGENT_READY, CLIENT_READY, DATA_READY, CLOSED = (
    "hello", "verifying", "agent", "client", "data", "closed",
)
NO_SUCH_LINK = "no such agent link (it ended, or the token is another key's)"
DATA_LINK_LIMIT = f"an agent has at most {MAX_DATA_LINKS} extra data connections"


def held_note(held: int) -> str:
    """
    What a throttled log line adds about the lines left out before it.
    """
    return f" ({held} similar lines left out)" if held else ""


@implementer(IAgentHolder)
class RelayLinkHandler(LinkHandler):
    """
    The relay's side of one link.

    @ivar state: where the link is in its life (see the module docstring).
    @ivar link: the link, once established.
    @ivar hello: the dialer's validated hello.
    @ivar key: the verified API key, once accepted.
    @ivar agent: the directory entry, for an agent.
    @ivar since: when the link was established (the relay clock's time).
    @ivar _pending: sessions a client opened before its welcome.
    """

    log = Logger()
    kind = LINK

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.since = 0.0
        self.state = HELLO
        self.link: LinkProtocol | None = None
        self.hello: DialerHello | None = None
        self.key: KeyInfo | None = None
        self.agent: AgentEntry | None = None
        self._pending: list[LinkSession] = []
        # An agent's first link: its token and extra data connections; a
        # data connection: the first link it is bound to.
        self.dataToken: str | None = None
        self.dataLinks: list[RelayLinkHandler] = []
        self.primary: RelayLinkHandler | None = None
        self._drainLimit: Any = None
        # The UDP ports an agent's hello declares.
        self.udpShares: tuple[UdpShare, ...] = ()

    # -- ILinkHandler ---------------------------------------------------------

    def linkEstablished(self, link: LinkProtocol) -> None:
        """
        Validate the hello and start checking the key.
        """
        self.link = link
        self.since = self.relay.clock.seconds()
        self.relay.handlers.add(self)
        assert link.peerHello is not None
        if self._linkDown():
            self.state = CLOSED  # the hello came with a bad frame: nothing to answer
            return
        try:
            self.hello = parse_dialer_hello(link.peerHello.app)
            if self.hello.role == AGENT:
                self.udpShares = parse_udp_shares(link.peerHello.app.get("udp", []))
        except MessageError as e:
            self.refuse(RefusalReason.INVALID, str(e))
            return
        self.state = VERIFYING
        d = self.relay.verifyKey(self.hello.key)
        d.addCallbacks(self._verified, self._verifyFailed)
        d.addErrback(self._unexpected)

    def sessionRequested(self, session: LinkSession) -> None:
        """
        Route a client's session; hold it until the verdict on the key;
        refuse an agent's.
        """
        if self.state == CLIENT_READY:
            self._route(session)
        elif self.state == VERIFYING:
            self._pending.append(session)
        elif self.state in (AGENT_READY, DATA_READY):
            session.refuse(ErrorCode.REFUSED, AGENT_SESSIONS_REFUSED)
        else:
            session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)

    def controlReceived(self, link: LinkProtocol, message: dict[str, Any]) -> None:
        """
        An agent's C{update} (L{nfltr.relay.agent_update}) or C{health}
        (L{nfltr.relay.agent_health}); any other
        control message from a dialer is ignored.
        """
        if self.state == AGENT_READY and message.get("type") == UPDATE:
            apply_update(self, message, self._agentUp)
            return
        if self.state == AGENT_READY and message.get("type") == HEALTH:
            apply_health(self, message)
            return
        held = self.relay.logThrottle.allow(self._source(), "control")
        if held is not None:
            self.log.debug("ignored control message {type} from {peer}{note}",
                           type=peerText(message.get("type")), peer=self._peer(),
                           note=held_note(held))

    def linkGoingAway(self, link: LinkProtocol) -> None:
        """
        The dialer drains (GOAWAY): an agent's name is freed at once (its
        lease runs), so its successor (a restarted agent) takes it without
        replacing this link, whose sessions in flight finish within
        L{Relay.peerDrainTimeout}.  The link stays under its key: a
        revocation still closes it.
        """
        agent = self.agent
        self._withdraw()
        self._endDataLinks(drain=True)
        if agent is not None and self.relay.releaseAgent(agent):
            self.log.info(
                "agent {name} (account {account}) is draining",
                name=agent.name, account=agent.account,
            )
        limit = self.relay.peerDrainTimeout
        if limit is not None and self._drainLimit is None and self.state != CLOSED:
            self._drainLimit = self.relay.clock.callLater(limit, self._drainExpired, limit)

    def _drainExpired(self, limit: float) -> None:
        """
        The peer's drain outlasted the relay's limit: reset what is left and
        close (a GOAWAY of ours, then the link's drain timeout at once).
        """
        self._drainLimit = None
        link = self.link
        if link is None or self.state == CLOSED or self._linkDown():
            return
        self.log.info(
            "link from {peer} still draining after {limit:g}s: its sessions are reset",
            peer=self._peer(), limit=limit,
        )
        link.drain(0)

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        """
        Forget the link.
        """
        agent = self.agent
        counters = self.relay.counters
        counters.closedBytesIn += link.bytesReceived
        counters.closedBytesOut += link.bytesSent
        self.relay.handlers.discard(self)
        if self._drainLimit is not None and self._drainLimit.active():
            self._drainLimit.cancel()
        self._drainLimit = None
        self._withdraw()
        self._endDataLinks(drain=False)
        self._forget()
        self._pending = []  # the link ended them
        self.state = CLOSED
        if agent is not None and self.relay.releaseAgent(agent):
            self.log.info(
                "agent {name} (account {account}) disconnected",
                name=agent.name, account=agent.account,
            )

    # -- verdicts -------------------------------------------------------------

    def _verified(self, key: KeyInfo | None) -> None:
        if self.state != VERIFYING:
            return  # the link was lost meanwhile
        if self._linkDown():
            self.state = CLOSED  # it failed meanwhile (a bad frame): its end is under way
            self._pending = []
            return
        hello = self.hello
        assert hello is not None
        if key is None:
            self.refuse(RefusalReason.UNAUTHORIZED, INVALID_KEY)
        elif key.revoked or self.relay.directory.isRevoked(key.keyid):
            self.refuse(RefusalReason.REVOKED, revoked_message(key.keyid))
        elif hello.role == AGENT:
            self._reserve(hello, key)
        elif hello.role == DATA:
            self._bindData(hello, key)
        else:
            self._welcomeClient(key)

    def _verifyFailed(self, failure: Failure) -> None:
        # An unavailable store was logged once for its outage (StoreHealth); another error
        # is one line a minute, not one per dialer.
        if not failure.check(StoreUnavailable):
            held = self.relay.logThrottle.allow("store", "verify")
            if held is not None:
                self.log.failure("cannot check an API key{note}", failure, note=held_note(held))
        if self.state == VERIFYING:
            self.refuse(RefusalReason.UNAVAILABLE, STORE_UNAVAILABLE)

    def _unexpected(self, failure: Failure) -> None:
        held = self.relay.logThrottle.allow(self._source(), "unexpected")
        if held is not None:
            self.log.failure("error while accepting a link from {peer}{note}", failure,
                             peer=self._peer(), note=held_note(held))
        if self.link is not None and self.state != CLOSED:
            self.state = CLOSED
            self.link.transport.loseConnection()

    def _reserve(self, hello: DialerHello, key: KeyInfo) -> None:
        """
        Reserve the agent's names (its own, its shares') for its account
        before claiming them (L{Relay.reserveNames}: at once on a relay of
        its own; across relays and restarts on a Redis directory); its
        sessions keep waiting meanwhile.
        """
        assert hello.name is not None
        names = [hello.name, *(share.name for share in hello.http),
                 *(lease_name(s.public_port) for s in hello.tcp if s.public_port)]
        d = self.relay.reserveNames(key.account, names)
        d.addCallbacks(lambda _: self._reserved(hello, key), self._reserveFailed)
        d.addErrback(self._unexpected)

    def _reserved(self, hello: DialerHello, key: KeyInfo) -> None:
        if self.state != VERIFYING:
            return  # the link was lost meanwhile
        if self._linkDown():
            self.state = CLOSED
            self._pending = []
            return
        if self.relay.directory.isRevoked(key.keyid):
            self.refuse(RefusalReason.REVOKED, revoked_message(key.keyid))
            return
        self._registerAgent(hello, key)

    def _reserveFailed(self, failure: Failure) -> Failure | None:
        if self.state != VERIFYING:
            return None
        leased = failure.value
        if isinstance(leased, NameLeased):
            self.refuse(RefusalReason.CONFLICT, name_taken_message(leased.args[0]))
        elif failure.check(StoreUnavailable):
            self.refuse(RefusalReason.UNAVAILABLE, NAMES_UNAVAILABLE)
        else:
            return failure
        return None

    def _registerAgent(self, hello: DialerHello, key: KeyInfo) -> None:
        assert hello.name is not None
        entry = AgentEntry(
            hello.name, key.account, key.keyid, frozenset(s.port for s in hello.tcp), self,
            plain=frozenset(s.port for s in hello.tcp if not s.e2ee),
            addressed=frozenset(s.port for s in hello.tcp if s.addressed), group=hello.group,
            udp=frozenset(s.port for s in self.udpShares),
            resumes=self._resumes(),
        )
        try:
            # Checked before the shares are published, claimed after: all or nothing.
            self.relay.admitAgent(entry)
            shares = self.relay.publishShares(
                self, key.account, hello.http, hello.group) if hello.http else []
            requests = [PortRequest(s.port, s.public_port, s.allow) for s in hello.tcp
                        if s.public_port is not None]
            ports = self.relay.publishPorts(
                self, key.account, requests, hello.group) if requests else None
            udpPorts = publish_udp(self.relay, self, key.account, self.udpShares)
            self.relay.claimAgent(entry)  # whom it replaces is refused
        except ClaimRefused as e:
            self.refuse(e.reason, str(e))
            return
        self.key, self.agent, self.state = key, entry, AGENT_READY
        self.relay.directory.addLink(key.keyid, self)
        self.relay.counters.agentConnects += 1
        self.dataToken = secrets.token_hex(16)
        self.relay.dataTokens[self.dataToken] = self
        message = welcome(key.account, hello.name, shares, self.dataToken, ports)
        if udpPorts is not None:
            message[PUBLIC_UDP_PORTS] = udpPorts
        self._send(message)
        self.log.info(
            "agent {name} (account {account}) connected from {peer}, sharing ports {ports}, "
            "URLs {urls} and public ports {public}",
            name=hello.name, account=key.account, peer=self._peer(),
            ports=listed(sorted(entry.ports)), urls=listed(s["url"] for s in shares),
            public=listed(p["public_port"] for p in ports or ()),
        )
        self._releasePending()

    def _withdraw(self) -> None:
        self.relay.withdrawShares(self)
        self.relay.directory.health.restore(self)

    def _bindData(self, hello: DialerHello, key: KeyInfo) -> None:
        assert hello.token is not None
        primary = self.relay.dataTokens.get(hello.token)
        if primary is None or primary.key is None or primary.key.keyid != key.keyid:
            self.refuse(RefusalReason.NOT_FOUND, NO_SUCH_LINK)
            return
        if len(primary.dataLinks) >= MAX_DATA_LINKS:
            self.refuse(RefusalReason.LIMIT, DATA_LINK_LIMIT)
            return
        self.key, self.primary, self.state = key, primary, DATA_READY
        primary.dataLinks.append(self)
        self.relay.directory.addLink(key.keyid, self)
        name = primary.agent.name if primary.agent is not None else None
        self._send(welcome(key.account, name))
        self.log.debug("agent {name}: extra data connection {count}", name=name,
                       count=len(primary.dataLinks))

    def pickLink(self) -> LinkProtocol | None:
        """
        The link of this agent to open a session on: among its first link and
        its data connections that can open one, the one with the fewest
        sessions (the first link if none can: opening there says why).
        """
        links = [self.link, *(d.link for d in self.dataLinks)]
        usable = [link for link in links if link is not None and link.canOpen()]
        if not usable:
            return self.link
        return min(usable, key=lambda link: link.connection.session_count)  # type: ignore[union-attr]

    # -- IAgentHolder -----------------------------------------------------------

    def canOpen(self) -> bool:
        """
        Whether one of this agent's links can open a session now.
        """
        link = self.pickLink()
        return link is not None and link.canOpen()

    def openSession(self, target: str, protocol: Any, firstBytes: bytes = b"",
                    wantAccept: bool = False) -> LinkSession:
        """
        Open C{target} on the link L{pickLink} chooses (see
        L{IAgentHolder.openSession}).
        """
        link = self.pickLink()
        if link is None:
            raise LinkUnavailable("the agent's link is not established")
        return link.openSession(target, protocol, firstBytes, wantAccept)

    def figures(self) -> HolderFigures:
        """
        The figures of this agent's first link (see L{IAgentHolder.figures}).
        """
        link = self.link
        if link is None:
            return HolderFigures(LINK, 0, 0, 0, None, self.since)
        sessions = link.connection.session_count if link.connection is not None else 0
        return HolderFigures(LINK, sessions, link.bytesReceived, link.bytesSent, link.rtt,
                             self.since, self._peer(), len(self.dataLinks))

    def _endDataLinks(self, drain: bool) -> None:
        """
        The first link ends (or drains): so do its data connections.
        """
        if self.dataToken is not None:
            self.relay.dataTokens.pop(self.dataToken, None)
            self.dataToken = None
        data, self.dataLinks = self.dataLinks, []
        for handler in data:
            if handler.link is not None:
                if drain:
                    handler.link.drain(0)
                else:
                    handler.link.transport.loseConnection()
        primary = self.primary
        if primary is not None and self in primary.dataLinks:
            primary.dataLinks.remove(self)

    def _welcomeClient(self, key: KeyInfo) -> None:
        self.key, self.state = key, CLIENT_READY
        self.relay.directory.addLink(key.keyid, self)
        self._send(client_welcome(key.account))
        self.log.debug(
            "client (account {account}) connected from {peer}",
            account=key.account, peer=self._peer(),
        )
        self._releasePending()

    def _releasePending(self) -> None:
        pending, self._pending = self._pending, []
        for session in pending:
            self.sessionRequested(session)

    # -- actions --------------------------------------------------------------

    def refuse(self, reason: RefusalReason, message: str) -> None:
        """
        Tell the dialer why it is turned away, then close the link: a
        C{refused} control message, a GOAWAY, and the end of the
        connection (sessions still open are reset).
        """
        if self.state == CLOSED:
            return
        role = self.hello.role if self.hello is not None else "dialer"
        self.relay.counters.refusals[reason.value] += 1
        held = self.relay.logThrottle.allow(self._source(), f"refused {reason.value}")
        if held is not None:
            self.log.info(
                "refused {role} from {peer}: {reason}: {message}{note}",
                role=role, peer=self._peer(), reason=reason.value, message=peerText(message),
                note=held_note(held),
            )
        self.state = CLOSED
        agent = self.agent
        self._withdraw()
        self._endDataLinks(drain=False)
        self._forget()
        if agent is not None:
            self.relay.releaseAgent(agent)
        pending, self._pending = self._pending, []
        for session in pending:
            session.refuse(NOT_FOUND_CODE, NOT_FOUND_REASON)
        self._send(refusal(reason, message))
        if self.link is not None:
            self.link.drain(0)

    def _route(self, session: LinkSession) -> None:
        assert self.key is not None
        if is_udp_target(session.target):
            route_udp(self.relay.directory, self.relay.tcp, self.key.account, session)
            return
        try:
            # tcp:, or rtcp: and resume: (resumable sessions: nothing is kept, the token in a
            # resume's first bytes is the agent's to check).
            resumable = parse_client_resume_target(session.target)
            if resumable is not None:
                kind, name, port = resumable
            else:
                kind, (name, port) = PLAIN, parse_client_target(session.target)
        except MessageError as e:
            session.refuse(ErrorCode.REFUSED, str(e))
            return
        self.log.debug("session to {name}:{port}", name=name, port=port)
        remote = self.relay.remote
        if remote is not None and not self.relay.servesHere(name):
            assert self.hello is not None
            # Held by another replica, or by none: the directory says (the replica that holds
            # it checks this client's key itself, and whether its agent resumes sessions).
            remote.routeTCP(session, self.hello.key, self.key.account, name, port, kind,
                            self._peer())
            return
        route, account = self.relay.tcp, self.key.account
        try:
            if kind == PLAIN:
                end = route.openTCP(account, name, port, "client link lost", client=self._peer())
            else:
                end = route.openResumable(account, kind, name, port, "client link lost")
        except RouteRefused as e:
            session.refuse(e.code, e.reason)
            return
        session.accept(end)

    def _resumes(self) -> bool:
        # Whether the agent's hello said it resumes sessions.
        link = self.link
        return link is not None and link.peerHello is not None and agent_resumes(
            link.peerHello.app)

    def _send(self, message: dict[str, Any]) -> None:
        if self.link is None or self._linkDown():
            return
        with suppress(LinkUnavailable):  # the connection is already gone
            self.link.sendControl(message)

    def _linkDown(self) -> bool:
        """
        Whether the link failed or closed, its connection not lost yet (a
        peer's bad frame in the read that brought its hello; a verdict that
        comes after): nothing can be sent on it, and it is closing.
        """
        link = self.link
        if link is None or link.connection is None or link.failure is not None:
            return True
        return link.connection.state in (State.ERROR, State.CLOSED)

    def _agentUp(self) -> bool:
        # Welcomed, not draining: its entry is still the directory's.
        agent = self.agent
        return (self.state == AGENT_READY and agent is not None and not self._linkDown()
                and self.relay.directory.agent(agent.name) is agent)

    def _forget(self) -> None:
        if self.key is not None:
            self.relay.directory.removeLink(self.key.keyid, self)

    def _peer(self) -> str:
        link = self.link
        if link is None or link.transport is None:
            return "?"
        return format_address(link.transport.getPeer())

    def _source(self) -> str:
        # The peer's host: what the log throttle counts lines by.
        link = self.link
        peer = None if link is None or link.transport is None else link.transport.getPeer()
        return str(getattr(peer, "host", "?"))
