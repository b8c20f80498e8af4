# -*- test-case-name: tests.wire.test_addresses -*-
"""
Addresses as people write them, for every line a user or operator reads.

Twisted's addresses print as Python reprs (C{IPv4Address(type='TCP',
host='127.0.0.1', port=8443)}); nothing nfltr shows a person should.  One
helper, L{format_address}, writes C{HOST:PORT}, C{[V6]:PORT}, or a UNIX
socket's path.
"""

from __future__ import annotations

import os
from typing import Any


def format_address(address: Any) -> str:
    """
    C{HOST:PORT} for an IP address (C{[HOST]:PORT} for IPv6), a UNIX
    socket's path, else the address's own text; C{?} for no address.
    """
    if address is None:
        return "?"
    host, port = getattr(address, "host", None), getattr(address, "port", None)
    if isinstance(host, str) and isinstance(port, int):
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    name = getattr(address, "name", None)
    if isinstance(name, str | bytes):
        return os.fsdecode(name)
    if hasattr(address, "name"):  # a UNIX socket with no name (an unbound client)
        return "unix socket"
    return str(address)
