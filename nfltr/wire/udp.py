# -*- test-case-name: tests.wire.test_udp -*-
"""
What datagram sessions (UDP) put on the wire: the hello's C{udp} list, the
welcome's feature and the C{OPEN} targets (docs/link-protocol.md, section
17).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nfltr.wire.messages import UDP_FEATURE, MessageError, check_port
from nfltr.wire.policy import Network, PolicyError, parse_networks

__all__ = [
    "MAX_UDP_SHARES", "PUBLIC_UDP_PORTS", "UDP_FEATURE", "UdpShare", "parse_udp_shares",
    "parse_udp_target", "udp_target",
]

#: The welcome's key naming the public UDP port each share got
#: (C{[{"port", "public_port"}]}), for an agent that asked for one.
PUBLIC_UDP_PORTS = "public_udp_ports"
#: UDP ports one agent may share.
MAX_UDP_SHARES = 16
_PREFIX = "udp:"
_PORT = re.compile(r"[1-9][0-9]{0,4}")
_PORT_LIMIT = 65536
_UDP_KEYS = frozenset({"port", "public_port", "allow"})


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


@dataclass(frozen=True)
class UdpShare:
    """
    A UDP port an agent shares.

    @ivar public_port: the relay's UDP port visitors reach it on, straight
        (0: any free one; L{None}: none).
    @ivar allow: the networks a public port's visitors must come from
        (none: anyone).
    """

    port: int
    public_port: int | None = None
    allow: tuple[Network, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """
        The share as it travels in the hello.
        """
        data: dict[str, Any] = {"port": self.port}
        if self.public_port is not None:
            data["public_port"] = self.public_port
        if self.allow:
            data["allow"] = [str(network) for network in self.allow]
        return data


def parse_udp_shares(raw: Any) -> tuple[UdpShare, ...]:
    """
    The UDP ports an agent's hello declares (its C{udp} list, absent for
    none).

    @raise MessageError: naming what is wrong.
    """
    if not isinstance(raw, list) or len(raw) > MAX_UDP_SHARES:
        raise MessageError(f"udp must be a list of at most {MAX_UDP_SHARES} shares")
    shares = []
    for item in raw:
        if not isinstance(item, dict) or not set(item) <= _UDP_KEYS:
            raise MessageError("each udp share is a port, a public_port and an allow list")
        public = item.get("public_port")
        if public is not None and not (type(public) is int and public == 0):
            public = check_port(public)
        try:
            allow = parse_networks(item.get("allow", []))
        except PolicyError as e:
            raise MessageError(str(e)) from None
        shares.append(UdpShare(check_port(item.get("port")), public, allow))
    if len({share.port for share in shares}) != len(shares):
        raise MessageError("a udp port is shared twice")
    return tuple(shares)
