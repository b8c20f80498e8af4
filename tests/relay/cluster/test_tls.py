"""
Tests for the cluster CA (L{nfltr.tls.init_cluster_ca}, C{nfltr cluster-ca
init}) and the replica link's mutual TLS (L{nfltr.tls.ReplicaTLS}), over
real TLS on loopback TCP.
"""

from __future__ import annotations

import io
import os
import stat
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint
from twisted.internet.task import deferLater
from twisted.logger import Logger, formatEvent
from twisted.python.failure import Failure
from twisted.trial import unittest

from nfltr.cli import main
from nfltr.link import DIALER, LISTENER
from nfltr.link.twisted import LinkFactory, LinkHandler, LinkProtocol
from nfltr.relay.agents import Relay
from nfltr.relay.cluster.listener import ReplicaLinkHandler
from nfltr.tls import (
    CLUSTER_CA_CERT,
    CLUSTER_CA_KEY,
    REPLICA_NAME,
    ClusterCA,
    PKIError,
    ReplicaTLS,
    TLSClientEndpoint,
    client_creator,
    init_cluster_ca,
    spki_fingerprint,
    tls_factory,
)
from tests.relay.helpers import FakeStore

TIMEOUT = 5.0


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


class ClusterCATests(unittest.SynchronousTestCase):
    """
    Making, loading and using the cluster CA.
    """

    def test_init(self) -> None:
        """
        C{nfltr cluster-ca init DIR} makes the CA (the key 0600 in a 0700
        directory) and says how to use it; run again, it keeps the same CA.
        """
        directory = Path(self.mktemp()) / "cluster"
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(main(["cluster-ca", "init", str(directory)]), 0)
        self.assertIn(f"--cluster-ca {directory}", out.getvalue())
        self.assertEqual(stat.S_IMODE(os.stat(directory).st_mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(directory / CLUSTER_CA_KEY).st_mode), 0o600)
        first = ClusterCA.load(directory)
        with redirect_stdout(io.StringIO()):
            self.assertEqual(main(["cluster-ca", "init", str(directory)]), 0)
        self.assertEqual(spki_fingerprint(ClusterCA.load(directory).cert),
                         spki_fingerprint(first.cert))

    def test_missing(self) -> None:
        """
        Loading a directory without a CA says how to make one.
        """
        directory = Path(self.mktemp())
        directory.mkdir()
        with self.assertRaises(PKIError) as caught:
            ClusterCA.load(directory)
        self.assertIn("nfltr cluster-ca init", str(caught.exception))
        init_cluster_ca(directory)
        (directory / CLUSTER_CA_CERT).unlink()
        with self.assertRaises(PKIError):
            ClusterCA.load(directory)

    def test_replicaCertificate(self) -> None:
        """
        A replica's certificate is signed by the cluster CA, names
        L{REPLICA_NAME}, and each replica gets its own key.
        """
        ca = init_cluster_ca(Path(self.mktemp()))
        one, two = ca.replica("one"), ca.replica("two")
        one.cert.verify_directly_issued_by(ca.cert)
        self.assertIn(REPLICA_NAME, str(one.cert.extensions))
        self.assertNotEqual(spki_fingerprint(one.cert), spki_fingerprint(two.cert))


class _Recorder(LinkHandler):
    def __init__(self, established: list[LinkProtocol]) -> None:
        self.established = established

    def linkEstablished(self, link: LinkProtocol) -> None:
        self.established.append(link)


class MutualTLSTests(unittest.TestCase):
    """
    The replica link's handshake over real TLS: members only.
    """

    def setUp(self) -> None:
        self.ca = init_cluster_ca(Path(self.mktemp()))
        self.other = init_cluster_ca(Path(self.mktemp()))

    async def listen(self, tls: ReplicaTLS, handler: Any = None
                     ) -> tuple[int, list[LinkProtocol]]:
        """
        A replica link listener with C{tls}'s certificate (and C{handler}'s
        handlers, if given); its port and the links it established.
        """
        reactor = _reactor()
        established: list[LinkProtocol] = []
        links = LinkFactory(LISTENER, handler or (lambda: _Recorder(established)), reactor)
        port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
            tls_factory(tls.server(), False, links, reactor))
        self.addCleanup(port.stopListening)
        return port.getHost().port, established

    def dial(self, port: int, creator: Any) -> Deferred[LinkProtocol]:
        reactor = _reactor()
        endpoint = TLSClientEndpoint(creator, TCP4ClientEndpoint(reactor, "127.0.0.1", port),
                                     reactor)
        links = LinkFactory(DIALER, LinkHandler, reactor, appHello={"role": "replica"})
        d: Deferred[LinkProtocol] = endpoint.connect(links)

        def established(link: LinkProtocol) -> LinkProtocol:
            self.addCleanup(link.transport.abortConnection)
            return link

        def connected(link: LinkProtocol) -> Deferred[LinkProtocol]:
            return link.whenEstablished().addCallback(established)

        return d.addCallback(connected).addTimeout(TIMEOUT, reactor)

    async def refused(self, port: int, creator: Any) -> Failure:
        try:
            link = await self.dial(port, creator)
        except Exception:  # noqa: BLE001 - any failure to establish is a refusal
            return Failure()
        self.fail(f"a link was established: {link!r}")

    async def test_members(self) -> None:
        """
        Two replicas of one cluster establish a link.
        """
        port, established = await self.listen(self.ca.replica("b"))
        link = await self.dial(port, self.ca.replica("a").client())
        self.assertIsNotNone(link.peerHello)
        self.assertEqual(len(established), 1)

    async def test_noCertificate(self) -> None:
        """
        A peer that presents no certificate (it trusts the cluster CA, but
        cannot prove membership) is refused: no link is established.
        """
        port, established = await self.listen(self.ca.replica("b"))
        creator = client_creator(REPLICA_NAME, self.ca.cert_path, role="replica")
        await self.refused(port, creator)
        self.assertEqual(established, [])

    async def test_otherCluster(self) -> None:
        """
        A peer whose certificate another cluster CA signed is refused, and a
        dialler refuses a listener of another cluster.
        """
        port, established = await self.listen(self.ca.replica("b"))
        # Its own certificate signed by another CA, the listener's trusted.
        stranger = self.other.replica("y")
        await self.refused(port, ReplicaTLS(self.ca, stranger.key, stranger.cert).client())
        self.assertEqual(established, [])
        otherPort, otherEstablished = await self.listen(self.other.replica("c"))
        await self.refused(otherPort, self.ca.replica("a").client())
        self.assertEqual(otherEstablished, [])

    async def test_refusalLogged(self) -> None:
        """
        The listener says, in one line, that a peer failed the handshake and
        what a peer needs.
        """
        relay = Relay(FakeStore(), _reactor())
        events: list[dict[str, Any]] = []
        handler = ReplicaLinkHandler(relay)
        handler.log = Logger(observer=events.append)
        port, _ = await self.listen(self.ca.replica("b"), lambda: handler)
        await self.refused(port, client_creator(REPLICA_NAME, self.ca.cert_path, role="r"))
        for _ in range(50):
            if events:
                break
            await deferLater(_reactor(), 0.05, lambda: None)
        [event] = events
        text = formatEvent(event)
        self.assertIn("replica link from 127.0.0.1:", text)
        self.assertIn("needs a certificate from this cluster's CA", text)
