"""
Tests for C{nfltr login} (L{nfltr.cli.login}) and the saved login
(L{nfltr.cli.saved_login}); the command against a real relay runs in
L{tests.integration.test_config}.
"""

from __future__ import annotations

import argparse
import io
import stat
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import ConfigError
from nfltr.cli.config_file import ConfigFileError
from nfltr.cli.login import login
from nfltr.cli.saved_login import apply_login, login_text, saved_login, with_login, write_login

PIN = "sha256:" + "cd" * 32
SAVED = {"relay": "r.example:1", "relay-pin": PIN, "key": "saved"}


def args(relay: str | list[str] = "r.example:1", ca: str | None = None, pin: str | None = None,
         key_file: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(relay=relay, ca=ca, relay_pin=pin, key_file=key_file)


class ApplyTests(SynchronousTestCase):
    """
    L{apply_login}: what a command gives wins.
    """

    def test_fillsIn(self) -> None:
        """
        A command that gives nothing takes the whole login.
        """
        self.assertEqual(apply_login({"relay": None}, SAVED, {}),
                         {"relay": "r.example:1", "ca": None, "relay-pin": PIN, "key": "saved",
                          "key-file": None})

    def test_commandWins(self) -> None:
        """
        A command's trust, key or key file keeps the saved ones out; so
        does the environment's key.
        """
        merged = apply_login({"ca": "/ca.crt", "key-file": "/k"}, SAVED, {})
        self.assertEqual((merged["ca"], merged.get("relay-pin"), merged.get("key")),
                         ("/ca.crt", None, None))
        merged = apply_login({}, SAVED, {"NFLTR_KEY": "env"})
        self.assertEqual((merged["relay-pin"], merged.get("key")), (PIN, None))

    def test_otherRelay(self) -> None:
        """
        A command naming another relay takes nothing from the login.
        """
        self.assertEqual(apply_login({"relay": "other:2"}, SAVED, {}), {"relay": "other:2"})
        self.assertEqual(apply_login({"relay": "r.example:1"}, SAVED, {})["key"], "saved")

    def test_nothingSaved(self) -> None:
        """
        No login: the values as they are.
        """
        self.assertEqual(apply_login({"relay": None}, {}, {}), {"relay": None})


class FileTests(SynchronousTestCase):
    """
    The user's config file: written 0600, read back, other lines kept.
    """

    def test_roundTrip(self) -> None:
        """
        A login written is read back; the file is 0600, in a 0700
        directory made for it.
        """
        home = Path(self.mktemp()).absolute()
        env = {"XDG_CONFIG_HOME": str(home)}
        self.assertEqual(saved_login(env), {})
        path = home / "nfltr" / "nfltr.toml"
        write_login(path, SAVED)
        self.assertEqual(stat.S_IMODE(path.stat().st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(path.parent.stat().st_mode), 0o700)
        self.assertEqual(saved_login(env), SAVED)
        self.assertEqual(with_login({}, env)["key"], "saved")

    def test_keepsOtherLines(self) -> None:
        """
        A new login replaces the old one's keys, keeps the rest (entries,
        comments, the agent's name), and is TOML.
        """
        old = login_text("", SAVED) + 'name = "box"\n# mine\n\n[[tcp]]\nport = 22\n'
        new = login_text(old, {"relay": 'q"x:2', "ca": "/c"})
        data = tomllib.loads(new)
        self.assertEqual(data, {"relay": 'q"x:2', "ca": "/c", "name": "box",
                                "tcp": [{"port": 22}]})
        self.assertIn("# mine", new)
        self.assertEqual(new.count("# The relay and key saved by nfltr login."), 1)

    def test_readableKey(self) -> None:
        """
        A saved key in a file others may read is refused, by its line.
        """
        home = Path(self.mktemp()).absolute()
        path = home / "nfltr" / "nfltr.toml"
        write_login(path, SAVED)
        path.chmod(0o644)
        env = {"XDG_CONFIG_HOME": str(home)}
        error = self.assertRaises(ConfigFileError, saved_login, env)
        self.assertEqual([p.line for p in error.problems], [4])
        self.assertRaises(ConfigError, with_login, {}, env)


class LoginTests(SynchronousTestCase):
    """
    L{login}: what it asks, what it saves.
    """

    def setUp(self) -> None:
        self.home = Path(self.mktemp()).absolute()
        self.env = {"XDG_CONFIG_HOME": str(self.home)}
        self.path = self.home / "nfltr" / "nfltr.toml"
        self.stdout, self.stderr = io.StringIO(), io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)
        self.asked: list[str] = []
        self.checked: list[dict[str, str]] = []
        self.verdict: str | None = None
        self.fetched: list[tuple[str, int]] = []
        #: The fingerprint each host presents (L{PIN} if not here).
        self.fingerprints: dict[str, str] = {}

    def runLogin(self, a: argparse.Namespace, answer: str = "y\n", typed: str = "typed-key",
            env: dict[str, str] | None = None) -> int:
        def ask(question: str) -> str:
            self.asked.append(question)
            return answer

        def check(values: Mapping[str, str]) -> str | None:
            self.checked.append(dict(values))
            return self.verdict

        def fetch(host: str, port: int) -> str:
            self.fetched.append((host, port))
            return self.fingerprints.get(host, PIN)

        return login(a, {**self.env, **(env or {})}, ask, lambda prompt: typed, fetch, check)

    def test_confirmed(self) -> None:
        """
        Without --ca or --relay-pin the fingerprint is shown and, once
        confirmed, saved with the typed key.
        """
        self.assertEqual(self.runLogin(args()), 0)
        self.assertIn(PIN, self.stdout.getvalue())
        self.assertEqual(len(self.asked), 1)
        self.assertEqual(saved_login(self.env),
                         {"relay": "r.example:1", "relay-pin": PIN, "key": "typed-key"})

    def test_triedFirst(self) -> None:
        """
        The login is tried on the relay before it is saved; one the relay
        turns away is not saved, and the reason is shown.
        """
        self.verdict = "relay refused: invalid API key"
        self.assertEqual(self.runLogin(args()), 1)
        self.assertEqual(self.checked, [{"relay": "r.example:1", "relay-pin": PIN,
                                         "key": "typed-key"}])
        self.assertFalse(self.path.exists())
        self.assertIn("not saved: relay refused: invalid API key", self.stderr.getvalue())

    def test_severalRelays(self) -> None:
        """
        The replicas of one relay, given as one comma list or as several
        arguments: every address is saved (and tried in one check, as
        C{--relay} takes them); each presents the fingerprint confirmed
        once.  Replicas that present different certificates are not saved
        without a --ca.
        """
        for given in ("r0.example:1, r1.example:2", ["r0.example:1", "r1.example:2"]):
            self.asked.clear()
            self.fetched.clear()
            self.assertEqual(self.runLogin(args(relay=given)), 0)
            self.assertEqual(self.fetched, [("r0.example", 1), ("r1.example", 2)])
            self.assertEqual(len(self.asked), 1)
            self.assertEqual(saved_login(self.env)["relay"], "r0.example:1,r1.example:2")
            self.assertEqual(self.checked[-1]["relay"], "r0.example:1,r1.example:2")
        self.fingerprints["r1.example"] = "sha256:" + "ef" * 32
        self.assertEqual(self.runLogin(args(relay="r0.example:1,r1.example:3")), 1)
        self.assertIn("present different certificates", self.stderr.getvalue())
        self.assertEqual(saved_login(self.env)["relay"], "r0.example:1,r1.example:2")
        self.assertEqual(self.runLogin(args(relay="r0.example:1,r0.example:1"), typed="k"), 2)
        self.assertIn("given twice", self.stderr.getvalue())

    def test_refused(self) -> None:
        """
        Anything but yes saves nothing.
        """
        self.assertEqual(self.runLogin(args(), answer="\n"), 1)
        self.assertFalse(self.path.exists())
        self.assertIn("not saved", self.stderr.getvalue())

    def test_givenTrust(self) -> None:
        """
        --relay-pin (or --ca) is saved without a question; NFLTR_KEY is the
        key; --key-file is saved as its path.
        """
        self.assertEqual(self.runLogin(args(pin=PIN.upper().replace("SHA256:", "")),
                                  env={"NFLTR_KEY": "env-key"}), 0)
        self.assertEqual(self.asked, [])
        self.assertEqual(saved_login(self.env)["key"], "env-key")
        key = self.home / "key"
        key.write_text("k\n")
        key.chmod(0o600)
        ca = self.home / "ca.crt"
        ca.write_text("x")
        self.assertEqual(self.runLogin(args(ca=str(ca), key_file=str(key))), 0)
        self.assertEqual(saved_login(self.env), {"relay": "r.example:1", "ca": str(ca),
                                                 "key-file": str(key)})

    def test_usage(self) -> None:
        """
        A bad relay, both trusts, a bad pin, an open key file, no key:
        status 2, nothing saved.
        """
        key = self.home / "open-key"
        self.home.mkdir(parents=True)
        key.write_text("k\n")
        key.chmod(0o644)
        for a, typed, words in (
            (args(relay="nope"), "k", "expected HOST:PORT"),
            (args(ca="/c", pin=PIN), "k", "not both"),
            (args(pin="sha256:zz"), "k", "expected sha256"),
            (args(key_file=str(key)), "k", "chmod 600"),
            (args(pin=PIN), " ", "no key given"),
        ):
            self.assertEqual(self.runLogin(a, typed=typed), 2, words)
            self.assertIn(words, self.stderr.getvalue())
        self.assertFalse(self.path.exists())
