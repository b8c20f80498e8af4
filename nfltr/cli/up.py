# -*- test-case-name: tests.cli.test_up -*-
"""
C{nfltr up [FILE]}: one agent, one link to the relay, serving every entry
of a config file (L{nfltr.cli.config_file}); C{nfltr check FILE}: the
file's problems, each named by its line and key, or that it is fine.

Without FILE, C{up} reads C{nfltr.toml} in the working directory, or else
the one in the user's config directory (where C{nfltr login} saves the
relay and the key, which fill in what a file leaves out).  C{SIGHUP}
reloads the file (L{nfltr.agent.config_agent}).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from nfltr.cli.agent_options import VERBOSE
from nfltr.cli.options import add_arguments

if TYPE_CHECKING:
    from nfltr.cli import Subparsers
    from nfltr.cli.config_check import Config
    from nfltr.cli.foreground import Foreground

EXIT_INVALID = 1
EXIT_USAGE = 2


def register(subparsers: Subparsers) -> None:
    """
    Add the C{up} and C{check} subcommands.
    """
    up = subparsers.add_parser(
        "up", help="run one agent for every entry of a config file",
        description="Serve every [[tcp]] and [[http]] entry of FILE through one agent and one "
        "link to the relay. SIGHUP reloads FILE: new entries start, removed ones drain, a "
        "broken file keeps the running ones. See docs/config.md.",
    )
    up.add_argument("file", nargs="?", metavar="FILE",
                    help="the config file (default: ./nfltr.toml, else "
                    "$XDG_CONFIG_HOME/nfltr/nfltr.toml)")
    add_arguments(up, (VERBOSE,))
    up.set_defaults(run=run_up)
    check = subparsers.add_parser(
        "check", help="check a config file",
        description="Check FILE as nfltr up would (the relay's CA and the key files are "
        "read) and print each problem with its line, or that it is fine.",
    )
    check.add_argument("file", metavar="FILE", help="the config file")
    check.set_defaults(run=run_check)


def config_path(given: str | None) -> Path:
    """
    The file C{up} reads: C{given}, or the default.
    """
    from nfltr.cli.config_file import default_config

    return Path(given) if given else default_config(Path.cwd())


def run_check(args: argparse.Namespace) -> int:
    """
    Print the file's problems (status 1) or that it is fine.
    """
    from nfltr.cli.config_file import ConfigFileError

    path = Path(args.file)
    try:
        config = load_config(path)
    except ConfigFileError as e:
        for line in e.lines():
            print(line, file=sys.stderr)
        return EXIT_INVALID
    counts = {kind: sum(1 for e in config.entries if e.kind == kind) for kind in ("tcp", "http")}
    print(f"{path}: fine: {counts['tcp']} [[tcp]] and {counts['http']} [[http]] entries, "
          f"relay {config.options.relay.address}")
    return 0


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def run_up(args: argparse.Namespace) -> int:
    """
    Run the agent of the file's entries until interrupted or turned away.
    """
    from nfltr.agent import ConfigError, prepare_agent
    from nfltr.cli.config_file import CONFIG_NAME, ConfigFileError
    from nfltr.cli.foreground import serve
    from nfltr.cli.logs import verbosity

    path = config_path(args.file)
    if args.file is None and not path.exists():
        print(f"nfltr up: no config file: none in the working directory ({CONFIG_NAME}), none "
              f"at {path}; give FILE (see docs/config.md)", file=sys.stderr)
        return EXIT_USAGE
    try:
        config = load_config(path)
        setup = prepare_agent(config.options)
    except ConfigFileError as e:
        for line in e.lines():
            print(f"nfltr up: {line}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as e:
        print(f"nfltr up: {e}", file=sys.stderr)
        return EXIT_USAGE
    from nfltr.cli.config_agent import ConfigAgent, reload_on_sighup

    def make(fg: Foreground) -> ConfigAgent:
        agent = ConfigAgent(fg.reactor, config, setup, lambda: load_config(path), fg.announce,
                            fg.fatal)
        reload_on_sighup(fg.reactor, agent.reload)
        return agent

    return serve(make, verbosity(args.verbose))


def load_config(path: Path) -> Config:
    """
    Check the config file C{path}, the saved login filling in what it
    leaves out (unless it is the file that holds the login).

    @raise ConfigFileError: what is wrong with either.
    """
    from nfltr.cli.config_check import check_config
    from nfltr.cli.saved_login import login_path, saved_login

    saved = {} if _same(path, login_path()) else saved_login()
    return check_config(path, os.environ, saved)
