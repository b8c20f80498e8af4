# -*- test-case-name: tests.relay.test_metrics -*-
"""
The relay's Prometheus metrics, served on the admin listener at
C{/metrics}.

A custom collector reads the relay's state when scraped (agents and links
in the directory, the counters of L{nfltr.relay.counters}, the TLS port's
router and the admission of each public port): nothing is paid per byte or
per request, and per-agent series exist exactly while their agent does, so
none outlives it.  Every label has a closed set of values, except C{agent},
bounded by the agents connected (and by C{--max-agents}).

| metric | type | labels |
|---|---|---|
| C{nfltr_agents_connected} | gauge | |
| C{nfltr_links} | gauge | C{role} (agent, data, client, pending) |
| C{nfltr_sessions_open} | gauge | C{role} of the link (agent, data, client) |
| C{nfltr_sessions_total} | counter | C{kind} (tcp, share, http), C{outcome} (see below) |
| C{nfltr_link_bytes_total} | counter | C{direction} (in, out): link bytes, framing included |
| C{nfltr_link_memory_bytes} | gauge | : bytes links hold for their peers (L{nfltr.link.memory}) |
| C{nfltr_link_memory_limit_bytes} | gauge | : its limit (C{--link-memory}; absent: none) |
| C{nfltr_links_pressed} | gauge | : links over their share of that limit now |
| C{nfltr_link_sessions_overloaded_total} | counter | : sessions refused for it |
| C{nfltr_agent_connects_total} | counter | |
| C{nfltr_dialers_refused_total} | counter | C{reason} (the refusal reasons) |
| C{nfltr_tls_port_connections_total} | counter | C{route} (hand_over, splice) |
| C{nfltr_tls_port_refused_total} | counter | C{reason} (the SNI router's) |
| C{nfltr_admission_refused_total} | counter | C{port} (tls, http, public), C{reason} |
| C{nfltr_public_ports} | gauge | : public ports published now (with C{--public-ports}) |
| C{nfltr_public_udp_datagrams_total} | counter | C{outcome} (received, forwarded, dropped...) |
| C{nfltr_proxy_protocol_refused_total} | counter | C{reason} (with C{--proxy-protocol-from}) |
| C{nfltr_agent_link_rtt_seconds} | gauge | C{agent} |
| C{nfltr_agent_sessions_open} | gauge | C{agent} |
| C{nfltr_agent_link_bytes_total} | counter | C{agent}, C{direction} |
| C{nfltr_agent_connected_since_seconds} | gauge | C{agent}, C{kind} (link, ssh) |
| C{nfltr_store_available} | gauge | : 1 while the key store answers (L{nfltr.relay.store_health}) |
| C{nfltr_store_outages_total} | counter | : outages of the key store seen |
| C{nfltr_directory_command_seconds} | histogram | : the Redis directory's call times |
| C{nfltr_onion_service_up} | gauge | : 1 while the onion service is published (C{--onion} only) |

The per-agent series are read from each agent's holder only through
L{nfltr.relay.interfaces.IAgentHolder.figures}, the same for a native
agent's link and an SSH connection (which measures no round-trip time:
no C{rtt} series).

Session outcomes: C{routed}, C{not_found}, C{not_allowed} (an allow list),
C{agent_unavailable} (the agent's link is draining or gone).

prometheus_client is imported when C{/metrics} is first served
(L{MetricsResource} is given a function that makes the registry), not when
the relay starts: a relay nobody scrapes never holds it (resident memory:
docs/benchmarks.md, "Memory").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from twisted.web import resource
from twisted.web.server import Request

from .link_handler import AGENT_READY, CLIENT_READY, DATA_READY

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric
    from prometheus_client.registry import Collector

ROLES = {AGENT_READY: "agent", DATA_READY: "data", CLIENT_READY: "client"}


def _gauge(*args: Any, **kwargs: Any) -> Any:
    """
    A prometheus_client C{GaugeMetricFamily} (imported on first use, see
    the module).
    """
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily(*args, **kwargs)


def _counter(*args: Any, **kwargs: Any) -> Any:
    """
    A prometheus_client C{CounterMetricFamily} (imported on first use).
    """
    from prometheus_client.core import CounterMetricFamily

    return CounterMetricFamily(*args, **kwargs)


class RelayCollector:
    """
    Reads a running L{nfltr.relay.service.RelayService}'s state: a
    prometheus_client C{Collector} (its one method, C{collect}), written
    without the base class so that this module loads without
    prometheus_client.
    """

    def __init__(self, service: Any) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        """
        The metrics, now.
        """
        service = self.service
        relay = service.relay
        if relay is None:
            return
        yield from self._links(relay)
        yield from self._counters(relay.counters)
        yield from self._ports(service)
        yield from self._agents(relay)
        yield from self._memory(getattr(service, "linkMemory", None))
        yield from self._store(relay.storeHealth)
        onion = getattr(service, "onion", None)
        if onion is not None:
            up = _gauge("nfltr_onion_service_up",
                        "1 while the onion service (--onion) is published, else 0.")
            up.add_metric([], 1 if onion.up else 0)
            yield up

    def _links(self, relay: Any) -> Iterator[Metric]:
        agents = _gauge("nfltr_agents_connected", "Agents connected now.")
        agents.add_metric([], relay.directory.counts()[0])
        yield agents
        links = _gauge("nfltr_links", "Links by the role of their dialer.",
                                  labels=["role"])
        sessions = _gauge("nfltr_sessions_open", "Sessions open on links.",
                                     labels=["role"])
        byRole = {"agent": [0, 0], "data": [0, 0], "client": [0, 0], "pending": [0, 0]}
        bytesIn, bytesOut = relay.counters.closedBytesIn, relay.counters.closedBytesOut
        for handler in list(relay.handlers):
            role = ROLES.get(handler.state, "pending")
            byRole[role][0] += 1
            link = handler.link
            if link is not None:
                bytesIn += link.bytesReceived
                bytesOut += link.bytesSent
                if link.connection is not None:
                    byRole[role][1] += link.connection.session_count
        for role, (count, open_) in byRole.items():
            links.add_metric([role], count)
            if role != "pending":
                sessions.add_metric([role], open_)
        yield links
        yield sessions
        traffic = _counter("nfltr_link_bytes", "Bytes on links, framing included.",
                                      labels=["direction"])
        traffic.add_metric(["in"], bytesIn)
        traffic.add_metric(["out"], bytesOut)
        yield traffic

    def _counters(self, counters: Any) -> Iterator[Metric]:
        sessions = _counter(
            "nfltr_sessions", "Sessions by kind and routing outcome.", labels=["kind", "outcome"]
        )
        for (kind, outcome), count in counters.sessions.items():
            sessions.add_metric([kind, outcome], count)
        yield sessions
        connects = _counter("nfltr_agent_connects", "Agents welcomed.")
        connects.add_metric([], counters.agentConnects)
        yield connects
        refused = _counter(
            "nfltr_dialers_refused", "Agents and clients turned away.", labels=["reason"]
        )
        for reason, count in counters.refusals.items():
            refused.add_metric([reason], count)
        yield refused

    def _ports(self, service: Any) -> Iterator[Metric]:
        router = service.router
        if router is not None:
            routed = _counter(
                "nfltr_tls_port_connections", "TLS port connections routed.", labels=["route"]
            )
            for route, count in router.routed.items():
                routed.add_metric([route], count)
            yield routed
            refused = _counter(
                "nfltr_tls_port_refused", "TLS port connections refused.", labels=["reason"]
            )
            for reason, count in router.refused.items():
                refused.add_metric([reason], count)
            yield refused
        admission = _counter(
            "nfltr_admission_refused", "Connections refused before a byte was read.",
            labels=["port", "reason"],
        )
        ports = getattr(service.relay, "publicPorts", None)
        public = None if ports is None else ports.admission
        for port, counted in (("tls", service.tlsAdmission), ("http", service.httpAdmission),
                              ("public", public)):
            if counted is not None:
                for reason, count in counted.refused.items():
                    admission.add_metric([port, reason], count)
        yield admission
        if ports is not None:
            published = _gauge("nfltr_public_ports", "Public ports published now.")
            published.add_metric([], len(ports))
            yield published
        udp = getattr(service.relay, "publicUDPPorts", None)
        if udp is not None:
            datagrams = _counter(
                "nfltr_public_udp_datagrams",
                "Datagrams of public UDP ports: received from visitors, forwarded to agents, "
                "dropped, returned to visitors.", labels=["outcome"],
            )
            counts = service.udpCounts
            for outcome in ("received", "forwarded", "dropped", "returned"):
                datagrams.add_metric([outcome], getattr(counts, outcome))
            yield datagrams
        if getattr(getattr(service, "config", None), "proxy_from", None):
            proxy = _counter(
                "nfltr_proxy_protocol_refused",
                "Connections refused for their PROXY protocol header (--proxy-protocol-from).",
                labels=["reason"],
            )
            for reason, count in service.proxyRefused.items():
                proxy.add_metric([reason], count)
            yield proxy

    def _memory(self, memory: Any) -> Iterator[Metric]:
        if memory is None:
            return
        held = _gauge("nfltr_link_memory_bytes",
                                 "Bytes links hold for their peers, unsent.")
        held.add_metric([], memory.held)
        yield held
        if memory.limit is not None:
            limit = _gauge("nfltr_link_memory_limit_bytes",
                                      "The limit on what links hold (--link-memory).")
            limit.add_metric([], memory.limit)
            yield limit
        pressed = _gauge("nfltr_links_pressed",
                                    "Links over their share of the link memory limit.")
        pressed.add_metric([], memory.pressed)
        yield pressed
        refused = _counter("nfltr_link_sessions_overloaded",
                                      "Sessions refused at the link memory limit.")
        refused.add_metric([], memory.refused)
        yield refused

    def _store(self, health: Any) -> Iterator[Metric]:
        available = _gauge("nfltr_store_available",
                                      "1 while the key store answers, else 0.")
        available.add_metric([], 1 if health.available else 0)
        yield available
        outages = _counter("nfltr_store_outages", "Outages of the key store seen.")
        outages.add_metric([], health.outages)
        yield outages
        times = health.commandTimes
        if times is not None:
            from prometheus_client.core import HistogramMetricFamily

            histogram = HistogramMetricFamily(
                "nfltr_directory_command_seconds",
                "How long the Redis directory took to answer a call (failed calls included).",
            )
            counts = times.cumulative()
            bounds = [*(f"{b:g}" for b in times.bounds), "+Inf"]
            histogram.add_metric([], list(zip(bounds, counts, strict=True)), times.total)
            yield histogram

    def _agents(self, relay: Any) -> Iterator[Metric]:
        rtt = _gauge("nfltr_agent_link_rtt_seconds",
                                "Last round-trip time of an agent's link.", labels=["agent"])
        open_ = _gauge("nfltr_agent_sessions_open", "Sessions open to an agent.",
                                  labels=["agent"])
        traffic = _counter("nfltr_agent_link_bytes",
                                      "Bytes on an agent's link, framing included.",
                                      labels=["agent", "direction"])
        since = _gauge("nfltr_agent_connected_since_seconds",
                                  "When an agent's link or SSH connection connected (Unix time).",
                                  labels=["agent", "kind"])
        for name, holder in relay.agentHolders():
            figures = holder.figures()
            if figures.rtt is not None:
                rtt.add_metric([name], figures.rtt)
            open_.add_metric([name], figures.sessions)
            traffic.add_metric([name, "in"], figures.bytesIn)
            traffic.add_metric([name, "out"], figures.bytesOut)
            since.add_metric([name, figures.kind], figures.since)
        yield rtt
        yield open_
        yield traffic
        yield since


def metrics_registry(service: Any) -> CollectorRegistry:
    """
    A registry (not the global one) with the relay's collector.
    """
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(cast("Collector", RelayCollector(service)))
    replica = getattr(service, "replica", None)
    if replica is not None:  # a replica's own (nfltr.relay.cluster.metrics)
        registry.register(cast("Collector", replica.collector()))
    return registry


class MetricsResource(resource.Resource):
    """
    C{GET /metrics}: the registry in Prometheus' text format.

    @ivar registry: the registry once made (by the first C{GET}, from the
        function given).
    """

    isLeaf = True

    def __init__(self, registry: CollectorRegistry | Callable[[], CollectorRegistry]) -> None:
        super().__init__()
        self._make = registry if callable(registry) else None
        self.registry = None if callable(registry) else registry

    def render_GET(self, request: Request) -> bytes:
        """
        The metrics, now.
        """
        from prometheus_client import generate_latest
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        if self.registry is None:
            assert self._make is not None
            self.registry = self._make()
        request.setHeader(b"content-type", CONTENT_TYPE_LATEST.encode("ascii"))
        request.setHeader(b"cache-control", b"no-store")
        return generate_latest(self.registry)
