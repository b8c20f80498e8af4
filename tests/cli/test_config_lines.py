"""
Tests for L{nfltr.cli.config_lines}: the line of every table and key of a
TOML file, checked against files hypothesis writes (and C{tomllib} reads,
so they are TOML), with values made to look like keys and headers.
"""

from __future__ import annotations

import json
import tomllib

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.config_lines import TOP, locate

KEYS = st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)
# Text that looks like TOML: keys, headers, brackets and quotes.
TRICKY = st.text(alphabet="ab =[]{}#\"'\\\n.", max_size=20)


def _array(draw: st.DrawFn) -> str:
    items = draw(st.lists(TRICKY.map(json.dumps), max_size=4))
    if draw(st.booleans()):
        return "[\n" + "".join(f"  {item},\n" for item in items) + "]"
    return "[" + ", ".join(items) + "]"


def _multi(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.sampled_from(["a = 1", "[x]", "[[tcp]]", "b", ""]), max_size=4))
    return '"""\n' + "\n".join(lines) + '"""'


def _value(draw: st.DrawFn) -> str:
    """
    A TOML value, on one line or more.
    """
    makers = {
        "int": lambda: str(draw(st.integers(-10**6, 10**6))),
        "bool": lambda: draw(st.sampled_from(["true", "false"])),
        "basic": lambda: json.dumps(draw(TRICKY)),
        "literal": lambda: "'" + draw(st.text(alphabet="ab =[]{}#\"\\.", max_size=20)) + "'",
        "multi": lambda: _multi(draw),
        "array": lambda: _array(draw),
        "inline": lambda: f"{{ a = {json.dumps(draw(TRICKY))}, b = [1, 2] }}",
    }
    return makers[draw(st.sampled_from(sorted(makers)))]()


@st.composite
def files(draw: st.DrawFn) -> tuple[str, dict[tuple[str, int, str], int],
                                     dict[tuple[str, int], int]]:
    """
    A TOML file, the line of each key and of each table.
    """
    out: list[str] = []
    keys: dict[tuple[str, int, str], int] = {}
    tables: dict[tuple[str, int], int] = {}
    counts: dict[str, int] = {}

    def table_body(table: str, index: int) -> None:
        for key in draw(st.lists(KEYS, unique=True, max_size=5)):
            value = _value(draw)
            if draw(st.booleans()):
                out.append(draw(st.sampled_from(["", "# a = 1", "  # [[tcp]]"])))
            keys[(table, index, key)] = len(out) + 1
            quoted = f'"{key}"' if draw(st.booleans()) else key
            out.extend(f"{quoted} = {value}".split("\n"))

    table_body(TOP, 0)
    for name in draw(st.lists(st.sampled_from(["tcp", "http", "udp"]), max_size=5)):
        index = counts.get(name, -1) + 1
        counts[name] = index
        out.append("")
        tables[(name, index)] = len(out) + 1
        out.append(f"[[{name}]]")
        table_body(name, index)
    return "\n".join(out) + "\n", keys, tables


class LocateTests(SynchronousTestCase):
    """
    L{locate}.
    """

    @settings(max_examples=300, deadline=None)
    @given(files())
    def test_everyLine(self, case: tuple[str, dict[tuple[str, int, str], int],
                                         dict[tuple[str, int], int]]) -> None:
        """
        Every key and every table of a file is found at its line, whatever
        its values hold (multi-line strings and arrays included), and
        nothing else is taken for a key.
        """
        text, keys, tables = case
        tomllib.loads(text)  # it is TOML
        lines = locate(text)
        self.assertEqual(lines.keys, keys)
        self.assertEqual(lines.tables, tables)

    def test_notFound(self) -> None:
        """
        A key not in the file is placed at its table's header; a table not
        in the file at line 1.
        """
        lines = locate('relay = "x"\n\n[[tcp]]\nport = 22\n\n[[tcp]]\nport = 23\n')
        self.assertEqual(lines.key("tcp", 1, "port"), 7)
        self.assertEqual(lines.key("tcp", 1, "e2ee"), 6)
        self.assertEqual(lines.key("http", 0, "port"), 1)
        self.assertEqual(lines.key(TOP, 0, "relay"), 1)

    def test_quotedKeys(self) -> None:
        """
        A quoted key is found by its value, escapes and all.
        """
        lines = locate('"caf\u00e9" = 1\n"a\\"b" = 2\n\'c d\' = 3\n"é" = 4\n')
        self.assertEqual({k[2]: v for k, v in lines.keys.items()},
                         {"café": 1, 'a"b': 2, "c d": 3, "é": 4})

    def test_plainTableAndDotted(self) -> None:
        """
        A plain table is entry 0; a dotted key is found by its first part;
        a header may carry a comment.
        """
        lines = locate('[tcp]  # one\nport = 1\nx.y = 2\n')
        self.assertEqual(lines.table("tcp"), 1)
        self.assertEqual(lines.key("tcp", 0, "x"), 3)
