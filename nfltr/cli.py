# -*- test-case-name: tests.test_cli -*-
"""
The C{nfltr} command.

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
    "nfltr.cli_version",
    "nfltr.cli_relay",
    "nfltr.cli_keys",
    "nfltr.cli_agent",
    "nfltr.cli_demo",
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
    parser = buildParser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        # argparse exits for --help, --version (0) and usage errors (2).
        return e.code if isinstance(e.code, int) else 2
    status: int = args.run(args)
    return status
