# -*- test-case-name: tests.udp -*-
"""
UDP over the link: datagram sessions (docs/link-protocol.md, section 17).

  - L{encode_datagram}, L{DatagramDecoder}: the framing, at most
    L{MAX_DATAGRAM} bytes a datagram (L{nfltr.udp._codec});
  - L{SessionTable}, L{DatagramLimits}: one session per visitor address
    with an idle timeout (L{nfltr.udp._table});
  - L{DatagramSession}, L{LinkDatagramOpener}: the protocol on a link
    session, dropping and counting what a full session cannot take
    (L{nfltr.udp._session});
  - L{UDPEntrance}, L{ServiceExit}: the sockets at either end
    (L{nfltr.udp._ports});

The names on the wire are L{nfltr.wire.udp}'s.
"""

from nfltr.udp._codec import MAX_DATAGRAM, DatagramDecoder, DatagramTooLarge, encode_datagram
from nfltr.udp._ports import ServiceExit, UDPEntrance
from nfltr.udp._session import DatagramSession, LinkDatagramOpener
from nfltr.udp._table import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_SESSIONS,
    DatagramCounts,
    DatagramLimits,
    SessionTable,
)

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_SESSIONS",
    "MAX_DATAGRAM",
    "DatagramCounts",
    "DatagramDecoder",
    "DatagramLimits",
    "DatagramSession",
    "DatagramTooLarge",
    "LinkDatagramOpener",
    "SessionTable",
    "ServiceExit",
    "UDPEntrance",
    "encode_datagram",
]
