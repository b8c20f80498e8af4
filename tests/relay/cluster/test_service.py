"""
Tests for a relay started as a replica (L{nfltr.relay.service.RelayService}
with a L{ReplicaConfig}, L{nfltr.relay.cluster.node.Replica}): in process,
on loopback port 0, with a real C{redis-server} (skipped, with the reason,
without one).
"""

from __future__ import annotations

from pathlib import Path

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from nfltr.relay.cluster.config import ReplicaConfig
from nfltr.relay.cluster.presence import REPLICA
from nfltr.relay.config import RelayConfig
from nfltr.relay.metrics import metrics_registry
from nfltr.relay.service import RelayService
from nfltr.store import parse_redis_url
from nfltr.tls import PKIError, init_cluster_ca
from tests.redis_helpers import REDIS_SERVER, SKIP_REASON, redis_command, start_redis
from tests.relay.test_service import LOOPBACK


class ReplicaServiceTests(TestCase):
    """
    A relay's life as a replica.
    """

    timeout = 60
    skip = None if REDIS_SERVER else SKIP_REASON

    async def setUp(self) -> None:  # type: ignore[override]
        self.redis = await start_redis(self)
        self.ca = Path(self.mktemp())
        init_cluster_ca(self.ca)

    def service(self, listen: str = LOOPBACK, cluster: Path | None = None) -> RelayService:
        replica = ReplicaConfig(listen, cluster or self.ca)
        config = RelayConfig(Path(self.mktemp()).absolute(), tls=LOOPBACK, admin=LOOPBACK,
                             drain_timeout=0.5, directory=parse_redis_url(self.redis.url),
                             replica=replica)
        return RelayService(config, reactor)

    async def test_registered(self) -> None:
        """
        A replica registers its replica link's bound address in the directory
        while it runs, and removes it when it stops; its metrics are on the
        relay's C{/metrics}.
        """
        service = self.service()
        service.startService()
        await service.whenReady()
        replica = service.replica
        key = f"nfltr:presence:{REPLICA}:{replica.id}"
        address = await redis_command(self.redis, "HGET", key, "address")
        self.assertEqual(address.decode(), replica.address)
        self.assertTrue(replica.address.startswith("127.0.0.1:"))
        from prometheus_client import generate_latest

        text = generate_latest(metrics_registry(service)).decode()
        for series in ('nfltr_replica_sessions_forwarded_total{kind="tcp"} 0.0',
                       'nfltr_replica_links{direction="dialled"} 0.0',
                       "nfltr_replica_peers_up 0.0",
                       'nfltr_replica_remembered_total{what="presence"} 0.0',
                       'nfltr_replica_remembered_total{what="key"} 0.0'):
            self.assertIn(series, text)
        await service.stopService()
        self.assertIsNone(await redis_command(self.redis, "HGET", key, "address"))

    async def test_startErrors(self) -> None:
        """
        A replica that cannot say where other replicas reach it (a wildcard
        listener and no C{--replica-address}), or has no cluster CA, does
        not start, saying why.
        """
        for service, words in [
            (self.service("tcp:0:interface=0.0.0.0"), "give --replica-address"),
            (self.service(cluster=Path(self.mktemp())), "nfltr cluster-ca init"),
        ]:
            service.startService()
            with self.assertRaises(PKIError) as caught:
                await service.whenReady()
            self.assertIn(words, str(caught.exception))
            await service.stopService()

    async def test_drainSideBySide(self) -> None:
        """
        A stopping replica withdraws from the directory and drains its
        replica links while its agents' links drain, not after them: one
        drain timeout in all, not two.
        """
        service = self.service()
        service.startService()
        await service.whenReady()
        replica = service.replica
        key = f"nfltr:presence:{REPLICA}:{replica.id}"
        links: Deferred[None] = Deferred()
        self.patch(service.relay, "closeAll", lambda timeout: links)
        stopped = service.stopService()
        for _ in range(200):
            if await redis_command(self.redis, "HGET", key, "address") is None:
                break
            await deferLater(reactor, 0.01)
        self.assertIsNone(await redis_command(self.redis, "HGET", key, "address"))
        self.assertFalse(stopped.called)
        links.callback(None)
        await stopped
