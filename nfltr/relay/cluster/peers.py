# -*- test-case-name: tests.relay.cluster.test_peers -*-
"""
The links this replica dials to its peers: a small pool per peer
(L{PeerLinks}, C{--replica-links}, L{nfltr.relay.cluster.config}), found
through the directory (L{Peers}: a peer's replica id to the address it
registered).

A pool dials up to its size on first use and again whenever a link is lost
or drains; a session goes on the established link with the fewest sessions.
A caller that finds no link established waits for the next one, at most
L{DIAL_TIMEOUT} seconds (a TCP connect, the mutual TLS handshake and the
link's hellos): a dead or unreachable peer fails the sessions for it, never
holds them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import (
    Deferred,
    TimeoutError,
    fail,
    gatherResults,
    maybeDeferred,
    succeed,
)
from twisted.internet.endpoints import HostnameEndpoint
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.link import DIALER
from nfltr.link.twisted import LinkFactory, LinkHandler, LinkProtocol, LinkUnavailable
from nfltr.tls import ReplicaTLS, TLSClientEndpoint

from .config import parse_address
from .counters import ReplicaCounters

#: Seconds a dial may take, from the TCP connect to the peer's link hello.
DIAL_TIMEOUT = 5.0

Dial = Callable[[str, LinkHandler], Deferred[LinkProtocol]]


def tls_dialler(tls: ReplicaTLS, reactor: Any, hello: dict[str, Any]) -> Dial:
    """
    How this replica dials a peer's replica link: TCP to C{HOST:PORT}, the
    cluster's mutual TLS with C{tls}, a link (dialler) saying C{hello};
    fires with the link once the peer's hello arrived.
    """

    def dial(address: str, handler: LinkHandler) -> Deferred[LinkProtocol]:
        host, port = parse_address(address)
        endpoint = TLSClientEndpoint(
            tls.client(), HostnameEndpoint(reactor, host, port, timeout=DIAL_TIMEOUT), reactor,
        )
        factory = LinkFactory(DIALER, lambda: handler, reactor, appHello=hello)
        factory.noisy = False
        d: Deferred[LinkProtocol] = endpoint.connect(factory)
        return d.addCallback(lambda link: link.whenEstablished())

    return dial


class PeerUnreachable(LinkUnavailable):
    """
    No replica link to a peer could be had: it is not registered, or it
    did not answer.
    """


class _PoolHandler(LinkHandler):
    """
    The dialling side's handler of one pooled link: it opens sessions, takes
    none (the base refuses them), and leaves the pool when the link drains
    or is lost.
    """

    def __init__(self, pool: PeerLinks) -> None:
        self.pool = pool
        self.link: LinkProtocol | None = None

    def linkGoingAway(self, link: LinkProtocol) -> None:
        self.pool.forget(link)

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        self.pool.forget(link)
        self.pool.counters.linkEnded(link)


class PeerLinks:
    """
    The pool of links to one peer replica; see the module.

    @ivar replica: the peer's id.
    @ivar address: its replica link's C{HOST:PORT}.
    @ivar size: how many links to keep.
    @ivar links: the established links.
    """

    log = Logger()

    def __init__(self, replica: str, address: str, dial: Dial, size: int,
                 clock: IReactorTime, empty: Callable[[PeerLinks], None] = lambda pool: None,
                 counters: ReplicaCounters | None = None) -> None:
        """
        @param empty: called when the pool's last link is gone and none is
            being dialled (a peer that stopped: the pool can go).
        @param counters: where its ended links' bytes are counted.
        """
        self.replica = replica
        self.empty = empty
        self.counters = counters if counters is not None else ReplicaCounters()
        self.address = address
        self.size = size
        self.links: list[LinkProtocol] = []
        self._dial = dial
        self._clock = clock
        self._dialling = 0
        self._waiters: list[Deferred[LinkProtocol]] = []
        self._closed = False
        self._failures = 0

    def link(self) -> Deferred[LinkProtocol]:
        """
        An established link that can open a session (the one with the fewest
        sessions), now or once one is; fails with L{PeerUnreachable}.
        """
        if self._closed:
            return fail(PeerUnreachable("the replica is stopping"))
        failures = self._failures
        self._fill()
        usable = [link for link in self.links if link.canOpen()]
        if usable:
            return succeed(min(usable, key=_sessions))
        if self._failures != failures and not self._dialling:  # every dial failed at once
            return fail(self._unreachable())
        d: Deferred[LinkProtocol] = Deferred()
        self._waiters.append(d)
        if not self._dialling:
            self._dialling += 1
            self._dialOne()
        return d

    def _fill(self) -> None:
        # Counted before the dials start: one that fails at once must not start another.
        for _ in range(self.size - len(self.links) - self._dialling):
            self._dialling += 1
            self._dialOne()

    def _dialOne(self) -> None:
        handler = _PoolHandler(self)
        d = maybeDeferred(self._dial, self.address, handler)
        d.addTimeout(DIAL_TIMEOUT, self._clock)
        d.addCallbacks(self._established, self._failed)

    def _established(self, link: LinkProtocol) -> None:
        self._dialling -= 1
        if self._closed:
            link.drain(0)
            return
        self.links.append(link)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.callback(link)

    def _failed(self, failure: Failure) -> None:
        self._dialling -= 1
        self._failures += 1
        error = (f"no answer within {DIAL_TIMEOUT:g} s" if failure.check(TimeoutError)
                 else failure.getErrorMessage())
        self.log.warn("cannot reach replica {replica} at {address}: {error}",
                      replica=self.replica, address=self.address, error=error)
        if self._dialling == 0:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                waiter.errback(self._unreachable())

    def _unreachable(self) -> PeerUnreachable:
        return PeerUnreachable(f"replica {self.replica} at {self.address} did not answer")

    def forget(self, link: LinkProtocol) -> None:
        """
        C{link} drains or is gone: no new session goes on it.
        """
        if link in self.links:
            self.links.remove(link)
            if not self.links and not self._dialling:
                self.empty(self)

    def close(self, timeout: float) -> Deferred[Any]:
        """
        Drain every link (sessions in flight have C{timeout} seconds).
        """
        self._closed = True
        links, self.links = self.links, []
        return gatherResults([link.drain(timeout) for link in links])


def _sessions(link: LinkProtocol) -> int:
    connection = link.connection
    return connection.session_count if connection is not None else 0


class Peers:
    """
    This replica's pools, one per peer it forwarded to, found by id.

    @ivar address: looks up where a replica's link listens (the directory).
    """

    def __init__(self, address: Callable[[str], Deferred[str | None]], dial: Dial, size: int,
                 clock: IReactorTime, counters: ReplicaCounters | None = None) -> None:
        self.address = address
        self.counters = counters if counters is not None else ReplicaCounters()
        self.size = size
        self.pools: dict[str, PeerLinks] = {}
        self._dial = dial
        self._clock = clock

    def link(self, replica: str) -> Deferred[LinkProtocol]:
        """
        A link to replica C{replica} that can open a session.

        @return: fails with L{PeerUnreachable}, or the directory's
            L{nfltr.store.StoreUnavailable}.
        """
        pool = self.pools.get(replica)
        if pool is not None:
            d = pool.link()
            return d.addErrback(self._dropped, replica, pool)

        def found(address: str | None) -> Deferred[LinkProtocol]:
            if address is None:
                raise PeerUnreachable(f"replica {replica} is not registered")
            current = self.pools.get(replica)
            if current is None or current.address != address:
                current = self.pools[replica] = PeerLinks(
                    replica, address, self._dial, self.size, self._clock, self._empty,
                    self.counters,
                )
            return current.link().addErrback(self._dropped, replica, current)

        return self.address(replica).addCallback(found)

    def _empty(self, pool: PeerLinks) -> None:
        """
        A pool lost its last link: it goes (a peer that restarted has a new
        id; one that comes back is looked up again).
        """
        if self.pools.get(pool.replica) is pool:
            del self.pools[pool.replica]

    def _dropped(self, failure: Failure, replica: str, pool: PeerLinks) -> Failure:
        """
        A pool that cannot reach its peer is dropped: the next session looks
        the peer up again.
        """
        if not pool.links and self.pools.get(replica) is pool:
            del self.pools[replica]
        return failure

    def close(self, timeout: float) -> Deferred[Any]:
        """
        Drain every pool.
        """
        pools, self.pools = list(self.pools.values()), {}
        return gatherResults([pool.close(timeout) for pool in pools])
