"""
What-if for L{bench.shares}: C{TCP_NODELAY} on every TCP connection this
process accepts (the relay's visitors).  Loaded by the interpreter at start
through C{PYTHONPATH}; see C{bench/whatif/README.md}.
"""

import contextlib
import socket
from typing import Any

from twisted.internet import tcp

_init = tcp.Server.__init__


def _nodelay_init(self: Any, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
    _init(self, sock, *args, **kwargs)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


tcp.Server.__init__ = _nodelay_init  # type: ignore[method-assign]
