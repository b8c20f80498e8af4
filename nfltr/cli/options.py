# -*- test-case-name: tests.cli.test_options -*-
"""
The option model: every option of the C{nfltr} command and of the twistd
plugins is declared once, as an L{Option} in a table, and each table feeds
both parsers: C{argparse} for C{nfltr tcp}, C{http} and C{tcp-connect}
(L{add_arguments}), and C{twisted.python.usage.Options} for twistd and
C{nfltr relay} (L{nfltr.cli.twistd.TableOptions}).

An option's values leave either parser as text (or a list of texts, or a
flag), keyed by the option's name; L{parse_values} then runs each option's
parser over them.  Options without a parser are checked by the code that
uses them (the agent's checkers, L{nfltr.agent.agent_options}, which also
read the environment variables and secret files a table names).

This module imports only the standard library: C{nfltr --help} stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: An option's parser: its value (as the command line gave it, or its
#: default) and its spelling (C{--name}, for messages) in; the checked value
#: out.  A parser raises the error of the parser it serves
#: (C{usage.UsageError}), naming the option.
Parser = Callable[[Any, str], Any]

#: C{--name VALUE}.
VALUE = "value"
#: C{--name}, no value: true when given.
FLAG = "flag"
#: C{--name VALUE}, repeatable: a list, empty when absent.
REPEAT = "repeat"
#: C{--name VALUE}, repeatable, each value a comma-separated list: the values
#: joined by commas, one text (L{None} when absent).
JOIN = "join"


@dataclass(frozen=True)
class Option:
    """
    One option of a table.

    @ivar name: the long name, without C{--}.
    @ivar metavar: how C{--help} names its value (C{argparse} only).
    @ivar help: one sentence for C{--help}.
    @ivar default: its value when absent (L{None}: the default of whoever
        checks it, which the help text states).
    @ivar short: a one-letter synonym, C{-X}.
    @ivar kind: L{VALUE}, L{FLAG}, L{REPEAT} or L{JOIN}.
    @ivar parse: its L{Parser}; L{None}: the text is kept.
    @ivar env: the environment variable read when the option is absent.
    @ivar secret_file: the option that gives this secret from a file
        instead of the command line, which others can read.
    """

    name: str
    metavar: str | None
    help: str
    default: Any = None
    short: str | None = None
    kind: str = VALUE
    parse: Parser | None = None
    env: str | None = None
    secret_file: str | None = None

    @property
    def flag(self) -> str:
        """
        How the option is spelled: C{--name}.
        """
        return f"--{self.name}"


def add_arguments(parser: argparse.ArgumentParser, options: Iterable[Option]) -> None:
    """
    Add C{options} to an C{argparse} parser.
    """
    for option in options:
        names = [f"-{option.short}"] if option.short else []
        names.append(option.flag)
        if option.kind == FLAG:
            parser.add_argument(*names, action="store_true", help=option.help)
        elif option.kind == REPEAT:
            parser.add_argument(*names, metavar=option.metavar, help=option.help,
                                action="append", default=[])
        elif option.kind == JOIN:
            parser.add_argument(*names, metavar=option.metavar, help=option.help,
                                action="append", default=None)
        else:
            parser.add_argument(*names, metavar=option.metavar, help=option.help,
                                default=option.default)


def option_values(source: argparse.Namespace | Mapping[str, Any],
                  options: Iterable[Option]) -> dict[str, Any]:
    """
    The values of C{options}, keyed by option name, from an C{argparse}
    namespace or a C{usage.Options}.
    """
    if isinstance(source, argparse.Namespace):
        values = {o.name: getattr(source, o.name.replace("-", "_")) for o in options}
    else:
        values = {o.name: source[o.name] for o in options}
    for option in options:
        if option.kind == JOIN:
            values[option.name] = joined(values[option.name])
    return values


def joined(value: Any) -> str | None:
    """
    A L{JOIN} option's values (a list of texts, or one text) as one text,
    comma-separated; L{None} for none.
    """
    if isinstance(value, list):
        return ",".join(value) if value else None
    return value if value is None else str(value)


def parse_values(values: Mapping[str, Any], options: Iterable[Option]) -> dict[str, Any]:
    """
    C{values} (keyed by option name) with each option's parser run over its
    value, in the table's order: the first bad value raises.
    """
    parsed = dict(values)
    for option in options:
        if option.parse is not None:
            parsed[option.name] = option.parse(values.get(option.name), option.flag)
    return parsed


def environment(options: Sequence[Option]) -> str | None:
    """
    A line for C{--help} naming the environment variables C{options} read,
    with the option each stands for (L{None} if none does).
    """
    named = [f"{o.env} (for {o.flag})" for o in options if o.env]
    return f"environment: {', '.join(named)}" if named else None


def check_table(options: Sequence[Option]) -> list[str]:
    """
    What is wrong with a table: a name given twice, a short name given
    twice, a C{secret_file} that names no option of the table.
    """
    problems = []
    names = [o.name for o in options]
    shorts = [o.short for o in options if o.short]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"--{name} is declared twice")
    for short in sorted({s for s in shorts if shorts.count(s) > 1}):
        problems.append(f"-{short} is declared twice")
    for option in options:
        if option.secret_file is not None and option.secret_file not in names:
            problems.append(f"{option.flag}: its file option --{option.secret_file} is missing")
    return problems
