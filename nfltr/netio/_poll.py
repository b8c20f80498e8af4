# -*- test-case-name: tests.netio.test_poll -*-
"""
Twisted's epoll reactor without the legacy log context around each I/O
event.

Twisted calls every C{doRead} and C{doWrite} through
C{twisted.python.log.callWithLogger}, which asks the selectable for its
log prefix and pushes a context (C{{"system": prefix}}) for the legacy
C{log.msg} API: about 1.8 µs per event here, 10 to 15 % of what a busy
tunnel process spends per message.  nfltr logs with C{twisted.logger},
which does not read that context; Twisted's own legacy messages logged
while an event is handled then say C{-} instead of the connection's
prefix.  An exception escaping an event's handling (Twisted's
C{_doReadOrWrite} already catches those of C{doRead} and C{doWrite}) is
logged, and the other events of the poll are still handled, as before.

L{install_reactor} installs it, if no reactor is installed yet and
C{NFLTR_FAST_POLL} is not C{0}.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Mapping

from twisted.internet import epollreactor
from twisted.logger import Logger

from ._settings import IOSettings

_log = Logger()


class EPollReactor(epollreactor.EPollReactor):
    """
    The epoll reactor, calling each selectable's handler directly.
    """

    def doPoll(self, timeout: float | None) -> None:
        """
        Wait for events (at most C{timeout} seconds; forever if L{None})
        and handle each.
        """
        try:
            events = self._poller.poll(-1 if timeout is None else timeout, len(self._selectables))
        except InterruptedError:
            return
        except OSError as e:  # pragma: no cover - as Twisted: a bug of ours
            if e.errno == errno.EINTR:
                return
            raise
        handle = self._doReadOrWrite
        selectables = self._selectables
        for fd, event in events:
            selectable = selectables.get(fd)
            if selectable is None:
                continue
            try:
                handle(selectable, fd, event)
            except Exception:  # noqa: BLE001 - as Twisted: log it, handle the next event
                _log.failure("while handling an event of {selectable!r}", selectable=selectable)

    doIteration = doPoll


def install_reactor(
    environ: Mapping[str, str] = os.environ, modules: Mapping[str, object] = sys.modules,
    install: Callable[[object], None] | None = None,
) -> bool:
    """
    Install L{EPollReactor} as the global reactor, unless a reactor is
    installed already or C{NFLTR_FAST_POLL=0}.

    @param modules: where to see whether a reactor is installed.
    @param install: installs a reactor (Twisted's C{installReactor}).
    @return: whether it was installed.
    """
    if "twisted.internet.reactor" in modules:
        return False
    try:
        chosen = IOSettings.from_environ(environ)
    except ValueError:
        chosen = IOSettings()  # tune_process reports it
    if not chosen.fast_poll:
        return False
    if install is None:
        from twisted.internet.main import installReactor

        install = installReactor
    install(EPollReactor())
    return True
