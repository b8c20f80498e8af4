# -*- test-case-name: tests.cli.test_twistd -*-
"""
What the twistd plugins (L{nfltr.relay_tap}, L{nfltr.agent_tap}) share:

  - L{TableOptions}: a C{usage.Options} built from an option table
    (L{nfltr.cli.options}), also used by C{nfltr relay};
    L{InterspersedOptions} lets options follow the positional arguments, as
    C{argparse} does for the C{nfltr} commands;
  - L{twistd_files}: each plugin's defaults for the files twistd writes in
    its working directory, so that a relay and agents run side by side;
  - L{TwistdService}: the top service of a plugin, which has twistd log at
    the plugin's level (L{nfltr.cli.logs.twistd_observer}).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any, ClassVar

from twisted.application.service import MultiService
from twisted.logger import ILogObserver, LogLevel
from twisted.python import usage
from twisted.python.components import Componentized

from nfltr.cli.logs import twistd_observer
from nfltr.cli.options import FLAG, JOIN, REPEAT, VALUE, Option

#: twistd's own default pidfile, in its working directory.
TWISTD_PIDFILE = "twistd.pid"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class TableOptions(usage.Options):
    """
    A C{usage.Options} whose options are those of the class's C{table}:
    values and flags as C{optParameters} and C{optFlags}, repeatable ones
    as C{opt_} methods that collect a list.  A subclass that does not set
    C{table} keeps its parent's options.
    """

    table: ClassVar[tuple[Option, ...]] = ()
    optParameters: ClassVar[list[list[Any]]] = []
    optFlags: ClassVar[list[list[Any]]] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "table" not in cls.__dict__:
            return
        cls.optParameters = [
            [o.name, o.short, o.default, o.help] for o in cls.table if o.kind == VALUE
        ]
        cls.optFlags = [[o.name, o.short, o.help] for o in cls.table if o.kind == FLAG]
        for option in cls.table:
            if option.kind in (REPEAT, JOIN):
                setattr(cls, "opt_" + option.name.replace("-", "_"), _collector(option))

    def __init__(self) -> None:
        super().__init__()
        for option in self.table:
            if option.kind in (REPEAT, JOIN):
                self[option.name] = []


def _collector(option: Option) -> Callable[[TableOptions, str], None]:
    def collect(self: TableOptions, value: str) -> None:
        self[option.name].append(value)

    collect.__doc__ = option.help
    return collect


class InterspersedOptions(TableOptions):
    """
    Options that may follow the positional arguments, as with C{argparse}
    (C{getopt}, under C{usage.Options}, stops at the first of them).
    """

    def parseOptions(self, options: list[str] | None = None) -> None:
        """
        Move the positional arguments after the options, then parse.
        """
        if options is None:
            options = sys.argv[1:]
        valued = {o.flag for o in self.table if o.kind != FLAG} | {
            f"-{o.short}" for o in self.table if o.kind != FLAG and o.short
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


def twistd_files(config: Any, stem: str) -> None:
    """
    Give twistd's options C{config} (its C{ServerOptions}; L{None} outside
    twistd) a plugin's defaults for the files twistd writes in its working
    directory: in the foreground (C{-n}) no pidfile; as a daemon the
    pidfile C{STEM.pid} and the log file C{STEM.log}.  What the operator
    gave (C{--pidfile}, C{--logfile}, C{--syslog}) is kept.

    twistd's own defaults, C{twistd.pid} and C{twistd.log}, are shared by
    every plugin: a second one started in the same directory (an agent next
    to its relay) would refuse to start, "Another twistd server is
    running".  Call this from the plugin's C{postOptions}, which runs
    before twistd reads those options.
    """
    if config is None:
        return
    stem = _UNSAFE.sub("_", stem)
    foreground = bool(config.get("nodaemon") or config.get("debug"))
    if config.get("pidfile") == TWISTD_PIDFILE:
        config["pidfile"] = "" if foreground else f"{stem}.pid"
    if not (foreground or config.get("logfile") or config.get("syslog")):
        config["logfile"] = f"{stem}.log"


class TwistdService(MultiService):
    """
    The top service a plugin gives twistd.  twistd adds it to the
    application it makes, then starts logging, with the application's
    C{ILogObserver} component if it has one: on being added, this service
    gives it L{twistd_observer}, twistd's own observer at the plugin's log
    level.  (Without it twistd logs every event, debug ones included.)  An
    observer the operator chose (C{--logger}) is left alone.

    @ivar config: twistd's options (L{None} outside twistd).
    @ivar level: the lowest level logged.
    """

    def __init__(self, config: Any, level: LogLevel) -> None:
        super().__init__()
        self.config = config
        self.level = level

    def setServiceParent(self, parent: Any) -> None:
        """
        Join C{parent}; if it is twistd's application, give it the log
        observer.
        """
        if (self.config is not None and not self.config.get("logger")
                and isinstance(parent, Componentized)):
            parent.setComponent(ILogObserver, twistd_observer(self.config, self.level))
        super().setServiceParent(parent)
