# -*- test-case-name: tests.relay.test_public_udp -*-
"""
Public UDP ports: relay UDP ports an agent publishes its UDP share on
(C{nfltr udp 53 --public-port 20053}), which visitors send to straight,
with no connector.

They are public ports as TCP's are (L{nfltr.relay.public_ports}, one more
L{PublicPorts} of the same C{--public-ports} ranges): leased to the
account under the same name (C{port:N}: a port number is one account's,
TCP and UDP alike), at most C{--max-public-ports-per-account} UDP ports
an account, unbound when the last holder leaves.  Each port's socket is a
L{UDPEntrance}: one datagram session per visitor address on the agent's
link (C{udp:PORT}), ended when idle.  A visitor's new session is admitted
by its source (the per-source limits, L{nfltr.streams.Admission}, one for
every public UDP port: a session counts as a connection) and the share's
allow list; a refused visitor's datagrams are dropped and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from zope.interface import implementer

from nfltr.link import RefusalReason
from nfltr.link.twisted import LinkUnavailable
from nfltr.streams import Admission
from nfltr.udp import MAX_DATAGRAM, DatagramCounts, DatagramSession, UDPEntrance
from nfltr.udp.interfaces import Address, IDatagramOpener, IDatagramPeer
from nfltr.wire.policy import SharePolicy
from nfltr.wire.udp import UdpShare, udp_target

from .counters import NOT_ALLOWED, TCP
from .names import REPLACED
from .public_ports import NOT_ENABLED, PortRequest, PublicPortRefused, PublicPorts

_log = Logger()


@implementer(IDatagramOpener)
class PublicUDPOpener:
    """
    Opens the datagram session of each visitor of one public UDP port; see
    the module.
    """

    def __init__(
        self, port: int, ports: PublicPorts, admission: Admission | None, clock: IReactorTime,
        counters: Any = None,
    ) -> None:
        self.port = port
        self.ports = ports
        self.admission = admission
        self.clock = clock
        self.counters = counters

    def openPeer(
        self, address: Address, deliver: Callable[[bytes], None], ended: Callable[[], None],
    ) -> IDatagramPeer | None:
        """
        See L{IDatagramOpener.openPeer}.
        """
        entry = self.ports.entry(self.port)
        if entry is None:
            return None
        source, admission = address[0], self.admission
        if admission is not None:
            if admission.admit(source, self.clock.seconds()) is not None:
                return None
            admission.routed()

        def close() -> None:
            if admission is not None:
                admission.closed(source, self.clock.seconds(), False)

        if entry.allow and not SharePolicy(entry.allow).allows(source):
            if self.counters is not None:
                self.counters.session(TCP, NOT_ALLOWED)
            close()
            return None

        def sessionEnded() -> None:
            close()
            ended()

        session = DatagramSession(deliver, sessionEnded)
        try:
            entry.holder.openSession(udp_target(entry.service), session)
        except LinkUnavailable:
            close()
            return None
        return session


def public_udp_ports(
    relay: Any, config: Any, reactor: Any, counts: DatagramCounts | None = None,
) -> PublicPorts:
    """
    The public UDP ports of a relay (its L{nfltr.relay.agents.Relay}) run
    with C{config} (a L{nfltr.relay.config.RelayConfig}): bound with the
    reactor's C{listenUDP} on C{config.public_ports_interface}, their
    visitors admitted under one L{Admission} of C{config.admission}, each
    port's sessions under C{config.udp_limits}, their datagrams counted
    together in C{counts}.
    """
    admission = Admission(config.admission)

    def listen(port: int, protocol: Any) -> Any:
        return reactor.listenUDP(port, protocol, interface=config.public_ports_interface,
                                 maxPacketSize=MAX_DATAGRAM)

    def entrance(port: int) -> Any:
        return UDPEntrance(PublicUDPOpener(port, ports, admission, reactor, relay.counters),
                           reactor, config.udp_limits, counts)

    ports = PublicPorts(config.public_ports, config.public_ports_per_account,
                        relay.directory.leases, reactor, listen, entrance)
    ports.admission = admission
    return ports


def publish_udp(
    relay: Any, holder: Any, account: str, shares: Sequence[UdpShare],
) -> list[dict[str, int]] | None:
    """
    Publish the public UDP ports that C{shares} ask for, for C{holder} of
    C{account}: all or none (the holders whose ports they take over are
    refused, as for TCP); L{None} when none asks.

    @return: the welcome's C{public_udp_ports}.
    @raise PublicPortRefused: why not, for the agent.
    """
    requests = [PortRequest(s.port, s.public_port, s.allow) for s in shares
                if s.public_port is not None]
    if not requests:
        return None
    ports: PublicPorts | None = relay.publicUDPPorts
    if ports is None:
        raise PublicPortRefused(RefusalReason.INVALID, NOT_ENABLED)
    before = [ports.holderOf(r.public) for r in requests if r.public]
    answers = ports.publish(holder, account, requests)
    replaced = {id(h): h for h in before if h is not None and h is not holder}
    for old in replaced.values():
        old.refuse(RefusalReason.CONFLICT, REPLACED)
    return answers
