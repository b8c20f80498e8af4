# -*- test-case-name: tests.cli.test_main -*-
"""
C{nfltr version}: print the installed version.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from nfltr import __version__

if TYPE_CHECKING:
    from nfltr.cli import Subparsers


def register(subparsers: Subparsers) -> None:
    """
    Add the C{version} subcommand to C{subparsers}.
    """
    parser = subparsers.add_parser("version", help="print the version and exit")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """
    Print C{nfltr VERSION}.
    """
    print(f"nfltr {__version__}")
    return 0
