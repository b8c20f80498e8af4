# -*- test-case-name: tests.integration.test_udp -*-
"""
A small UDP service for the integration tests, run as its own process:

    python -m tests.integration.udp_service --port-file F --mode dns|echo

It listens on 127.0.0.1, UDP port 0, writes the bound port to F, and serves:

  - C{dns}: a Twisted Names authoritative server answering C{A} queries for
    L{NAME} with L{ADDRESS} (and NXDOMAIN for other names);
  - C{echo}: every datagram is sent back to its sender as it came.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.protocol import DatagramProtocol
from twisted.internet.task import react
from twisted.names import dns, server
from twisted.names.authority import FileAuthority

NAME = "service.nfltr.test"
ADDRESS = "192.0.2.53"


class _Authority(FileAuthority):
    """
    The one zone: C{nfltr.test}, with an A record for L{NAME}.
    """

    def __init__(self) -> None:
        super().__init__("")
        soa = dns.Record_SOA(mname=b"ns.nfltr.test", rname=b"root.nfltr.test", serial=1,
                             refresh=60, retry=60, expire=60, minimum=60)
        self.soa = (b"nfltr.test", soa)
        self.records = {
            b"nfltr.test": [soa],
            NAME.encode(): [dns.Record_A(ADDRESS, ttl=60)],
        }

    def loadFile(self, filename: Any) -> None:
        """
        Nothing to load: the records are above.
        """


class _Echo(DatagramProtocol):
    def datagramReceived(self, datagram: bytes, addr: Any) -> None:
        self.transport.write(datagram, addr)


def main(reactor: Any, port_file: str, mode: str) -> Deferred[None]:
    if mode == "dns":
        factory = server.DNSServerFactory(authorities=[_Authority()])
        protocol: Any = dns.DNSDatagramProtocol(factory)
    else:
        protocol = _Echo()
    port = reactor.listenUDP(0, protocol, interface="127.0.0.1", maxPacketSize=65535)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(port.getHost().port))
    os.replace(tmp, port_file)
    return Deferred()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--mode", choices=("dns", "echo"), required=True)
    args = parser.parse_args()
    react(main, (args.port_file, args.mode))
