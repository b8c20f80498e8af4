# -*- test-case-name: tests.udp.test_codec -*-
"""
The names datagram sessions carry on the wire: the welcome's feature and
the C{OPEN} targets (docs/link-protocol.md, section 17).
"""

from __future__ import annotations

import re

#: What a peer lists in its welcome's C{features} when it takes datagram
#: sessions; a peer that does not list it is never sent one.
UDP_FEATURE = "udp"
_PREFIX = "udp:"
_PORT = re.compile(r"[0-9]{1,5}")
_PORT_LIMIT = 65536


def udp_target(port: int, agent: str | None = None) -> str:
    """
    The target of a datagram session for UDP port C{port}: C{udp:<port>}
    on an agent's link, C{udp:<agent>:<port>} from a client to the relay.
    """
    if not 0 < port < _PORT_LIMIT:
        raise ValueError(f"port {port} out of range")
    return f"{_PREFIX}{agent}:{port}" if agent is not None else f"{_PREFIX}{port}"


def parse_udp_target(target: str) -> tuple[str | None, int] | None:
    """
    C{(agent, port)} from a datagram session's target (C{agent} C{None}
    for C{udp:<port>}); C{None} if C{target} is not one.
    """
    if not target.startswith(_PREFIX):
        return None
    agent, _, text = target[len(_PREFIX):].rpartition(":")
    if _PORT.fullmatch(text) is None or not 0 < int(text) < _PORT_LIMIT:
        return None
    if agent == "":
        return (None, int(text)) if ":" not in target[len(_PREFIX):] else None
    return agent, int(text)
