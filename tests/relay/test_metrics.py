"""
Tests for L{nfltr.relay.metrics} and L{nfltr.relay.counters}: the relay's
Prometheus metrics, read from the state of real links over iosim.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import error
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase

from nfltr.link.memory import MIN_LINK_MEMORY, LinkMemory
from nfltr.relay.admin import admin_site
from nfltr.relay.metrics import MetricsResource, metrics_registry
from nfltr.store import CommandTimes, StoreUnavailable
from nfltr.streams import Admission
from nfltr.wire.messages import client_target

from .helpers import RelayHarness

A_KEY = "aaaaaaaaaaaa"


def samples(registry: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """
    Every sample, by name and sorted labels.
    """
    from prometheus_client import generate_latest

    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


class MetricsTests(SynchronousTestCase):
    """
    The collector reads agents, links, sessions and refusals.
    """

    def setUp(self) -> None:
        self.h = RelayHarness()
        self.key = self.h.store.addKey(A_KEY, "acme")
        self.service = SimpleNamespace(
            relay=self.h.relay, router=None, tlsAdmission=Admission(), httpAdmission=None
        )
        self.registry = metrics_registry(self.service)

    def test_agentSeriesLiveWithTheirAgent(self) -> None:
        """
        An agent's labelled series exist while it is connected and are gone
        once it disconnects; no sample names it then.
        """
        agent = self.h.agent(self.key, "web")
        seen = samples(self.registry)
        self.assertEqual(seen[("nfltr_agents_connected", ())], 1)
        self.assertIn(("nfltr_agent_sessions_open", (("agent", "web"),)), seen)
        self.assertGreater(
            seen[("nfltr_agent_link_bytes_total", (("agent", "web"), ("direction", "in")))], 0
        )
        agent.cut(error.ConnectionLost("gone"))
        self.h.run()
        after = samples(self.registry)
        self.assertEqual(after[("nfltr_agents_connected", ())], 0)
        self.assertEqual([k for k in after if ("agent", "web") in k[1]], [])
        # What the agent's link carried stays in the totals.
        self.assertGreaterEqual(
            after[("nfltr_link_bytes_total", (("direction", "in"),))],
            seen[("nfltr_agent_link_bytes_total", (("agent", "web"), ("direction", "in")))],
        )

    def test_sessionsAndRefusals(self) -> None:
        """
        A routed session and a session to nobody are counted by kind and
        outcome; a refused dialer by reason; admission refusals by port and
        reason.
        """
        self.h.agent(self.key, "web")
        client = self.h.client(self.key)
        client.link.openSession(client_target("web", 3000), Protocol())
        client.link.openSession(client_target("nobody", 3000), Protocol())
        self.h.run()
        self.h.agent("nfltr_cccccccccccc_" + "B" * 43, "x")
        self.service.tlsAdmission.refused["per_source_rate"] += 2
        seen = samples(self.registry)
        self.assertEqual(
            seen[("nfltr_sessions_total", (("kind", "tcp"), ("outcome", "routed")))], 1
        )
        self.assertEqual(
            seen[("nfltr_sessions_total", (("kind", "tcp"), ("outcome", "not_found")))], 1
        )
        self.assertEqual(
            seen[("nfltr_dialers_refused_total", (("reason", "unauthorized"),))], 1
        )
        self.assertEqual(seen[("nfltr_agent_connects_total", ())], 1)
        self.assertEqual(
            seen[("nfltr_admission_refused_total",
                  (("port", "tls"), ("reason", "per_source_rate")))], 2
        )
        self.assertEqual(seen[("nfltr_links", (("role", "client"),))], 1)


class Holder:
    """
    Stands for a link of the account.
    """

    def memoryRelieved(self) -> None:
        pass


class LinkMemoryMetricsTests(SynchronousTestCase):
    """
    The relay's link memory account is exported.
    """

    def test_gauges(self) -> None:
        """
        What the links hold, the limit, the links pressed and the sessions
        refused, as the account says.
        """
        memory = LinkMemory(MIN_LINK_MEMORY)
        holder = Holder()
        memory.change(holder, 0, MIN_LINK_MEMORY + 1)
        memory.refused = 3
        seen = samples(metrics_registry(SimpleNamespace(
            relay=RelayHarness().relay, router=None, tlsAdmission=None, httpAdmission=None,
            linkMemory=memory,
        )))
        self.assertEqual(seen[("nfltr_link_memory_bytes", ())], MIN_LINK_MEMORY + 1)
        self.assertEqual(seen[("nfltr_link_memory_limit_bytes", ())], MIN_LINK_MEMORY)
        self.assertEqual(seen[("nfltr_links_pressed", ())], 1)
        self.assertEqual(seen[("nfltr_link_sessions_overloaded_total", ())], 3)

    def test_store(self) -> None:
        """
        Whether the key store answers, and how many outages it had.
        """
        relay = RelayHarness().relay
        relay.storeHealth.log = Logger(observer=lambda event: None)
        service = SimpleNamespace(relay=relay, router=None, tlsAdmission=None,
                                  httpAdmission=None)
        seen = samples(metrics_registry(service))
        self.assertEqual((seen[("nfltr_store_available", ())],
                          seen[("nfltr_store_outages_total", ())]), (1, 0))
        relay.storeHealth.failed(StoreUnavailable("gone"))
        seen = samples(metrics_registry(service))
        self.assertEqual((seen[("nfltr_store_available", ())],
                          seen[("nfltr_store_outages_total", ())]), (0, 1))
        self.assertNotIn(("nfltr_directory_command_seconds_count", ()), seen)

    def test_directoryTimes(self) -> None:
        """
        With a Redis directory (its call durations counted), a histogram of
        them: a bucket per bound, +Inf, the count and the sum.
        """
        relay = RelayHarness().relay
        times = relay.storeHealth.commandTimes = CommandTimes((0.01, 0.1))
        times.observe(0.005)
        times.observe(0.05)
        service = SimpleNamespace(relay=relay, router=None, tlsAdmission=None,
                                  httpAdmission=None)
        seen = samples(metrics_registry(service))
        name = "nfltr_directory_command_seconds"
        self.assertEqual(seen[(name + "_bucket", (("le", "0.01"),))], 1)
        self.assertEqual(seen[(name + "_bucket", (("le", "+Inf"),))], 2)
        self.assertEqual(seen[(name + "_count", ())], 2)
        self.assertAlmostEqual(seen[(name + "_sum", ())], 0.055)


class AdminTests(SynchronousTestCase):
    """
    C{/metrics} and C{/readyz} on the admin site.
    """

    def get(self, site: Any, path: bytes) -> bytes:
        protocol = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
        transport = StringTransport()
        protocol.makeConnection(transport)
        protocol.dataReceived(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        return transport.value()

    def test_readyzAndMetrics(self) -> None:
        """
        C{/readyz} follows the readiness flag (200, then 503); C{/metrics}
        answers in Prometheus' text format.
        """
        state = {"ready": True}
        h = RelayHarness()
        registry = metrics_registry(SimpleNamespace(
            relay=h.relay, router=None, tlsAdmission=None, httpAdmission=None))
        site = admin_site(lambda: state["ready"], MetricsResource(registry), Clock())
        self.assertTrue(self.get(site, b"/readyz").startswith(b"HTTP/1.1 200 "))
        state["ready"] = False
        self.assertTrue(self.get(site, b"/readyz").startswith(b"HTTP/1.1 503 "))
        answer = self.get(site, b"/metrics")
        self.assertIn(b"content-type: text/plain; version=", answer.lower())
        self.assertIn(b"nfltr_agents_connected 0.0", answer)


class SSHHolderMetricsTests(SynchronousTestCase):
    """
    The collector with an SSH connection holding an agent (C{ssh -R
    0:localhost:PORT NAME@relay}) next to a native agent.
    """

    def test_everyHolderKind(self) -> None:
        """
        C{/metrics} answers while a native agent and an SSH connection's
        agent are connected, with the per-agent series of both.
        """
        from nfltr.relay.ssh._auth import SSHIdentity
        from nfltr.relay.ssh._user import RelayUser, SSHHub
        from nfltr.ssh import SSHConfig
        from tests.relay.ssh.test_server import FakeConnection, forward

        h = RelayHarness()
        h.agent(h.store.addKey(A_KEY, "acme"), "web")
        hub = SSHHub(h.relay, SSHConfig(), h.clock, lambda: ("relay.test", 2222))
        user = RelayUser(SSHIdentity("acme", "laptop", "ssh:acme"), hub)
        user.conn = FakeConnection()
        self.assertTrue(user.global_tcpip_forward(forward(b"localhost", 0)))
        registry = metrics_registry(SimpleNamespace(
            relay=h.relay, router=None, tlsAdmission=None, httpAdmission=None))
        seen = samples(registry)
        self.assertEqual(seen[("nfltr_agents_connected", ())], 2)
        for name in ("web", "laptop"):
            self.assertIn(("nfltr_agent_sessions_open", (("agent", name),)), seen)
