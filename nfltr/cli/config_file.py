# -*- test-case-name: tests.cli.test_config_file -*-
"""
The agent's config file (C{nfltr up}, C{nfltr check}, C{nfltr login}):
TOML read with C{tomllib}, its keys taken from the option tables of the
commands it stands for (L{nfltr.cli.agent_options}), so an option added to
C{nfltr tcp} or C{nfltr http} is a key of its entries without more work:

  - the top level: the relay options (C{relay}, C{ca}, C{relay-pin},
    C{key}, C{key-file}, ...) and the agent's (C{name}, C{state-dir});
  - C{[[tcp]]}: C{port}, and the other options of C{nfltr tcp};
  - C{[[http]]}: C{port}, and the other options of C{nfltr http}
    (C{name} is the share's).

This module turns the file into option values (texts, as the command line
gives them), each with its line: L{read_values}.  It checks what the
file's shape decides (unknown keys, types, where a secret may be written);
L{nfltr.cli.config_check} then runs the commands' own checks over them.
Paths (values of C{FILE} and C{DIR} options) are relative to the file's
directory.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nfltr.cli.agent_options import AGENT_OPTIONS, HTTP_OPTIONS, RELAY_OPTIONS, UDP_OPTIONS
from nfltr.cli.config_lines import TOP, Lines, locate
from nfltr.cli.options import FLAG, JOIN, REPEAT, Option, joined

#: The file C{nfltr up} reads by default, in the working directory and then
#: in the user's config directory (L{user_config_dir}).
CONFIG_NAME = "nfltr.toml"
#: The largest config file read.
MAX_CONFIG_FILE = 1024 * 1024
#: The options of C{nfltr tcp} that are the agent's, not a port's (all but
#: C{name} the agent's, not a share URL's, too).
AGENT_LEVEL = ("name", "state-dir", "group", "health-check")
TCP, HTTP, UDP = "tcp", "http", "udp"
PORT = "port"

TOP_OPTIONS: tuple[Option, ...] = tuple(
    o for o in AGENT_OPTIONS if o.name in AGENT_LEVEL or o in RELAY_OPTIONS
)
ENTRY_OPTIONS: dict[str, tuple[Option, ...]] = {
    TCP: tuple(o for o in AGENT_OPTIONS if o.name not in AGENT_LEVEL and o not in RELAY_OPTIONS),
    HTTP: tuple(o for o in HTTP_OPTIONS
                if o.name not in AGENT_LEVEL[1:] and o not in RELAY_OPTIONS),
    # nfltr udp PORT's own: a public port and its allow list.
    UDP: tuple(o for o in UDP_OPTIONS if o.name in ("public-port", "allow-ip")),
}
_PATHS = ("FILE", "DIR")
_BOOL = "BOOL"
MAX_PORT = 65535
# The longest wrong value a message repeats.
_SHOWN = 40
_SYNTAX_LINE = re.compile(r"\(at line (\d+)")


@dataclass(frozen=True)
class Problem:
    """
    One thing wrong with a config file: its line, the key (L{None}: the
    line as a whole), and what is wrong, for the user.
    """

    line: int
    key: str | None
    message: str


class ConfigFileError(Exception):
    """
    A config file that cannot be used: every L{Problem} found, by line.
    """

    def __init__(self, path: Path | str, problems: list[Problem]) -> None:
        super().__init__(path, problems)
        self.path = Path(path)
        self.problems = sorted(problems, key=lambda p: p.line)

    def lines(self) -> list[str]:
        """
        One line per problem: C{FILE:LINE: message}.
        """
        return [f"{self.path}:{p.line}: {p.message}" for p in self.problems]

    def __str__(self) -> str:
        return "\n".join(self.lines())


@dataclass
class Entry:
    """
    A C{[[tcp]]}, C{[[http]]} or C{[[udp]]} entry: its values (keyed by option name,
    C{port} an int), and the line of each key.
    """

    kind: str
    index: int
    values: dict[str, Any]
    line: int
    lines: dict[str, int] = field(default_factory=dict)

    @property
    def title(self) -> str:
        """
        How messages name it: C{[[http]] 2} (from 1).
        """
        return f"[[{self.kind}]] {self.index + 1}"

    def key_line(self, key: str) -> int:
        """
        The line of C{key} in the entry, or the entry's header's.
        """
        return self.lines.get(key, self.line)

    def identity(self) -> tuple[Any, ...]:
        """
        Equal for entries that serve the same way (a reload keeps those).
        """
        return (self.kind, tuple(sorted((k, repr(v)) for k, v in self.values.items())))


@dataclass
class FileValues:
    """
    A config file read: the top level's values and lines, and its entries.
    """

    path: Path
    top: dict[str, Any]
    lines: dict[str, int]
    entries: list[Entry]
    problems: list[Problem]


def user_config_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """
    The user's nfltr config directory: C{$XDG_CONFIG_HOME/nfltr}, or
    C{~/.config/nfltr}.
    """
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(
        environ.get("HOME") or os.path.expanduser("~"), ".config"
    )
    return Path(base) / "nfltr"


def default_config(cwd: Path, environ: Mapping[str, str] = os.environ) -> Path:
    """
    The file C{nfltr up} reads with no argument: C{nfltr.toml} here if there
    is one, else the user's.
    """
    here = cwd / CONFIG_NAME
    return here if here.exists() else user_config_dir(environ) / CONFIG_NAME


def load_text(path: Path) -> tuple[str, int]:
    """
    The text and mode of the config file C{path}.

    @raise ConfigFileError: it cannot be read, is too big or not UTF-8.
    """
    try:
        with open(path, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise ConfigFileError(path, [Problem(1, None, "not a regular file")])
            data = f.read(MAX_CONFIG_FILE + 1)
    except OSError as e:
        raise ConfigFileError(path, [Problem(1, None, f"cannot be read: {e.strerror or e}")]) \
            from None
    if len(data) > MAX_CONFIG_FILE:
        raise ConfigFileError(path, [Problem(1, None, f"over {MAX_CONFIG_FILE} bytes")])
    try:
        return data.decode("utf-8"), stat.S_IMODE(mode)
    except UnicodeDecodeError:
        raise ConfigFileError(path, [Problem(1, None, "not UTF-8 text")]) from None


def read_values(path: Path, text: str, mode: int, *, top_only: bool = False) -> FileValues:
    """
    The option values of the config file C{path} (its C{text} and C{mode}),
    with the problems of its shape; with C{top_only}, its tables and the
    top level's unknown keys are passed over (a saved login is read so).

    @raise ConfigFileError: it is no TOML.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        found = _SYNTAX_LINE.search(str(e))
        raise ConfigFileError(path, [
            Problem(int(found.group(1)) if found else 1, None, f"not TOML: {e}")
        ]) from None
    reader = _Reader(path, mode, locate(text))
    read = FileValues(path, {}, {}, [], reader.problems)
    tables = {k: v for k, v in data.items() if k in (TCP, HTTP, UDP)}
    top = {k: v for k, v in data.items() if k not in tables}
    read.top, read.lines = reader.convert(TOP_OPTIONS, top, TOP, 0, "", ignore_unknown=top_only)
    if top_only:
        return read
    where = reader.where
    for kind, value in tables.items():
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            line = where.keys.get((TOP, 0, kind)) or where.table(kind)
            reader.problems.append(Problem(
                line, kind, f"{kind}: write [[{kind}]] tables, one per entry"
            ))
            continue
        for index, item in enumerate(value):
            read.entries.append(reader.entry(kind, index, item))
    return read


