# -*- test-case-name: tests.agent.test_udp -*-
"""
The agent's UDP services (C{nfltr udp PORT}): the ports it declares in its
hello's C{udp} list, and the datagram sessions the relay opens for them
(C{udp:PORT}), each served by a socket connected to the local service
(L{nfltr.udp.ServiceExit}).  Datagram sessions are not end-to-end
encrypted: the relay can read them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from twisted.internet.error import CannotListenError
from twisted.logger import Logger

from nfltr.link import ErrorCode
from nfltr.link.twisted import LinkSession
from nfltr.udp import ServiceExit
from nfltr.wire.udp import PUBLIC_UDP_PORTS, UDP_FEATURE, UdpShare, parse_udp_target

from ._local import IPV4_LOOPBACK

#: What an agent sharing UDP ports says when its relay does not carry them.
OLD_RELAY_UDP = (
    "the relay does not carry UDP (it is older than this agent): upgrade it, or share no "
    "UDP port"
)


class UDPServices:
    """
    See the module.

    @ivar shares: the UDP ports shared.
    @ivar ports: their numbers.
    @ivar host: the address of the local services.
    """

    log = Logger()

    def __init__(
        self, reactor: Any, shares: Iterable[UdpShare], host: str = IPV4_LOOPBACK,
    ) -> None:
        self.reactor = reactor
        self.shares = tuple(shares)
        self.ports = frozenset(share.port for share in self.shares)
        self.host = host

    def declaration(self) -> list[dict[str, Any]]:
        """
        The hello's C{udp} list.
        """
        return [share.to_json() for share in self.shares]

    def refusal(self, welcome: dict[str, Any]) -> str | None:
        """
        Why this agent cannot run with the relay that sent C{welcome} (it
        shares UDP ports and the relay does not list the feature), or
        L{None}.
        """
        features = welcome.get("features")
        if self.ports and not (isinstance(features, list) and UDP_FEATURE in features):
            return OLD_RELAY_UDP
        public = any(share.public_port is not None for share in self.shares)
        if public and not isinstance(welcome.get(PUBLIC_UDP_PORTS), list):
            return OLD_RELAY_UDP
        return None

    def serve(self, session: LinkSession) -> bool:
        """
        Serve C{session} if it is a datagram session for a shared port;
        C{False} (untouched) otherwise.
        """
        parsed = parse_udp_target(session.target)
        if parsed is None or parsed[0] is not None or parsed[1] not in self.ports:
            return False
        port = parsed[1]
        try:
            exit = ServiceExit(self.reactor, self.host, port)
        except CannotListenError as e:
            self.log.warn("no UDP socket for port {port}: {why}", port=port, why=str(e.socketError))
            session.refuse(ErrorCode.CONNECT_FAILED, "the agent has no UDP socket for it")
            return True
        session.accept(exit.session)
        return True

    def connectLines(self, name: str, common: str, free: list[int]) -> list[str]:
        """
        The command that reaches each shared port (C{common}: the relay
        options), listening on a port of C{free}.
        """
        return [
            f"connect to UDP port {port} (not end-to-end encrypted): "
            f"nfltr udp-connect {name} {port} --listen 127.0.0.1:{local} {common}"
            for port, local in zip(sorted(self.ports), free, strict=False)
        ]

    def publicLines(self, relay: str, welcome: dict[str, Any]) -> list[str]:
        """
        Where visitors reach each public UDP port the welcome names (on
        C{relay}'s host, the agent's C{HOST:PORT} of it).
        """
        host = relay.rpartition(":")[0] or relay
        lines = []
        for answer in welcome.get(PUBLIC_UDP_PORTS) or ():
            if not isinstance(answer, dict):
                continue
            port, public = answer.get("port"), answer.get("public_port")
            if type(port) is int and type(public) is int:
                lines.append(f"public UDP port {host}:{public} -> UDP port {port}: visitors send "
                             "to it straight, with no connector; not end-to-end encrypted")
        return lines
