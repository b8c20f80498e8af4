# -*- test-case-name: tests.wire.test_udp -*-
"""
What datagram sessions (UDP) put on the wire: the hello's C{udp} list, the
welcome's feature and the C{OPEN} targets (docs/link-protocol.md, section
17).
"""

from __future__ import annotations

import re
from typing import Any

from nfltr.wire.messages import UDP_FEATURE, MessageError, check_port

__all__ = [
    "MAX_UDP_SHARES", "UDP_FEATURE", "parse_udp_ports", "parse_udp_target", "udp_declaration",
    "udp_target",
]

#: UDP ports one agent may share.
MAX_UDP_SHARES = 16
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


def udp_declaration(ports: list[int]) -> list[dict[str, int]]:
    """
    The C{udp} list of an agent's hello sharing UDP C{ports}.
    """
    return [{"port": check_port(port)} for port in ports]


def parse_udp_ports(raw: Any) -> frozenset[int]:
    """
    The UDP ports an agent's hello declares (its C{udp} list, absent for
    none).

    @raise MessageError: naming what is wrong.
    """
    if not isinstance(raw, list) or len(raw) > MAX_UDP_SHARES:
        raise MessageError(f"udp must be a list of at most {MAX_UDP_SHARES} shares")
    ports = []
    for item in raw:
        if not isinstance(item, dict) or set(item) != {"port"}:
            raise MessageError("each udp share is a port alone")
        ports.append(check_port(item["port"]))
    if len(set(ports)) != len(ports):
        raise MessageError("a udp port is shared twice")
    return frozenset(ports)