class _Reader:
    """
    Reads the tables of one file into option values, noting its problems.
    """

    def __init__(self, path: Path, mode: int, where: Lines) -> None:
        self.path, self.mode, self.where = path, mode, where
        self.problems: list[Problem] = []

    def entry(self, kind: str, index: int, item: dict[str, Any]) -> Entry:
        """
        A C{[[tcp]]} or C{[[http]]} entry's values.
        """
        entry = Entry(kind, index, {}, self.where.table(kind, index))
        raw = dict(item)
        port = raw.pop(PORT, None)
        line = self.where.key(kind, index, PORT)
        if port is None:
            self.problems.append(Problem(entry.line, PORT,
                                         f"{entry.title}: give the port of its service"))
        elif isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= MAX_PORT:
            self.problems.append(Problem(
                line, PORT,
                f"{entry.title}: port {_shown(port)}: expected a number in 1..{MAX_PORT}",
            ))
        else:
            entry.values[PORT] = port
            entry.lines[PORT] = line
        values, lines = self.convert(ENTRY_OPTIONS[kind], raw, kind, index, f"{entry.title}: ")
        entry.values.update(values)
        entry.lines.update(lines)
        return entry

    def convert(
        self, options: tuple[Option, ...], raw: Mapping[str, Any], table: str, index: int,
        title: str, ignore_unknown: bool = False,
    ) -> tuple[dict[str, Any], dict[str, int]]:
        """
        The option values of one table, as the command line would give them.
        """
        known = {o.name: o for o in options}
        values: dict[str, Any] = {}
        lines: dict[str, int] = {}
        for key, value in raw.items():
            line = self.where.key(table, index, key)
            if table == TOP and (key, 0) in self.where.tables:
                line = self.where.table(key)
            option = known.get(key)
            if option is None:
                if not ignore_unknown:
                    names = [*known, *([PORT] if table != TOP else [])]
                    self.problems.append(Problem(
                        line, key, f"{title}unknown key {key!r}{_hint(key, names)}"
                    ))
                continue
            text = _option_value(option, value)
            if text is None:
                self.problems.append(Problem(
                    line, key, f"{title}{key}: {_expected(option)}, not {_type_name(value)}"
                ))
                continue
            if option.secret_file is not None and self.mode & 0o077:
                also = f" or set {option.env}" if option.env and table == TOP else ""
                self.problems.append(Problem(line, key, (
                    f"{title}{key}: a secret written in the file, which others than its owner "
                    f"may read (mode {self.mode:04o}): chmod 600 {self.path}, or give "
                    f"{option.secret_file}{also} instead"
                )))
                continue
            if option.metavar in _PATHS:
                text = str(self.path.parent / os.path.expanduser(text))
            values[key], lines[key] = text, line
        return values, lines


