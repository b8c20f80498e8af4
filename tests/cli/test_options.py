"""
Tests for L{nfltr.cli.options}, the option model, and its tables
(L{nfltr.cli.agent_options}, L{nfltr.cli.relay_options}): one declaration
gives the same options to C{argparse} and to C{usage.Options}.
"""

from __future__ import annotations

import argparse
from typing import Any

from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.agent_options import AGENT_OPTIONS, CONNECT_OPTIONS, HTTP_OPTIONS, VERBOSE
from nfltr.cli.options import (
    FLAG,
    JOIN,
    REPEAT,
    Option,
    add_arguments,
    check_table,
    environment,
    option_values,
    parse_values,
)
from nfltr.cli.relay_options import RELAY_OPTIONS
from nfltr.cli.twistd import InterspersedOptions, TableOptions

TABLE = (
    Option("size", "N", "how big", "3", parse=lambda value, option: int(value)),
    Option("word", "W", "a word", env="TEST_WORD", secret_file="word-file"),
    Option("word-file", "FILE", "the word from FILE"),
    Option("tag", "T", "a tag; repeatable", kind=REPEAT),
    Option("loud", None, "say it loud", short="l", kind=FLAG),
    Option("host", "H[,H...]", "hosts; repeatable, joined", kind=JOIN),
)


class Table(InterspersedOptions):
    """
    L{TABLE} as C{usage.Options}, with positional arguments.
    """

    table = TABLE

    def parseArgs(self, *rest: str) -> None:
        self["rest"] = rest


def argparsed(argv: list[str]) -> dict[str, Any]:
    """
    L{TABLE}'s values from C{argv}, parsed by C{argparse}.
    """
    parser = argparse.ArgumentParser()
    parser.add_argument("rest", nargs="*")
    add_arguments(parser, TABLE)
    return option_values(parser.parse_args(argv), TABLE)


def twistdParsed(argv: list[str]) -> dict[str, Any]:
    """
    L{TABLE}'s values from C{argv}, parsed by C{usage.Options}.
    """
    options = Table()
    options.parseOptions(argv)
    return option_values(options, TABLE)


class BothParsersTests(SynchronousTestCase):
    """
    A table gives both parsers the same options and the same values.
    """

    def test_same(self) -> None:
        """
        Values, defaults, repeatable options (in order, empty when absent),
        joined ones (one text, commas between the values given, L{None}
        when absent) and flags come out of both parsers alike, options before or after
        the positional arguments.
        """
        argv = ["--size", "5", "--tag", "a", "x", "--tag", "b", "-l", "--word", "w",
                "--host", "h1,h2", "--host", "h3"]
        expected = {"size": "5", "word": "w", "word-file": None, "tag": ["a", "b"],
                    "loud": True, "host": "h1,h2,h3"}
        self.assertEqual(argparsed(argv), expected)
        self.assertEqual(twistdParsed(argv), expected)
        empty = {"size": "3", "word": None, "word-file": None, "tag": [], "loud": False,
                 "host": None}
        self.assertEqual(argparsed([]), empty)
        self.assertEqual(twistdParsed([]), empty)

    def test_help(self) -> None:
        """
        Both help texts hold every option with its help sentence.
        """
        text = str(Table())
        parser = argparse.ArgumentParser()
        add_arguments(parser, TABLE)
        for option in TABLE:
            self.assertIn(option.flag, text)
            self.assertIn(option.flag, parser.format_help())
            self.assertIn(option.help, " ".join(text.split()))

    def test_subclassKeepsTable(self) -> None:
        """
        A subclass that sets no table keeps its parent's options, once.
        """

        class Sub(Table):
            synopsis = "sub"

        self.assertEqual(twistdParsed(["--tag", "a"])["tag"], ["a"])
        options = Sub()
        options.parseOptions(["--tag", "a", "--size", "1"])
        self.assertEqual((options["tag"], options["size"]), (["a"], "1"))

    def test_parse(self) -> None:
        """
        L{parse_values} runs each option's parser over its value, given or
        default; options without one keep their text.
        """
        values = parse_values(twistdParsed(["--word", "w"]), TABLE)
        self.assertEqual((values["size"], values["word"]), (3, "w"))

    def test_environment(self) -> None:
        """
        The help names the variables a table's options read.
        """
        self.assertEqual(environment(TABLE), "environment: TEST_WORD (for --word)")
        self.assertIsNone(environment(TABLE[:1]))


class TableTests(SynchronousTestCase):
    """
    nfltr's own tables.
    """

    def test_checker(self) -> None:
        """
        L{check_table} finds a name or a short name given twice and a
        secret file option that is missing.
        """
        bad = (Option("a", None, "", short="x"), Option("a", None, "", short="x"),
               Option("b", None, "", secret_file="b-file"))
        self.assertEqual(check_table(bad), [
            "--a is declared twice", "-x is declared twice",
            "--b: its file option --b-file is missing",
        ])
        self.assertEqual(check_table(TABLE), [])

    def test_tables(self) -> None:
        """
        Every table is well formed, the agent's with the C{-v} their
        commands add.
        """
        self.assertEqual(check_table(RELAY_OPTIONS), [])
        for table in (AGENT_OPTIONS, HTTP_OPTIONS, CONNECT_OPTIONS):
            self.assertEqual(check_table((*table, VERBOSE)), [])

    def test_agentEnvironment(self) -> None:
        """
        The variables and secret files the tables name are those the
        agent's checkers read.
        """
        from nfltr.agent import KEY_ENV
        from nfltr.agent._secrets import BASIC_AUTH_ENV, BEARER_ENV
        from nfltr.agent._settings import PROXY_ENV

        def named(table: tuple[Option, ...]) -> dict[str, tuple[str | None, str | None]]:
            return {o.name: (o.env, o.secret_file) for o in table if o.env or o.secret_file}

        self.assertEqual(named(AGENT_OPTIONS), {
            "key": (KEY_ENV, "key-file"), "proxy": (PROXY_ENV[0], None),
        })
        self.assertEqual(named(HTTP_OPTIONS), {
            "key": (KEY_ENV, "key-file"), "proxy": (PROXY_ENV[0], None),
            "basic-auth": (BASIC_AUTH_ENV, "basic-auth-file"),
            "bearer": (BEARER_ENV, "bearer-file"),
            "require-header": (None, "require-header-file"),
        })

    def test_relayUsage(self) -> None:
        """
        The relay's table gives C{usage.Options} its options with their
        defaults: C{-d} for C{--data-dir}, C{--name} repeatable, the SSH
        switches as flags.
        """

        class Relay(TableOptions):
            table = RELAY_OPTIONS

        options = Relay()
        options.parseOptions(["-d", "/d", "--name", "a", "--name", "b", "--ssh-pq-only"])
        self.assertEqual((options["data-dir"], options["name"], options["ssh-pq-only"]),
                         ("/d", ["a", "b"], 1))
        self.assertEqual((options["tls"], options["log-level"]), ("tcp:8443", "info"))
        self.assertRaises(usage.UsageError, Relay().parseOptions, ["--bogus"])
