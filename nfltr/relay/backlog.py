# -*- test-case-name: tests.relay.test_backlog -*-
"""
The listen backlog of the relay's listeners.

The kernel queues connections a listener has not accepted yet up to its
backlog; Twisted's default is 50.  A burst from many clients (or from one,
up to C{--per-source-connections}) beyond it waits in SYN retries, seconds
each, and may miss the handshake timeout before it is even accepted.  So
every listener of the relay (TLS, HTTP, SSH, admin) listens with
C{RelayConfig.backlog} (C{--listen-backlog}, L{DEFAULT_BACKLOG}), unless
its endpoint string says C{backlog=} itself.  The kernel caps it at
C{net.core.somaxconn}.
"""

from __future__ import annotations

from twisted.internet.endpoints import _parse

#: Endpoint types of Twisted's whose string takes C{backlog=}.  Others
#: (C{systemd:}, whose socket is listening already; plugins such as
#: C{onion:}) are left as they are.
BACKLOG_TYPES = frozenset({"tcp", "tcp6", "unix", "ssl"})


def with_backlog(spec: str, backlog: int) -> str:
    """
    The endpoint string C{spec} with C{backlog=BACKLOG} added, if it is of
    a type that takes one and gives none.
    """
    args, kwargs = _parse(spec)
    if not args or str(args[0]).strip().lower() not in BACKLOG_TYPES or "backlog" in kwargs:
        return spec
    return f"{spec}:backlog={backlog}"
