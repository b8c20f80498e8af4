# -*- test-case-name: tests.agent.test_cli -*-
"""
C{nfltr tcp PORT...}: share local TCP services through the relay (the
agent).  C{nfltr http PORT}: publish a local web service at a share URL (the
agent too).  C{nfltr tcp-connect AGENT PORT}: reach a TCP share from here
(the client).

The options are declared here, once, in tables that also give twistd's
C{nfltr-agent} plugin its options (L{nfltr.agent_tap}); their defaults and
checks live with the code that uses them (L{nfltr.agent},
L{nfltr.client}).  This module imports nothing heavy until a command runs.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nfltr.cli import Subparsers

EXIT_USAGE = 2


@dataclass(frozen=True)
class Option:
    """
    One C{--name VALUE} option; a missing value means the checker's default.
    A repeatable one (C{repeat}) gives a list, empty when absent.
    """

    name: str
    metavar: str
    help: str
    repeat: bool = False


RELAY_OPTIONS: tuple[Option, ...] = (
    Option("relay", "HOST:PORT", "the relay's TLS port (default: localhost:8443)"),
    Option(
        "ca", "FILE",
        "trust the relay through this CA certificate (its DATA_DIR/tls/ca.crt; the relay "
        "names it in DATA_DIR/relay.json)",
    ),
    Option(
        "relay-pin", "FP",
        "trust the relay's certificate by its key fingerprint, sha256:... (the relay prints it)",
    ),
    Option(
        "key", "KEY",
        "API key; better, set NFLTR_KEY or give --key-file: other users can read "
        "command-line arguments",
    ),
    Option(
        "key-file", "FILE",
        "read the API key from FILE, which only its owner may read (mode 0600)",
    ),
    Option(
        "transport", "TRANSPORT",
        "auto (default): the raw link, or WebSocket when that does not get through; link; "
        "websocket (for networks that pass only HTTP)",
    ),
    Option(
        "proxy", "URL",
        "reach the relay through this HTTP proxy, http://HOST:PORT, with CONNECT (default: "
        "HTTPS_PROXY if set)",
    ),
    Option(
        "keepalive", "PRESET",
        "link liveness: fast, default, nat, datacenter, mobile, or interval=D,timeout=D "
        "(default: default)",
    ),
)
AGENT_OPTIONS: tuple[Option, ...] = (
    Option(
        "name", "NAME",
        "the agent's name (default: a random name, kept in the state directory)",
    ),
    Option(
        "e2ee", "BOOL",
        "true (default): end each session's TLS here, with a key clients pin; false: "
        "plain sessions the relay can read",
    ),
    Option(
        "state-dir", "DIR",
        "where the name and the end-to-end key are kept (default: "
        "$XDG_STATE_HOME/nfltr/agent or ~/.local/state/nfltr/agent)",
    ),
    *RELAY_OPTIONS,
)
HTTP_OPTIONS: tuple[Option, ...] = (
    Option(
        "name", "NAME",
        "the share's name: its URL is https://NAME.SHARE_DOMAIN/ (default: a random name, "
        "kept in the state directory)",
    ),
    Option(
        "mode", "MODE",
        "e2ee (default): TLS ends here, the relay forwards ciphertext; inspect: the relay "
        "ends TLS and proxies HTTP; passthrough: the service ends TLS itself",
    ),
    Option(
        "host-header", "HOST",
        "the Host header the service gets: rewrite (default: localhost:PORT), preserve (the "
        "visitor's), or a value",
    ),
    Option(
        "basic-auth", "USER:PASS",
        "visitors must log in with this user and password (HTTP Basic; browsers prompt); "
        "better, set NFLTR_BASIC_AUTH or give --basic-auth-file: other users can read "
        "command-line arguments",
    ),
    Option(
        "basic-auth-file", "FILE",
        "--basic-auth's USER:PASS from FILE, which only its owner may read (mode 0600)",
    ),
    Option(
        "bearer", "TOKEN",
        "visitors must send Authorization: Bearer TOKEN (for API clients; no prompt); "
        "better, set NFLTR_BEARER or give --bearer-file",
    ),
    Option(
        "bearer-file", "FILE",
        "--bearer's TOKEN from FILE, which only its owner may read (mode 0600)",
    ),
    Option(
        "require-header", "NAME:VALUE",
        "visitors' requests must carry this header with this value (webhook secrets); "
        "repeatable; better, give --require-header-file", repeat=True,
    ),
    Option(
        "require-header-file", "FILE",
        "more --require-header NAME:VALUE, one a line, from FILE, which only its owner may "
        "read (mode 0600)",
    ),
    Option(
        "allow-ip", "CIDR",
        "only visitors from this network (or address) may connect; repeatable",
        repeat=True,
    ),
    Option(
        "idle-expiry", "DURATION",
        "end the share (and exit 0) once nobody visited it for DURATION: 90s, 30m, 12h, 7d",
    ),
    Option(
        "plain-http", "BOOL",
        "true: also serve the share in plain HTTP on the relay's HTTP port (the relay then "
        "reads that traffic); default false: the HTTP port redirects to HTTPS",
    ),
    Option(
        "state-dir", "DIR",
        "where the name and the share key are kept (default: $XDG_STATE_HOME/nfltr/agent or "
        "~/.local/state/nfltr/agent)",
    ),
    *RELAY_OPTIONS,
)
CONNECT_OPTIONS: tuple[Option, ...] = (
    Option(
        "listen", "[HOST:]PORT",
        "where to accept local connections (default: 127.0.0.1:0, any free port; the port "
        "is printed)",
    ),
    Option("pin", "FP", "the agent's key fingerprint, sha256:... (the agent prints it)"),
    Option(
        "e2ee", "BOOL",
        "true (default): end-to-end TLS to the agent; false: for an agent run with "
        "--e2ee false",
    ),
    *RELAY_OPTIONS,
)


def add_arguments(parser: argparse.ArgumentParser, options: Sequence[Option]) -> None:
    """
    Add C{options} to an C{argparse} parser.
    """
    for option in options:
        if option.repeat:
            parser.add_argument(f"--{option.name}", metavar=option.metavar, help=option.help,
                                action="append", default=[])
        else:
            parser.add_argument(f"--{option.name}", metavar=option.metavar, help=option.help)


def opt_parameters(options: Sequence[Option]) -> list[list[Any]]:
    """
    C{options} as C{usage.Options.optParameters}; repeatable ones are left
    to C{opt_} methods (see L{nfltr.agent_tap.HttpOptions}).
    """
    return [[option.name, None, None, option.help] for option in options if not option.repeat]


def option_values(source: Any, options: Sequence[Option]) -> dict[str, Any]:
    """
    The values of C{options}, keyed by option name, from an C{argparse}
    namespace or a C{usage.Options}.
    """
    if isinstance(source, argparse.Namespace):
        return {o.name: getattr(source, o.name.replace("-", "_")) for o in options}
    return {o.name: source[o.name] for o in options}


def register(subparsers: Subparsers) -> None:
    """
    Add the C{tcp} and C{tcp-connect} subcommands.
    """
    tcp = subparsers.add_parser(
        "tcp", help="share local TCP services through the relay (run the agent)",
        description="Share the TCP services on these local ports through the relay. "
        "It prints the fingerprint of its end-to-end key and the tcp-connect command to use.",
    )
    tcp.add_argument("ports", nargs="+", metavar="PORT", help="a port of a local service")
    add_arguments(tcp, AGENT_OPTIONS)
    tcp.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    tcp.set_defaults(run=run_agent)
    http = subparsers.add_parser(
        "http", help="publish a local web service at a public HTTPS URL (run the agent)",
        description="Publish the web service on this local port at https://NAME.SHARE_DOMAIN/ "
        "through the relay, end to end encrypted by default. Prints the URL.",
    )
    http.add_argument("port", metavar="PORT", help="the port of the local web service")
    add_arguments(http, HTTP_OPTIONS)
    http.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    http.set_defaults(run=run_http)
    connect = subparsers.add_parser(
        "tcp-connect", help="reach an agent's TCP service from a local port",
        description="Accept local connections and carry each to AGENT's service on PORT "
        "through the relay. Prints 'listening on HOST:PORT' once the relay accepted us.",
    )
    connect.add_argument("agent", metavar="AGENT", help="the agent's name")
    connect.add_argument("port", metavar="PORT", help="the port the agent shares")
    add_arguments(connect, CONNECT_OPTIONS)
    connect.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    connect.set_defaults(run=run_connect)


def run_agent(args: argparse.Namespace) -> int:
    """
    Run the agent until interrupted or turned away.
    """
    from nfltr.agent import AgentService, ConfigError, agent_options, prepare_agent

    try:
        setup = prepare_agent(agent_options(args.ports, option_values(args, AGENT_OPTIONS)))
    except ConfigError as e:
        print(f"nfltr tcp: {e}", file=sys.stderr)
        return EXIT_USAGE
    from nfltr.agent_tap import serve

    return serve(lambda *a: AgentService(a[0], setup, a[1], a[2]), args.verbose)


def run_http(args: argparse.Namespace) -> int:
    """
    Run the agent for one share URL until interrupted or turned away.
    """
    from nfltr.agent import AgentService, ConfigError, http_agent_options, prepare_agent

    try:
        options = http_agent_options(args.port, option_values(args, HTTP_OPTIONS))
        setup = prepare_agent(options)
    except ConfigError as e:
        print(f"nfltr http: {e}", file=sys.stderr)
        return EXIT_USAGE
    from nfltr.agent_tap import serve

    return serve(
        lambda *a: AgentService(a[0], setup, a[1], a[2], onDone=a[3]), args.verbose
    )


def run_connect(args: argparse.Namespace) -> int:
    """
    Run the client until interrupted or turned away.
    """
    from nfltr.agent import ConfigError
    from nfltr.client import TcpConnector, connect_options

    try:
        options = connect_options(args.agent, args.port, option_values(args, CONNECT_OPTIONS))
    except ConfigError as e:
        print(f"nfltr tcp-connect: {e}", file=sys.stderr)
        return EXIT_USAGE
    from nfltr.agent_tap import serve

    return serve(lambda *a: TcpConnector(a[0], options, a[1], a[2]), args.verbose)
