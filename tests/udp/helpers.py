# -*- test-case-name: tests.udp.test_ports -*-
"""
A fake UDP reactor for the tests of UDP sockets.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.error import CannotListenError
from twisted.internet.task import Clock


class FakeUDPPort:
    """
    A listening UDP port: what was written, where, and whether it closed.
    """

    def __init__(self, protocol: Any, interface: str) -> None:
        self.protocol = protocol
        self.interface = interface
        self.written: list[tuple[bytes, Any]] = []
        self.connected: tuple[str, int] | None = None
        self.listening = True
        self.failWrites = False
        protocol.makeConnection(self)

    def getHost(self) -> IPv4Address:
        return IPv4Address("UDP", self.interface or "0.0.0.0", 40000)

    def connect(self, host: str, port: int) -> None:
        self.connected = (host, port)

    def write(self, data: bytes, addr: Any = None) -> None:
        if self.failWrites:
            raise OSError("buffer full")
        self.written.append((data, addr if addr is not None else self.connected))

    def stopListening(self) -> None:
        self.listening = False
        self.protocol.doStop()


class FakeUDPReactor:
    """
    An C{IReactorUDP} that makes L{FakeUDPPort}s (or refuses, with C{fail}).
    """

    def __init__(self) -> None:
        super().__init__()
        self.ports: list[FakeUDPPort] = []
        self.fail = False

    def listenUDP(self, port: int, protocol: Any, interface: str = "",
                  maxPacketSize: int = 8192) -> FakeUDPPort:
        if self.fail:
            raise CannotListenError(interface, port, OSError("no"))
        made = FakeUDPPort(protocol, interface)
        self.ports.append(made)
        return made


class UDPClock(FakeUDPReactor, Clock):
    """
    A L{Clock} that listens on UDP as L{FakeUDPReactor} does.
    """
