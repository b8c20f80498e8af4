# -*- test-case-name: tests.test_bench_link -*-
"""
The two ends of one run of C{bench.link_pair}, each in a process of its own:

    python -m bench._child '{"end": "listener", ...}'

The listener adopts a listening TCP socket handed down by the parent, runs
TLS on what connects and, in C{link} mode, a L{LinkProtocol} (LISTENER) whose
handler accepts every session with a L{Sink}; in C{plain} mode the L{Sink}
sits directly on TLS.  The dialer connects with TLS (the listener's key
pinned), waits for the link (or the handshake), reports C{ready}, and on the
parent's C{go} streams C{per_session} bytes on each of C{sessions} sessions
(one TLS stream in C{plain} mode) from a streaming producer that honours
C{pauseProducing}.  Each L{Sink} answers one byte once it has counted all
its bytes; the dialer's wall clock runs from C{go} to the last answer.

The parent talks to an end through its standard input and output, one JSON
object a line: the end reports C{listening}, C{ready} and C{done} events; the
parent sends C{go}, and closes standard input to make the end exit.  An end
whose parent goes away, or that outlives its C{timeout}, exits on its own.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any


def _die(message: str) -> None:
    """
    Report a fatal error on stderr and leave at once (the parent reads the
    exit status and stderr).
    """
    sys.stderr.write(f"bench end {os.getpid()}: {message}\n")
    sys.stderr.flush()
    os._exit(1)


def main(argv: list[str]) -> None:
    """
    Run one end; the configuration is the JSON object in C{argv[1]}.
    """
    # First, as the commands do: importing nfltr.tls configures OpenSSL,
    # which must happen before anything (Twisted's modules below) loads it.
    import nfltr.tls  # noqa: F401

    # isort: split
    from twisted.internet import epollreactor

    from nfltr.netio import install_reactor

    # nfltr's epoll reactor, as the commands run (Twisted's with NFLTR_FAST_POLL=0).
    if not install_reactor():
        epollreactor.install()
    from twisted.internet import reactor, stdio
    from twisted.logger import (
        FilteringLogObserver,
        LogLevel,
        LogLevelFilterPredicate,
        globalLogBeginner,
        textFileLogObserver,
    )

    from nfltr.netio import tune_process

    from ._ends import Control, DialerEnd, ListenerEnd

    # As the nfltr commands run: nfltr's TCP transport and TLS, and the
    # NFLTR_* switches of the environment (nfltr.netio).
    reactor = tune_process(reactor)
    config = json.loads(argv[1])
    # Warnings and errors go to stderr (the parent shows its tail on failure);
    # an error logged by anything means the run cannot be trusted.
    text = FilteringLogObserver(
        textFileLogObserver(sys.stderr), [LogLevelFilterPredicate(LogLevel.warn)]
    )

    def observer(event: dict[str, Any]) -> None:
        text(event)
        if event.get("log_level") in (LogLevel.error, LogLevel.critical):
            _die("an error was logged (see above)")

    globalLogBeginner.beginLoggingTo([observer], redirectStandardIO=False)
    endClass = ListenerEnd if config["end"] == "listener" else DialerEnd
    end = endClass(reactor, config, _die)
    stdio.StandardIO(Control(end, reactor), reactor=reactor)
    reactor.callLater(config["timeout"], _die, f"timed out after {config['timeout']:g}s")
    # The last resort, should the reactor itself hang: SIGALRM kills us.
    signal.alarm(int(config["timeout"]) + 10)
    reactor.callWhenRunning(end.start)
    reactor.run()
    sys.stdout.flush()
    os._exit(0 if end.finished else 1)


if __name__ == "__main__":
    main(sys.argv)

