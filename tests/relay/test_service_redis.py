"""
Tests for L{nfltr.relay.service} on a Redis directory (C{--directory}): a
real relay on loopback port 0 and a real C{redis-server} on a unix socket
(L{tests.redis_helpers}; skipped, with the reason, without one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol, wrapClientTLS
from twisted.internet.task import deferLater
from twisted.logger import LogLevel, globalLogPublisher
from twisted.trial.unittest import TestCase

from nfltr.link import DIALER
from nfltr.link.twisted import LinkProtocol
from nfltr.relay.config import DATABASE_NAME, RelayConfig
from nfltr.relay.link_handler import STORE_UNAVAILABLE
from nfltr.relay.relay_json import RelayInfo
from nfltr.relay.service import RelayService
from nfltr.store import parse_redis_url
from nfltr.tls import client_creator
from nfltr.wire.messages import TcpShare, agent_hello, client_hello, client_target
from tests.redis_helpers import REDIS_SERVER, SKIP_REASON, RedisServer, start_redis
from tests.relay.helpers import without_token
from tests.relay.test_service import LOOPBACK, Collector, DialerHandler, asyncTest

READYZ = b"GET /readyz HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n"
#: How long an announced revocation may take to end its agent's link.
AT_ONCE = 1.0
#: How long the relay may take to see its store back (the retry, the
#: reconnect schedule, a loaded machine).
BACK_WITHIN = 10.0
A_KEY = "nfltr_aaaaaaaaaaaa_" + "A" * 43


class RelayOnRedisTests(TestCase):
    """
    A relay whose accounts and keys are in Redis.
    """

    timeout = 60
    skip = None if REDIS_SERVER else SKIP_REASON

    def setUp(self) -> None:
        self.dataDir = Path(self.mktemp()).absolute() / "relay"
        self.links: list[tuple[LinkProtocol, DialerHandler]] = []
        self.warnings: list[dict[str, Any]] = []

        def observe(event: dict[str, Any]) -> None:
            if event.get("log_namespace", "").endswith("StoreHealth") and \
                    event.get("log_level") == LogLevel.warn:
                self.warnings.append(event)

        globalLogPublisher.addObserver(observe)
        self.addCleanup(globalLogPublisher.removeObserver, observe)

    async def startRelay(self, url: str, revocationPoll: float = 2.0) -> RelayInfo:
        config = RelayConfig(
            self.dataDir, tls=LOOPBACK, admin=LOOPBACK, revocation_poll=revocationPoll,
            drain_timeout=0.5, directory=parse_redis_url(url),
        )
        self.service = RelayService(config, reactor)
        self.service.startService()
        self.addCleanup(self.stopAll)
        return await self.service.whenReady()

    async def stopAll(self) -> None:
        for link, handler in self.links:
            if link.transport is not None:
                link.transport.loseConnection()
            await handler.lost
        if self.service.running:
            await self.service.stopService()

    async def keys(self, url: str, count: int) -> list[tuple[str, str]]:
        """
        C{count} keys of account C{acme}, made through a store of the test's
        own: (key id, key) each.
        """
        from nfltr.store import RedisStore

        store = RedisStore(reactor, parse_redis_url(url))
        try:
            await store.create_account("acme")
            made = [await store.create_key("acme") for _ in range(count)]
        finally:
            await store.close()
        return [(info.keyid, plaintext) for info, plaintext in made]

    async def revoke(self, url: str, keyid: str) -> None:
        from nfltr.store import RedisStore

        store = RedisStore(reactor, parse_redis_url(url))
        try:
            await store.revoke_key(keyid)
        finally:
            await store.close()

    async def dial(self, info: RelayInfo, app: dict[str, Any]) -> DialerHandler:
        host, port = info.tls.rsplit(":", 1)
        endpoint = wrapClientTLS(
            client_creator(host, ca_path=info.ca), TCP4ClientEndpoint(reactor, host, int(port))
        )
        handler = DialerHandler()
        link = LinkProtocol(DIALER, handler, reactor, None, app)
        await connectProtocol(endpoint, link)
        self.links.append((link, handler))
        await handler.firstControl
        return handler

    async def readyz(self, info: RelayInfo) -> int:
        """
        The status code of the relay's C{/readyz}.
        """
        host, port = info.admin.rsplit(":", 1)
        collector = Collector(READYZ, 1 << 20)
        await connectProtocol(TCP4ClientEndpoint(reactor, host, int(port)), collector)
        answer = await collector.done
        return int(answer.split(b" ", 2)[1])

    async def upgrade(self, info: RelayInfo, key: str) -> bytes:
        """
        The status line's start of a WebSocket upgrade to C{/link} with
        C{key}.
        """
        lines = ["GET /link HTTP/1.1", "Host: localhost", "Upgrade: websocket",
                 "Connection: Upgrade", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                 "Sec-WebSocket-Version: 13", "Sec-WebSocket-Protocol: nfltr.link.v1",
                 f"Authorization: Bearer {key}"]
        host, port = info.tls.rsplit(":", 1)
        endpoint = wrapClientTLS(
            client_creator(host, ca_path=info.ca), TCP4ClientEndpoint(reactor, host, int(port))
        )
        collector = Collector(("\r\n".join(lines) + "\r\n\r\n").encode(), 12)
        await connectProtocol(endpoint, collector)
        return (await collector.done)[:12]

    async def readyWithin(self, info: RelayInfo, seconds: float) -> float:
        """
        Poll C{/readyz} until it answers 200; how long that took.
        """
        started = reactor.seconds()
        while await self.readyz(info) != 200:
            self.assertLess(reactor.seconds() - started, seconds, "/readyz stayed 503")
            await deferLater(reactor, 0.1, lambda: None)
        return reactor.seconds() - started

    @asyncTest
    async def test_servedAndRevokedAtOnce(self) -> None:
        """
        Keys made in Redis by another process serve an agent and a client
        (no SQLite database in the data directory); a key revoked by another
        process ends its agent's link within L{AT_ONCE}, with a poll an hour
        apart: the announcement did it.
        """
        server = await start_redis(self)
        (agentId, agentKey), (_, clientKey) = await self.keys(server.url, 2)
        info = await self.startRelay(server.url, revocationPoll=3600)
        self.assertEqual(await self.readyz(info), 200)
        agent = await self.dial(info, agent_hello(agentKey, "web", [TcpShare(3000)]))
        self.assertEqual(without_token(agent.controls), [
            {"type": "welcome", "account": "acme", "name": "web", "shares": []}
        ])
        await self.dial(info, client_hello(clientKey))
        collector = Collector(b"through a relay on Redis", 24)
        self.links[-1][0].openSession(client_target("web", 3000), collector)
        self.assertEqual(await collector.done, b"through a relay on Redis")
        self.assertFalse((self.dataDir / DATABASE_NAME).exists())
        await self.revoke(server.url, agentId)
        revoked = reactor.seconds()
        refusal: Deferred[dict[str, Any]] = agent.refusal
        refusal.addTimeout(AT_ONCE, reactor)
        self.assertEqual(await refusal, {
            "type": "refused", "reason": "revoked", "message": f"API key {agentId} was revoked",
        })
        self.assertLess(reactor.seconds() - revoked, AT_ONCE)

    @asyncTest
    async def test_downAtStart(self) -> None:
        """
        A relay whose Redis does not answer starts all the same: C{/readyz}
        answers 503, an agent is refused with C{unavailable} and the message
        to try later, a WebSocket upgrade with 503, one warning logged for
        the outage.  Once Redis
        is up, C{/readyz} answers 200 and agents are served, and
        revocations reach them.
        """
        server = RedisServer(reactor, Path(self.mktemp()))
        self.addCleanup(server.remove)
        info = await self.startRelay(server.url)
        self.assertEqual(await self.readyz(info), 503)
        turnedAway = await self.dial(info, agent_hello(A_KEY, "web", [TcpShare(3000)]))
        self.assertEqual(turnedAway.controls, [
            {"type": "refused", "reason": "unavailable", "message": STORE_UNAVAILABLE},
        ])
        self.assertEqual(await self.upgrade(info, A_KEY), b"HTTP/1.1 503")
        await server.start()
        self.addCleanup(server.stop)
        [(keyid, key)] = await self.keys(server.url, 1)
        await self.readyWithin(info, BACK_WITHIN)
        self.assertEqual(await self.upgrade(info, key), b"HTTP/1.1 101")
        agent = await self.dial(info, agent_hello(key, "web", [TcpShare(3000)]))
        self.assertEqual(agent.controls[0]["type"], "welcome")
        self.assertEqual(len(self.warnings), 1)
        await self.revoke(server.url, keyid)
        self.assertEqual((await agent.refusal)["reason"], "revoked")

    @asyncTest
    async def test_outage(self) -> None:
        """
        Redis going away while the relay runs: an established tunnel keeps
        carrying bytes, C{/readyz} turns 503, a new agent is refused with
        the message to try later, one warning is logged; once Redis is back
        everything is as before.
        """
        server = await start_redis(self)
        (_, agentKey), (_, clientKey), (_, laterKey) = await self.keys(server.url, 3)
        info = await self.startRelay(server.url, revocationPoll=0.2)
        await self.dial(info, agent_hello(agentKey, "web", [TcpShare(3000)]))
        await self.dial(info, client_hello(clientKey))
        await server.stop()
        started = reactor.seconds()
        while await self.readyz(info) != 503:
            self.assertLess(reactor.seconds() - started, BACK_WITHIN, "/readyz stayed 200")
            await deferLater(reactor, 0.1, lambda: None)
        collector = Collector(b"during the outage", 17)
        self.links[-1][0].openSession(client_target("web", 3000), collector)
        self.assertEqual(await collector.done, b"during the outage")
        turnedAway = await self.dial(info, agent_hello(laterKey, "api", [TcpShare(3000)]))
        self.assertEqual(turnedAway.controls[0]["message"], STORE_UNAVAILABLE)
        self.assertEqual(len(self.warnings), 1)
        await server.start()
        # The server restarted empty (nothing is saved): keys are made again.
        [(_, key)] = await self.keys(server.url, 1)
        await self.readyWithin(info, BACK_WITHIN)
        agent = await self.dial(info, agent_hello(key, "api", [TcpShare(3000)]))
        self.assertEqual(agent.controls[0]["type"], "welcome")
