# -*- test-case-name: tests.sni -*-
"""
sni: read the server name a TLS connection asks for, without ending TLS.

The relay's TLS port routes each visitor by the name in its ClientHello.
L{ClientHelloParser} is sans-I/O (no Twisted): it is fed the connection's
first bytes and keeps them, untouched, for replay to the chosen backend.
Its contract is to raise nothing but L{ClientHelloError}, on any input.
L{nfltr.sni.twisted} is the router protocol that adapts it to Twisted (not
imported here: the parser needs no Twisted).
"""

from ._errors import ClientHelloError, Reason
from ._hello import TLS13, ClientHello, check_host_name, parse_client_hello
from ._parser import (
    MAX_HELLO_RECORDS,
    MAX_HELLO_SIZE,
    MAX_HELLO_WIRE_SIZE,
    MAX_RECORD_PAYLOAD,
    MAX_RECORD_SIZE,
    NEED_DATA,
    ClientHelloParser,
    NeedData,
    is_tls_start,
)

__all__ = [
    "MAX_HELLO_RECORDS", "MAX_HELLO_SIZE", "MAX_HELLO_WIRE_SIZE", "MAX_RECORD_PAYLOAD",
    "MAX_RECORD_SIZE", "NEED_DATA", "TLS13", "ClientHello", "ClientHelloError",
    "ClientHelloParser", "NeedData", "Reason", "check_host_name", "is_tls_start",
    "parse_client_hello",
]
