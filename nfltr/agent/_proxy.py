# -*- test-case-name: tests.agent.test_proxy -*-
"""
The PROXY protocol header the agent writes first on each connection to a
service run with C{--proxy-protocol v1|v2} (L{nfltr.wire.proxy_protocol}),
so that the service sees whose connection it is: the visitor's address,
as the relay gives it in the session's target (a public port's
C{public:PORT@VISITOR}, a share's C{share:NAME@VISITOR}), and the
service's own address as the destination.  The agent writes it because it
is the only hop at the service (in every mode, end-to-end TLS included).
A session whose visitor is not known gets a header that names nobody
(v1 C{UNKNOWN}, v2 C{LOCAL}), so the service still reads one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nfltr.wire.proxy_protocol import VERSIONS, encode, encode_unknown, parse_address

from ._settings import ConfigError

#: The destination a header names when the service's address is not an IP
#: address and port.
UNKNOWN_SERVICE = ("0.0.0.0", 0)


def proxy_version(value: str | None, option: str = "--proxy-protocol") -> str | None:
    """
    C{--proxy-protocol}'s value: C{v1}, C{v2}, or L{None} when not given.

    @raise ConfigError: anything else.
    """
    if value is None:
        return None
    version = value.strip().lower()
    if version not in VERSIONS:
        raise ConfigError(f"{option} {value}: use v1 or v2")
    return version


def header_writer(version: str | None, visitor: str | None) -> Callable[[Any], bytes] | None:
    """
    What writes the header of C{version} for a visitor C{HOST:PORT}, given
    the service's address (an C{IAddress}); L{None} without a version.
    """
    if version is None:
        return None
    source = parse_address(visitor) if visitor else None

    def header(service: Any) -> bytes:
        if source is None:
            return encode_unknown(version)
        host, port = getattr(service, "host", None), getattr(service, "port", None)
        if not isinstance(host, str) or not isinstance(port, int):
            host, port = UNKNOWN_SERVICE  # not a TCP address: named as nobody's
        return encode(version, source, (host, port))

    return header
