# -*- test-case-name: tests.cli.test_main -*-
"""
The C{nfltr} command (L{main}, the console script) and what it shares with
the twistd plugins (L{nfltr.relay_tap}, L{nfltr.agent_tap}), which import
from this package and never the other way round:

  - L{nfltr.cli.options}: the option model, one table per command feeding
    C{argparse} and C{usage.Options} (L{nfltr.cli.twistd.TableOptions});
    the tables are L{nfltr.cli.agent_options} and L{nfltr.cli.relay_options};
  - L{nfltr.cli.logs}: the one logging setup, for the commands and twistd;
  - L{nfltr.cli.foreground}: how a command runs its service;
  - L{nfltr.cli.twistd}: what both plugins share;
  - the subcommands: L{nfltr.cli.version}, L{nfltr.cli.relay},
    L{nfltr.cli.keys}, L{nfltr.cli.agent}, L{nfltr.cli.demo} (with
    L{nfltr.cli.processes}, child processes read line by line, which the
    integration tests and benchmarks use too).

Each subcommand lives in its own module, named in L{COMMAND_MODULES}. Such a module exposes
C{register(subparsers)}, which adds its parser to the C{argparse} subparsers action and sets a
C{run} default: a callable taking the parsed L{argparse.Namespace} and returning the exit status.
Modules are imported when the command line is parsed, so they keep heavy imports (the reactor
above all) inside their C{run} functions.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nfltr import __version__

if TYPE_CHECKING:
    # What a command module's register() is given.
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

COMMAND_MODULES: tuple[str, ...] = (
    "nfltr.cli.version",
    "nfltr.cli.relay",
    "nfltr.cli.keys",
    "nfltr.cli.admin",
    "nfltr.cli.agent",
    "nfltr.cli.up",
    "nfltr.cli.login",
    "nfltr.cli.demo",
    "nfltr.cli.cluster_ca",
    "nfltr.cli.onion_keys",
)


def buildParser(commandModules: Sequence[str] = COMMAND_MODULES) -> argparse.ArgumentParser:
    """
    Build the C{nfltr} argument parser with a subcommand from each of C{commandModules}.
    """
    parser = argparse.ArgumentParser(
        prog="nfltr",
        description="A self-hosted reverse-tunnel relay, its agent and its client.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in commandModules:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """
    Run the C{nfltr} command with C{argv} (default: C{sys.argv[1:]}) and return its exit status.

    Usage errors come from C{argparse}: its usage message on standard error and status 2.
    """
    # OpenSSL's configuration must come before anything loads OpenSSL (the
    # commands import Twisted's TCP, which does): nfltr.tls applies it on import.
    import nfltr.tls  # noqa: F401

    parser = buildParser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        # argparse exits for --help, --version (0) and usage errors (2).
        return e.code if isinstance(e.code, int) else 2
    status: int = args.run(args)
    return status
