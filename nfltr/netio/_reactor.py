# -*- test-case-name: tests.netio.test_reactor -*-
"""
Where a process's I/O tuning is applied: L{tune_process}, called once by
each command and twistd plugin before it builds its services, and
L{io_settings}, which reads the settings a reactor carries.

L{TunedReactor} stands in for the reactor the services are given: it is
the reactor in everything but C{listenTCP}, C{connectTCP} and (for TCP)
C{adoptStreamPort}, which make nfltr's TCP transport
(L{nfltr.netio._tcp}).  Every TCP endpoint built
on it (C{serverFromString}'s C{tcp:}, C{HostnameEndpoint},
C{TCP4ClientEndpoint}) gets that transport with no change at its call
site; endpoints of other kinds are untouched.
"""

from __future__ import annotations

import inspect
import os
import socket
from typing import Any, cast

from twisted.internet.interfaces import IReactorTime
from twisted.internet.posixbase import PosixReactorBase
from twisted.logger import Logger
from zope.interface import directlyProvides, providedBy

from ._malloc import HeapTrimmer, trimmable_libc, tune_malloc
from ._settings import IOSettings
from ._tcp import Connector, Port

_log = Logger()


class TunedReactor:
    """
    A reactor whose TCP ports and connections use nfltr's transport; any
    other attribute is the wrapped reactor's.  It provides every interface
    the wrapped reactor provides.

    @ivar reactor: the real reactor.
    @ivar settings: the I/O settings of the transports it makes.
    """

    def __init__(self, reactor: Any, settings: IOSettings) -> None:
        self.reactor = reactor
        self.settings = settings
        directlyProvides(self, providedBy(reactor))

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.reactor, name)
        if inspect.ismethod(value):
            # Methods are looked up once (callLater is called per write),
            # plain attributes (running) every time.
            self.__dict__[name] = value
        return value

    def __repr__(self) -> str:
        return f"<TunedReactor {self.reactor!r} {self.settings}>"

    def listenTCP(
        self, port: int, factory: Any, backlog: int = 50, interface: str = ""
    ) -> Port:
        """
        L{IReactorTCP.listenTCP}, with nfltr's transport.
        """
        p = Port(port, factory, backlog, interface, self.reactor, settings=self.settings)
        p.startListening()
        return p

    def adoptStreamPort(self, fileDescriptor: int, addressFamily: Any, factory: Any) -> Any:
        """
        L{IReactorSocket.adoptStreamPort}, with nfltr's transport for TCP.
        """
        if addressFamily not in (socket.AF_INET, socket.AF_INET6):
            return self.reactor.adoptStreamPort(fileDescriptor, addressFamily, factory)
        p = Port._fromListeningDescriptor(self.reactor, fileDescriptor, addressFamily, factory)
        p.settings = self.settings
        p.startListening()
        return p

    def connectTCP(
        self, host: str, port: int, factory: Any, timeout: float = 30.0,
        bindAddress: Any = None,
    ) -> Connector:
        """
        L{IReactorTCP.connectTCP}, with nfltr's transport.
        """
        c = Connector(host, port, factory, timeout, bindAddress, self.reactor,
                      settings=self.settings)
        c.connect()
        return c


def tune_process(reactor: Any, environ: Any = None) -> Any:
    """
    Apply the I/O settings of this process's environment (see
    L{nfltr.netio._settings}): glibc's malloc thresholds now, and the
    reactor to give the services (a L{TunedReactor} carrying the settings,
    or C{reactor} itself when it is not a real one, as in tests).  Unusable
    values are reported and the defaults used.
    """
    try:
        chosen = IOSettings.from_environ(os.environ if environ is None else environ)
    except ValueError as e:
        _log.warn("ignoring an I/O setting: {error}; using the defaults", error=str(e))
        chosen = IOSettings()
    if chosen.malloc_tuning:
        tune_malloc()
    if isinstance(reactor, TunedReactor) or not isinstance(reactor, PosixReactorBase):
        return reactor
    return TunedReactor(reactor, chosen)


def heap_trimmer(reactor: Any, libc: object | None = None) -> HeapTrimmer | None:
    """
    The service that gives a process's free heap back to the kernel
    (L{HeapTrimmer}), for C{reactor} as L{tune_process} returned it: each
    command and twistd plugin runs it beside its services.  L{None} if the
    reactor's settings turn it off (C{NFLTR_HEAP_TRIM=0}), if the reactor is
    not a real one (tests' fakes), or if the C library is not glibc.

    @param libc: the C library (default: this process's).
    """
    if not isinstance(reactor, TunedReactor) or not reactor.settings.heap_trim:
        return None
    usable = trimmable_libc(libc)
    # A TunedReactor provides its reactor's interfaces (directlyProvides), IReactorTime too.
    return None if usable is None else HeapTrimmer(cast(IReactorTime, reactor), usable)


_DEFAULTS = IOSettings()


def io_settings(reactor: object) -> IOSettings:
    """
    The I/O settings C{reactor} carries: a L{TunedReactor}'s own, the
    defaults for any other reactor or clock (tests' fakes).
    """
    if isinstance(reactor, TunedReactor):
        return reactor.settings
    return _DEFAULTS
