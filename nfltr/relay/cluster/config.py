# -*- test-case-name: tests.relay.cluster.test_config -*-
"""
How a relay runs as a replica of a cluster (L{ReplicaConfig}), from the
C{--replica-...} and C{--cluster-ca} options, and the limits they are
checked against.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nfltr.wire.messages import MessageError, check_port, is_port_text

#: Link connections a replica keeps to each peer replica it forwards to
#: (C{--replica-links}), and the most it may be given.
DEFAULT_REPLICA_LINKS = 2
MAX_REPLICA_LINKS = 8
#: Seconds a presence record lives without a refresh
#: (L{nfltr.relay.cluster.presence}): the bound on routing to a replica that
#: died (C{--presence-ttl}).
DEFAULT_PRESENCE_TTL = 15.0
#: Seconds between two refreshes of the records a replica holds (a third of
#: the TTL).
DEFAULT_PRESENCE_REFRESH = DEFAULT_PRESENCE_TTL / 3
#: The least and most C{--presence-ttl} may be (its default:
#: L{DEFAULT_PRESENCE_TTL}).
MIN_PRESENCE_TTL = 3.0
MAX_PRESENCE_TTL = 300.0
#: Seconds a presence record read from (or written to) the directory may
#: still be used for routing while the directory cannot answer
#: (C{--presence-stale-limit}; 0: never; L{nfltr.relay.cluster.presence_cache}).
DEFAULT_PRESENCE_STALE_LIMIT = 300.0
MAX_PRESENCE_STALE_LIMIT = 3600.0
#: Presence records a replica remembers for an outage of the directory, at
#: most (C{--presence-cache-entries}; the least recently used go first).
DEFAULT_PRESENCE_CACHE_ENTRIES = 10_000
MAX_PRESENCE_CACHE_ENTRIES = 1_000_000
#: Seconds a draining replica waits, at most, for its agents to move to
#: another replica before it drains their links (L{nfltr.relay.handover},
#: C{--handover-wait}), and the most it may be given.
DEFAULT_HANDOVER_WAIT = 5.0
MAX_HANDOVER_WAIT = 300.0


@dataclass(frozen=True)
class ReplicaConfig:
    """
    A replica's settings.

    @ivar listen: the endpoint string of its replica-link listener
        (C{--replica-listen}); the relay adds mutual TLS.
    @ivar address: the C{HOST:PORT} other replicas dial it at
        (C{--replica-address}); L{None}: the address the listener bound,
        which must then not be a wildcard.
    @ivar cluster_ca: the cluster CA's directory (C{--cluster-ca}).
    @ivar links: link connections to each peer (C{--replica-links}).
    @ivar presence_ttl: seconds a presence record lives without a refresh
        (C{--presence-ttl}); records are refreshed three times as often.
    @ivar presence_stale_limit: seconds a remembered presence record may
        route visitors, and a remembered API or SSH key be taken, while the
        directory is away (C{--presence-stale-limit}).
    @ivar presence_cache_entries: presence records (and API keys, and SSH
        keys) remembered, at most each (C{--presence-cache-entries}).
    @ivar handover_wait: seconds a draining replica waits, at most, for its
        agents to move to another replica (L{nfltr.relay.handover},
        C{--handover-wait}); 0: it drains their links at once.
    """

    listen: str
    cluster_ca: Path
    address: str | None = None
    links: int = DEFAULT_REPLICA_LINKS
    presence_ttl: float = DEFAULT_PRESENCE_TTL
    presence_stale_limit: float = DEFAULT_PRESENCE_STALE_LIMIT
    presence_cache_entries: int = DEFAULT_PRESENCE_CACHE_ENTRIES
    handover_wait: float = DEFAULT_HANDOVER_WAIT


def parse_address(text: str) -> tuple[str, int]:
    """
    Read C{HOST:PORT} (C{[V6]:PORT} for an IPv6 address).

    @raise ValueError: saying what is wrong.
    """
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        if not sep or not host or not is_port_text(port):
            raise MessageError("no port")
        return host, check_port(int(port))
    except MessageError:
        raise ValueError(f"{text!r}: give HOST:PORT") from None


def check_links(value: object) -> int:
    """
    A number of links per peer, 1 to L{MAX_REPLICA_LINKS}.

    @raise ValueError: saying what is wrong.
    """
    text = str(value).strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_REPLICA_LINKS:
        raise ValueError(f"{value}: give a number from 1 to {MAX_REPLICA_LINKS}")
    return int(text)
