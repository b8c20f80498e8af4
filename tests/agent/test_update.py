"""
Tests for L{nfltr.agent.EntryUpdater}: new entries for a running agent, on
its link to the test relay.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import (
    AgentService,
    EntryUpdater,
    agent_options,
    http_option,
    prepare_agent,
)
from nfltr.agent._service import AgentSetup
from nfltr.wire.messages import agent_target, http_target, share_target, welcome
from nfltr.wire.update import update_refused, updated_message

from .helpers import Echo, FakeServices, LogCapture, Network, Recorder, TestRelay

KEY = "nfk_agent-key"
RELAY_PIN = "sha256:" + "11" * 32


def welcomeWithUpdates(app: dict[str, Any]) -> dict[str, Any]:
    """
    A relay that takes updates.
    """
    return welcome("acme", app.get("name"), [], "0" * 32)


class UpdaterFixture:
    """
    An agent C{box} sharing port 3000 and share C{blog} (inspect, port
    8000), with an updater.
    """

    def __init__(self, case: SynchronousTestCase, policy: Any = welcomeWithUpdates) -> None:
        self.case = case
        self.state = case.mktemp()
        self.network = Network()
        self.relay = TestRelay(self.network, policy)
        self.services = FakeServices(self.network, {3000: Echo, 3001: Echo, 8000: Echo})
        self.logs = LogCapture(case)
        self.announced: list[str] = []
        self.agent = AgentService(
            self.network.clock, self.setup([3000], ["blog"]), self.announced.append,
            endpoint=self.relay.endpoint(), connector=self.services,
        )
        self.updater = EntryUpdater(self.agent, self.network.clock)
        self.agent.startService()
        case.addCleanup(self.agent.stopService)
        self.network.run()

    def setup(self, ports: list[int], shares: list[str], mode: str = "inspect",
              port: int = 8000) -> AgentSetup:
        http = [replace(http_option(port, {"mode": mode}, {}), name=name) for name in shares]
        options = agent_options(
            [str(p) for p in ports],
            {"name": "box", "state-dir": self.state, "relay-pin": RELAY_PIN, "key": KEY},
            environ={}, http=http,
        )
        return prepare_agent(options)

    def session(self, target: str) -> Recorder:
        """
        Open a session from the relay; what came back.
        """
        recorder = Recorder()
        self.relay.agents["box"].openSession(target, recorder)
        self.network.run()
        return recorder


class UpdaterTests(SynchronousTestCase):
    """
    L{EntryUpdater.update}.
    """

    def test_applied(self) -> None:
        """
        The relay is sent the whole new declaration; the kept share's
        server is the same object; once the relay answers, the new URL is
        announced and the dialler's hello is the new declaration.
        """
        f = UpdaterFixture(self)
        blog = f.agent.shares["blog"]
        f.relay.answer = lambda m: updated_message(m["seq"], [
            {"name": "wiki", "mode": "inspect", "url": "https://wiki.example/"}])
        f.updater.update(f.setup([3000, 3001], ["blog", "wiki"]))
        f.network.run()
        [sent] = f.relay.controls
        self.assertEqual((sent["type"], sent["seq"]), ("update", 1))
        self.assertEqual([s["port"] for s in sent["tcp"]], [3000, 3001])
        self.assertEqual([s["name"] for s in sent["http"]], ["blog", "wiki"])
        self.assertIs(f.agent.shares["blog"], blog)
        self.assertIn("share https://wiki.example/ -> port 8000", "\n".join(f.announced))
        self.assertEqual([s["port"] for s in f.agent.dialler.appHello["tcp"]], [3000, 3001])
        self.assertTrue(any(line.startswith("connect to port 3001 ") for line in f.announced))

    def test_sessions(self) -> None:
        """
        Sessions for an added port are served; for a removed port or share,
        refused.
        """
        f = UpdaterFixture(self)
        f.relay.answer = lambda m: updated_message(m["seq"], [])
        f.updater.update(f.setup([3001], []))
        f.network.run()
        self.assertIsNone(f.session(agent_target(3001)).lost)
        for target in (agent_target(3000), http_target("blog")):
            self.assertIsNotNone(f.session(target).lost)

    def test_refused(self) -> None:
        """
        A refused update puts the previous entries back.
        """
        f = UpdaterFixture(self)
        shares, sessions, hello = f.agent.shares, f.agent.sessions, f.agent.dialler.appHello
        f.relay.answer = lambda m: update_refused(m["seq"], "conflict", "name wiki is taken")
        f.updater.update(f.setup([3000], ["blog", "wiki"]))
        f.network.run()
        self.assertIs(f.agent.shares, shares)
        self.assertIs(f.agent.sessions, sessions)
        self.assertIs(f.agent.dialler.appHello, hello)
        self.assertIn("name wiki is taken", f.logs.allText())

    def test_oneAtATime(self) -> None:
        """
        An update waits for the answer to the one before; only the latest
        of those waiting is sent.
        """
        f = UpdaterFixture(self)
        f.updater.update(f.setup([3001], []))
        f.updater.update(f.setup([3000], []))
        f.updater.update(f.setup([3000, 3001], []))
        f.network.run()
        self.assertEqual(len(f.relay.controls), 1)
        f.relay.agents["box"].sendControl(updated_message(1, []))
        f.network.run()
        self.assertEqual([[s["port"] for s in c["tcp"]] for c in f.relay.controls],
                         [[3001], [3000, 3001]])
        self.assertEqual(f.relay.controls[1]["seq"], 2)

    def test_oldRelay(self) -> None:
        """
        A relay without the feature is not sent the update; the log says
        the entries reach it at the next link, whose hello declares them.
        """
        f = UpdaterFixture(self, policy=lambda app: welcome("acme", app.get("name")))
        f.updater.update(f.setup([3001], []))
        f.network.run()
        self.assertEqual(f.relay.controls, [])
        self.assertIn("does not take updates", f.logs.allText())
        self.assertEqual([s["port"] for s in f.agent.dialler.appHello["tcp"]], [3001])

    def test_reconnectWhilePending(self) -> None:
        """
        A link welcomed while an update waits for its answer declared the
        new entries: the update is done, the next may go.
        """
        f = UpdaterFixture(self)
        f.updater.update(f.setup([3001], []))
        f.network.run()
        f.agent.relayUp(f.agent.dialler.link, welcomeWithUpdates({"name": "box"}))
        self.assertIsNone(f.updater.pending)


class UpdatedSessionsTests(SynchronousTestCase):
    """
    What the new sessions' router keeps of the new options.
    """

    def test_everyOption(self) -> None:
        """
        The router installed by an update serves the new options as the
        agent's first router does: plain ports plain, the public ports'
        visitors, the PROXY protocol, and the UDP ports.
        """
        f = UpdaterFixture(self)
        f.relay.answer = lambda m: updated_message(m["seq"], [])
        setup = f.setup([3000, 3001], [])
        options = replace(setup.options, plain=frozenset({3001}), public_ports=(20001,),
                          proxy_protocol="v1", udp=(5353,))
        f.updater.update(replace(setup, options=options))
        f.network.run()
        sessions = f.agent.sessions
        self.assertEqual(sessions.plain, frozenset({3001}))
        self.assertEqual(sessions.publicPorts, frozenset({3000}))
        self.assertEqual(sessions.proxyProtocol, "v1")
        assert sessions.udp is not None
        self.assertEqual(sessions.udp.ports, frozenset({5353}))
        self.assertIs(f.agent.udp, sessions.udp)
        [sent] = f.relay.controls
        self.assertEqual(sent["udp"], [{"port": 5353}])
        self.assertEqual(f.agent.dialler.appHello["udp"], [{"port": 5353}])

    def test_udpRemoved(self) -> None:
        """
        An update without UDP ports declares an empty list (the relay
        withdraws them), and the agent serves none.
        """
        f = UpdaterFixture(self)
        f.relay.answer = lambda m: updated_message(m["seq"], [])
        f.updater.update(f.setup([3000], []))
        f.network.run()
        self.assertIsNone(f.agent.udp)
        self.assertEqual(f.relay.controls[0]["udp"], [])

    def test_publicPortsAnnounced(self) -> None:
        """
        The public ports the relay published for an update are announced,
        as those of the welcome.
        """
        f = UpdaterFixture(self)
        f.relay.answer = lambda m: updated_message(m["seq"], [], {
            "public_ports": [{"port": 3001, "public_port": 20001}],
            "public_udp_ports": [{"port": 5353, "public_port": 20053}]})
        setup = f.setup([3000, 3001], [])
        f.updater.update(replace(setup, options=replace(setup.options, udp=(5353,))))
        f.network.run()
        text = "\n".join(f.announced)
        self.assertIn(":20001 -> port 3001", text)
        self.assertIn(":20053 -> UDP port 5353", text)

    def test_relayWithoutUDP(self) -> None:
        """
        New UDP entries for a relay that does not carry UDP change nothing;
        the log says why.
        """
        f = UpdaterFixture(self, policy=lambda app: welcome("acme", app.get("name"), [], "0" * 32))
        sessions = f.agent.sessions
        f.agent.dialler.welcome = {**(f.agent.dialler.welcome or {}), "features": ["update"]}
        setup = f.setup([3000], ["blog"])
        f.updater.update(replace(setup, options=replace(setup.options, udp=(5353,))))
        f.network.run()
        self.assertIs(f.agent.sessions, sessions)
        self.assertEqual(f.relay.controls, [])
        self.assertIn("the relay does not carry UDP", f.logs.allText())


BODY = bytes(range(256)) * 1024
REQUEST = b"GET / HTTP/1.1\r\nHost: blog\r\n\r\n"


class HeldService(Recorder):
    """
    An HTTP service that answers each request with L{BODY}, its head and
    first half at once, the rest when the test says (L{finish}).
    """

    def dataReceived(self, data: bytes) -> None:
        super().dataReceived(data)
        if self.received.endswith(b"\r\n\r\n"):
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY)
                                 + BODY[:len(BODY) // 2])

    def finish(self) -> None:
        self.transport.write(BODY[len(BODY) // 2:])


class _Clear:
    """
    In place of a share's TLS: the visitor's bytes as they are (what is
    tested here is what the proxy under it does).
    """

    def wrap(self, application: Any) -> Any:
        return application


class RemovedShareTests(SynchronousTestCase):
    """
    An e2ee share that an update removes or changes: its downloads in
    flight finish whole, each visitor connection ends at its next response's
    end (L{nfltr.http.IDrainable}), new visits go to the new share or are
    refused, and the agent's drain timeout bounds the rest.
    """

    def setUp(self) -> None:
        self.f = f = UpdaterFixture(self)
        f.services.factories.update({8000: HeldService, 8001: HeldService})
        f.relay.answer = lambda m: updated_message(m["seq"], [])
        f.updater.update(f.setup([3000], ["blog"], "e2ee"))
        f.network.run()
        f.agent.shares["blog"].tls = _Clear()

    def visit(self) -> Recorder:
        """
        A visitor connection to C{blog}, one request sent.
        """
        visitor = Recorder(REQUEST)
        self.f.relay.agents["box"].openSession(share_target("blog", "203.0.113.5:4711"), visitor)
        self.f.network.run()
        return visitor

    def finish(self, port: int) -> None:
        """
        The newest service connection on C{port} ends its response.
        """
        service = self.f.services.services[port][-1]
        assert isinstance(service, HeldService)
        service.finish()
        self.f.network.run()

    def requests(self, port: int) -> int:
        """
        How many requests the service on C{port} was sent.
        """
        return sum(s.received.count(b"GET ") for s in self.f.services.services[port]
                   if isinstance(s, Recorder))

    def assertWhole(self, received: bytes, closes: bool) -> bytes:
        """
        C{received} is a response with the whole of L{BODY}, which says
        C{Connection: close} if C{closes}; what follows it.
        """
        head, _, rest = received.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200 "), head)
        self.assertEqual(b"connection: close" in head.lower(), closes, head)
        self.assertEqual(rest[:len(BODY)], BODY)
        return rest[len(BODY):]

    def test_removed(self) -> None:
        """
        A download in flight through a removed share finishes whole; the
        next request on its connection is answered with C{Connection:
        close}, and the connection ends; a new visit is refused.
        """
        f = self.f
        visitor = self.visit()
        f.updater.update(f.setup([3000], []))
        f.network.run()
        self.assertNotIn("blog", f.agent.shares)
        self.finish(8000)
        self.assertEqual(self.assertWhole(visitor.received, closes=False), b"")
        self.assertIsNone(visitor.lost)
        visitor.transport.write(REQUEST)
        f.network.run()
        self.finish(8000)
        self.assertWhole(self.assertWhole(visitor.received, closes=False), closes=True)
        self.assertIsNotNone(visitor.lost, "the visitor connection stayed open")
        self.assertIsNotNone(self.visit().lost)
        self.assertEqual(self.requests(8000), 2)

    def test_changed(self) -> None:
        """
        A share whose service port changed: the download in flight finishes
        on the old port, its connection ends after its next response, and a
        new visit goes to the new port.
        """
        f = self.f
        visitor = self.visit()
        f.updater.update(f.setup([3000], ["blog"], "e2ee", port=8001))
        f.network.run()
        f.agent.shares["blog"].tls = _Clear()
        self.finish(8000)
        visitor.transport.write(REQUEST)
        f.network.run()
        self.finish(8000)
        self.assertWhole(self.assertWhole(visitor.received, closes=False), closes=True)
        self.assertIsNotNone(visitor.lost, "the visitor connection stayed open")
        second = self.visit()
        self.finish(8001)
        self.assertEqual(self.assertWhole(second.received, closes=False), b"")
        self.assertIsNone(second.lost)
        self.assertEqual(self.requests(8001), 1)
        self.assertEqual(self.requests(8000), 2)

    def test_bound(self) -> None:
        """
        A visit still in flight when the drain timeout is over is reset,
        and its service connection closed; an idle visitor connection too.
        """
        f = self.f
        busy = self.visit()
        idle = self.visit()
        self.finish(8000)
        self.assertWhole(idle.received, closes=False)
        f.updater.update(f.setup([3000], []))
        f.network.advance(f.agent.drainTimeout - 1)
        self.assertEqual((busy.lost, idle.lost), (None, None))
        f.network.advance(1)
        self.assertIsNotNone(busy.lost, "the visit outlived the drain timeout")
        self.assertIsNotNone(idle.lost, "the idle connection outlived the drain timeout")
        self.assertIsNotNone(f.services.services[8000][0].lost)
