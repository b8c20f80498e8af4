# -*- test-case-name: tests.relay.test_update_ports -*-
"""
The public ports an agent's C{update} changes (L{nfltr.relay.agent_update}):
those of its TCP shares (L{nfltr.relay.public_ports}) and of its UDP shares
(L{nfltr.relay.public_udp}).

A share's public port is changed when the share no longer asks for it, or
asks for another port or allow list: the old one is withdrawn (its lease
runs) before the new one is published, so a move stays within the
per-account limit.  Publishing is all or nothing: when a port is refused,
what was published is withdrawn and what was withdrawn published again on
the port it had, and the refusal goes on to the agent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from twisted.logger import Logger

from nfltr.wire.messages import PUBLIC_PORTS, TcpShare
from nfltr.wire.udp import PUBLIC_UDP_PORTS, UdpShare

from .names import ClaimRefused
from .public_ports import PortRequest, PublicPorts
from .public_udp import publish_udp

_log = Logger()


def _requests(shares: Iterable[TcpShare | UdpShare]) -> dict[int, PortRequest]:
    return {s.port: PortRequest(s.port, s.public_port, s.allow) for s in shares
            if s.public_port is not None}


def _changed(old: dict[int, PortRequest], new: dict[int, PortRequest]) -> tuple[
        list[PortRequest], list[PortRequest]]:
    added = [r for service, r in new.items() if old.get(service) != r]
    removed = [r for service, r in old.items() if new.get(service) != r]
    return added, removed


def _udp(requests: Iterable[PortRequest]) -> list[UdpShare]:
    return [UdpShare(r.service, r.public, r.allow) for r in requests]


@dataclass
class PortChanges:
    """
    The public ports one update adds and removes, TCP and UDP.

    @ivar withdrawn: the requests of the ports withdrawn so far, each with
        the port it had (to publish again if the update is undone).
    """

    tcpAdded: list[PortRequest]
    tcpRemoved: list[PortRequest]
    udpAdded: list[PortRequest]
    udpRemoved: list[PortRequest]
    withdrawn: dict[str, list[PortRequest]] = field(default_factory=dict)

    @classmethod
    def between(
        cls, oldTcp: Iterable[TcpShare], newTcp: Iterable[TcpShare],
        oldUdp: Iterable[UdpShare], newUdp: Iterable[UdpShare],
    ) -> PortChanges:
        """
        What changes from the old shares to the new ones.
        """
        tcpAdded, tcpRemoved = _changed(_requests(oldTcp), _requests(newTcp))
        udpAdded, udpRemoved = _changed(_requests(oldUdp), _requests(newUdp))
        return cls(tcpAdded, tcpRemoved, udpAdded, udpRemoved)

    def apply(self, relay: Any, holder: Any, account: str, group: str | None) -> dict[str, Any]:
        """
        Withdraw the removed ports, publish the added ones.

        @return: the answers, keyed as in the welcome (C{public_ports},
            C{public_udp_ports}), for the kinds that published any.
        @raise ClaimRefused: a port refused; nothing changed.
        """
        self.withdrawn = {
            PUBLIC_PORTS: _withdraw(relay.publicPorts, holder, self.tcpRemoved),
            PUBLIC_UDP_PORTS: _withdraw(relay.publicUDPPorts, holder, self.udpRemoved),
        }
        answers: dict[str, Any] = {}
        try:
            if self.tcpAdded:
                answers[PUBLIC_PORTS] = relay.publishPorts(holder, account, self.tcpAdded, group)
            if self.udpAdded:
                answers[PUBLIC_UDP_PORTS] = publish_udp(relay, holder, account,
                                                        _udp(self.udpAdded))
        except ClaimRefused:
            self.undo(relay, holder, account, group, answers)
            raise
        return answers

    def undo(
        self, relay: Any, holder: Any, account: str, group: str | None,
        answers: dict[str, Any],
    ) -> None:
        """
        Withdraw the ports C{answers} published and publish again those
        L{apply} withdrew.
        """
        for key, ports in ((PUBLIC_PORTS, relay.publicPorts),
                           (PUBLIC_UDP_PORTS, relay.publicUDPPorts)):
            for answer in answers.get(key, ()):
                ports.withdraw(holder, answer["public_port"])
        try:
            if self.withdrawn.get(PUBLIC_PORTS):
                relay.publishPorts(holder, account, self.withdrawn[PUBLIC_PORTS], group)
            if self.withdrawn.get(PUBLIC_UDP_PORTS):
                publish_udp(relay, holder, account, _udp(self.withdrawn[PUBLIC_UDP_PORTS]))
        except ClaimRefused as e:  # taken meanwhile: the agent's next hello asks again
            _log.warn("a public port withdrawn for an update that was refused could not be "
                      "published again: {why}", why=str(e))


def _withdraw(
    ports: PublicPorts | None, holder: Any, removed: list[PortRequest],
) -> list[PortRequest]:
    if ports is None:
        return []
    return [PortRequest(r.service, port, r.allow) for r in removed
            for port in ports.withdrawService(holder, r.service)]
