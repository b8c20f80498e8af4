"""
Tests for L{nfltr.cli}, the C{nfltr} command.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

import nfltr
from nfltr.cli import main

REPO = Path(__file__).resolve().parent.parent.parent


class MainTests(SynchronousTestCase):
    """
    Tests for L{main}, run in this process with standard output and error captured.
    """

    def setUp(self) -> None:
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.patch(sys, "stdout", self.stdout)
        self.patch(sys, "stderr", self.stderr)

    def test_versionOption(self) -> None:
        """
        C{nfltr --version} prints C{nfltr} and the package version to standard output and exits 0.
        """
        self.assertEqual(main(["--version"]), 0)
        self.assertEqual(self.stdout.getvalue(), f"nfltr {nfltr.__version__}\n")
        self.assertEqual(self.stderr.getvalue(), "")

    def test_versionCommand(self) -> None:
        """
        The C{version} subcommand prints the same line as C{--version} and exits 0.
        """
        self.assertEqual(main(["version"]), 0)
        self.assertEqual(self.stdout.getvalue(), f"nfltr {nfltr.__version__}\n")

    def test_unknownCommand(self) -> None:
        """
        An unknown subcommand exits 2 with argparse's usage message on standard error, naming
        the bad choice, and no traceback.
        """
        self.assertEqual(main(["no-such-command"]), 2)
        err = self.stderr.getvalue()
        self.assertTrue(err.startswith("usage: nfltr "), err)
        self.assertIn("invalid choice: 'no-such-command'", err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(self.stdout.getvalue(), "")

    def test_unknownOption(self) -> None:
        """
        An unknown option exits 2 with a usage message that names it.
        """
        self.assertEqual(main(["version", "--no-such-option"]), 2)
        err = self.stderr.getvalue()
        self.assertTrue(err.startswith("usage: nfltr "), err)
        self.assertIn("--no-such-option", err)

    def test_noCommand(self) -> None:
        """
        Without a subcommand the command exits 2 with a usage message: it never runs nothing
        silently.
        """
        self.assertEqual(main([]), 2)
        self.assertTrue(self.stderr.getvalue().startswith("usage: nfltr "))

    def test_help(self) -> None:
        """
        C{--help} exits 0 and lists every registered subcommand.
        """
        self.assertEqual(main(["--help"]), 0)
        self.assertIn("version", self.stdout.getvalue())


class ProcessTests(SynchronousTestCase):
    """
    Tests for the command run as a real process, as a user would.
    """

    def test_unknownCommandProcess(self) -> None:
        """
        C{python -m nfltr} with an unknown subcommand exits 2, prints the usage message to
        standard error and nothing on standard output, and no traceback.
        """
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        result = subprocess.run(
            [sys.executable, "-m", "nfltr", "no-such-command"],
            capture_output=True,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(result.stdout, "")
        self.assertTrue(result.stderr.startswith("usage: nfltr "), result.stderr)
        self.assertNotIn("Traceback", result.stderr)
