"""
Tests for C{nfltr check FILE} and C{nfltr up}'s choice of file
(L{nfltr.cli.up}); C{nfltr up} itself runs in
L{tests.integration.test_config}.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli import main
from nfltr.cli.up import config_path

PIN = "sha256:" + "ab" * 32


def isolate(case: SynchronousTestCase) -> Path:
    """
    Give the test a config directory of its own and no key in the
    environment; the directory.
    """
    home = Path(case.mktemp()).absolute()
    home.mkdir()
    for name, value in (("XDG_CONFIG_HOME", str(home)), ("NFLTR_KEY", None)):
        saved = os.environ.get(name)
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
        case.addCleanup(_restore, name, saved)
    return home


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


class CheckTests(SynchronousTestCase):
    """
    C{nfltr check FILE}.
    """

    def setUp(self) -> None:
        self.home = isolate(self)
        self.stdout, self.stderr = io.StringIO(), io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)
        self.path = self.home / "f.toml"

    def test_fine(self) -> None:
        """
        A good file: status 0 and a line saying what it serves.
        """
        self.path.write_text(f'relay-pin = "{PIN}"\nkey = "k"\n[[tcp]]\nport = 22\n')
        self.path.chmod(0o600)
        self.assertEqual(main(["check", str(self.path)]), 0)
        self.assertEqual(self.stdout.getvalue(),
                         f"{self.path}: fine: 1 [[tcp]] and 0 [[http]] entries, "
                         "relay localhost:8443\n")

    def test_broken(self) -> None:
        """
        A broken file: status 1 and a line per problem, FILE:LINE first.
        """
        self.path.write_text(f'relay-pin = "{PIN}"\nkey = "k"\nx = 1\n[[tcp]]\nport = 0\n')
        self.path.chmod(0o600)
        self.assertEqual(main(["check", str(self.path)]), 1)
        self.assertEqual([line.split(": ", 1)[0] for line in
                          self.stderr.getvalue().splitlines()],
                         [f"{self.path}:3", f"{self.path}:5"])

    def test_missing(self) -> None:
        """
        A file that is not there.
        """
        self.assertEqual(main(["check", str(self.path)]), 1)
        self.assertIn(f"{self.path}:1: cannot be read", self.stderr.getvalue())


class DefaultFileTests(SynchronousTestCase):
    """
    The file C{nfltr up} reads without an argument.
    """

    def test_none(self) -> None:
        """
        No file here nor in the user's config directory: one line naming
        both, status 2.
        """
        home = isolate(self)
        here = Path(self.mktemp()).absolute()
        here.mkdir()
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(here)
        stderr = io.StringIO()
        self.patch(sys, "stderr", stderr)
        self.assertEqual(main(["up"]), 2)
        self.assertEqual(stderr.getvalue(),
                         "nfltr up: no config file: none in the working directory (nfltr.toml), "
                         f"none at {home / 'nfltr' / 'nfltr.toml'}; give FILE (see "
                         "docs/config.md)\n")

    def test_default(self) -> None:
        """
        ./nfltr.toml when there is one, else the user's.
        """
        home = isolate(self)
        here = Path(self.mktemp()).absolute()
        here.mkdir()
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(here)
        self.assertEqual(config_path(None), home / "nfltr" / "nfltr.toml")
        (here / "nfltr.toml").write_text("")
        self.assertEqual(config_path(None), here / "nfltr.toml")
        self.assertEqual(config_path("other.toml"), Path("other.toml"))
