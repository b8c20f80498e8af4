# -*- test-case-name: tests.udp.test_ports -*-
"""
The UDP sockets at either end of datagram sessions (Twisted adapters; the
logic is in L{nfltr.udp._table} and L{nfltr.udp._session}):

  - L{UDPEntrance}: a listening socket whose visitors' datagrams go into a
    L{SessionTable} (a connector's C{--listen}, a relay's public UDP port);
  - L{ServiceExit}: the agent's end of one session, a socket connected to
    the local service (one per visitor, so the service's answers find their
    way back).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from twisted.internet import interfaces
from twisted.internet.protocol import DatagramProtocol
from twisted.logger import Logger

from ._codec import MAX_DATAGRAM
from ._session import DatagramSession
from ._table import DatagramCounts, DatagramLimits, SessionTable
from .interfaces import Address, IDatagramOpener


class UDPEntrance(DatagramProtocol):
    """
    See the module.

    @ivar table: the visitors' sessions.
    """

    def __init__(
        self, opener: IDatagramOpener, clock: interfaces.IReactorTime,
        limits: DatagramLimits | None = None, counts: DatagramCounts | None = None,
    ) -> None:
        self.table = SessionTable(opener, clock, self._reply, limits, counts)

    def datagramReceived(self, datagram: bytes, addr: Any) -> None:
        """
        A visitor's datagram.
        """
        self.table.datagramReceived(datagram, (addr[0], addr[1]))

    def _reply(self, payload: bytes, address: Address) -> None:
        transport = self.transport
        if transport is not None:
            transport.write(payload, address)

    def stopProtocol(self) -> None:
        """
        The socket closed: end every session.
        """
        self.table.close()


class _ServiceSocket(DatagramProtocol):
    """
    The connected socket of one L{ServiceExit}.
    """

    # A connected UDP port, once listening.
    transport: Any

    def __init__(self, session: DatagramSession) -> None:
        self.session = session

    def datagramReceived(self, datagram: bytes, addr: Any) -> None:
        self.session.send(datagram)

    def connectionRefused(self) -> None:
        # ICMP port unreachable: the service is not there (yet); UDP goes on.
        pass


class ServiceExit:
    """
    The agent's end of one datagram session, towards the service at
    C{host}:C{port}: datagrams from the session are sent to it, its answers
    go back on the session, and the socket closes with the session.

    @ivar session: the protocol to accept the link session with.
    """

    log = Logger()

    def __init__(self, reactor: interfaces.IReactorUDP, host: str, port: int) -> None:
        self.session = DatagramSession(self._toService, self._ended)
        self._socket = _ServiceSocket(self.session)
        listening: Any = reactor.listenUDP(
            0, self._socket, interface=_bindFor(host), maxPacketSize=MAX_DATAGRAM,
        )
        listening.connect(host, port)
        self._port: Any = listening

    def _toService(self, payload: bytes) -> None:
        transport = self._socket.transport
        if transport is None:
            return
        try:
            transport.write(payload)
        except OSError as e:
            # A full socket buffer or an unreachable service: a lost datagram.
            self.session.dropped += 1
            self.log.debug("datagram to the service lost: {why}", why=str(e))

    def _ended(self) -> None:
        port, self._port = self._port, None
        if port is not None:
            port.stopListening()

    def stop(self) -> None:
        """
        End the session and close the socket.
        """
        self.session.close()
        self._ended()


def _bindFor(host: str) -> str:
    """
    The address to bind a socket to C{host} on: a loopback service's own
    (nothing else can reach the socket), else any of its family.
    """
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:  # a name: any address
        pass
    return "::" if ":" in host else ""
