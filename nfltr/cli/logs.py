# -*- test-case-name: tests.cli.test_logs -*-
"""
The one logging setup of nfltr's processes.

Every process logs through C{twisted.logger} at a level it is given: info
by default, debug with C{-v} (the agent and the client) or
C{--log-level LEVEL} (the relay).  L{at_level} is the one filter all of
them use:

  - the C{nfltr} commands log to standard error, one C{TIME [LEVEL] TEXT}
    line an event (L{log_to});
  - under twistd, the log goes where twistd's options send it (standard
    output with C{-n}, C{--logfile}, C{--syslog}), in twistd's format,
    through the same filter (L{twistd_observer}).
"""

from __future__ import annotations

import re
import time
from typing import IO, Any, cast

from twisted.logger import (
    FilteringLogObserver,
    ILogFilterPredicate,
    ILogObserver,
    InvalidLogLevelError,
    LegacyLogObserverWrapper,
    LogLevel,
    LogLevelFilterPredicate,
    PredicateResult,
    eventAsText,
    globalLogBeginner,
)
from zope.interface import implementer

#: What C{--log-level} takes, least first.
LEVEL_NAMES = ("debug", "info", "warn", "error", "critical")
DEFAULT_LEVEL = LogLevel.info


def parse_level(text: str) -> LogLevel:
    """
    The level named C{text} (any case), one of L{LEVEL_NAMES}.

    @raise ValueError: no such level.
    """
    try:
        return LogLevel.levelWithName(str(text).lower())
    except InvalidLogLevelError:
        raise ValueError(f"use {', '.join(LEVEL_NAMES[:-1])} or {LEVEL_NAMES[-1]}") from None


def verbosity(verbose: bool) -> LogLevel:
    """
    The level of C{-v} (debug) or of its absence (info).
    """
    return LogLevel.debug if verbose else DEFAULT_LEVEL


#: Namespaces whose lines are per attempt, not events an operator acts on:
#: shown at debug only.  Twisted's C{ClientService} says each reconnect
#: attempt of a Redis connection at info; the outage itself is one warning
#: (L{nfltr.relay.store_health}).  Its logger's namespace names the module
#: that defines it (C{twisted.application._client_service} in the Twisted we test),
#: not the one it is imported from; both are listed, and the test takes the
#: namespace from the class itself.
QUIET_NAMESPACES = ("twisted.application._client_service.ClientService",
                    "twisted.application.internet.ClientService")


#: Twisted's own lines for each listening port, which name Python classes
#: ("SNIRouterFactory starting on 8443", "(TCP Port 8443 Closed)"): shown at
#: debug only; each nfltr process says what it listens on in its own words.
PORT_LINES = re.compile(r"\S+ starting on \S+|\(\w+ Port \S+ Closed\)")


def at_level(observer: ILogObserver, level: LogLevel) -> ILogObserver:
    """
    C{observer}, given only the events at C{level} or above (and, from the
    L{QUIET_NAMESPACES} and for the L{PORT_LINES}, at debug or at warn and
    above).
    """
    predicate = LogLevelFilterPredicate(defaultLogLevel=level)
    quiet = level if level == LogLevel.debug else max(level, LogLevel.warn)
    for namespace in QUIET_NAMESPACES:
        predicate.setLogLevelForNamespace(namespace, quiet)
    return cast(ILogObserver, FilteringLogObserver(observer, [predicate, _PortLines(level)]))


@implementer(ILogFilterPredicate)
class _PortLines:
    """
    Drops the L{PORT_LINES} unless the level is debug.
    """

    def __init__(self, level: LogLevel) -> None:
        self.level = level

    def __call__(self, event: dict[str, Any]) -> PredicateResult:
        if (self.level > LogLevel.debug and event.get("log_namespace") == "log_legacy"
                and PORT_LINES.fullmatch(str(event.get("log_text", "")))):
            return PredicateResult.no
        return PredicateResult.maybe


def log_to(stream: IO[str], level: LogLevel) -> None:
    """
    Start logging the events at C{level} or above to C{stream}, one
    L{line_observer} line each (for the C{nfltr} commands).
    """
    globalLogBeginner.beginLoggingTo(
        [at_level(line_observer(stream), level)], redirectStandardIO=False
    )


def line_observer(stream: IO[str]) -> ILogObserver:
    """
    A log observer that writes C{TIME [LEVEL] TEXT} lines to C{stream}:
    local time, level, text (and a traceback for failures).
    """

    def formatTime(when: float | None) -> str:
        return "-" if when is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(when))

    def observe(event: dict[str, Any]) -> None:
        text = eventAsText(event, includeSystem=False, formatTime=formatTime)
        stamp, _, rest = text.partition(" ")
        level = event.get("log_level", LogLevel.info)
        stream.write(f"{stamp} [{level.name}] {rest}\n")
        stream.flush()

    return cast(ILogObserver, observe)


def twistd_observer(config: Any, level: LogLevel) -> ILogObserver:
    """
    The observer twistd would start for its options C{config} (a
    C{ServerOptions}: C{--logfile}, C{--syslog}, C{-n}), given only the
    events at C{level} or above.

    twistd makes that observer in a method of its logger class that is not
    public; it is called here (rather than copied) so that every twistd
    option keeps its meaning, the log file's rotation on SIGUSR1 included.
    """
    from twisted.scripts.twistd import _SomeApplicationRunner

    made = _SomeApplicationRunner.loggerFactory(config)._getLogObserver()
    if not ILogObserver.providedBy(made):  # syslog's is a legacy observer
        made = LegacyLogObserverWrapper(made)
    return at_level(made, level)
