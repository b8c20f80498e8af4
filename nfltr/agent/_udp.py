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
from nfltr.wire.udp import UDP_FEATURE, parse_udp_target, udp_declaration

from ._local import IPV4_LOOPBACK

#: What an agent sharing UDP ports says when its relay does not carry them.
OLD_RELAY_UDP = (
    "the relay does not carry UDP (it is older than this agent): upgrade it, or share no "
    "UDP port"
)


class UDPServices:
    """
    See the module.

    @ivar ports: the UDP ports shared.
    @ivar host: the address of the local services.
    """

    log = Logger()

    def __init__(self, reactor: Any, ports: Iterable[int], host: str = IPV4_LOOPBACK) -> None:
        self.reactor = reactor
        self.ports = frozenset(ports)
        self.host = host

    def declaration(self) -> list[dict[str, int]]:
        """
        The hello's C{udp} list.
        """
        return udp_declaration(sorted(self.ports))

    def refusal(self, welcome: dict[str, Any]) -> str | None:
        """
        Why this agent cannot run with the relay that sent C{welcome} (it
        shares UDP ports and the relay does not list the feature), or
        L{None}.
        """
        features = welcome.get("features")
        if self.ports and not (isinstance(features, list) and UDP_FEATURE in features):
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
