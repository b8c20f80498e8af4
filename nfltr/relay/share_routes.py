# -*- test-case-name: tests.relay.test_tls_port -*-
"""
L{ShareRoutes}: a fixed routing table of share names in memory, an
L{IShareRoutes} for the TLS port (L{nfltr.relay.tls_port}) beside the routes
agents publish (L{nfltr.relay.shares.ShareRegistry}).
"""

from __future__ import annotations

from zope.interface import implementer

from nfltr.sni.twisted import HandOver, ISpliceBackend, Route, Splice

from .interfaces import IShareRoutes


@implementer(IShareRoutes)
class ShareRoutes:
    """
    A routing table in memory.

    @ivar _backends: the backends by share name.
    """

    def __init__(self) -> None:
        self._backends: dict[str, Route] = {}

    def add(self, name: str, backend: ISpliceBackend | Route) -> None:
        """
        Route C{name} (a lowercase DNS label) to C{backend} (a route, or a
        backend to splice to), in place of any earlier route of that name.
        """
        if isinstance(backend, HandOver | Splice):
            self._backends[name] = backend
        else:
            self._backends[name] = Splice(backend)  # type: ignore[arg-type]

    def remove(self, name: str) -> None:
        """
        Stop routing C{name}; nothing happens if it was not routed.
        """
        self._backends.pop(name, None)

    def route(self, name: str) -> Route | None:
        """
        See L{IShareRoutes.route}.
        """
        return self._backends.get(name)
