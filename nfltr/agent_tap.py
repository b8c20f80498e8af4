# -*- test-case-name: tests.agent.test_tap -*-
"""
C{twistd nfltr-agent tcp PORT...}, C{twistd nfltr-agent http PORT},
C{twistd nfltr-agent up [FILE]} and C{twistd nfltr-agent tcp-connect AGENT
PORT}: the agent and the client as twistd services, with the options of
C{nfltr tcp}, C{nfltr http}, C{nfltr up} and C{nfltr tcp-connect} (the
tables of L{nfltr.cli.agent_options}); the relay options they leave out
come from the login saved by C{nfltr login} (L{nfltr.cli.saved_login}).

Under twistd the connect command and the listening address go to the log,
at info, or at debug too with C{-v}.  In the foreground (C{-n}) no pidfile
is written; a daemon's are C{nfltr-agent[-NAME].pid} and C{.log}, or
C{nfltr-tcp-connect-AGENT.pid} (L{nfltr.cli.twistd.twistd_files}).  When the
relay turns us away for good, the reason is logged (critical), the reactor
stops, and the process exits with status 1 once twistd has cleaned up
(twistd itself would exit 0 after any stop).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.application.service import IService
from twisted.logger import Logger
from twisted.python import usage

from nfltr.cli.agent_options import AGENT_OPTIONS, CONNECT_OPTIONS, HTTP_OPTIONS, VERBOSE
from nfltr.cli.logs import verbosity
from nfltr.cli.options import environment, option_values
from nfltr.cli.saved_login import with_login
from nfltr.cli.twistd import InterspersedOptions, TwistdService, twistd_files

EXIT_FATAL = 1

if TYPE_CHECKING:
    from nfltr.cli.config_agent import ConfigAgent

_log = Logger()


class TcpOptions(InterspersedOptions):
    """
    C{tcp PORT [PORT...]}: the agent.
    """

    synopsis = "PORT [PORT...] [options]"
    table = (*AGENT_OPTIONS, VERBOSE)
    longdesc = environment(AGENT_OPTIONS)

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
            values = with_login(option_values(self, AGENT_OPTIONS))
            self.checked = agent_options(self["ports"], values)
        except ConfigError as e:
            raise usage.UsageError(str(e)) from None
        self.stem = "nfltr-agent" + ("" if self.checked.name is None else f"-{self.checked.name}")


class HttpOptions(InterspersedOptions):
    """
    C{http PORT}: the agent, publishing a share URL.
    """

    synopsis = "PORT [options]"
    table = (*HTTP_OPTIONS, VERBOSE)
    longdesc = environment(HTTP_OPTIONS)

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
            values = with_login(option_values(self, HTTP_OPTIONS))
            self.checked = http_agent_options(self["port"], values)
        except ConfigError as e:
            raise usage.UsageError(str(e)) from None
        self.stem = "nfltr-agent" + ("" if self.checked.name is None else f"-{self.checked.name}")


class UpOptions(InterspersedOptions):
    """
    C{up [FILE]}: the agent of a config file's entries (L{nfltr.cli.up}).
    """

    synopsis = "[FILE] [options]"
    table = (VERBOSE,)

    def parseArgs(self, *files: str) -> None:
        """
        The config file, if given.
        """
        if len(files) > 1:
            raise usage.UsageError("give one config file")
        self["file"] = files[0] if files else None

    def postOptions(self) -> None:
        """
        Check the file (the relay's CA and the key files are read).
        """
        from nfltr.cli.config_file import ConfigFileError
        from nfltr.cli.up import config_path, load_config

        self.path = config_path(self["file"])
        try:
            self.config = load_config(self.path)
        except ConfigFileError as e:
            raise usage.UsageError(str(e)) from None
        self.checked = self.config.options
        self.stem = "nfltr-agent" + ("" if self.checked.name is None else f"-{self.checked.name}")


class TcpConnectOptions(InterspersedOptions):
    """
    C{tcp-connect AGENT PORT}: the client.
    """

    synopsis = "AGENT PORT [options]"
    table = (*CONNECT_OPTIONS, VERBOSE)
    longdesc = environment(CONNECT_OPTIONS)

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
                self["agent"], self["port"], with_login(option_values(self, CONNECT_OPTIONS))
            )
        except ConfigError as e:
            raise usage.UsageError(str(e)) from None
        self.stem = f"nfltr-tcp-connect-{self['agent']}"


class Options(usage.Options):
    """
    C{twistd nfltr-agent COMMAND}.
    """

    synopsis = "tcp PORT... | http PORT | up [FILE] | tcp-connect AGENT PORT [options]"
    subCommands = [
        ["tcp", None, TcpOptions, "share local TCP services through the relay"],
        ["http", None, HttpOptions, "publish a local web service at a share URL"],
        ["up", None, UpOptions, "serve every entry of a config file (nfltr.toml)"],
        ["tcp-connect", None, TcpConnectOptions, "reach an agent's TCP service from a local port"],
    ]

    def getSynopsis(self) -> str:
        """
        The usage line; a command's own line (C{twistd [options]
        nfltr-agent tcp PORT [PORT...] [options]}) starts with this one
        without the list of commands.
        """
        synopsis = super().getSynopsis()
        if self.subCommand is not None:
            synopsis = synopsis.removesuffix(f" {self.synopsis}")
        return synopsis

    def postOptions(self) -> None:
        """
        A command is required; twistd's files are named for it.
        """
        if self.subCommand is None:
            raise usage.UsageError("give a command: tcp, http, up or tcp-connect")
        twistd_files(self.parent, self.subOptions.stem)


def makeService(options: Options) -> IService:
    """
    The agent's or the client's service, logging at its level.  The
    agent's state (name, end-to-end key) is created here; a state directory
    that cannot be used ends twistd with one line.
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

    from nfltr.netio import heap_trimmer, tune_process

    tuned = tune_process(reactor)
    top = plugin_service(options, tuned, fatal, done)
    trimmer = heap_trimmer(tuned)
    if trimmer is not None:
        trimmer.setServiceParent(top)
    return top


