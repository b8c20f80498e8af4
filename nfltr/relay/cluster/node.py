# -*- test-case-name: tests.relay.cluster.test_service,tests.integration.test_replicas -*-
"""
L{Replica}: what a relay started with C{--replica-listen} runs beside its
public listeners (L{nfltr.relay.service.RelayService} starts and stops it).

At start it takes a random id (a restarted replica is a new one: its agents
reconnect anyway), loads the cluster CA (C{--cluster-ca}) and has it sign a
certificate for that id, listens for the replica link with mutual TLS,
registers the link's address in the directory, and installs its presence
(L{nfltr.relay.cluster.presence}) and its routes to the other replicas
(L{nfltr.relay.cluster.routes}) in the relay.  When the relay drains,
it first hands its agents over (L{Replica.handOver}: they move to other
replicas while their links here still take sessions); then, at stop, it
removes its records (the others stop routing here at once), stops
listening and drains its replica links, within the relay's drain timeout.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import Deferred, gatherResults
from twisted.logger import Logger

from nfltr import __version__
from nfltr.link import LISTENER, RefusalReason
from nfltr.link.twisted import LinkFactory, LinkHandler, LinkProtocol
from nfltr.store import IPresenceTable
from nfltr.tls import ClusterCA, PKIError, ReplicaTLS, tls_factory

from ..agents import Relay
from ..deferreds import passing
from ..handover import hand_over
from ..interfaces import IShareRoutes
from ..names import REPLACED
from ..store_health import StoreHealth
from ..vhost import Chooser
from .config import ReplicaConfig
from .counters import ReplicaCounters
from .key_cache import KeyCache
from .listener import ReplicaLinkHandler
from .metrics import ReplicaCollector
from .peers import Peers, tls_dialler
from .presence import AGENT, SHARE, RedisPresence
from .presence_cache import PresenceCache
from .routes import ClusterPlainRoutes, ClusterShareRoutes, RemoteRoutes
from .ssh_key_cache import SSHKeyCache

Listen = Callable[[str, str, Any], Awaitable[Any]]
_WILDCARDS = ("0.0.0.0", "::", "")


def replica_hello(replica: str) -> dict[str, Any]:
    """
    What a replica says in its replica links' hellos.
    """
    return {"role": "replica", "replica": replica, "version": __version__}


class Replica:
    """
    This relay as a replica of a cluster; see the module.

    @ivar id: this replica's id (random, per start).
    @ivar address: the C{HOST:PORT} registered for its replica link.
    """

    log = Logger()

    def __init__(self, config: ReplicaConfig, relay: Relay, table: IPresenceTable,
                 health: StoreHealth, reactor: Any, memory: Any = None) -> None:
        self.config = config
        self.relay = relay
        self.reactor = reactor
        self.memory = memory
        self.id = secrets.token_hex(8)
        self.address: str | None = None
        cache = PresenceCache(reactor, entries=config.presence_cache_entries,
                              limit=config.presence_stale_limit)
        self.presence = RedisPresence(table, self.id, reactor, health=health, cache=cache,
                                      ttl=config.presence_ttl, refresh=config.presence_ttl / 3)
        self.presence.lost = replaced_elsewhere(relay)
        self.keys = KeyCache(reactor, relay.directory.isRevoked,
                             entries=config.presence_cache_entries,
                             limit=config.presence_stale_limit)
        self.sshKeys = SSHKeyCache(reactor, relay.storeHealth,
                                   entries=config.presence_cache_entries,
                                   limit=config.presence_stale_limit)
        self.tls: ReplicaTLS | None = None
        self.peers: Peers | None = None
        self.routes: RemoteRoutes | None = None
        self.counters = ReplicaCounters()
        self._port: Any = None
        self._stopping: Deferred[Any] | None = None
        self._accepted: set[LinkProtocol] = set()

    async def start(self, listen: Listen) -> None:
        """
        Listen, register, and route through the cluster (see the module).

        @param listen: binds an endpoint string for an option (the relay's
            own, which names the option in its error).
        @raise PKIError: the cluster CA cannot be loaded, or the bound
            address is a wildcard and no C{--replica-address} was given.
        """
        tls = self.tls = ClusterCA.load(self.config.cluster_ca).replica(self.id)
        links = LinkFactory(LISTENER, self._accept, self.reactor, memory=self.memory)
        links.noisy = False
        self._port = await listen("--replica-listen", self.config.listen,
                                  tls_factory(tls.server(), False, links, self.reactor))
        self.address = self.config.address or _bound(self._port.getHost())
        relay = self.relay
        relay.presence = self.presence
        relay.sshKeys = self.sshKeys
        dial = tls_dialler(tls, self.reactor, replica_hello(self.id))
        self.peers = Peers(self.presence.replicaAddress, dial, self.config.links, self.reactor,
                           self.counters)
        self.routes = relay.remote = RemoteRoutes(relay, self.presence, self.peers,
                                                  self.reactor)
        self.presence.register(self.address)
        self.presence.start()
        self.log.info("replica {id}: replica link on {address} (mutual TLS, cluster CA {ca})",
                      id=self.id, address=self.address, ca=str(self.config.cluster_ca))

    def shareRoutes(self, local: IShareRoutes) -> IShareRoutes:
        """
        The TLS port's routing table: C{local}'s shares, then the cluster's.
        """
        assert self.routes is not None
        return ClusterShareRoutes(local, self.routes)

    def plainRoutes(self) -> Chooser:
        """
        The HTTP port's choice of a plain-HTTP share: this replica's, then
        the cluster's (L{ClusterPlainRoutes}).
        """
        assert self.routes is not None and self.relay.shares is not None
        return ClusterPlainRoutes(self.relay.shares, self.routes)

    def _accept(self) -> LinkHandler:
        return _Accepted(self.relay, self._accepted, self.counters, self.keys)

    def collector(self) -> ReplicaCollector:
        """
        Its metrics' collector (L{nfltr.relay.cluster.metrics}).
        """
        assert self.peers is not None
        return ReplicaCollector(self.counters, self.peers, self._accepted,
                                self.presence.cache, self.keys, self.sshKeys)

    def handOver(self) -> Deferred[None]:
        """
        Ask this replica's agents to move to other replicas, and wait until
        they did, at most the configured C{handover_wait}
        (L{nfltr.relay.handover}).  Meanwhile a record that another replica
        took is given up without turning its holder here away: an agent that
        moved drains its old link itself, sessions in flight included.
        """
        self.presence.lost = lambda kind, name: None
        return hand_over(self.relay, self.config.handover_wait, self.reactor)

    def stop(self, timeout: float) -> Deferred[Any]:
        """
        Withdraw from the directory, stop listening, drain the replica links
        (sessions in flight have C{timeout} seconds).  Called again, it
        waits for the first call's stop.
        """
        if self._stopping is not None:
            waiter: Deferred[Any] = Deferred()
            self._stopping.addBoth(passing(lambda: waiter.callback(None)))
            return waiter

        async def stop() -> None:
            await self.presence.stop()
            if self._port is not None:
                await self._port.stopListening()
            drains = [link.drain(timeout) for link in list(self._accepted)]
            if self.peers is not None:
                drains.append(self.peers.close(timeout))
            await gatherResults(drains)

        self._stopping = Deferred.fromCoroutine(stop())
        return self._stopping


class _Accepted(ReplicaLinkHandler):
    """
    A replica link this replica accepted, listed while it lives (to drain
    it at stop).
    """

    def __init__(self, relay: Relay, accepted: set[LinkProtocol],
                 counters: ReplicaCounters, keys: KeyCache) -> None:
        super().__init__(relay, keys)
        self.accepted = accepted
        self.counters = counters

    def linkEstablished(self, link: LinkProtocol) -> None:
        self.accepted.add(link)
        super().linkEstablished(link)

    def linkLost(self, link: LinkProtocol, reason: Any) -> None:
        self.accepted.discard(link)
        self.counters.linkEnded(link)
        super().linkLost(link, reason)


def _bound(host: Any) -> str:
    """
    The address a listener bound, to register.

    @raise PKIError: it is a wildcard (other replicas could not dial it).
    """
    if not isinstance(host, IPv4Address | IPv6Address) or host.host in _WILDCARDS:
        raise PKIError("--replica-listen binds every interface: give --replica-address "
                       "HOST:PORT, the address the other replicas dial")
    text = f"[{host.host}]" if isinstance(host, IPv6Address) else host.host
    return f"{text}:{host.port}"


def replaced_elsewhere(relay: Relay) -> Callable[[str, str], None]:
    """
    What L{RedisPresence.lost} does in a relay: the local holder of an agent
    or share whose record another replica took (a newer holder of the name
    connected there) is turned away with C{REPLACED}, as one relay turns
    away the holder a newer one replaces (a group's members here, all of
    them: a holder that is no member of their group replaced them).
    """

    def lost(kind: str, name: str) -> None:
        holders: list[Any] = []
        if kind == AGENT:
            holders = [entry.holder for entry in relay.directory.members(name)]
        elif kind == SHARE and relay.shares is not None:
            holders = relay.shares.holdersOf(name)
        for holder in holders:  # a group's every member here
            holder.refuse(RefusalReason.CONFLICT, REPLACED)

    return lost
