"""
Tests for L{nfltr.cli.config_file} and L{nfltr.cli.config_check}: a config
file becomes one agent's options; every problem of a broken one is named by
its line and key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.agent_options import AGENT_OPTIONS, HTTP_OPTIONS, RELAY_OPTIONS
from nfltr.cli.config_check import check_config, merge_fields
from nfltr.cli.config_file import (
    CONFIG_NAME,
    ENTRY_OPTIONS,
    HTTP,
    TCP,
    TOP_OPTIONS,
    ConfigFileError,
    Entry,
    Problem,
    default_config,
    user_config_dir,
)

PIN = "sha256:" + "ab" * 32
HEAD = f'relay = "relay.example:8443"\nrelay-pin = "{PIN}"\nkey-file = "key"\n'


class Files:
    """
    Config files (and the key file they name) in a directory of their own.
    """

    def __init__(self, case: SynchronousTestCase) -> None:
        self.dir = Path(case.mktemp()).absolute()
        self.dir.mkdir()
        key = self.dir / "key"
        key.write_text("the-key\n")
        key.chmod(0o600)

    def write(self, text: str, mode: int = 0o600) -> Path:
        path = self.dir / CONFIG_NAME
        path.write_text(text)
        path.chmod(mode)
        return path


def problems(case: SynchronousTestCase, text: str, mode: int = 0o600) -> list[Problem]:
    """
    The problems of the config file C{text}.
    """
    path = Files(case).write(text, mode)
    error = case.assertRaises(ConfigFileError, check_config, path, {})
    return error.problems


class KeysTests(SynchronousTestCase):
    """
    The keys a file accepts come from the commands' option tables.
    """

    def test_fromTables(self) -> None:
        """
        The top level takes the relay options and the agent's name and
        state directory; [[tcp]] every other option of C{nfltr tcp};
        [[http]] every option of C{nfltr http} but the relay's and the
        state directory, so an option added to a table is a key.
        """
        self.assertEqual({o.name for o in TOP_OPTIONS},
                         {o.name for o in RELAY_OPTIONS}
                         | {"name", "state-dir", "group", "health-check"})
        self.assertEqual(set(ENTRY_OPTIONS[TCP]),
                         set(AGENT_OPTIONS) - set(TOP_OPTIONS))
        self.assertEqual({o.name for o in ENTRY_OPTIONS[HTTP]},
                         {o.name for o in HTTP_OPTIONS} - {o.name for o in RELAY_OPTIONS}
                         - {"state-dir", "group", "health-check"})

    def test_defaultFile(self) -> None:
        """
        C{nfltr up} reads ./nfltr.toml, else the user's.
        """
        here = Path(self.mktemp())
        here.mkdir()
        env = {"XDG_CONFIG_HOME": "/cfg"}
        self.assertEqual(default_config(here, env), Path("/cfg/nfltr/nfltr.toml"))
        (here / CONFIG_NAME).write_text("")
        self.assertEqual(default_config(here, env), here / CONFIG_NAME)
        self.assertEqual(user_config_dir({"HOME": "/h"}), Path("/h/.config/nfltr"))


class GoodFileTests(SynchronousTestCase):
    """
    A file that is fine.
    """

    def test_oneAgent(self) -> None:
        """
        TCP and HTTP entries become one agent's ports and share URLs, each
        share with its options and name; paths are relative to the file.
        """
        files = Files(self)
        path = files.write(HEAD + 'name = "box"\nstate-dir = "state"\n\n'
                           "[[tcp]]\nport = 22\n\n[[tcp]]\nport = 5432\ne2ee = true\n\n"
                           '[[http]]\nname = "blog"\nport = 3000\nmode = "inspect"\n'
                           'allow-ip = ["10.0.0.0/8"]\nhost-header = "preserve"\n\n'
                           "[[http]]\nport = 8000\n")
        config = check_config(path, {})
        options = config.options
        self.assertEqual(options.ports, (22, 5432))
        self.assertEqual(options.name, "box")
        self.assertEqual(options.state_dir, files.dir / "state")
        self.assertEqual(options.relay.address, "relay.example:8443")
        self.assertEqual(options.relay.key, "the-key")
        blog, other = options.http
        self.assertEqual((blog.name, blog.port, blog.mode, blog.host_header),
                         ("blog", 3000, "inspect", "preserve"))
        self.assertEqual((other.name, other.port, other.mode), (None, 8000, "e2ee"))
        self.assertEqual([e.kind for e in config.entries], ["tcp", "tcp", "http", "http"])

    def test_severalRelays(self) -> None:
        """
        The relay key takes an array of addresses (replicas of one relay), or
        one string of them separated by commas.
        """
        files = Files(self)
        tail = f'relay-pin = "{PIN}"\nkey-file = "key"\n\n[[tcp]]\nport = 22\n'
        for relay in ('["a.example:1", "b.example:2"]', '"a.example:1,b.example:2"'):
            path = files.write(f"relay = {relay}\n" + tail)
            relays = check_config(path, {}).options.relay
            self.assertEqual(relays.address, "a.example:1,b.example:2")
            self.assertEqual(relays.others, (("b.example", 2),))

    def test_mixedE2ee(self) -> None:
        """
        Each [[tcp]] entry sets e2ee for its own port.
        """
        path = Files(self).write(HEAD + "[[tcp]]\nport = 1\n[[tcp]]\nport = 2\ne2ee = false\n")
        options = check_config(path, {}).options
        self.assertEqual((options.e2ee, options.plain), (True, frozenset({2})))
        self.assertEqual([(s.port, s.e2ee) for s in options.tcp_shares()], [(1, True), (2, False)])
        path.write_text(HEAD + "[[tcp]]\nport = 1\ne2ee = false\n")
        options = check_config(path, {}).options
        self.assertEqual((options.e2ee, options.plain), (False, frozenset()))

    def test_publicPortPaired(self) -> None:
        """
        An entry's public port goes with its own port, whatever the order
        of the entries (the agent pairs ports and public ports in order).
        """
        path = Files(self).write(HEAD + "[[tcp]]\nport = 22\n[[tcp]]\nport = 5432\n"
                                 "public-port = 20001\n")
        options = check_config(path, {}).options
        self.assertEqual([(s.port, s.public_port) for s in options.tcp_shares()],
                         [(5432, 20001), (22, None)])

    def test_udpEntries(self) -> None:
        """
        The [[udp]] entries' ports are the agent's UDP ports, beside its TCP
        ports; a file of [[udp]] entries alone is an agent too.
        """
        path = Files(self).write(HEAD + "[[tcp]]\nport = 53\n[[udp]]\nport = 53\n"
                                 "[[udp]]\nport = 5353\n")
        options = check_config(path, {}).options
        self.assertEqual((options.ports, options.udp), ((53,), (53, 5353)))
        path = Files(self).write(HEAD + "[[udp]]\nport = 53\n")
        options = check_config(path, {}).options
        self.assertEqual((options.ports, options.udp), ((), (53,)))

    def test_udpPublicPort(self) -> None:
        """
        A [[udp]] entry's public port goes with its own port, whatever the
        order of the entries, with its allow list.
        """
        path = Files(self).write(HEAD + "[[udp]]\nport = 53\n[[udp]]\nport = 123\n"
                                 'public-port = 20123\nallow-ip = ["192.0.2.0/24"]\n')
        shares = check_config(path, {}).options.udp_shares()
        self.assertEqual([(s.port, s.public_port, [str(n) for n in s.allow]) for s in shares],
                         [(123, 20123, ["192.0.2.0/24"]), (53, None, [])])

    def test_savedLogin(self) -> None:
        """
        What the file leaves out of the relay options comes from the saved
        login; the environment's key wins over the saved one.
        """
        path = Files(self).write("[[tcp]]\nport = 22\n")
        saved = {"relay": "saved.example:1", "relay-pin": PIN, "key": "saved-key"}
        self.assertEqual(check_config(path, {}, saved).options.relay.key, "saved-key")
        relay = check_config(path, {"NFLTR_KEY": "env-key"}, saved).options.relay
        self.assertEqual((relay.address, relay.key), ("saved.example:1", "env-key"))

    def test_inlineKeyPrivateFile(self) -> None:
        """
        A key written in the file is taken when only its owner may read it.
        """
        path = Files(self).write(f'relay-pin = "{PIN}"\nkey = "k"\n[[tcp]]\nport = 1\n')
        self.assertEqual(check_config(path, {}).options.relay.key, "k")


@dataclass(frozen=True)
class Part:
    """
    Options as a command might check them: a list per port, one value for all.
    """

    ports: tuple[int, ...]
    level: int
    kept: str = "x"


class MergeTests(SynchronousTestCase):
    """
    L{merge_fields}: several entries' options as one agent's.
    """

    def entry(self, index: int, level_line: int) -> Entry:
        return Entry(TCP, index, {}, 10 * index, {"level": level_line})

    def test_joinedAndEqual(self) -> None:
        """
        Tuples are joined in order; other fields that agree are no
        problem; skipped fields are left out.
        """
        found: list[Problem] = []
        parts = [(self.entry(0, 1), Part((1,), 5)), (self.entry(1, 2), Part((2, 3), 5))]
        self.assertEqual(merge_fields(parts, {"kept"}, found), {"ports": (1, 2, 3)})
        self.assertEqual(found, [])

    def test_differ(self) -> None:
        """
        A value for all ports that differs between entries is a problem at
        the first entry that differs, at its key's line.
        """
        found: list[Problem] = []
        parts = [(self.entry(i, 40 + i), Part((i,), level))
                 for i, level in enumerate([5, 5, 6, 7])]
        merge_fields(parts, (), found)
        self.assertEqual([(p.line, p.key) for p in found], [(42, "level")])
        self.assertIn("[[tcp]] 3: level: every [[tcp]] entry must give the same",
                      found[0].message)


class BrokenFileTests(SynchronousTestCase):
    """
    Each broken file: every problem at its line, naming its key.
    """

    def assertProblems(self, text: str, expected: list[tuple[int, str | None, str]],
                       mode: int = 0o600) -> None:
        found = problems(self, text, mode)
        self.assertEqual([(p.line, p.key) for p in found], [(e[0], e[1]) for e in expected],
                         [p.message for p in found])
        for problem, (_, _, words) in zip(found, expected, strict=True):
            self.assertIn(words, problem.message)

    def test_publicAllowDiffers(self) -> None:
        """
        Entries with public ports that allow different networks: one agent
        has one allow list for its public ports, so the second is named.
        """
        self.assertProblems(
            HEAD + '[[tcp]]\nport = 1\npublic-port = 20001\nallow-ip = ["10.0.0.0/8"]\n'
            '[[tcp]]\nport = 2\npublic-port = 20002\nallow-ip = ["192.0.2.0/24"]\n',
            [(11, "allow-ip", "must give the same")])

    def test_notToml(self) -> None:
        """
        A syntax error is placed by tomllib.
        """
        self.assertProblems(HEAD + "[[tcp]]\nport = = 2\n", [(5, None, "not TOML")])

    def test_unknownKeys(self) -> None:
        """
        An unknown key, at the top or in an entry, names the keys known
        there; a misspelling gets a hint.
        """
        self.assertProblems(HEAD + 'colour = "x"\n[[http]]\nport = 1\nhost_header = "x"\n',
                            [(4, "colour", "known here: ca,"),
                             (7, "host_header", "did you mean host-header?")])

    def test_unknownTable(self) -> None:
        """
        An unknown table is named at its header.
        """
        self.assertProblems(HEAD + "[[tcp]]\nport = 1\n\n[extra]\na = 1\n",
                            [(7, "extra", "unknown key 'extra'")])

    def test_badTypes(self) -> None:
        """
        A value of the wrong type: a number for a string, a string for a
        port, a float for a boolean, a float in a list (a whole number is
        read as the command line would spell it, and checked as such).
        """
        self.assertProblems(
            HEAD + "state-dir = 5.5\n[[tcp]]\nport = \"22\"\ne2ee = 3\n"
            "[[http]]\nport = 80\nallow-ip = [1.5]\n",
            [(4, "state-dir", "expected a string, not a number"),
             (6, "port", "port '22' (a string)"),
             (7, "e2ee", "expected true or false"),
             (10, "allow-ip", "an array of strings")],
        )

    def test_badPorts(self) -> None:
        """
        Ports out of range, missing, or given twice.
        """
        self.assertProblems(
            HEAD + "[[tcp]]\nport = 0\n[[tcp]]\nport = 65536\n[[tcp]]\ne2ee = true\n"
            "[[tcp]]\nport = 22\n[[tcp]]\nport = 22\n",
            [(5, "port", "port 0"), (7, "port", "port 65536"),
             (8, "port", "give the port"), (13, "port", "given twice")],
        )

    def test_duplicateNames(self) -> None:
        """
        Two shares of one name; two unnamed (both the agent's name).
        """
        self.assertProblems(
            HEAD + '[[http]]\nname = "a"\nport = 1\n[[http]]\nname = "a"\nport = 2\n'
            "[[http]]\nport = 3\n[[http]]\nport = 4\n",
            [(8, "name", "share name a is given twice"),
             (12, "name", "given twice")],
        )

    def test_inlineSecretReadable(self) -> None:
        """
        A key, or a share's credentials, written in a file others may read.
        """
        self.assertProblems(
            f'relay-pin = "{PIN}"\nkey = "k"\n[[http]]\nport = 1\nbearer = "t"\n',
            [(2, "key", "mode 0644"), (5, "bearer", "give bearer-file instead")],
            mode=0o644,
        )

    def test_badValues(self) -> None:
        """
        The commands' own checks, named by the file's keys: a mode, a
        host header, an allow list, a share name, a relay address.
        """
        self.assertProblems(
            HEAD.replace("8443", "99999") + '[[http]]\nport = 1\nmode = "weird"\n'
            '[[http]]\nname = "Bad_Name"\nport = 2\nallow-ip = "10.0.0.300/8"\n'
            '[[http]]\nname = "c"\nport = 3\nmode = "passthrough"\nhost-header = "x"\n',
            [(1, "relay", "relay 'relay.example:99999'"),
             (6, "mode", "mode 'weird'"),
             (8, "name", "invalid agent name"),
             (10, "allow-ip", "10.0.0.300/8"),
             (15, "host-header", "host-header: a passthrough share")],
        )

    def test_udp(self) -> None:
        """
        [[udp]] entries give a port alone, each once (the same number as a
        TCP port is another port); another key is unknown.
        """
        self.assertProblems(
            HEAD + "[[tcp]]\nport = 53\n[[udp]]\nport = 53\n[[udp]]\nport = 53\n"
            "[[udp]]\nport = 54\ne2ee = false\n",
            [(9, "port", "UDP port 53 is given twice"), (12, "e2ee", "unknown key")],
        )

    def test_udpPublicAllowDiffers(self) -> None:
        """
        A [[udp]] entry with a public port whose allow list differs from a
        [[tcp]] entry's with a public port is named: one agent, one list.
        """
        self.assertProblems(
            HEAD + '[[tcp]]\nport = 1\npublic-port = 20001\nallow-ip = ["10.0.0.0/8"]\n'
            '[[udp]]\nport = 53\npublic-port = 20053\nallow-ip = ["192.0.2.0/24"]\n',
            [(11, "allow-ip", "every entry with a public-port must give the same")],
        )

    def test_singleTable(self) -> None:
        """
        [tcp] for [[tcp]].
        """
        self.assertProblems(HEAD + "[tcp]\nport = 1\n", [
            (1, None, "no entries"), (4, "tcp", "write [[tcp]] tables")
        ])

    def test_noTrustNoKey(self) -> None:
        """
        No relay trust and no key, with no saved login.
        """
        found = problems(self, "[[tcp]]\nport = 1\n")
        self.assertEqual([p.line for p in found], [1])
        self.assertIn("API key is required", found[0].message)

    def test_keyFileOpen(self) -> None:
        """
        A key file others may read is named at its key.
        """
        files = Files(self)
        (files.dir / "key").chmod(0o644)
        path = files.write(HEAD + "[[tcp]]\nport = 1\n")
        error = self.assertRaises(ConfigFileError, check_config, path, {})
        self.assertEqual([(p.line, p.key) for p in error.problems], [(3, "key-file")])
        self.assertIn("chmod 600", error.problems[0].message)

    def test_idleExpiry(self) -> None:
        """
        An entry cannot end the whole agent.
        """
        self.assertProblems(HEAD + '[[http]]\nport = 1\nidle-expiry = "1h"\n',
                            [(6, "idle-expiry", "not for an entry")])

    def test_lines(self) -> None:
        """
        The messages as printed: FILE:LINE: message.
        """
        path = Files(self).write(HEAD + "[[tcp]]\nport = 0\n")
        error = self.assertRaises(ConfigFileError, check_config, path, {})
        self.assertEqual(error.lines(),
                         [f"{path}:5: [[tcp]] 1: port 0: expected a number in 1..65535"])
        self.assertEqual(os.path.basename(str(error.path)), CONFIG_NAME)


# One mistake put in one entry of a good file: kind | key | value | words of the message.
MISTAKES = [tuple(part.strip() for part in line.split("|")) for line in """
tcp | bogus-key | 1 | unknown key 'bogus-key'
tcp | port | 0 | port 0
tcp | port | 70000 | port 70000
tcp | port | "22" | port '22'
tcp | e2ee | 1.5 | expected true or false
tcp | e2ee | "maybe" | e2ee 'maybe'
http | mode | 5.5 | mode: expected a string, not a number
http | mode | "weird" | mode 'weird'
http | name | "Bad_Name" | invalid agent name
http | allow-ip | ["x"] | 'x'
http | host_header | "x" | did you mean host-header?
http | idle-expiry | "1h" | not for an entry
http | port | -1 | port -1
""".strip().splitlines()]


@st.composite
def broken_files(draw: st.DrawFn) -> tuple[str, int, str, str]:
    """
    A file of good entries with one mistake: its text, the mistake's line,
    its key, and words of its message.
    """
    kind, key, value, words = draw(st.sampled_from(MISTAKES))
    count = draw(st.integers(1, 5))
    kinds = [draw(st.sampled_from(["tcp", "http"])) for _ in range(count)]
    target = draw(st.sampled_from([i for i, k in enumerate(kinds)] or [0]))
    kinds[target] = kind
    lines = HEAD.splitlines()
    where = 0
    for index, entry in enumerate(kinds):
        lines += draw(st.sampled_from([[""], [], ["# a comment", ""]]))
        lines.append(f"[[{entry}]]")
        body = [("port", str(1000 + index))]
        if entry == "http":
            body.append(("name", f'"site-{index}"'))
        body += draw(st.sampled_from([[], [("e2ee", "true")] if entry == "tcp"
                                      else [("mode", '"inspect"')]]))
        if index == target:
            body = [(k, v) for k, v in body if k != key]
            body.insert(draw(st.integers(0, len(body))), (key, value))
        for k, v in body:
            if index == target and k == key:
                where = len(lines) + 1
            lines.append(f"{k} = {v}")
    return "\n".join(lines) + "\n", where, key, words


class PropertyTests(SynchronousTestCase):
    """
    Whatever the file around it, a mistake is named at its line and key.
    """

    @settings(max_examples=150, deadline=None)
    @given(broken_files())
    def test_mistakeLine(self, case: tuple[str, int, str, str]) -> None:
        """
        The one problem found is the mistake, at its line, naming its key.
        """
        text, line, key, words = case
        [problem] = problems(self, text)
        self.assertEqual((problem.line, problem.key), (line, key), text)
        self.assertIn(words, problem.message)