def _option_value(option: Option, value: Any) -> Any:
    """
    C{value} as the command line gives the option's value, or L{None} if
    it has the wrong type.
    """
    if option.kind == FLAG:
        return value if isinstance(value, bool) else None
    if option.kind in (REPEAT, JOIN):
        # One value or an array; numbers as the command line would spell them
        # (public-port = 20001).
        items = value if isinstance(value, list) else [value]
        ok = all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in items)
        if not ok:
            return None
        return [str(v) for v in items] if option.kind == REPEAT else joined([str(v) for v in items])
    if isinstance(value, bool):
        return "true" if value else "false"
    if option.metavar == _BOOL or not isinstance(value, (str, int)):
        return value if isinstance(value, str) else None
    return str(value)


def _expected(option: Option) -> str:
    if option.kind == FLAG:
        return "expected true or false"
    if option.kind in (REPEAT, JOIN):
        return "expected a string or an array of strings"
    if option.metavar == _BOOL:
        return "expected true or false"
    return "expected a string"


def _type_name(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "an array", dict: "a table"}
    return next((n for t, n in names.items() if isinstance(value, t)), "a date or time")


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and len(value) <= _SHOWN:
        return f"{value!r} ({_type_name(value)})"
    return f"({_type_name(value)})"


def _hint(key: str, known: list[str]) -> str:
    spelled = key.replace("_", "-").lower()
    if spelled in known and spelled != key:
        return f" (did you mean {spelled}?)"
    return f"; known here: {', '.join(sorted(known))}"