def plugin_service(options: Options, reactor: Any, fatal: Callable[[str], None],
                   done: Callable[[str], None]) -> TwistdService:
    """
    The service of the parsed command C{options} on C{reactor}, under a
    L{TwistdService} at the command's log level (debug with C{-v}).
    """
    assert options.subCommand is not None
    sub = options.subOptions
    top = TwistdService(options.parent, verbosity(bool(sub["verbose"])))
    if options.subCommand == "up":
        from nfltr.cli.config_agent import reload_on_sighup

        agent = up_service(sub, reactor, fatal)
        reload_on_sighup(reactor, agent.reload)
        agent.setServiceParent(top)
        return top
    build_service(options.subCommand, sub.checked, reactor, None, fatal, done).setServiceParent(top)
    return top


def up_service(options: UpOptions, reactor: Any, fatal: Callable[[str], None]) -> ConfigAgent:
    """
    The agent of C{up}'s config file, which reloads it on L{ConfigAgent.reload}.

    @raise SystemExit: the agent's state directory cannot be used.
    """
    from nfltr.agent import ConfigError, prepare_agent
    from nfltr.cli.config_agent import ConfigAgent
    from nfltr.cli.up import load_config

    try:
        setup = prepare_agent(options.checked)
    except ConfigError as e:
        raise SystemExit(f"nfltr up: {e}") from None
    path = options.path
    return ConfigAgent(reactor, options.config, setup, lambda: load_config(path), None, fatal)


def build_service(
    command: str, checked: Any, reactor: Any, announce: Callable[[str], None] | None,
    fatal: Callable[[str], None], done: Callable[[str], None] | None = None,
) -> IService:
    """
    The service of C{command} (C{tcp}, C{http}, C{up} or C{tcp-connect})
    for its checked options.

    @raise SystemExit: the agent's state directory cannot be used.
    """
    from nfltr.agent import AgentService, ConfigError, prepare_agent
    from nfltr.client import TcpConnector

    if command in ("tcp", "http", "up"):
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
