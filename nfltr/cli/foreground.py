# -*- test-case-name: tests.cli.test_agent,tests.cli.test_relay -*-
"""
Running a command's service in the foreground: C{nfltr relay},
C{nfltr tcp}, C{nfltr http} and C{nfltr tcp-connect} all run through
L{serve}, which installs nfltr's reactor, starts the log on standard error
at the command's level (L{nfltr.cli.logs.log_to}), runs the service until a
signal or the service itself ends the command, and returns the exit status.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from twisted.application.service import IService
from twisted.logger import LogLevel

#: The exit status of a command that could not run or was turned away.
EXIT_FATAL = 1


class Foreground:
    """
    What a command's service is given to speak to its user and to end the
    command.

    @ivar reactor: the reactor to run on (tuned, L{nfltr.netio.tune_process}).
    @ivar status: the exit status so far.
    @ivar message: why the command ended with L{fatal}, shown last.
    """

    def __init__(self, reactor: Any, stop: Callable[[], None]) -> None:
        self.reactor = reactor
        self.status = 0
        self.message: str | None = None
        self._stop = stop

    def announce(self, line: str) -> None:
        """
        Print C{line} on standard output (a URL, a command to run).
        """
        print(line, flush=True)

    def done(self, message: str) -> None:
        """
        The service is done: print C{message} on standard output, exit 0.
        """
        print(message, flush=True)
        self._stop()

    def fatal(self, message: str) -> None:
        """
        End the command with status 1 and C{message} on standard error, as
        its last line (after the log of the shutdown).
        """
        if self.message is None:
            self.message = message
        self.failed()

    def failed(self, reason: object = None) -> None:
        """
        End the command with status 1; the log has said why.
        """
        self.status = EXIT_FATAL
        self._stop()


def serve(make: Callable[[Foreground], IService], level: LogLevel) -> int:
    """
    Run the service C{make(foreground)} returns, logging at C{level} to
    standard error, until a signal (status 0) or the service ends the
    command (L{Foreground}); the exit status.
    """
    from nfltr.netio import install_reactor

    install_reactor()
    from twisted.internet import task
    from twisted.internet.defer import Deferred
    from twisted.internet.error import ReactorNotRunning

    from nfltr.cli.logs import log_to
    from nfltr.netio import heap_trimmer, tune_process

    log_to(sys.stderr, level)
    foregrounds: list[Foreground] = []

    async def main(reactor: Any) -> None:
        def stop() -> None:
            # On the next turn, not now: a service that fails inside startService (a data
            # directory in use) asks before the reactor is running, when reactor.stop() would
            # raise ReactorNotRunning and the process would stay up.
            reactor.callLater(0, stopNow)

        def stopNow() -> None:
            with suppress(ReactorNotRunning):
                reactor.stop()

        foreground = Foreground(tune_process(reactor), stop)
        foregrounds.append(foreground)
        trimmer = heap_trimmer(foreground.reactor)
        for service in (make(foreground), trimmer):
            if service is not None:
                service.startService()
                reactor.addSystemEventTrigger("before", "shutdown", service.stopService)
        await Deferred()  # until the reactor stops

    code: object = 0
    try:
        task.react(main)
    except SystemExit as e:
        code = e.code
    if not foregrounds:  # pragma: no cover - react always calls main
        return EXIT_FATAL
    foreground = foregrounds[0]
    if foreground.message is not None:
        print(f"nfltr: {foreground.message}", file=sys.stderr, flush=True)
    if foreground.status:
        return foreground.status
    return code if isinstance(code, int) else EXIT_FATAL if code else 0
