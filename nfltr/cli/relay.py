# -*- test-case-name: tests.cli.test_relay -*-
"""
C{nfltr relay [options]}: run a relay in the foreground, logging to standard
error at C{--log-level}, until SIGINT or SIGTERM.

It takes the options of C{twistd nfltr-relay}
(L{nfltr.cli.relay_options.RelayOptions}) and runs the same service tree
(L{buildService}).  Exit status: 0 after a signal, 1 if the relay could not
start, 2 for bad options.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from twisted.application.service import MultiService

    from nfltr.cli import Subparsers
    from nfltr.cli.foreground import Foreground
    from nfltr.relay.config import RelayConfig
    from nfltr.relay.service import RelayService

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
    The relay's options as C{twistd nfltr-relay} parses them, spelled for C{nfltr relay}.
    """
    from nfltr.cli.relay_options import RelayOptions

    class RelayCommandOptions(RelayOptions):
        synopsis = "Usage: nfltr relay [options]"

    return RelayCommandOptions()


def commandParser() -> argparse.ArgumentParser:
    """
    The argparse parser of C{nfltr relay}, from the relay's option table (the one
    C{twistd nfltr-relay} reads too), so its help looks like every other command's.  Built
    only when the relay runs: the other commands never import the relay's options.
    """
    from nfltr.cli.options import add_arguments, environment
    from nfltr.cli.relay_options import RELAY_OPTIONS, RelayOptions

    parser = argparse.ArgumentParser(
        prog="nfltr relay", description=RelayOptions.longdesc, epilog=environment(RELAY_OPTIONS),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_arguments(parser, RELAY_OPTIONS)
    return parser


def run(args: argparse.Namespace) -> int:
    """
    Parse the options and run the relay until a signal.
    """
    from twisted.python import usage

    from nfltr.cli.foreground import serve
    from nfltr.cli.options import option_values, parse_values
    from nfltr.cli.relay_options import RELAY_OPTIONS, relay_config

    parser = commandParser()
    try:
        namespace = parser.parse_args(args.options)
    except SystemExit as e:  # --help (0), or a usage error argparse printed (2)
        return e.code if isinstance(e.code, int) else 0
    try:
        values = parse_values(option_values(namespace, RELAY_OPTIONS), RELAY_OPTIONS)
        config = relay_config(values)
    except usage.UsageError as e:
        print(f"nfltr relay: error: {e}", file=sys.stderr)
        print("Try 'nfltr relay --help'.", file=sys.stderr)
        return 2

    def make(foreground: Foreground) -> MultiService:
        from nfltr.relay.service import RelayService

        top = buildService(config, foreground.reactor)
        relay = top.getServiceNamed(RelayService.name)
        assert isinstance(relay, RelayService)
        relay.whenReady().addErrback(foreground.failed)
        reload_on_sighup(relay, foreground.reactor)
        return top

    return serve(make, values["log-level"])


def buildService(config: RelayConfig, reactor: Any) -> MultiService:
    """
    The relay's service tree for C{config}, on C{reactor}: a
    C{MultiService} holding the L{RelayService}, named C{relay}.
    """
    from twisted.application.service import MultiService

    from nfltr.relay.service import RelayService

    top = MultiService()
    RelayService(config, reactor).setServiceParent(top)
    return top


def reload_on_sighup(relay: RelayService, reactor: Any) -> None:
    """
    Reload the relay's certificate on SIGHUP (from the reactor thread).
    """
    import signal

    def hup(signum: int, frame: Any) -> None:
        reactor.callFromThread(relay.reload)

    signal.signal(signal.SIGHUP, hup)
