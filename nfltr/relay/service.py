# -*- test-case-name: tests.relay.test_service -*-
"""
L{RelayService}: one relay process's start-up and shut-down.

Starting: create the data directory (0700), the PKI
(L{nfltr.tls.ensure_relay_pki}), the key store (SQLite in a thread pool the
service owns or, with C{--directory}, a L{nfltr.store.RedisStore}), then the
listeners, each from an endpoint string: the TLS
listener and the admin web site, each with the relay's listen backlog
(L{nfltr.relay.backlog}).  On the TLS listener an SNI router
(L{nfltr.relay.tls_port.tls_port_factory}) reads each ClientHello without
ending TLS: the relay's own names go to its own TLS stack (the relay adds
TLS itself, then tells link connections from other bytes, see
L{nfltr.relay._sniff}), share names to their share (L{RelayService.shares}),
others get an alert.  Once both are bound it writes C{relay.json}
(L{nfltr.relay.relay_json}) and starts polling for revoked keys (and, with
a store that announces them, listening: L{nfltr.relay.revocation}).

A Redis directory that does not answer at start does not stop the relay
(established work needs nothing from it): the relay starts without a
revision to poll from, refuses new links with C{STORE_UNAVAILABLE} and
answers C{/readyz} with 503 until the store answers
(L{nfltr.relay.store_health}); the same holds whenever it goes away later.

Stopping undoes what was done, in reverse: C{relay.json} removed, polling
stopped, the public listeners closed, links and SSH connections drained side
by side (a GOAWAY on each link; sessions and channels in flight may finish
within C{config.drain_timeout}, C{--drain-timeout}), then the admin listener
closed (it answers C{/readyz} with 503 during the drain), store closed,
thread pool stopped.  A start that fails undoes itself the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import (
    CancelledError,
    Deferred,
    ensureDeferred,
    gatherResults,
    maybeDeferred,
)
from twisted.internet.error import CannotListenError
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from nfltr import __version__
from nfltr.link.memory import LinkMemory
from nfltr.sni.twisted import SNIRouterFactory
from nfltr.store import (
    IRevocationFeed,
    IStore,
    OwnerLock,
    SQLiteStore,
    StoreError,
    StoreUnavailable,
    claim_owner,
)
from nfltr.streams import Admission, FirstUseFactory
from nfltr.tls import (
    PKIError,
    ShareCA,
    ensure_relay_pki,
)
from nfltr.tor import OnionKeyError
from nfltr.udp import DatagramCounts

from .announce import announce, describe
from .certs import RelayCertificate
from .config import RelayConfig, database_path, state_file_path
from .deferreds import passing
from .leases import ILeases, Leases
from .link_handler import Relay
from .listener_error import ListenerError
from .onion import RelayOnion, local_target, relay_onion
from .proxy_front import REFUSALS as PROXY_REFUSALS
from .proxy_front import proxy_front
from .public_listener import public_ports
from .public_udp import public_udp_ports
from .relay_json import RelayInfo, remove_state_file, write_state_file
from .reuseport import server_endpoint
from .revocation import RevocationListener, RevocationPoller
from .shared_leases import SharedLeases
from .shares import ShareRegistry
from .store_health import StoreHealth
from .succession import SuccessorWatch, listen_after_predecessor, predecessor_pid
from .takeover import TakeoverError, adopt, claim_when_free, offer_listeners, take_over
from .tls_port import LOCAL_NAME, check_share_domain, own_names, tls_port_factory
from .vhost import HostRouterFactory

DATA_DIR_MODE = 0o700
#: The SSH host keys' directory in the data directory.
SSH_KEY_DIR = "ssh"
#: The lock file that keeps one relay per data directory (L{nfltr.store.claim_owner}).
OWNER_LOCK = "relay.lock"
STORE_THREADS = 1

# Start-up errors an operator can act on: logged in one line, no traceback.
EXPECTED_START_ERRORS = (
    CannotListenError, PKIError, StoreError, OSError, OnionKeyError, TakeoverError,
)


Cleanup = Callable[[], Any]


class RelayService(Service):
    """
    Runs one relay.

    @ivar config: what to run.
    @ivar reactor: the reactor (TCP, time, threads), injected.
    @ivar relay: the shared state of the link handlers, once started.
    @ivar info: what C{relay.json} says, once started.
    @ivar shares: the share URLs agents publish, and any fixed routes
        added with its C{add} (kept across a restart of the service).
    @ivar router: the TLS port's router factory (its C{refused} and
        C{routed} counters), once started.
    @ivar tlsAdmission: the TLS port's admission (its C{refused} counters).
    @ivar ready: listening and not stopping (C{/readyz} also wants the
        store up: L{storeHealth}).
    @ivar storeHealth: whether the key store answers, once started.
    @ivar httpAdmission: the HTTP port's, if there is one.
    @ivar linkMemory: what the links hold for their peers, and its limit
        (C{--link-memory}), shared by every link the relay accepts.
    @ivar replica: with C{--replica-listen}, the relay as a replica of a
        cluster (L{nfltr.relay.cluster.node.Replica}), once started.
    @ivar onion: its onion service (C{--onion}), once started.
    """

    name = "relay"
    log = Logger()

    def __init__(self, config: RelayConfig, reactor: Any) -> None:
        self.config = config
        self.reactor = reactor
        self.relay: Relay | None = None
        self.info: RelayInfo | None = None
        self.shares = ShareRegistry(None, reactor, ())
        self.router: SNIRouterFactory | None = None
        self.tlsAdmission: Admission | None = None
        self.ready = False
        self.storeHealth: StoreHealth | None = None
        self.httpAdmission: Admission | None = None
        self.linkMemory = LinkMemory(config.link_memory, getattr(reactor, "seconds", None))
        #: Connections refused by the PROXY protocol front of every listener.
        self.proxyRefused = dict.fromkeys(PROXY_REFUSALS, 0)
        #: The datagrams of every public UDP port (L{nfltr.relay.public_udp}).
        self.udpCounts = DatagramCounts()
        self.certificate: RelayCertificate | None = None
        self.sshFactory: Any = None
        self.replica: Any = None
        self.onion: RelayOnion | None = None
        self._adminPort: Any = None
        #: Sockets taken over from a predecessor (C{--takeover}), by role, until used.
        self._adopted: dict[str, int] = {}
        self._api: Any = None
        self._health: StoreHealth | None = None
        self._statePath: Path | None = None
        self._cleanups: list[Cleanup] = []
        self._starting: Deferred[RelayInfo] | None = None
        self._outcome: RelayInfo | Failure | None = None
        self._observers: list[Deferred[RelayInfo]] = []
        self._undoing: Deferred[None] | None = None
        self._undoWaiters: list[Deferred[None]] = []

    def whenReady(self) -> Deferred[RelayInfo]:
        """
        A Deferred that fires with the L{RelayInfo} once the relay listens,
        or fails with the reason it could not start.
        """
        if self._outcome is not None:
            return _settled(self._outcome)
        d: Deferred[RelayInfo] = Deferred()
        self._observers.append(d)
        return d

    def startService(self) -> None:
        """
        Start in the background; see L{whenReady}.
        """
        super().startService()
        self._starting = ensureDeferred(self._start())
        self._starting.addBoth(self._settle)

    def _settle(self, outcome: RelayInfo | Failure) -> None:
        self._starting = None
        if isinstance(outcome, Failure):
            if outcome.check(*EXPECTED_START_ERRORS):
                self.log.error("the relay could not start: {error}", error=outcome.value)
            elif not outcome.check(CancelledError):
                self.log.failure("the relay could not start", outcome)
            d = self._undo()
            d.addBoth(lambda _: self._notify(outcome))
        else:
            self.info = outcome
            self._notify(outcome)

    def _notify(self, outcome: RelayInfo | Failure) -> None:
        self._outcome = outcome
        observers, self._observers = self._observers, []
        for d in observers:
            _settled(outcome).chainDeferred(d)

    async def _start(self) -> RelayInfo:
        dataDir = Path(self.config.data_dir).absolute()
        dataDir.mkdir(mode=DATA_DIR_MODE, parents=True, exist_ok=True)
        owner, predecessor = await self._claimOrTakeOver(dataDir)
        # With --onion, the onion address is among the relay's names (docs/tor.md).
        onion = self.onion = relay_onion(self.config, dataDir, self.reactor)
        config = self.config = self.config if onion is None else onion.effective(self.config)
        domain = check_share_domain(config.share_domain)
        pki = ensure_relay_pki(dataDir, list(config.names), share_domain=domain)
        own = self.certificate = RelayCertificate(
            config.cert or pki.cert, config.key or pki.key
        )
        creator = own.tls
        store, health, leases = self._openStore(dataDir)
        self.shares = ShareRegistry(
            ShareCA.load(pki, domain), self.reactor, own_names(config.names), leases,
            self.shares.static, operator=own if config.cert is not None else None,
        )
        self.shares.inspectRate = config.inspect_rate
        self.shares.h2limits = config.h2_limits
        revision = await self._firstRevision(store, health)
        relay = self.relay = Relay(
            store, self.reactor, self.shares, config.max_agents, self.shares.counters,
            peerDrainTimeout=config.peer_drain_timeout, storeHealth=health,
        )
        self.replica = await self._startReplica(relay, store, health)
        # Registered before the drain so that it runs after it (cleanups run last first): the
        # admin listener answers /readyz with 503 for as long as the relay drains, unless a
        # successor takes the data directory meanwhile (L{nfltr.relay.succession}).
        self._cleanups.append(self._closeAdmin)
        self._cleanups.append(
            lambda: self._drain(relay, config.drain_timeout, dataDir / OWNER_LOCK)
        )
        httpPort = None
        # Bound before the TLS port, so share URLs name its port from the first agent on.
        if config.http is not None:
            from .redirect import redirect_site  # here: twisted.web (see _adminSite)

            fallback = config.names[0] if config.names else LOCAL_NAME
            site = redirect_site(fallback, lambda: self.shares.port, self.reactor)
            front = HostRouterFactory(  # on a replica, the cluster's plain-HTTP shares too
                self.shares.plainRoute if self.replica is None else self.replica.plainRoutes(),
                site, self.reactor)
            front.admission = self.httpAdmission = Admission(config.admission)
            httpPort = await self._listen("--http", config.http, front, "http")
            self._cleanups.append(httpPort.stopListening)
            self.shares.httpPort = httpPort.getHost().port
        tlsPort = await self._listen("--tls", config.tls, self._tlsFactory(relay, creator), "tls")
        self._cleanups.append(tlsPort.stopListening)
        self.shares.port = config.public_port or tlsPort.getHost().port
        if config.public_ports:
            relay.publicPorts = public_ports(relay, config, self.reactor, self.proxyRefused)
            self._cleanups.append(relay.publicPorts.close)
            relay.publicUDPPorts = public_udp_ports(relay, config, self.reactor, self.udpCounts)
            self._cleanups.append(relay.publicUDPPorts.close)
        sshPort = await self._listenSSH(relay, store, dataDir)
        if onion is not None:
            self._startOnion(onion, tlsPort, sshPort)
        self._health = health
        adminPort = await self._listenAdmin(FirstUseFactory(self._adminSite), predecessor)
        await self._watchRevocations(store, relay, health, revision)
        info = describe(self.config, pki, self.certificate, self.onion, tlsPort,
                        adminPort=adminPort, httpPort=httpPort, sshPort=sshPort)
        self._cleanups.append(await offer_listeners(
            self.reactor, dataDir, {"tls": tlsPort, "http": httpPort, "ssh": sshPort}))
        path = self._statePath = state_file_path(dataDir)
        write_state_file(path, info)
        self._cleanups.append(lambda: remove_state_file(path, info.pid))
        self._cleanups.append(owner.release)
        announce(self.log, self.config, info, self.shares.port)
        self.ready = True
        return info

    def _openStore(self, dataDir: Path) -> tuple[IStore, StoreHealth, ILeases]:
        """
        The key store (closed by the cleanups), its health and the lease
        table: SQLite in C{dataDir}, in a thread pool of the service's, and
        leases in memory; or the Redis directory of C{--directory}, leases
        kept there too (txredisapi is imported only then).
        """
        config = self.config
        address = config.directory
        if address is None:
            pool = ThreadPool(minthreads=STORE_THREADS, maxthreads=STORE_THREADS,
                              name="nfltr-store")
            pool.start()
            self._cleanups.append(pool.stop)
            path = database_path(dataDir)
            sqlite = SQLiteStore(path, self.reactor, pool)
            self._cleanups.append(sqlite.close)
            health = self.storeHealth = StoreHealth(str(path), self.reactor)
            return sqlite, health, Leases(config.lease_time)
        from nfltr.store import RedisStore

        redis = RedisStore(self.reactor, address)
        self._cleanups.append(redis.close)
        where = address.describe()
        self.log.info("accounts, keys and name leases in the Redis directory {where}",
                      where=where)
        health = self.storeHealth = StoreHealth(where, self.reactor)
        health.commandTimes = redis.commandTimes
        leases = SharedLeases(redis.lease_table(), self.reactor, config.lease_time,
                              health=health)
        leases.start()
        self._cleanups.append(leases.stop)
        return redis, health, leases

    async def _startReplica(self, relay: Relay, store: IStore, health: StoreHealth) -> Any:
        """
        With C{--replica-listen}: run as a replica of a cluster
        (L{nfltr.relay.cluster.node.Replica}, imported only then), stopped
        after the links drained.
        """
        config = self.config.replica
        if config is None:
            return None
        from nfltr.store import RedisStore

        from .cluster.node import Replica

        assert isinstance(store, RedisStore)  # relay_config: --replica-listen needs --directory
        replica = Replica(config, relay, store.presence_table(), health, self.reactor,
                          self.linkMemory)
        self._cleanups.append(lambda: replica.stop(self.config.drain_timeout))
        await replica.start(self._listen)
        return replica

    async def _firstRevision(self, store: IStore, health: StoreHealth) -> int | None:
        """
        The store's revision, where polling for revocations starts; with a
        Redis directory that does not answer, L{None} (the relay starts
        without it, the store marked down: see the module).
        """
        try:
            return await store.revision()
        except StoreUnavailable as e:
            if self.config.directory is None:
                raise
            health.failed(e)
            return None

    async def _watchRevocations(
        self, store: IStore, relay: Relay, health: StoreHealth, revision: int | None,
    ) -> None:
        """
        Poll for revocations and, from a store that announces them, listen
        (subscribed before the relay says it is ready, if the store is up).
        """
        poller = RevocationPoller(store, relay, self.reactor, self.config.revocation_poll,
                                  revision, health)
        poller.start()
        self._cleanups.append(poller.stop)
        feed = IRevocationFeed(store, None)
        if feed is not None:
            listener = RevocationListener(feed, poller.revoked, self.reactor, poller.sshKeyRemoved)
            self._cleanups.append(listener.stop)
            started = listener.start()
            if health.available:
                await started

    def _adminSite(self) -> Any:
        """
        The admin listener's site, made for its first connection: twisted.web
        (and prometheus_client, on the first C{/metrics}) is loaded then, not
        when the relay starts (resident memory: docs/benchmarks.md, "Memory").
        C{/readyz} is ready while the relay runs and its store answers.
        """
        from .admin import admin_site
        from .metrics import MetricsResource, metrics_registry

        def ready() -> bool:
            onion = self.onion is None or self.onion.up
            return self.ready and onion and (self._health is None or self._health.available)

        metrics = MetricsResource(lambda: metrics_registry(self))
        return admin_site(ready, metrics, self.reactor, self._apiResources(ready))

    def _apiResources(self, ready: Callable[[], bool]) -> dict[bytes, Any]:
        """
        The API and the dashboard (L{nfltr.relay.api}); draining through
        them stops the relay as a signal would.
        """
        from .api import RelayView, api_resources

        reactor = self.reactor
        view = RelayView(lambda: self.relay, lambda: self.shares, reactor,
                         lambda: reactor.callLater(0, reactor.stop), ready, __version__)
        assert self.relay is not None
        api, children = api_resources(view, self.relay.store, reactor, self.config.api)
        self._api = api
        return children

    async def _listenSSH(self, relay: Relay, store: IStore, dataDir: Path) -> Any:
        """
        The SSH port, if configured (conch is only imported then).
        """
        config = self.config
        if config.ssh is None:
            return None
        from nfltr.relay.ssh import ssh_factory

        host = config.names[0] if config.names else LOCAL_NAME
        bound: list[int] = []
        factory = ssh_factory(
            relay, config.ssh_config, store, dataDir / SSH_KEY_DIR, self.reactor,
            lambda: (host, bound[0] if bound else 22), Admission(config.admission),
        )
        self.sshFactory = factory
        port = await self._listen("--ssh", config.ssh, factory, "ssh")
        bound.append(getattr(port.getHost(), "port", 22))
        # Its connections drain with the links (L{_drain}), once it stopped listening.
        self._cleanups.append(port.stopListening)
        return port

    def _startOnion(self, onion: RelayOnion, tlsPort: Any, sshPort: Any) -> None:
        """
        Bring the onion service up in the background (L{nfltr.relay.onion}); share URLs name
        its port when the share domain is the onion address.
        """
        settings = onion.config
        ports = [(settings.tls_port, local_target(tlsPort.getHost()))]
        if settings.ssh_port is not None and sshPort is not None:
            ports.append((settings.ssh_port, local_target(sshPort.getHost())))
        if self.config.share_domain == onion.address and self.config.public_port is None:
            self.shares.port = settings.tls_port
        onion.start(ports)
        self._cleanups.append(onion.stop)

    def _drain(self, relay: Relay, timeout: float, lock: Path) -> Deferred[Any]:
        """
        A replica hands its agents over (L{nfltr.relay.handover}), then the links, SSH
        connections and replica links (L{nfltr.relay.cluster.node.Replica.stop}) drain side by
        side: sessions in flight may finish within C{timeout}.  A successor that takes the data
        directory's C{lock} meanwhile gets the admin address.
        """
        watch = SuccessorWatch(self.reactor, lock, self._closeAdmin)
        watch.start()
        replica, ssh = self.replica, self.sshFactory

        async def drain() -> None:
            if replica is not None:
                await replica.handOver()
            await gatherResults([relay.closeAll(timeout)]
                                + ([] if ssh is None else [ssh.drain(timeout)])
                                + ([] if replica is None else [replica.stop(timeout)]))

        return Deferred.fromCoroutine(drain()).addBoth(passing(watch.stop))

    def _claim(self, dataDir: Path) -> tuple[OwnerLock, int | None]:
        """
        Take the data directory for this relay, before anything in it is read or written: a
        second relay here would share the database and take over relay.json.  The lock is
        let go first when the relay stops, so a successor can start while this one drains.

        @return: the lock, and the pid of a predecessor still draining, if there is one.
        @raise DirectoryInUse: another relay runs on it.
        """
        predecessor = predecessor_pid(dataDir / OWNER_LOCK, os.getpid())
        owner = claim_owner(
            dataDir / OWNER_LOCK, f"the data directory {dataDir}",
            "give this relay another --data-dir",
        )
        self._cleanups.append(owner.release)
        return owner, predecessor

    async def _listenAdmin(self, site: Any, predecessor: int | None) -> Any:
        """
        The admin listener, once a draining C{predecessor} let its address go.
        """
        spec = self.config.admin
        try:
            self._adminPort = await listen_after_predecessor(
                self.reactor, lambda: self._endpoint(spec).listen(site), predecessor,
            )
        except CannotListenError as e:
            raise ListenerError("--admin", spec, e) from None
        return self._adminPort

    def _closeAdmin(self) -> Deferred[Any] | None:
        """
        Stop the admin listener, if it listens (once).
        """
        port, self._adminPort = self._adminPort, None
        if self._api is not None and self._api.events is not None:
            self._api.events.close()
        return None if port is None else port.stopListening()

    async def _listen(self, option: str, spec: str, factory: Any, role: str = "") -> Any:
        """
        Listen on C{spec}, the value of C{option}; a failure names both.  A
        socket taken over for C{role} (C{--takeover}) is used instead.
        """
        config = self.config
        front = proxy_front(factory, config.proxy_from, self.reactor, config.handshake_timeout,
                            self.proxyRefused)
        fd = self._adopted.pop(role, None)
        if fd is not None:
            return adopt(self.reactor, fd, front)
        try:
            return await self._endpoint(spec).listen(front)
        except CannotListenError as e:
            raise ListenerError(option, spec, e) from None

    async def _claimOrTakeOver(self, dataDir: Path) -> tuple[OwnerLock, int | None]:
        """
        L{_claim}; with C{--takeover}, once the running relay handed its
        sockets over (L{nfltr.relay.takeover}) and let the directory go.
        """
        if not self.config.takeover:
            return self._claim(dataDir)
        self._adopted = await take_over(self.reactor, dataDir)
        return await claim_when_free(self.reactor, lambda: self._claim(dataDir))

    def _endpoint(self, spec: str) -> Any:
        """
        The listener of endpoint string C{spec} (C{reuseport:}, or
        Twisted's), with the relay's listen backlog unless C{spec} names one
        (L{nfltr.relay.reuseport}).
        """
        return server_endpoint(self.reactor, spec, self.config.backlog)

    def _tlsFactory(self, relay: Relay, creator: Any) -> SNIRouterFactory:
        shares = self.shares if self.replica is None else self.replica.shareRoutes(self.shares)
        self.router = tls_port_factory(
            relay, creator, self.config, shares, self.reactor, self.linkMemory
        )
        self.router.admission = self.tlsAdmission = Admission(self.config.admission)
        return self.router

    def reload(self) -> bool:
        """
        Read the relay's certificate and key again (SIGHUP): new connections
        get them, and C{relay.json} names the new fingerprint; a failure
        keeps those in use.

        @return: whether the new ones are in use.
        """
        if self.certificate is None or not self.certificate.reload():
            return False
        info = self.info
        if info is not None and self._statePath is not None:
            self.info = replace(info, fingerprint=self.certificate.fingerprint)
            write_state_file(self._statePath, self.info)
        return True

    def stopService(self) -> Deferred[None]:
        """
        Stop: cancel a start in progress, then undo what was done.
        """
        super().stopService()
        self.ready = False
        if self._starting is not None:
            self._starting.cancel()
        return self._undo()

    def _undo(self) -> Deferred[None]:
        """
        Run the cleanups, last first, one at a time; fires when none is left
        (at most one run is in progress: a second call waits for it).
        """
        waiter: Deferred[None] = Deferred()
        self._undoWaiters.append(waiter)
        if self._undoing is None:
            self._undoing = ensureDeferred(self._runCleanups())
            self._undoing.addBoth(self._undone)
        return waiter

    async def _runCleanups(self) -> None:
        while self._cleanups:
            cleanup = self._cleanups.pop()
            try:
                await maybeDeferred(cleanup)
            except Exception:  # noqa: BLE001 - one failed step must not skip the others
                self.log.failure("error while stopping the relay")

    def _undone(self, _: object) -> None:
        self._undoing = None
        waiters, self._undoWaiters = self._undoWaiters, []
        for waiter in waiters:
            waiter.callback(None)


def _settled(outcome: RelayInfo | Failure) -> Deferred[RelayInfo]:
    d: Deferred[RelayInfo] = Deferred()
    if isinstance(outcome, Failure):
        d.errback(outcome)
    else:
        d.callback(outcome)
    return d
