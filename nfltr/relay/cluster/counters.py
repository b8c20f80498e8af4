# -*- test-case-name: tests.relay.cluster.test_service,tests.integration.test_replicas -*-
"""
L{ReplicaCounters}: a replica's running totals, counted as sessions are
forwarded (L{nfltr.relay.cluster.routes}) and replica links end
(L{nfltr.relay.cluster.peers}, L{nfltr.relay.cluster.node}), read by its
metrics (L{nfltr.relay.cluster.metrics}).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nfltr.link.twisted import LinkProtocol

#: The kinds of forwarded sessions.
FORWARDED_KINDS = ("tcp", "share", "ssh")


@dataclass
class ReplicaCounters:
    """
    Running totals of one replica.

    @ivar forwarded: sessions carried to another replica, by kind.
    @ivar closedBytesIn: bytes read on replica links that have ended.
    @ivar closedBytesOut: bytes written on them.
    """

    forwarded: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FORWARDED_KINDS, 0))
    closedBytesIn: int = 0
    closedBytesOut: int = 0

    def linkEnded(self, link: LinkProtocol) -> None:
        """
        Keep an ended replica link's bytes.
        """
        self.closedBytesIn += link.bytesReceived
        self.closedBytesOut += link.bytesSent
