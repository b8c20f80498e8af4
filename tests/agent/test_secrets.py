"""
Tests for L{nfltr.agent._secrets}: secrets (the API key, a share's
credentials) from the command line, a file only its owner may read, or the
environment; and their use by L{nfltr.agent.http_option} and
L{nfltr.agent.relay_settings}.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import ConfigError, http_option, relay_settings
from nfltr.agent._secrets import MAX_SECRET_FILE, read_secret_file, secret, secret_lines
from nfltr.wire.policy import policy_from_options

PIN = "sha256:" + "ab" * 32
TOKEN = "tok-never-echoed"


class SecretFileTests(SynchronousTestCase):
    """
    L{read_secret_file} reads a regular file only its owner may read or
    change, and never echoes what it holds.
    """

    def write(self, text: str | bytes, mode: int = 0o600) -> Path:
        path = Path(self.mktemp())
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        path.chmod(mode)
        return path

    def test_read(self) -> None:
        """
        The text of a 0600 (or 0400) file, its line end dropped.
        """
        self.assertEqual(read_secret_file(str(self.write(TOKEN + "\n")), "--bearer-file"),
                         TOKEN)
        self.assertEqual(read_secret_file(str(self.write(TOKEN + "\r\n", 0o400)), "--x"), TOKEN)

    def test_othersMayRead(self) -> None:
        """
        A file others than its owner may read or change is refused, with
        its mode and how to fix it, before anything is read.
        """
        for mode in (0o640, 0o604, 0o620):
            path = self.write(TOKEN, mode)
            e = self.assertRaises(ConfigError, read_secret_file, str(path), "--bearer-file")
            self.assertIn(f"--bearer-file {path}", str(e))
            self.assertIn(f"mode {mode:04o}", str(e))
            self.assertIn(f"chmod 600 {path}", str(e))
            self.assertNotIn(TOKEN, str(e))

    def test_unusable(self) -> None:
        """
        A missing file, a FIFO (not waited on), a device, an empty file, one
        over L{MAX_SECRET_FILE} bytes and one not in UTF-8 are refused, each
        with its reason.
        """
        fifo = Path(self.mktemp())
        os.mkfifo(fifo, 0o600)
        for path, words in (
            (Path(self.mktemp()), "cannot be read"),
            (fifo, "not a regular file"),
            (Path("/dev/zero"), "not a regular file"),
            (self.write(""), "is empty"),
            (self.write("\n"), "is empty"),
            (self.write("x" * (MAX_SECRET_FILE + 1)), f"over {MAX_SECRET_FILE} bytes"),
            (self.write(b"\xff\xfe"), "not UTF-8"),
        ):
            e = self.assertRaises(ConfigError, read_secret_file, str(path), "--bearer-file")
            self.assertIn(words, str(e))
            self.assertIn(f"--bearer-file {path}", str(e))


class SecretTests(SynchronousTestCase):
    """
    L{secret}: the command line, else the file, else the environment.
    """

    def write(self, text: str, mode: int = 0o600) -> str:
        path = Path(self.mktemp())
        path.write_text(text)
        path.chmod(mode)
        return str(path)

    def test_sources(self) -> None:
        """
        C{--bearer} wins over C{NFLTR_BEARER}; C{--bearer-file} too; with
        none, L{None}.
        """
        env = {"NFLTR_BEARER": "from-env"}
        self.assertEqual(secret({"bearer": "cli"}, env, "bearer", "NFLTR_BEARER"), "cli")
        path = self.write("from-file\n")
        self.assertEqual(secret({"bearer-file": path}, env, "bearer", "NFLTR_BEARER"),
                         "from-file")
        self.assertEqual(secret({}, env, "bearer", "NFLTR_BEARER"), "from-env")
        self.assertIsNone(secret({}, {}, "bearer", "NFLTR_BEARER"))

    def test_conflicts(self) -> None:
        """
        C{--bearer} with C{--bearer-file} is refused; a file of two lines
        for a one-line secret, and an empty variable, too.
        """
        both = {"bearer": "a", "bearer-file": self.write("b")}
        e = self.assertRaises(ConfigError, secret, both, {}, "bearer", "NFLTR_BEARER")
        self.assertIn("--bearer or --bearer-file, not both", str(e))
        two = {"bearer-file": self.write("a\nb\n")}
        e = self.assertRaises(ConfigError, secret, two, {}, "bearer", "NFLTR_BEARER")
        self.assertIn("one line", str(e))
        e = self.assertRaises(ConfigError, secret, {}, {"NFLTR_BEARER": ""}, "bearer",
                              "NFLTR_BEARER")
        self.assertIn("NFLTR_BEARER is set but empty", str(e))

    def test_lines(self) -> None:
        """
        L{secret_lines}: the file's non-blank lines, each with where it was.
        """
        path = self.write("X-A: 1\n\nX-B: 2\n")
        self.assertEqual(secret_lines({"require-header-file": path}, "require-header"), [
            ("X-A: 1", f"line 1 of --require-header-file {path}"),
            ("X-B: 2", f"line 3 of --require-header-file {path}"),
        ])
        self.assertEqual(secret_lines({}, "require-header"), [])


class PolicySourceTests(SynchronousTestCase):
    """
    L{http_option} reads a share's credentials from files and the
    environment as from the command line.
    """

    def write(self, text: str, mode: int = 0o600) -> str:
        path = Path(self.mktemp())
        path.write_text(text)
        path.chmod(mode)
        return str(path)

    def policy(self, values: dict[str, Any], environ: dict[str, str] | None = None) -> Any:
        return http_option(3000, {"mode": "inspect", **values}, environ or {}).policy

    def test_sameAsCommandLine(self) -> None:
        """
        C{--basic-auth-file}, C{--bearer-file} and C{--require-header-file},
        or C{NFLTR_BASIC_AUTH} and C{NFLTR_BEARER}, give the policy the
        command-line options give.
        """
        expected = policy_from_options("u:p", TOKEN, ["X-A:1", "X-B:2"], [])
        files = {"basic-auth-file": self.write("u:p\n"), "bearer-file": self.write(TOKEN),
                 "require-header-file": self.write("X-A:1\nX-B:2\n")}
        self.assertEqual(self.policy(files), expected)
        environ = {"NFLTR_BASIC_AUTH": "u:p", "NFLTR_BEARER": TOKEN}
        mixed = {"require-header": ["X-A:1"], "require-header-file": self.write("X-B:2\n")}
        self.assertEqual(self.policy(mixed, environ), expected)

    def test_badContentNamesItsSource(self) -> None:
        """
        A bad credential in a file or a variable is named by where it came
        from (the file and line), never echoed.
        """
        path = self.write(f"X-A:1\nno colon {TOKEN}\n")
        e = self.assertRaises(ConfigError, self.policy, {"require-header-file": path})
        self.assertIn(f"line 2 of --require-header-file {path}", str(e))
        self.assertIn("NAME:VALUE", str(e))
        self.assertNotIn(TOKEN, str(e))
        e = self.assertRaises(ConfigError, self.policy, {}, {"NFLTR_BASIC_AUTH": TOKEN})
        self.assertIn("NFLTR_BASIC_AUTH", str(e))
        self.assertIn("USER:PASSWORD", str(e))
        self.assertNotIn(TOKEN, str(e))

    def test_readableFileRefused(self) -> None:
        """
        A credentials file others may read is refused.
        """
        path = self.write(TOKEN, 0o644)
        e = self.assertRaises(ConfigError, self.policy, {"bearer-file": path})
        self.assertIn("chmod 600", str(e))


class KeyFileTests(SynchronousTestCase):
    """
    The API key the same ways: C{--key}, C{--key-file}, C{NFLTR_KEY}.
    """

    def test_keyFile(self) -> None:
        """
        C{--key-file} gives the key; one others may read is refused.
        """
        path = Path(self.mktemp())
        path.write_text("nfk_from_file\n")
        path.chmod(0o600)
        values = {"relay-pin": PIN, "key-file": str(path)}
        self.assertEqual(relay_settings(values, {"NFLTR_KEY": "env"}).key, "nfk_from_file")
        path.chmod(0o644)
        e = self.assertRaises(ConfigError, relay_settings, values, {})
        self.assertIn(f"--key-file {path}", str(e))
