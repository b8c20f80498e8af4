"""
Tests for L{nfltr.relay.service} and L{nfltr.relay.relay_json}: a real relay on
loopback port 0, with the real reactor, the real SQLite store and real TLS.
"""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from cryptography import x509
from twisted.internet import reactor
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.endpoints import (
    TCP4ClientEndpoint,
    TCP4ServerEndpoint,
    connectProtocol,
    wrapClientTLS,
)
from twisted.internet.error import CannotListenError, ConnectionRefusedError
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import deferLater
from twisted.logger import Logger, LogLevel
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase, TestCase
from zope.interface import implementer

from nfltr.link import DIALER, ErrorCode
from nfltr.link.twisted import LinkHandler, LinkProtocol, SessionResetError
from nfltr.relay.config import RelayConfig
from nfltr.relay.relay_json import RelayInfo
from nfltr.relay.service import RelayService
from nfltr.sni.twisted import NOT_TLS_RESPONSE, ISpliceBackend
from nfltr.store import DirectoryInUse, SQLiteStoreCore
from nfltr.streams import AdmissionLimits
from nfltr.tls import client_creator, spki_fingerprint
from nfltr.wire import format_address
from nfltr.wire.messages import (
    NOT_FOUND_CODE,
    NOT_FOUND_REASON,
    TcpShare,
    agent_hello,
    client_hello,
    client_target,
)
from tests.relay.helpers import without_token
from tests.sni.helpers import live_hello

LOOPBACK = "tcp:0:interface=127.0.0.1"


def asyncTest(
    f: Callable[..., Coroutine[Any, Any, None]],
) -> Callable[..., Deferred[None]]:
    @functools.wraps(f)
    def run(self: TestCase) -> Deferred[None]:
        return ensureDeferred(f(self))

    return run


class DialerHandler(LinkHandler):
    """
    A dialer's handler: records control messages, echoes every session.
    """

    def __init__(self) -> None:
        self.controls: list[dict[str, Any]] = []
        self.firstControl: Deferred[dict[str, Any]] = Deferred()
        self.lost: Deferred[None] = Deferred()
        self.refusal: Deferred[dict[str, Any]] = Deferred()

    def controlReceived(self, link: LinkProtocol, message: dict[str, Any]) -> None:
        self.controls.append(message)
        if not self.firstControl.called:
            self.firstControl.callback(message)
        if message["type"] == "refused" and not self.refusal.called:
            self.refusal.callback(message)

    def sessionRequested(self, session: Any) -> None:
        session.accept(Echo())

    def linkLost(self, link: LinkProtocol, reason: Failure) -> None:
        self.lost.callback(None)


class Echo(Protocol):
    def dataReceived(self, data: bytes) -> None:
        self.transport.write(data)


@implementer(ISpliceBackend)
class TCPBackend:
    """
    A share backend that is a TCP service on loopback.
    """

    def __init__(self, port: int) -> None:
        self.port = port

    def connect(self, protocol: Any, visitor: Any = None) -> None:
        d = connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", self.port), protocol)
        d.addErrback(protocol.connectionLost)


NOT_TLS_PROBE = b"GET / HTTP/1.1\r\nHost: r\r\n\r\n"


class Collector(Protocol):
    """
    Sends C{payload}, then collects until C{expect} bytes arrived or the
    connection ends.
    """

    def __init__(self, payload: bytes, expect: int) -> None:
        self.payload = payload
        self.expect = expect
        self.received = b""
        self.lost: Failure | None = None
        self.done: Deferred[bytes] = Deferred()

    def connectionMade(self) -> None:
        if self.payload:
            self.transport.write(self.payload)

    def dataReceived(self, data: bytes) -> None:
        self.received += data
        if len(self.received) >= self.expect and not self.done.called:
            self.done.callback(self.received)
            self.transport.loseConnection()

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.lost = reason
        if not self.done.called:
            self.done.callback(self.received)


