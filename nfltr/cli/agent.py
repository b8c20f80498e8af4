# -*- test-case-name: tests.cli.test_agent -*-
"""
C{nfltr tcp PORT...}: share local TCP services through the relay (the
agent).  C{nfltr http PORT}: publish a local web service at a share URL (the
agent too).  C{nfltr tcp-connect AGENT PORT}: reach a TCP share from here
(the client).  C{nfltr udp PORT...} and C{nfltr udp-connect AGENT PORT}: the
same for UDP services (datagram sessions, L{nfltr.udp}).

Their options are declared in L{nfltr.cli.agent_options}, tables that also
give twistd's C{nfltr-agent} plugin its options (L{nfltr.agent_tap}); their
defaults and checks live with the code that uses them (L{nfltr.agent},
L{nfltr.client}).  This module imports nothing heavy until a command runs.

The relay options a command line leaves out come from the login saved by
C{nfltr login} (L{nfltr.cli.saved_login}).

Output: the agent's connect command and the client's C{listening on
HOST:PORT} go to standard output, for people and scripts; the log goes to
standard error.  A setting that is wrong exits 2 with one line; a relay that
turns us away for good (a revoked key, say) exits 1 with one line
(C{nfltr: relay refused: ...}).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nfltr.cli.agent_options import (
    AGENT_OPTIONS,
    CONNECT_OPTIONS,
    HTTP_OPTIONS,
    UDP_CONNECT_OPTIONS,
    UDP_OPTIONS,
    VERBOSE,
)
from nfltr.cli.options import Option, add_arguments, environment, option_values
from nfltr.cli.saved_login import with_login

if TYPE_CHECKING:
    from nfltr.cli import Subparsers

EXIT_USAGE = 2


def _parser(subparsers: Subparsers, name: str, options: Sequence[Option], help: str,
            description: str) -> argparse.ArgumentParser:
    return subparsers.add_parser(name, help=help, description=description,
                                 epilog=environment(options))


def register(subparsers: Subparsers) -> None:
    """
    Add the C{tcp}, C{http}, C{tcp-connect}, C{udp} and C{udp-connect}
    subcommands.
    """
    tcp = _parser(
        subparsers, "tcp", AGENT_OPTIONS,
        "share local TCP services through the relay (run the agent)",
        "Share the TCP services on these local ports through the relay. "
        "It prints the fingerprint of its end-to-end key and the tcp-connect command to use.",
    )
    tcp.add_argument("ports", nargs="+", metavar="PORT", help="a port of a local service")
    add_arguments(tcp, (*AGENT_OPTIONS, VERBOSE))
    tcp.set_defaults(run=run_agent)
    http = _parser(
        subparsers, "http", HTTP_OPTIONS,
        "publish a local web service at a public HTTPS URL (run the agent)",
        "Publish the web service on this local port at https://NAME.SHARE_DOMAIN/ "
        "through the relay, end to end encrypted by default. Prints the URL.",
    )
    http.add_argument("port", metavar="PORT", help="the port of the local web service")
    add_arguments(http, (*HTTP_OPTIONS, VERBOSE))
    http.set_defaults(run=run_http)
    connect = _parser(
        subparsers, "tcp-connect", CONNECT_OPTIONS,
        "reach an agent's TCP service from a local port",
        "Accept local connections and carry each to AGENT's service on PORT "
        "through the relay. Prints 'listening on HOST:PORT' once the relay accepted us.",
    )
    connect.add_argument("agent", metavar="AGENT", help="the agent's name")
    connect.add_argument("port", metavar="PORT", help="the port the agent shares")
    add_arguments(connect, (*CONNECT_OPTIONS, VERBOSE))
    connect.set_defaults(run=run_connect)
    _register_udp(subparsers)


def _register_udp(subparsers: Subparsers) -> None:
    udp = _parser(
        subparsers, "udp", UDP_OPTIONS,
        "share local UDP services through the relay (run the agent)",
        "Share the UDP services on these local ports through the relay (not end-to-end "
        "encrypted). It prints the udp-connect command to use.",
    )
    udp.add_argument("ports", nargs="+", metavar="PORT", help="a UDP port of a local service")
    add_arguments(udp, (*UDP_OPTIONS, VERBOSE))
    udp.set_defaults(run=run_udp)
    connect = _parser(
        subparsers, "udp-connect", UDP_CONNECT_OPTIONS,
        "reach an agent's UDP service from a local port",
        "Receive local datagrams and carry them, one session per sender, to AGENT's UDP "
        "service on PORT through the relay. Prints 'listening on HOST:PORT (UDP)'.",
    )
    connect.add_argument("agent", metavar="AGENT", help="the agent's name")
    connect.add_argument("port", metavar="PORT", help="the UDP port the agent shares")
    add_arguments(connect, (*UDP_CONNECT_OPTIONS, VERBOSE))
    connect.set_defaults(run=run_udp_connect)


def run_agent(args: argparse.Namespace) -> int:
    """
    Run the agent until interrupted or turned away.
    """
    from nfltr.agent import AgentService, ConfigError, agent_options, prepare_agent
    from nfltr.cli.foreground import serve
    from nfltr.cli.logs import verbosity

    try:
        values = with_login(option_values(args, AGENT_OPTIONS))
        setup = prepare_agent(agent_options(args.ports, values))
    except ConfigError as e:
        print(f"nfltr tcp: {e}", file=sys.stderr)
        return EXIT_USAGE
    return serve(
        lambda fg: AgentService(fg.reactor, setup, fg.announce, fg.fatal), verbosity(args.verbose)
    )


def run_http(args: argparse.Namespace) -> int:
    """
    Run the agent for one share URL until interrupted or turned away.
    """
    from nfltr.agent import AgentService, ConfigError, http_agent_options, prepare_agent
    from nfltr.cli.foreground import serve
    from nfltr.cli.logs import verbosity

    try:
        options = http_agent_options(args.port, with_login(option_values(args, HTTP_OPTIONS)))
        setup = prepare_agent(options)
    except ConfigError as e:
        print(f"nfltr http: {e}", file=sys.stderr)
        return EXIT_USAGE
    return serve(
        lambda fg: AgentService(fg.reactor, setup, fg.announce, fg.fatal, onDone=fg.done),
        verbosity(args.verbose),
    )


def run_connect(args: argparse.Namespace) -> int:
    """
    Run the client until interrupted or turned away.
    """
    from nfltr.agent import ConfigError
    from nfltr.cli.foreground import serve
    from nfltr.cli.logs import verbosity
    from nfltr.client import TcpConnector, connect_options

    try:
        values = with_login(option_values(args, CONNECT_OPTIONS))
        options = connect_options(args.agent, args.port, values)
    except ConfigError as e:
        print(f"nfltr tcp-connect: {e}", file=sys.stderr)
        return EXIT_USAGE
    return serve(
        lambda fg: TcpConnector(fg.reactor, options, fg.announce, fg.fatal),
        verbosity(args.verbose),
    )


def run_udp(args: argparse.Namespace) -> int:
    """
    Run the agent for UDP ports until interrupted or turned away.
    """
    from nfltr.agent import AgentService, ConfigError, agent_options, prepare_agent
    from nfltr.cli.foreground import serve
    from nfltr.cli.logs import verbosity

    try:
        values = with_login(option_values(args, UDP_OPTIONS))
        setup = prepare_agent(agent_options([], values, udp=args.ports))
    except ConfigError as e:
        print(f"nfltr udp: {e}", file=sys.stderr)
        return EXIT_USAGE
    return serve(
        lambda fg: AgentService(fg.reactor, setup, fg.announce, fg.fatal), verbosity(args.verbose)
    )


def run_udp_connect(args: argparse.Namespace) -> int:
    """
    Run the UDP client until interrupted or turned away.
    """
    from nfltr.agent import ConfigError
    from nfltr.cli.foreground import serve
    from nfltr.cli.logs import verbosity
    from nfltr.client import UDPConnector, datagram_limits, udp_connect_options

    try:
        values = with_login(option_values(args, UDP_CONNECT_OPTIONS))
        options = udp_connect_options(args.agent, args.port, values)
        limits = datagram_limits(values)
    except ConfigError as e:
        print(f"nfltr udp-connect: {e}", file=sys.stderr)
        return EXIT_USAGE
    return serve(
        lambda fg: UDPConnector(fg.reactor, options, fg.announce, fg.fatal, limits=limits),
        verbosity(args.verbose),
    )
