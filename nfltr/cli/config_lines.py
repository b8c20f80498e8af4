# -*- test-case-name: tests.cli.test_config_lines -*-
"""
Where things are in a TOML file: C{tomllib} gives line numbers for syntax
errors only, so the messages of C{nfltr check} and C{nfltr up} find the line
of a table or a key with a small scan of the file's lines (L{locate}).

The scan knows what a config file holds: tables (C{[name]}), arrays of
tables (C{[[name]]}), and C{key = value} lines (bare or quoted keys; a
dotted key is found by its first part).  It skips the inside of multi-line
strings and of arrays and inline tables that span lines, so a line there
that looks like C{key = value} is not taken for one.  What it cannot place
is placed at its table's header (or line 1).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

#: The top level of a file: no header.
TOP = ""

_HEADER = re.compile(r"\s*(\[\[?)\s*([^\[\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*[=.]""")


@dataclass
class Lines:
    """
    The line (from 1) of each table and key of a file.

    @ivar tables: C{(table, index)} to the line of its header; an array of
        tables counts its entries from 0, a plain table is entry 0.
    @ivar keys: C{(table, index, key)} to the line of its first
        C{key = value}.
    """

    tables: dict[tuple[str, int], int] = field(default_factory=dict)
    keys: dict[tuple[str, int, str], int] = field(default_factory=dict)

    def table(self, table: str, index: int = 0) -> int:
        """
        The line of the table's header (1 for the top level, or a table not found).
        """
        return self.tables.get((table, index), 1)

    def key(self, table: str, index: int, key: str) -> int:
        """
        The line of C{key} in the table, or the table's if not found.
        """
        return self.keys.get((table, index, key), self.table(table, index))


def _unquote(key: str) -> str:
    if key[:1] == '"':
        try:  # TOML's basic strings escape as JSON's do (and \e, \xHH more)
            return str(json.loads(key))
        except ValueError:
            return key[1:-1]
    if key[:1] == "'":
        return key[1:-1]
    return key


def _depth(text: str) -> int:
    """
    How many arrays and inline tables C{text} (part of a line) leaves open,
    its strings and its comment not counted.
    """
    depth, i = 0, 0
    while i < len(text):
        c = text[i]
        if c == "#":
            break
        if c in "\"'":
            i = _string_end(text, i)
            continue
        depth += (c in "[{") - (c in "]}")
        i += 1
    return depth


def _string_end(text: str, start: int) -> int:
    """
    Where the one-line string that starts at C{start} ends (after it).
    """
    quote, i = text[start], start + 1
    while i < len(text):
        if quote == '"' and text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return i


def locate(text: str) -> Lines:
    """
    Scan C{text}, a TOML file, for its tables and keys.
    """
    lines = Lines()
    table, index = TOP, 0
    counts: dict[str, int] = {}
    closing: str | None = None  # the quotes that end a multi-line string
    depth = 0  # arrays or inline tables open across lines
    for number, line in enumerate(text.splitlines(), 1):
        if closing is not None:
            if closing in line:
                closing = None
            continue
        if depth > 0:
            depth = max(0, depth + _depth(line))
            continue
        header = _HEADER.match(line)
        if header is not None:
            table = header.group(2).strip()
            table = ".".join(_unquote(part.strip()) for part in table.split("."))
            if header.group(1) == "[[":
                index = counts.get(table, -1) + 1
                counts[table] = index
            else:
                index = 0
            lines.tables.setdefault((table, index), number)
            continue
        key = _KEY.match(line)
        if key is None:
            continue
        lines.keys.setdefault((table, index, _unquote(key.group(1))), number)
        value = line[key.end():].lstrip()
        quotes = value[:3]
        if quotes in ('"""', "'''"):
            if quotes not in value[3:]:
                closing = quotes
        else:
            depth = max(0, _depth(value))
    return lines
