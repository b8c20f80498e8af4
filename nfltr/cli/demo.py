# -*- test-case-name: tests.integration.test_demo -*-
"""
C{nfltr demo}: run a relay, an agent, a service and a connector on this
machine, send a request through the tunnel, explain, and clean up
(L{nfltr.cli.demo_steps}).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nfltr.cli import Subparsers


def register(subparsers: Subparsers) -> None:
    """
    Add the C{demo} subcommand.
    """
    parser = subparsers.add_parser(
        "demo", help="run relay, agent, service and connector here and send a request through"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """
    Run the demo.
    """
    from nfltr.cli.demo_steps import Demo

    return Demo().run()
