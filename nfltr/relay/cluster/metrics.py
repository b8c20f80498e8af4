# -*- test-case-name: tests.relay.cluster.test_service,tests.integration.test_replicas -*-
"""
A replica's own metrics, beside the relay's (L{nfltr.relay.metrics}), on the
same C{/metrics}: L{ReplicaCollector} reads its L{ReplicaCounters}
(L{nfltr.relay.cluster.counters}), and the links open now, when scraped.

| metric | type | labels |
|---|---|---|
| C{nfltr_replica_sessions_forwarded_total} | counter | C{kind} (tcp, share, ssh) |
| C{nfltr_replica_links} | gauge | C{direction} (dialled, accepted) |
| C{nfltr_replica_peers_up} | gauge | |
| C{nfltr_replica_link_bytes_total} | counter | C{direction} (in, out) |
| C{nfltr_replica_link_rtt_seconds} | gauge | C{peer} (a replica id) |
| C{nfltr_replica_remembered_total} | counter | C{what} (presence, key, ssh_key) |

Sessions forwarded are those this replica carried to another; links and
peers are counted now; bytes include the link framing; a peer label is one
replica of the cluster (bounded by the cluster's size).  Remembered: the
presence records, API keys and SSH keys taken from memory because the
directory could not answer (L{nfltr.relay.cluster.presence_cache},
L{nfltr.relay.cluster.key_cache}, L{nfltr.relay.cluster.ssh_key_cache}).

prometheus_client is imported only when scraped, as for the relay's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .counters import ReplicaCounters

if TYPE_CHECKING:
    from nfltr.link.twisted import LinkProtocol

    from .aged_cache import AgedCache
    from .key_cache import KeyCache
    from .peers import Peers
    from .presence_cache import PresenceCache
    from .ssh_key_cache import SSHKeyCache

class ReplicaCollector:
    """
    Reads a replica's counters and links (a prometheus_client C{Collector},
    written without its base class).
    """

    def __init__(self, counters: ReplicaCounters, peers: Peers,
                 accepted: Iterable[LinkProtocol], presence: PresenceCache | None = None,
                 keys: KeyCache | None = None, sshKeys: SSHKeyCache | None = None) -> None:
        self.counters = counters
        self.peers = peers
        self.accepted = accepted
        self.presence = presence
        self.keys = keys
        self.sshKeys = sshKeys

    def collect(self) -> Iterator[Any]:
        """
        The metrics, now.
        """
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        counters = self.counters
        forwarded = CounterMetricFamily("nfltr_replica_sessions_forwarded",
                                        "Sessions carried to another replica.", labels=["kind"])
        for kind, count in counters.forwarded.items():
            forwarded.add_metric([kind], count)
        yield forwarded
        pools = list(self.peers.pools.values())
        dialled = [link for pool in pools for link in pool.links]
        accepted = list(self.accepted)
        links = GaugeMetricFamily("nfltr_replica_links", "Replica links open now.",
                                  labels=["direction"])
        links.add_metric(["dialled"], len(dialled))
        links.add_metric(["accepted"], len(accepted))
        yield links
        up = GaugeMetricFamily("nfltr_replica_peers_up", "Peers this replica has a link to.")
        up.add_metric([], sum(1 for pool in pools if pool.links))
        yield up
        traffic = CounterMetricFamily("nfltr_replica_link_bytes",
                                      "Replica-link bytes, framing included.",
                                      labels=["direction"])
        open_ = dialled + accepted
        traffic.add_metric(["in"], counters.closedBytesIn + sum(x.bytesReceived for x in open_))
        traffic.add_metric(["out"], counters.closedBytesOut + sum(x.bytesSent for x in open_))
        yield traffic
        rtt = GaugeMetricFamily("nfltr_replica_link_rtt_seconds",
                                "The last round-trip time measured to each peer.",
                                labels=["peer"])
        for pool in pools:
            measured = [link.rtt for link in pool.links if link.rtt is not None]
            if measured:
                rtt.add_metric([pool.replica], min(measured))
        yield rtt
        remembered = CounterMetricFamily(
            "nfltr_replica_remembered",
            "Presence records and keys taken from memory while the directory could not answer.",
            labels=["what"])
        caches: tuple[tuple[str, AgedCache[Any, Any] | None], ...] = (
            ("presence", self.presence), ("key", self.keys), ("ssh_key", self.sshKeys))
        for what, cache in caches:
            remembered.add_metric([what], 0 if cache is None else cache.recalled)
        yield remembered
