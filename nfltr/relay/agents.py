# -*- test-case-name: tests.relay.test_holders -*-
"""
L{Relay}: what the link handlers and SSH connections of one relay share,
and the one place agent holders (L{IAgentHolder}: native links, SSH
connections) claim, replace and release their names.

  - Agent names: L{Relay.admitAgent} checks a claim (L{nfltr.relay.names}:
    the ownership rule, the agent limit), L{Relay.claimAgent} makes it,
    L{Relay.releaseAgent} gives the name up (its lease runs).
  - Share names: L{Relay.publishShares} and L{Relay.withdrawShares}, in the
    relay's L{nfltr.relay.shares.ShareRegistry}, under the same leases.
  - Public ports: L{Relay.publishPorts} (L{nfltr.relay.public_ports}), under
    the same leases; L{Relay.withdrawShares} withdraws them with the shares.
  - A newer holder of an account that takes a name over (an agent name or
    a share's) replaces the holder that had it, of whichever kind: the older
    one is refused with C{conflict} L{REPLACED} and gives up all it holds,
    so that when the newer one leaves the name is free for the account's
    next holder, with no route left behind.
  - L{Relay.revoke} turns away every holder that logged in with a key.
  - L{Relay.tcp} is the one TCP route (L{nfltr.relay.tcp_route.TCPRoute}) for
    native clients and SSH clients; the metrics read each agent's figures
    through L{Relay.agentHolders}.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.link import RefusalReason
from nfltr.store import IStore, KeyInfo, StoreUnavailable
from nfltr.wire import LogThrottle
from nfltr.wire.messages import HttpShare

from .cluster.presence import AGENT, NoPresence
from .cluster.presence import SHARE as SHARE_RECORD
from .config import DEFAULT_DRAIN_TIMEOUT
from .counters import RelayCounters
from .directory import AgentEntry, Directory
from .interfaces import IAgentHolder, IPresence, IRemoteRoutes
from .leases import Leases
from .names import REPLACED, check_agent_claim
from .public_ports import NOT_ENABLED as PORTS_NOT_ENABLED
from .public_ports import PortRequest, PublicPortRefused, PublicPorts
from .shares import ShareRefused, ShareRegistry
from .store_health import StoreHealth
from .tcp_route import TCPRoute

if TYPE_CHECKING:
    from .cluster.ssh_key_cache import SSHKeyCache
    from .link_handler import RelayLinkHandler

NO_SHARE_URLS = "this relay does not publish share URLs"
#: Seconds a peer that sent GOAWAY may keep its sessions going before the
#: relay resets them and closes the link (the relay's own --drain-timeout's
#: default).
DEFAULT_PEER_DRAIN_TIMEOUT = DEFAULT_DRAIN_TIMEOUT


def revoked_message(keyid: str) -> str:
    """
    The text of the refusal a revoked key gets.
    """
    return f"API key {keyid} was revoked"


class Relay:
    """
    What the link handlers and SSH connections of one relay share; see the
    module.

    @ivar store: checks API keys.
    @ivar storeHealth: whether the store is up: while it is down, keys are
        not checked (L{verifyKey} fails at once).
    @ivar directory: the connected agents and authenticated links.
    @ivar clock: the reactor's time.
    @ivar handlers: the handlers of every established link.
    @ivar shares: the share URLs agents publish (L{None}: this relay
        publishes none, and refuses agents that ask).
    @ivar maxAgents: how many agents may be connected at once (L{None}: no
        limit).  Checked when an agent's key is verified, on the reactor
        thread, so admission is atomic: agents racing for the last places
        get exactly as many as there are.
    @ivar counters: running totals for the metrics.
    @ivar tcp: the one TCP route.
    @ivar dataTokens: the agents' first links by the token their extra data
        connections present.
    @ivar peerDrainTimeout: seconds a peer that sent GOAWAY may keep its
        sessions going; then the relay resets them and closes the link
        (L{None}: no limit).
    @ivar logThrottle: how often lines about one source's refusals are
        logged.
    @ivar presence: what the other replicas of a cluster are told of the
        agents and shares claimed here (L{NoPresence}: a relay of its own).
    @ivar remote: the routes to agents other replicas of a cluster hold
        (L{None}: a relay of its own).
    @ivar sshKeys: the SSH keys checked here, for when the store cannot
        answer (L{nfltr.relay.cluster.ssh_key_cache}; L{None}: none kept).
    """

    log = Logger()

    def __init__(
        self, store: IStore, clock: IReactorTime, shares: ShareRegistry | None = None,
        maxAgents: int | None = None, counters: RelayCounters | None = None,
        peerDrainTimeout: float | None = DEFAULT_PEER_DRAIN_TIMEOUT,
        storeHealth: StoreHealth | None = None,
    ) -> None:
        """
        @param shares: its leases are the agent names' too (one table, one
            lease time: C{--lease-time}).
        """
        self.store = store
        self.storeHealth = storeHealth or StoreHealth("the key store", clock)
        self.clock = clock
        self.shares = shares
        self.maxAgents = maxAgents
        self.counters = counters if counters is not None else RelayCounters()
        self.directory = Directory(shares.leases if shares is not None else Leases())
        if shares is not None:
            shares.health = self.directory.health
        self.tcp = TCPRoute(self.directory, self.counters)
        self.handlers: set[RelayLinkHandler] = set()
        self.dataTokens: dict[str, RelayLinkHandler] = {}
        self.peerDrainTimeout = peerDrainTimeout
        self.logThrottle = LogThrottle(clock.seconds)
        self.presence: IPresence = NoPresence()
        self.remote: IRemoteRoutes | None = None
        self.sshKeys: SSHKeyCache | None = None
        self.publicPorts: PublicPorts | None = None
        #: The public UDP ports (L{nfltr.relay.public_udp}), with public ports.
        self.publicUDPPorts: PublicPorts | None = None

    def verifyKey(self, plaintext: str) -> Deferred[KeyInfo | None]:
        """
        The store's record of the API key C{plaintext} (L{IStore.verify_key});
        while the store is down, a L{StoreUnavailable} failure at once, and a
        failure that says the store is unavailable marks it down
        (L{StoreHealth.failed}).
        """
        return self._ask(lambda: self.store.verify_key(plaintext))

    def sshKeyAccount(self, line: str) -> Deferred[str | None]:
        """
        The account the SSH public key C{line} is registered to
        (L{IStore.ssh_key_account}), with the store's health as
        L{verifyKey}; while the store cannot answer, the account
        L{sshKeys} remembers, if any.
        """

        def ask() -> Deferred[str | None]:
            return self._ask(lambda: self.store.ssh_key_account(line))

        return ask() if self.sshKeys is None else self.sshKeys.lookup(line, ask)

    def sshKeyRemoved(self, fingerprint: str) -> None:
        """
        The SSH key C{fingerprint} was removed from the store (announced or
        polled, L{nfltr.relay.revocation}): L{sshKeys} forgets it.  SSH
        connections that logged in with it go on (docs/ssh.md).
        """
        if self.sshKeys is not None:
            self.sshKeys.removed(fingerprint)

    def _ask(self, call: Callable[[], Deferred[Any]]) -> Deferred[Any]:
        health = self.storeHealth
        if not health.available:
            return _unavailable(health.where)

        def failed(failure: Failure) -> Failure:
            health.failed(failure)
            return failure

        return call().addErrback(failed)

    def checkKey(self, plaintext: str) -> Deferred[bool]:
        """
        Whether C{plaintext} is a valid API key, not revoked (for the
        WebSocket upgrade, before the link's own hello).
        """
        d = self.verifyKey(plaintext)
        return d.addCallback(
            lambda key: key is not None and not key.revoked
            and not self.directory.isRevoked(key.keyid)
        )

    def servesHere(self, name: str) -> bool:
        """
        Whether this relay serves the clients of agent C{name} itself: one
        of its agents holds the name and, for a load-balancing group's, not
        every one of them withdrew its service.  Otherwise, on a replica,
        the cluster's routes say (C{remote}): another replica's members of
        the group may serve them.
        """
        entry = self.directory.agent(name)
        return entry is not None and (entry.group is None or not self.directory.withdrawn(name))

    def agentHolders(self) -> list[tuple[str, IAgentHolder]]:
        """
        The name and holder of each live agent.
        """
        return [(entry.name, entry.holder) for entry in self.directory.agents()]

    # -- the one claim place ----------------------------------------------------

    def admitAgent(self, entry: AgentEntry, replace: bool = True) -> None:
        """
        The one check of an agent's claim to its name, for native agents and
        SSH connections (L{check_agent_claim}, under C{maxAgents}).

        @raise ClaimRefused: why not.
        """
        check_agent_claim(self.directory, entry, self.clock.seconds(), self.maxAgents, replace)

    def claimAgent(self, entry: AgentEntry, replace: bool = True) -> AgentEntry | None:
        """
        Register C{entry} under its name if L{admitAgent} allows; the agent
        it replaces, if another holder's, is refused (L{REPLACED}).

        @return: the agent it replaced.
        @raise ClaimRefused: why not.
        """
        self.admitAgent(entry, replace)
        before = self.directory.members(entry.name)
        old = self.directory.claimAgent(entry, self.clock.seconds())
        after = {id(m.holder) for m in self.directory.members(entry.name)}
        for replaced in before:  # a whole group is replaced by a non-member
            if id(replaced.holder) not in after:
                replaced.holder.refuse(RefusalReason.CONFLICT, REPLACED)
        shares = [] if self.shares is None else self.shares.heldBy(entry.holder)
        self.presence.agentClaimed(entry, shares)
        self.memberHealth([entry.name])
        return old

    def reserveNames(self, account: str, names: Sequence[str]) -> Deferred[None]:
        """
        Before a claim: make sure no other account holds any of C{names}
        wherever the lease table reaches, and keep them for C{account}
        (L{ILeases.reserve}: at once on a relay of its own; across relays
        and restarts on a Redis directory).  A directory found unavailable
        marks the store down.

        @return: fails with L{NameLeased} or L{StoreUnavailable}.
        """
        d = self.directory.leases.reserve(names, account, self.clock.seconds())

        def failed(failure: Failure) -> Failure:
            self.storeHealth.failed(failure)
            return failure

        return d.addErrback(failed)

    def releaseAgent(self, entry: AgentEntry) -> bool:
        """
        C{entry} gives its name up (its lease runs); whether it still held it.
        """
        released = self.directory.releaseAgent(entry, self.clock.seconds())
        if released and self.directory.agent(entry.name) is None:
            self.presence.agentReleased(entry)
        elif released:  # its group's other members here hold the name
            self.memberHealth([entry.name])
        return released

    def publishShares(
        self, holder: IAgentHolder, account: str, shares: Sequence[HttpShare],
        group: str | None = None,
    ) -> list[dict[str, Any]]:
        """
        Publish C{shares} for C{holder} of C{account}, whose sessions it
        opens (L{ShareRegistry.publish}): all or, with L{ShareRefused},
        none.  The holders whose shares they take over are refused
        (L{REPLACED}), but not those of the same account's C{group}, which
        C{holder} joins (L{nfltr.relay.groups}).

        @return: the C{shares} of the welcome message.
        """
        registry = self.shares
        if registry is None:
            raise ShareRefused(RefusalReason.INVALID, NO_SHARE_URLS)
        before = [h for share in shares if not registry.joins(share.name, account, group)
                  for h in registry.holdersOf(share.name)]
        answers = registry.publish(holder, account, shares, lambda: holder, group)
        replaced = {id(h): h for h in before if h is not None and h is not holder}
        for old in replaced.values():
            old.refuse(RefusalReason.CONFLICT, REPLACED)
        self.presence.sharesPublished(account, [(share.name, share.mode) for share in shares],
                                      [share.name for share in shares if share.plain], group)
        self.memberHealth(shares=[share.name for share in shares])
        return answers

    def withdrawShares(self, holder: IAgentHolder, name: str | None = None) -> list[str]:
        """
        Remove the share routes C{holder} still holds (only C{name}, if
        given); their leases run.  Without C{name}, its public ports go too.
        """
        if name is None and self.publicPorts is not None:
            self.publicPorts.withdraw(holder)
        if name is None and self.publicUDPPorts is not None:
            self.publicUDPPorts.withdraw(holder)
        names = [] if self.shares is None else self.shares.withdraw(holder, name)
        gone = [n for n in names if self.shares is not None and self.shares.holderOf(n) is None]
        if gone:  # a group's other members keep the rest
            self.presence.sharesWithdrawn(gone)
        self.memberHealth(shares=[n for n in names if n not in gone])
        return names

    def memberHealth(self, agents: Sequence[str] = (), shares: Sequence[str] = ()) -> None:
        """
        Tell the other replicas whether every member here of each agent
        name in C{agents} and share in C{shares} withdrew its service
        (L{IPresence.memberHealth}: for a group's names only): after a
        health change, a claim or a release.
        """
        for name in agents:
            self.presence.memberHealth(AGENT, name, self.directory.withdrawn(name))
        for name in shares:
            withdrawn = self.shares is not None and self.shares.withdrawn(name)
            self.presence.memberHealth(SHARE_RECORD, name, withdrawn)

    def publishPorts(
        self, holder: IAgentHolder, account: str, requests: Sequence[PortRequest],
        group: str | None = None,
    ) -> list[dict[str, int]]:
        """
        Publish the public ports C{requests} for C{holder} of C{account}
        (L{PublicPorts.publish}): all or, with L{PublicPortRefused}, none.
        The holders whose ports they take over are refused (L{REPLACED}),
        but not those of the same account's C{group}, which C{holder} joins.

        @return: the C{public_ports} of the welcome message.
        """
        ports = self.publicPorts
        if ports is None:
            raise PublicPortRefused(RefusalReason.INVALID, PORTS_NOT_ENABLED)
        before = [h for r in requests if r.public and not ports.joins(r.public, account, group)
                  for h in _holders(ports.entry(r.public))]
        answers = ports.publish(holder, account, requests, group)
        replaced = {id(h): h for h in before if h is not None and h is not holder}
        for old in replaced.values():
            old.refuse(RefusalReason.CONFLICT, REPLACED)
        return answers

    def withdrawPort(self, holder: IAgentHolder, port: int) -> None:
        """
        Stop public port C{port} if C{holder} still holds it; its lease runs.
        """
        if self.publicPorts is not None:
            self.publicPorts.withdraw(holder, port)

    # -- turning away -------------------------------------------------------------

    def revoke(self, keyid: str) -> int:
        """
        Turn away every link authenticated with C{keyid}, now and later:
        agents' first links and data connections, clients, SSH connections,
        draining or not.

        @return: how many links were closed.
        """
        self.directory.markRevoked(keyid)
        holders = self.directory.linksFor(keyid)
        self.log.info(
            "API key {keyid} was revoked: closing {count} link(s)",
            keyid=keyid, count=len(holders),
        )
        for holder in holders:
            holder.refuse(RefusalReason.REVOKED, revoked_message(keyid))
        return len(holders)

    def closeAll(self, timeout: float) -> Deferred[Any]:
        """
        Drain every link (see L{LinkProtocol.drain}); fires once all are
        closed.
        """
        links = [h.link for h in self.handlers if h.link is not None]
        if links:
            self.log.info(
                "draining {count} link(s): sessions in flight have {timeout:g}s to finish",
                count=len(links), timeout=timeout,
            )
        return gatherResults([link.drain(timeout) for link in links])


def _holders(entry: Any) -> list[Any]:
    """
    The holders of a public port's entry, if any.
    """
    if entry is None:
        return []
    return [entry.holder] if entry.members is None else list(entry.members.members)


def _unavailable(where: str) -> Deferred[Any]:
    d: Deferred[Any] = Deferred()
    d.errback(StoreUnavailable(f"the key store ({where}) is unavailable"))
    return d