class Talker(Protocol):
    """
    Says things and waits for their echo.
    """

    def __init__(self) -> None:
        self.received = b""
        self.expect = 0
        self.echoed: Deferred[bytes] | None = None
        self.reason: Failure | None = None
        self.lost: Deferred[None] = Deferred()

    def say(self, data: bytes) -> Deferred[bytes]:
        """
        Send C{data}; fires with all received so far once its echo is in.
        """
        self.expect += len(data)
        self.echoed = Deferred()
        self.transport.write(data)
        return self.echoed

    def dataReceived(self, data: bytes) -> None:
        self.received += data
        if self.echoed is not None and len(self.received) >= self.expect:
            self.echoed, d = None, self.echoed
            d.callback(self.received)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.reason = reason
        self.lost.callback(None)


class RelayServiceTests(TestCase):
    """
    A relay started on loopback port 0.
    """

    timeout = 30

    def setUp(self) -> None:
        self.dataDir = Path(self.mktemp()).absolute() / "relay"
        self.links: list[tuple[LinkProtocol, DialerHandler]] = []

    async def startRelay(
        self, revocationPoll: float = 2.0, drainTimeout: float = 30.0, **extra: Any
    ) -> RelayInfo:
        config = RelayConfig(
            self.dataDir, tls=LOOPBACK, admin=LOOPBACK, revocation_poll=revocationPoll,
            drain_timeout=drainTimeout, **extra,
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

    async def talk(
        self, address: str, request: bytes, tls: str | None = None, expect: int = 1 << 20
    ) -> bytes:
        host, port = address.rsplit(":", 1)
        endpoint: Any = TCP4ClientEndpoint(reactor, host, int(port))
        if tls is not None:
            endpoint = wrapClientTLS(client_creator(host, ca_path=tls), endpoint)
        collector = Collector(request, expect)
        await connectProtocol(endpoint, collector)
        return await collector.done

    @asyncTest
    async def test_peerDrainTimeout(self) -> None:
        """
        The relay that routes links gets the configured bound on a peer's drain.
        """
        await self.startRelay(peer_drain_timeout=7.5)
        assert self.service.relay is not None
        self.assertEqual(self.service.relay.peerDrainTimeout, 7.5)

    @asyncTest
    async def test_perSourceLimit(self) -> None:
        """
        With C{per_source_open=2} on the TLS port, a third connection from
        the same address is closed unread while the first two are held (and
        counted), and another address is served meanwhile; after one of the
        two ends, a new one from the first address is admitted.
        """
        info = await self.startRelay(
            handshake_timeout=30,
            admission=AdmissionLimits(per_source_open=2, per_source_rate=None),
        )
        host, port = info.tls.rsplit(":", 1)
        endpoint = TCP4ClientEndpoint(reactor, host, int(port))
        held = [Collector(b"", 1), Collector(b"", 1)]
        for collector in held:
            await connectProtocol(endpoint, collector)
        third = Collector(b"\x16\x03\x01", 1)
        await connectProtocol(endpoint, third)
        self.assertEqual(await third.done, b"")
        self.assertFalse(held[0].done.called)
        # Another address is served normally meanwhile.
        other = TCP4ClientEndpoint(reactor, host, int(port), bindAddress=("127.0.0.2", 0))
        second = Collector(NOT_TLS_PROBE, len(NOT_TLS_RESPONSE))
        await connectProtocol(other, second)
        self.assertEqual(await second.done, NOT_TLS_RESPONSE)
        admission = self.service.tlsAdmission
        assert admission is not None
        self.assertEqual(admission.refused["per_source_open"], 1)
        held[0].transport.loseConnection()
        await held[0].done
        # The relay's side of the close is seen in a later turn of this reactor.
        for _ in range(1000):
            if admission.handshaking == 1:
                break
            await deferLater(reactor, 0)
        self.assertEqual(admission.handshaking, 1)
        fourth = Collector(NOT_TLS_PROBE, len(NOT_TLS_RESPONSE))
        await connectProtocol(endpoint, fourth)
        self.assertEqual(await fourth.done, NOT_TLS_RESPONSE)
        held[1].transport.loseConnection()
        await held[1].done

    @asyncTest
    async def test_relayJson(self) -> None:
        """
        Once listening, C{relay.json} in a 0700 data directory names the
        bound TLS and admin addresses (real ports, not 0), the CA file, the
        relay certificate's fingerprint, this process and the version; the
        admin address answers C{/healthz}.  After a stop the file is gone and
        the ports are closed.
        """
        info = await self.startRelay()
        written = json.loads((self.dataDir / "relay.json").read_text())
        self.assertEqual(written, info.to_json())
        self.assertEqual(
            set(written),
            {"tls", "admin", "http", "ssh", "ca", "share_ca", "fingerprint", "pid", "version",
             "onion", "onion_ssh"},
        )
        self.assertIsNone(info.onion)
        self.assertIsNone(info.http)
        self.assertIsNone(info.ssh)
        self.assertEqual(info.share_ca, str(self.dataDir / "tls" / "share-ca.crt"))
        for address in (info.tls, info.admin):
            host, port = address.rsplit(":", 1)
            self.assertEqual(host, "127.0.0.1")
            self.assertNotEqual(int(port), 0)
        self.assertEqual(info.ca, str(self.dataDir / "tls" / "ca.crt"))
        cert = x509.load_pem_x509_certificate((self.dataDir / "tls" / "relay.crt").read_bytes())
        self.assertEqual(info.fingerprint, spki_fingerprint(cert))
        self.assertEqual(info.pid, os.getpid())
        self.assertEqual(stat.S_IMODE(self.dataDir.stat().st_mode), 0o700)
        response = await self.talk(info.admin, b"GET /healthz HTTP/1.0\r\n\r\n")
        self.assertTrue(response.startswith(b"HTTP/1.0 200 OK"), response)
        self.assertTrue(response.endswith(b"ok\n"))
        await self.service.stopService()
        self.assertFalse((self.dataDir / "relay.json").exists())
        with self.assertRaises(ConnectionRefusedError):
            await self.talk(info.tls, b"")

    @asyncTest
    async def test_httpOnLinkPort(self) -> None:
        """
        An HTTP request over TLS to the link port that is no WebSocket
        upgrade gets 426 (Upgrade Required) from the WebSocket endpoint.
        """
        info = await self.startRelay()
        response = await self.talk(info.tls, b"GET / HTTP/1.1\r\nHost: r\r\n\r\n", tls=info.ca)
        self.assertTrue(response.startswith(b"HTTP/1.1 426 "), response)

    @asyncTest
    async def test_webSocketUpgradeRefusals(self) -> None:
        """
        A WebSocket upgrade on the relay's name is refused, before any link,
        with 404 for another path, 400 without the link subprotocol, 401
        without a key or with a wrong one; the echo path answers only when
        configured.
        """
        core = SQLiteStoreCore(self.dataDir / "nfltr.sqlite3")
        core.create_account("acme")
        _, key = core.create_key("acme")
        core.close()
        info = await self.startRelay()

        def upgrade(path: str, protocol: str | None, auth: str | None) -> bytes:
            lines = [f"GET {path} HTTP/1.1", "Host: localhost", "Upgrade: websocket",
                     "Connection: Upgrade", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                     "Sec-WebSocket-Version: 13"]
            if protocol:
                lines.append(f"Sec-WebSocket-Protocol: {protocol}")
            if auth:
                lines.append(f"Authorization: Bearer {auth}")
            return ("\r\n".join(lines) + "\r\n\r\n").encode()

        async def status(request: bytes) -> bytes:
            answer = await self.talk(info.tls, request, tls=info.ca, expect=12)
            return answer[:12]

        self.assertEqual(await status(upgrade("/other", "nfltr.link.v1", key)), b"HTTP/1.1 404")
        self.assertEqual(await status(upgrade("/link", "chat", key)), b"HTTP/1.1 400")
        self.assertEqual(await status(upgrade("/link", "nfltr.link.v1", None)), b"HTTP/1.1 401")
        self.assertEqual(
            await status(upgrade("/link", "nfltr.link.v1", "nfltr_x_y")), b"HTTP/1.1 401"
        )
        self.assertEqual(await status(upgrade("/link", "nfltr.link.v1", key)), b"HTTP/1.1 101")
        self.assertEqual(await status(upgrade("/echo", None, None)), b"HTTP/1.1 404")

    @asyncTest
    async def test_tlsPortRefusals(self) -> None:
        """
        On the TLS port: plain HTTP gets the 400 saying the port speaks TLS; a
        TLS client asking for an unknown name fails its handshake on the
        relay's unrecognized_name alert; a silent connection is closed after
        the configured handshake timeout.  Each is counted by the router.
        """
        info = await self.startRelay(handshake_timeout=0.3)
        response = await self.talk(info.tls, b"GET / HTTP/1.1\r\nHost: r\r\n\r\n")
        self.assertEqual(response, NOT_TLS_RESPONSE)
        host, port = info.tls.rsplit(":", 1)
        endpoint = wrapClientTLS(
            client_creator("nope.localhost", ca_path=info.ca),
            TCP4ClientEndpoint(reactor, host, int(port)),
        )
        collector = Collector(b"never", 1)
        await connectProtocol(endpoint, collector)
        self.assertEqual(await collector.done, b"")
        assert collector.lost is not None
        self.assertIn("unrecognized name", str(collector.lost.value))
        started = reactor.seconds()
        self.assertEqual(await self.talk(info.tls, b""), b"")
        self.assertGreaterEqual(reactor.seconds() - started, 0.3)
        router = self.service.router
        assert router is not None
        self.assertEqual(
            {k: v for k, v in router.refused.items() if v},
            {"not_tls": 1, "unrecognized_name": 1, "timeout": 1},
        )

    @asyncTest
    async def test_shareSplice(self) -> None:
        """
        A share added to the relay's routing table gets the raw bytes of a
        visitor asking for C{NAME.localhost} over real sockets, hello first,
        and its answer reaches the visitor: here a TCP echo service, which
        sends back exactly what the visitor sent.
        """
        echo = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
            Factory.forProtocol(Echo)
        )
        self.addCleanup(echo.stopListening)
        info = await self.startRelay()
        self.service.shares.add("web", TCPBackend(echo.getHost().port))
        sent = live_hello("web.localhost") + b"bytes after the hello" * 1000
        self.assertEqual(await self.talk(info.tls, sent, expect=len(sent)), sent)

    @asyncTest
    async def test_tunnelOverTLS(self) -> None:
        """
        With keys from the real SQLite store: an agent and a client of one
        account are welcomed over TLS, and the client's bytes come back
        through the relay from the agent's echo; a key of another account is
        refused the session.
        """
        core = SQLiteStoreCore(self.dataDir / "nfltr.sqlite3")
        core.create_account("acme")
        core.create_account("bravo")
        _, agentKey = core.create_key("acme")
        _, clientKey = core.create_key("acme")
        _, otherKey = core.create_key("bravo")
        core.close()
        info = await self.startRelay()
        agent = await self.dial(info, agent_hello(agentKey, "web", [TcpShare(3000)]))
        self.assertEqual(without_token(agent.controls), [
            {"type": "welcome", "account": "acme", "name": "web", "shares": []}
        ])
        client = await self.dial(info, client_hello(clientKey))
        self.assertEqual(client.controls, [
            {"type": "welcome", "account": "acme", "name": None, "shares": [],
             "features": ["resume"]}
        ])
        link = self.links[-1][0]
        collector = Collector(b"hello through the relay", 23)
        link.openSession(client_target("web", 3000), collector)
        self.assertEqual(await collector.done, b"hello through the relay")
        await self.dial(info, client_hello(otherKey))
        other = Collector(b"x", 1)
        self.links[-1][0].openSession(client_target("web", 3000), other)
        self.assertEqual(await other.done, b"")
        self.assertEqual(
            (other.lost.value.code, other.lost.value.reason), (NOT_FOUND_CODE, NOT_FOUND_REASON)
        )

    @asyncTest
    async def test_stopDrainsWithinDrainTimeout(self) -> None:
        """
        Stopping sends a GOAWAY but lets a session in flight go on carrying
        bytes; one still open after the configured drain timeout is reset
        (C{GOING_AWAY}, C{drain timeout}), and only then is the stop done:
        not before the timeout, and well before the default one.
        """
        core = SQLiteStoreCore(self.dataDir / "nfltr.sqlite3")
        core.create_account("acme")
        _, agentKey = core.create_key("acme")
        _, clientKey = core.create_key("acme")
        core.close()
        drainTimeout = 0.5
        info = await self.startRelay(drainTimeout=drainTimeout)
        await self.dial(info, agent_hello(agentKey, "web", [TcpShare(3000)]))
        await self.dial(info, client_hello(clientKey))
        talker = Talker()
        self.links[-1][0].openSession(client_target("web", 3000), talker)
        self.assertEqual(await talker.say(b"before"), b"before")
        started = reactor.seconds()
        stopped = self.service.stopService()
        self.assertEqual(await talker.say(b" during"), b"before during")
        await stopped
        elapsed = reactor.seconds() - started
        await talker.lost
        reason = talker.reason
        assert reason is not None
        self.assertTrue(reason.check(SessionResetError), reason)
        self.assertEqual(
            (reason.value.code, reason.value.reason), (ErrorCode.GOING_AWAY, "drain timeout")
        )
        self.assertGreaterEqual(elapsed, drainTimeout)
        self.assertLess(elapsed, 1.5)

    @asyncTest
    async def test_readyzDuringDrain(self) -> None:
        """
        While the relay drains, its admin listener stays: C{/readyz} answers 503 (so a load
        balancer sees the drain) until the drain is over, and only then does the port close.
        """
        core = SQLiteStoreCore(self.dataDir / "nfltr.sqlite3")
        core.create_account("acme")
        _, agentKey = core.create_key("acme")
        _, clientKey = core.create_key("acme")
        core.close()
        info = await self.startRelay(drainTimeout=1.0)
        ask = b"GET /readyz HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n"
        self.assertTrue((await self.talk(info.admin, ask)).startswith(b"HTTP/1.1 200 "))
        await self.dial(info, agent_hello(agentKey, "web", [TcpShare(3000)]))
        await self.dial(info, client_hello(clientKey))
        talker = Talker()
        self.links[-1][0].openSession(client_target("web", 3000), talker)
        self.assertEqual(await talker.say(b"before"), b"before")
        stopped = self.service.stopService()
        self.assertTrue((await self.talk(info.admin, ask)).startswith(b"HTTP/1.1 503 "))
        await stopped
        host, port = info.admin.rsplit(":", 1)
        with self.assertRaises(ConnectionRefusedError):
            await connectProtocol(TCP4ClientEndpoint(reactor, host, int(port)), Protocol())

    @asyncTest
    async def test_eventStreamsEndOnStop(self) -> None:
        """
        The API's event streams (L{nfltr.relay.api}) end when the relay
        stops, so its admin listener can close.
        """
        core = SQLiteStoreCore(self.dataDir / "nfltr.sqlite3")
        _, token = core.create_admin_token()
        core.close()
        info = await self.startRelay(drainTimeout=1.0)
        ask = (f"GET /api/v1/events HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer {token}"
               "\r\nConnection: close\r\n\r\n").encode()
        host, port = info.admin.rsplit(":", 1)
        collector = Collector(ask, 1 << 30)
        await connectProtocol(TCP4ClientEndpoint(reactor, host, int(port)), collector)
        for _ in range(100):
            if b"event: snapshot" in collector.received:
                break
            await deferLater(reactor, 0.05)
        self.assertIn(b"event: snapshot", collector.received)
        await self.service.stopService()
        received = await collector.done
        self.assertTrue(received.startswith(b"HTTP/1.1 200 "))

    @asyncTest
    async def test_oneRelayPerDataDirectory(self) -> None:
        """
        A second relay on a data directory in use refuses to start, naming the holder's pid,
        and leaves the first one's C{relay.json} alone; once the first is stopping (draining),
        a successor starts.
        """
        info = await self.startRelay()
        first = self.service
        second = RelayService(RelayConfig(self.dataDir, tls=LOOPBACK, admin=LOOPBACK), reactor)
        second.startService()
        with self.assertRaises(DirectoryInUse) as caught:
            await second.whenReady()
        self.assertIn(f"is in use by another process (pid {os.getpid()})", str(caught.exception))
        await second.stopService()
        state = self.dataDir / "relay.json"
        self.assertEqual(json.loads(state.read_text())["tls"], info.tls)
        stopping = first.stopService()
        self.service = RelayService(
            RelayConfig(self.dataDir, tls=LOOPBACK, admin=LOOPBACK), reactor
        )
        self.service.startService()
        await self.service.whenReady()
        await stopping

    @asyncTest
    async def test_revocationFromAnotherProcess(self) -> None:
        """
        A key revoked through another connection to the database (as
        C{nfltr keys revoke} does) disconnects its agent with the C{revoked}
        message at the next poll.
        """
        core = SQLiteStoreCore(self.dataDir / "nfltr.sqlite3")
        core.create_account("acme")
        key, agentKey = core.create_key("acme")
        info = await self.startRelay(revocationPoll=0.05)
        agent = await self.dial(info, agent_hello(agentKey, "web", [TcpShare(3000)]))
        core.revoke_key(key.keyid)
        core.close()
        message = await agent.refusal
        self.assertEqual(
            message,
            {"type": "refused", "reason": "revoked", "message": f"API key {key.keyid} was revoked"},
        )
        await agent.lost

    @asyncTest
    async def test_startFailure(self) -> None:
        """
        When a listener cannot be bound, L{RelayService.whenReady} fails with
        the reason, which is logged in one line naming the option and its
        endpoint; nothing stays listening and no C{relay.json} is written.
        """
        logged: list[dict[str, Any]] = []
        self.patch(RelayService, "log", Logger(observer=logged.append))
        busy = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(Factory())
        self.addCleanup(busy.stopListening)
        config = RelayConfig(
            self.dataDir, tls=LOOPBACK, admin=f"tcp:{busy.getHost().port}:interface=127.0.0.1"
        )
        service = RelayService(config, reactor)
        service.startService()
        with self.assertRaises(CannotListenError) as caught:
            await service.whenReady()
        self.assertEqual(str(caught.exception), f"--admin {config.admin}: address already in use")
        with self.assertRaises(CannotListenError):
            await service.whenReady()
        await service.stopService()
        self.assertFalse((self.dataDir / "relay.json").exists())
        [event] = [e for e in logged if "error" in e]
        self.assertEqual(event["log_format"], "the relay could not start: {error}")
        self.assertIs(event["log_level"], LogLevel.error)
        self.assertNotIn("log_failure", event)


class FormatAddressTests(SynchronousTestCase):
    """
    L{format_address} spells bound addresses for C{relay.json}.
    """

    def test_ipv4(self) -> None:
        """
        IPv4 addresses read C{HOST:PORT}.
        """
        from twisted.internet.address import IPv4Address

        self.assertEqual(format_address(IPv4Address("TCP", "127.0.0.1", 8443)), "127.0.0.1:8443")

    def test_ipv6(self) -> None:
        """
        IPv6 addresses read C{[HOST]:PORT}.
        """
        from twisted.internet.address import IPv6Address

        self.assertEqual(format_address(IPv6Address("TCP", "::1", 8443)), "[::1]:8443")

    def test_unix(self) -> None:
        """
        A UNIX socket's address is its path.
        """
        from twisted.internet.address import UNIXAddress

        self.assertEqual(format_address(UNIXAddress(b"/run/relay.sock")), "/run/relay.sock")
