# -*- test-case-name: tests.relay.test_cli_relay -*-
"""
C{nfltr relay [options]}: run a relay in the foreground, logging to standard
error, until SIGINT or SIGTERM.

It takes the options of C{twistd nfltr-relay} (L{nfltr.relay_tap.Options}),
plus C{--log-level}.  Exit status: 0 after a signal, 1 if the relay could not
start, 2 for bad options.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nfltr.cli import Subparsers

# argparse must not read the relay's options: a prefix character that never
# appears on a command line makes it hand them all to usage.Options.
_NO_PREFIX = "\x00"


def register(subparsers: Subparsers) -> None:
    """
    Add the C{relay} subcommand to C{subparsers}.
    """
    parser = subparsers.add_parser(
        "relay", help="run a relay (see: nfltr relay --help)",
        prefix_chars=_NO_PREFIX, add_help=False,
    )
    parser.add_argument("options", nargs=argparse.REMAINDER)
    parser.set_defaults(run=run)


def commandOptions() -> Any:
    """
    The relay's L{Options} with C{--log-level}, spelled for C{nfltr relay}.
    """
    from twisted.logger import InvalidLogLevelError, LogLevel
    from twisted.python import usage

    from nfltr.relay_tap import Options

    class RelayCommandOptions(Options):
        synopsis = "Usage: nfltr relay [options]"
        optParameters = [
            ["log-level", None, "info",
             "What to log on standard error: debug, info, warn, error or critical."],
        ]

        def postOptions(self) -> None:
            super().postOptions()
            try:
                self["log-level"] = LogLevel.levelWithName(str(self["log-level"]).lower())
            except InvalidLogLevelError:
                raise usage.UsageError(
                    f"--log-level {self['log-level']}: use debug, info, warn, error or critical"
                ) from None

    return RelayCommandOptions()


def run(args: argparse.Namespace) -> int:
    """
    Parse the options and run the relay until a signal.
    """
    from twisted.internet import task
    from twisted.python import usage

    options = commandOptions()
    try:
        options.parseOptions(args.options)
    except usage.UsageError as e:
        print(f"nfltr relay: error: {e}", file=sys.stderr)
        print("Try 'nfltr relay --help'.", file=sys.stderr)
        return 2
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    from nfltr.netio import install_reactor

    install_reactor()
    try:
        task.react(_main, (options,))
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    return 0  # pragma: no cover - react always exits


async def _main(reactor: Any, options: Any) -> None:
    from twisted.internet.defer import Deferred
    from twisted.logger import (
        FilteringLogObserver,
        LogLevelFilterPredicate,
        globalLogBeginner,
        textFileLogObserver,
    )

    from nfltr.netio import tune_process
    from nfltr.relay_tap import buildService, reload_on_sighup

    observer = FilteringLogObserver(
        textFileLogObserver(sys.stderr),
        [LogLevelFilterPredicate(defaultLogLevel=options["log-level"])],
    )
    globalLogBeginner.beginLoggingTo([observer], redirectStandardIO=False)
    top = buildService(options.config, tune_process(reactor))
    top.startService()
    reactor.addSystemEventTrigger("before", "shutdown", top.stopService)
    relay = top.getServiceNamed("relay")
    reload_on_sighup(relay, reactor)
    try:
        await relay.whenReady()
    except Exception:  # noqa: BLE001 - the service has logged why
        raise SystemExit(1) from None
    await Deferred()  # until the reactor stops (SIGINT, SIGTERM)
