# -*- test-case-name: tests.agent.test_cli -*-
"""
C{twistd nfltr-agent tcp PORT...}, C{twistd nfltr-agent http PORT} and
C{twistd nfltr-agent tcp-connect AGENT PORT}: the agent and the client as
twistd services, with the options of C{nfltr tcp}, C{nfltr http} and
C{nfltr tcp-connect} (L{nfltr.cli_agent}).  Also
L{serve}, which runs either on the global reactor for those commands.

Under twistd the connect command and the listening address go to the log.
When the relay turns us away for good, the reason is logged (critical), the
reactor stops, and the process exits with status 1 once twistd has cleaned
up (twistd itself would exit 0 after any stop).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import suppress
from typing import Any, cast

from twisted.application.service import IService
from twisted.logger import ILogObserver, Logger
from twisted.python import usage

from nfltr.cli_agent import (
    AGENT_OPTIONS,
    CONNECT_OPTIONS,
    HTTP_OPTIONS,
    opt_parameters,
    option_values,
)

EXIT_FATAL = 1

_log = Logger()


class _Permuting(usage.Options):
    """
    Options that may follow the positional arguments, as with C{argparse}
    (C{getopt}, under C{usage.Options}, stops at the first of them).
    """

    optParameters: list[list[Any]] = []

    def parseOptions(self, options: list[str] | None = None) -> None:
        """
        Move the positional arguments after the options, then parse.
        """
        if options is None:
            options = sys.argv[1:]
        valued = {f"--{p[0]}" for p in self.optParameters} | {
            f"--{name[4:].replace('_', '-')}" for name in dir(self)
            if name.startswith("opt_") and _takesValue(getattr(self, name))
        }
        flags: list[str] = []
        positional: list[str] = []
        args = iter(options)
        for arg in args:
            if arg == "--":
                positional.extend(args)
            elif arg.startswith("-") and arg != "-":
                flags.append(arg)
                if arg in valued:
                    flags.append(next(args, ""))
            else:
                positional.append(arg)
        super().parseOptions([*flags, "--", *positional])


def _takesValue(method: Any) -> bool:
    import inspect

    return len(inspect.signature(method).parameters) == 1


class TcpOptions(_Permuting):
    """
    C{tcp PORT [PORT...]}: the agent.
    """

    synopsis = "PORT [PORT...] [options]"
    optParameters = opt_parameters(AGENT_OPTIONS)

    def parseArgs(self, *ports: str) -> None:
        """
        The ports of the services to share.
        """
        self["ports"] = ports

    def postOptions(self) -> None:
        """
        Check the options (the relay's CA file is read).
        """
        from nfltr.agent import ConfigError, agent_options

        try:
            self.checked = agent_options(self["ports"], option_values(self, AGENT_OPTIONS))
        except ConfigError as e:
            raise usage.UsageError(str(e)) from None


class HttpOptions(_Permuting):
    """
    C{http PORT}: the agent, publishing a share URL.
    """

    synopsis = "PORT [options]"
    optParameters = opt_parameters(HTTP_OPTIONS)

    def __init__(self) -> None:
        super().__init__()
        self["allow-ip"], self["require-header"] = [], []

    def opt_allow_ip(self, value: str) -> None:
        """
        Only visitors from this network (or address) may connect; repeatable.
        """
        self["allow-ip"].append(value)

    def opt_require_header(self, value: str) -> None:
        """
        Requests must carry this NAME:VALUE header; repeatable.
        """
        self["require-header"].append(value)

    def parseArgs(self, port: str) -> None:  # type: ignore[override]  # usage.Options reads the positional arguments from this signature
        """
        The port of the web service to publish.
        """
        self["port"] = port

    def postOptions(self) -> None:
        """
        Check the options (the relay's CA file is read).
        """
        from nfltr.agent import ConfigError, http_agent_options

        try:
            self.checked = http_agent_options(self["port"], option_values(self, HTTP_OPTIONS))
        except ConfigError as e:
            raise usage.UsageError(str(e)) from None


class TcpConnectOptions(_Permuting):
    """
    C{tcp-connect AGENT PORT}: the client.
    """

    synopsis = "AGENT PORT [options]"
    optParameters = opt_parameters(CONNECT_OPTIONS)

    def parseArgs(self, agent: str, port: str) -> None:  # type: ignore[override]  # usage.Options reads the positional arguments from this signature
        """
        The agent and its port.
        """
        self["agent"], self["port"] = agent, port

    def postOptions(self) -> None:
        """
        Check the options.
        """
        from nfltr.agent import ConfigError
        from nfltr.client import connect_options

        try:
            self.checked = connect_options(
                self["agent"], self["port"], option_values(self, CONNECT_OPTIONS)
            )
        except ConfigError as e:
            raise usage.UsageError(str(e)) from None


class Options(usage.Options):
    """
    C{twistd nfltr-agent COMMAND}.
    """

    synopsis = "tcp PORT... | http PORT | tcp-connect AGENT PORT [options]"
    subCommands = [
        ["tcp", None, TcpOptions, "share local TCP services through the relay"],
        ["http", None, HttpOptions, "publish a local web service at a share URL"],
        ["tcp-connect", None, TcpConnectOptions, "reach an agent's TCP service from a local port"],
    ]

    def postOptions(self) -> None:
        """
        A command is required.
        """
        if self.subCommand is None:
            raise usage.UsageError("give a command: tcp, http or tcp-connect")


def makeService(options: Options) -> IService:
    """
    The agent's or the client's service.  The agent's state (name,
    end-to-end key) is created here; a state directory that cannot be used
    ends twistd with one line.
    """
    from twisted.internet import reactor

    def fatal(message: str) -> None:
        _log.critical("{message}", message=message)
        _exitNonZeroAtExit()
        if reactor.running:
            reactor.stop()

    def done(message: str) -> None:
        _log.info("{message}", message=message)
        if reactor.running:
            reactor.stop()

    from nfltr.netio import tune_process

    assert options.subCommand is not None
    return build_service(
        options.subCommand, options.subOptions.checked, tune_process(reactor), None, fatal, done
    )


def build_service(
    command: str, checked: Any, reactor: Any, announce: Callable[[str], None] | None,
    fatal: Callable[[str], None], done: Callable[[str], None] | None = None,
) -> IService:
    """
    The service of C{command} (C{tcp} or C{tcp-connect}) for its checked
    options.

    @raise SystemExit: the agent's state directory cannot be used.
    """
    from nfltr.agent import AgentService, ConfigError, prepare_agent
    from nfltr.client import TcpConnector

    if command in ("tcp", "http"):
        try:
            setup = prepare_agent(checked)
        except ConfigError as e:
            raise SystemExit(f"nfltr {command}: {e}") from None
        return AgentService(reactor, setup, announce, fatal, onDone=done)
    return TcpConnector(reactor, checked, announce, fatal)


def _exitNonZeroAtExit() -> None:
    import atexit
    import os

    def exit() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_FATAL)

    atexit.register(exit)


def serve(make: Callable[..., IService], verbose: bool) -> int:
    """
    Run the service C{make(reactor, announce, onFatal, onDone)} returns on
    the global reactor, with the log on standard error and announcements on
    standard output, until a signal or C{onDone} stops it (status 0; the
    latter's message on standard output) or C{onFatal} does (status 1, its
    message on standard error as the last line).
    """
    from nfltr.netio import install_reactor

    install_reactor()
    from twisted.internet import reactor
    from twisted.internet.error import ReactorNotRunning

    start_logging(sys.stderr, verbose)
    fatalMessages: list[str] = []

    def announce(line: str) -> None:
        print(line, flush=True)

    def fatal(message: str) -> None:
        fatalMessages.append(message)
        with suppress(ReactorNotRunning):
            reactor.stop()

    def done(message: str) -> None:
        print(message, flush=True)
        with suppress(ReactorNotRunning):
            reactor.stop()

    from nfltr.netio import tune_process

    service = make(tune_process(reactor), announce, fatal, done)
    reactor.callWhenRunning(service.startService)
    reactor.addSystemEventTrigger("before", "shutdown", service.stopService)
    reactor.run()
    if not fatalMessages:
        return 0
    # Last, after the log of the shutdown: the line the user must see.
    print(f"nfltr: {fatalMessages[0]}", file=sys.stderr, flush=True)
    return EXIT_FATAL


def start_logging(stream: Any, verbose: bool) -> None:
    """
    Send the log to C{stream}, one line an event: local time, level, text
    (and a traceback for failures); debug messages only when C{verbose}.
    """
    from twisted.logger import (
        FilteringLogObserver,
        LogLevel,
        LogLevelFilterPredicate,
        globalLogBeginner,
    )

    level = LogLevel.debug if verbose else LogLevel.info
    predicate = LogLevelFilterPredicate(defaultLogLevel=level)
    globalLogBeginner.beginLoggingTo(
        [FilteringLogObserver(line_observer(stream), [predicate])], redirectStandardIO=False
    )


def line_observer(stream: Any) -> ILogObserver:
    """
    A log observer that writes C{TIME [LEVEL] TEXT} lines to C{stream}.
    """
    import time

    from twisted.logger import LogLevel, eventAsText

    def formatTime(when: float | None) -> str:
        return "-" if when is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(when))

    def observe(event: dict[str, Any]) -> None:
        text = eventAsText(event, includeSystem=False, formatTime=formatTime)
        stamp, _, rest = text.partition(" ")
        level = event.get("log_level", LogLevel.info)
        stream.write(f"{stamp} [{level.name}] {rest}\n")
        stream.flush()

    return cast(ILogObserver, observe)
