"""
Tests for L{nfltr.relay.cluster.peers}: the pools of replica links, over
real mutual TLS on loopback TCP.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.endpoints import TCP4ServerEndpoint
from twisted.internet.task import Clock, deferLater
from twisted.logger import Logger, formatEvent
from twisted.trial import unittest

from nfltr.link import LISTENER
from nfltr.link.twisted import LinkFactory, LinkHandler, LinkProtocol
from nfltr.relay.cluster.peers import DIAL_TIMEOUT, PeerLinks, Peers, PeerUnreachable, tls_dialler
from nfltr.tls import init_cluster_ca, tls_factory


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


class _Accepting(LinkHandler):
    """
    Accepts every session with a protocol that ignores it.
    """

    def __init__(self, links: list[LinkProtocol]) -> None:
        self.links = links

    def linkEstablished(self, link: LinkProtocol) -> None:
        self.links.append(link)


class PeersTests(unittest.TestCase):
    """
    L{Peers} and its L{PeerLinks} against a real replica-link listener.
    """

    async def setUp(self) -> None:  # type: ignore[override]
        reactor = _reactor()
        ca = init_cluster_ca(Path(self.mktemp()))
        self.accepted: list[LinkProtocol] = []
        factory = LinkFactory(LISTENER, lambda: _Accepting(self.accepted), reactor)
        self.port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
            tls_factory(ca.replica("b").server(), False, factory, reactor))
        self.addCleanup(self.stopListening)
        self.address = f"127.0.0.1:{self.port.getHost().port}"
        self.registry: dict[str, str] = {"b": self.address}
        self.peers = Peers(self.lookup, tls_dialler(ca.replica("a"), reactor, {"role": "x"}), 2,
                           reactor)
        self.addCleanup(self.peers.close, 0)

    async def stopListening(self) -> None:
        if self.port is not None:
            await self.port.stopListening()
            self.port = None

    def lookup(self, replica: str) -> Deferred[str | None]:
        return succeed(self.registry.get(replica))

    async def until(self, check: Any) -> None:
        for _ in range(100):
            if check():
                return
            await deferLater(_reactor(), 0.02, lambda: None)
        self.fail("not within 2 s")

    async def test_pool(self) -> None:
        """
        The first use dials the pool's size; a session goes on the
        established link with the fewest sessions.
        """
        first = await self.peers.link("b")
        pool = self.peers.pools["b"]
        await self.until(lambda: len(pool.links) == 2)
        first.openSession("x", _Ignore())
        second = await self.peers.link("b")
        self.assertIsNot(second, first)
        self.assertEqual(len(self.accepted), 2)

    async def test_unregistered(self) -> None:
        """
        A replica the directory does not know is unreachable.
        """
        with self.assertRaises(PeerUnreachable):
            await self.peers.link("nobody")

    async def test_peerGone(self) -> None:
        """
        A peer that stopped: its pool goes once its links are lost, and the
        next session fails (the dial is refused), never waits for long.
        """
        await self.peers.link("b")
        pool = self.peers.pools["b"]
        await self.until(lambda: len(pool.links) == 2)
        await self.stopListening()
        for link in self.accepted:
            link.transport.abortConnection()
        await self.until(lambda: "b" not in self.peers.pools)
        with self.assertRaises(PeerUnreachable):
            await self.peers.link("b")
        self.assertNotIn("b", self.peers.pools)


class PeerLinksFailingTests(unittest.SynchronousTestCase):
    """
    L{PeerLinks} whose dials fail: at once, by raising, or by not answering.
    """

    def pool(self, dial: Any) -> tuple[PeerLinks, list[str], Clock]:
        dialled: list[str] = []
        clock = Clock()

        def counting(address: str, handler: LinkHandler) -> Deferred[LinkProtocol]:
            dialled.append(address)
            if len(dialled) > 10:
                raise AssertionError("dialled again and again")
            return dial(address)

        pool = PeerLinks("b", "127.0.0.1:1", counting, 2, clock)
        self.events: list[dict[str, Any]] = []
        pool.log = Logger(observer=self.events.append)
        return pool, dialled, clock

    def test_failsAtOnce(self) -> None:
        """
        A dial that fails before it returns (a refused connect on some
        reactors, an address that does not parse) fails the session with
        L{PeerUnreachable}: the pool dials its size once, not in a loop.
        """
        pool, dialled, _ = self.pool(lambda address: fail(ConnectionRefusedError()))
        self.failureResultOf(pool.link(), PeerUnreachable)
        self.assertEqual(len(dialled), 2)

    def test_raises(self) -> None:
        """
        A dial that raises (a registered address that does not parse) is a
        failed dial like any other: the session fails, the pool is not left
        counting a dial in progress, and the next use dials again.
        """

        def broken(address: str) -> Deferred[LinkProtocol]:
            raise ValueError("not HOST:PORT")

        pool, dialled, _ = self.pool(broken)
        self.failureResultOf(pool.link(), PeerUnreachable)
        self.failureResultOf(pool.link(), PeerUnreachable)
        self.assertEqual(len(dialled), 4)

    def test_timeoutSaid(self) -> None:
        """
        A peer that does not answer fails the waiting session after
        L{DIAL_TIMEOUT}, and the warning says so in words (no Python repr).
        """
        pool, _, clock = self.pool(lambda address: Deferred())
        d = pool.link()
        clock.advance(DIAL_TIMEOUT)
        self.failureResultOf(d, PeerUnreachable)
        said = {formatEvent(event) for event in self.events}
        self.assertEqual(said, {f"cannot reach replica b at 127.0.0.1:1: no answer within "
                                f"{DIAL_TIMEOUT:g} s"})


class _Ignore:
    """
    A session's protocol that does nothing.
    """

    def makeConnection(self, transport: Any) -> None:
        self.transport = transport

    def dataReceived(self, data: bytes) -> None:
        pass

    def connectionLost(self, reason: Any) -> None:
        pass
