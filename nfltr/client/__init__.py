# -*- test-case-name: tests.client -*-
"""
The client, C{nfltr tcp-connect AGENT PORT}: local connections become
sessions, through the relay, to an agent's service; C{nfltr udp-connect
AGENT PORT}: local datagrams become datagram sessions (L{UDPConnector}).
"""

from ._connector import MAX_PENDING, PENDING_TIMEOUT, TcpConnector, explain
from ._options import DEFAULT_LISTEN, ConnectOptions, connect_options
from ._udp import UDPConnector, datagram_limits, udp_connect_options

__all__ = [
    "DEFAULT_LISTEN", "MAX_PENDING", "PENDING_TIMEOUT", "ConnectOptions",
    "TcpConnector", "UDPConnector", "connect_options", "datagram_limits", "explain",
    "udp_connect_options",
]
