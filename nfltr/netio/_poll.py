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

L{EPollReactor.callAfterEvents} runs a function once every event of the
current poll has been handled, before the reactor runs its timers or
polls again: a link that many reads of one poll wrote to sends once, at
no extra reactor turn (a C{callLater(0)} costs a timer and a turn).
Code given a clock asks L{after_events} for it, so that any clock (a
L{nfltr.netio.TunedReactor} around this reactor, Twisted's reactors, a
test's L{Clock}) will do.

The common event, "readable" alone, calls C{doRead} directly (and
disconnects the selectable on its result or exception as Twisted does);
every other event goes through Twisted's C{_doReadOrWrite}.

L{install_reactor} installs it, if no reactor is installed yet and
C{NFLTR_FAST_POLL} is not C{0}.
"""

from __future__ import annotations

import errno
import os
import select
import sys
from collections.abc import Callable, Mapping

from twisted.internet import epollreactor
from twisted.internet.main import installReactor
from twisted.logger import Logger

from ._settings import IOSettings

_log = Logger()
_READABLE = select.EPOLLIN


class EPollReactor(epollreactor.EPollReactor):
    """
    The epoll reactor, calling each selectable's handler directly.

    @ivar _afterEvents: what to call once the events being handled are,
        or C{None} when no events are being handled.
    """

    _afterEvents: list[Callable[[], object]] | None = None

    def callAfterEvents(self, f: Callable[[], object]) -> bool:
        """
        Call C{f} once every event of the poll being handled has been.

        @return: C{False} when no poll's events are being handled (a timer
            or a thread called): C{f} was not scheduled, use C{callLater}.
        """
        after = self._afterEvents
        if after is None:
            return False
        after.append(f)
        return True

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
        if not events:
            return
        after: list[Callable[[], object]] = []
        self._afterEvents = after
        try:
            self._handle(events)
        finally:
            self._afterEvents = None  # what these calls schedule takes a timer
            for f in after:
                try:
                    f()
                except Exception:  # noqa: BLE001 - log it, call the others
                    _log.failure("after the events of a poll: {f!r}", f=f)

    def _handle(self, events: list[tuple[int, int]]) -> None:
        handle = self._doReadOrWrite
        selectables = self._selectables
        for fd, event in events:
            selectable = selectables.get(fd)
            if selectable is None:
                continue
            try:
                if event == _READABLE:
                    try:
                        why = selectable.doRead()
                    except BaseException as e:  # noqa: BLE001 - as Twisted: disconnect it
                        _log.failure("while reading from {selectable!r}", selectable=selectable)
                        why = e
                    if why:
                        self._disconnectSelectable(selectable, why, True)
                else:
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
    (install or installReactor)(EPollReactor())
    return True


def after_events(clock: object) -> Callable[[Callable[[], object]], bool] | None:
    """
    The C{callAfterEvents} of C{clock} (L{EPollReactor.callAfterEvents}:
    call a function once the events of the poll being handled are, or
    return C{False} to say "not now, use C{callLater}"), found on nfltr's
    reactor, the L{nfltr.netio.TunedReactor} around it and any clock that
    offers the same method; L{None} for any other clock.
    """
    found: Callable[[Callable[[], object]], bool] | None = getattr(clock, "callAfterEvents", None)
    return found
