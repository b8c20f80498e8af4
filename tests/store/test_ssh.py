"""
Tests for L{nfltr.store._ssh} and the SSH-key methods of the SQLite store:
keys made by the real C{ssh-keygen}, fingerprints compared with its own.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.store import (
    InvalidSSHKey,
    SQLiteStoreCore,
    StoreError,
    UnknownAccount,
    UnknownKey,
    parse_ssh_public_key,
)
from nfltr.store._ssh import is_fingerprint


def keygen(directory: Path, kind: str, bits: int | None = None) -> tuple[str, str]:
    """
    A public key line made by ssh-keygen, and the fingerprint it prints.
    """
    path = directory / f"key-{kind}-{bits}"
    args = ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", f"test {kind}", "-f", str(path)]
    if bits:
        args += ["-b", str(bits)]
    subprocess.run(args, check=True, capture_output=True, timeout=60)
    printed = subprocess.run(["ssh-keygen", "-l", "-f", f"{path}.pub"], check=True,
                             capture_output=True, text=True, timeout=60).stdout.split()[1]
    return Path(f"{path}.pub").read_text(), printed


class ParseTests(SynchronousTestCase):
    """
    L{parse_ssh_public_key} over ssh-keygen's own keys.
    """

    if shutil.which("ssh-keygen") is None:
        skip = "ssh-keygen not found: install the Debian package openssh-client"

    def setUp(self) -> None:
        self.dir = Path(self.mktemp())
        self.dir.mkdir()

    def test_accepted(self) -> None:
        """
        ed25519, ECDSA and RSA 3072 are accepted, with ssh-keygen's
        fingerprint and the comment.
        """
        for kind, bits in (("ed25519", None), ("ecdsa", 256), ("ecdsa", 521), ("rsa", 3072)):
            line, printed = keygen(self.dir, kind, bits)
            key = parse_ssh_public_key(line)
            self.assertEqual(key.fingerprint, printed, kind)
            self.assertEqual(key.comment, f"test {kind}")
            self.assertTrue(is_fingerprint(key.fingerprint))

    def test_fingerprintShape(self) -> None:
        """
        L{is_fingerprint} (what a removal announced on Redis must look like)
        refuses anything but C{SHA256:} and 43 base64 characters.
        """
        good = "SHA256:" + "A+/9" * 10 + "abc"
        self.assertTrue(is_fingerprint(good))
        for bad in (good[:-1], good + "d", good.lower(), "MD5:" + good[7:], good + "\n",
                    b"SHA256:x", None, good.replace("A", "=")):
            self.assertFalse(is_fingerprint(bad), bad)

    def test_refused(self) -> None:
        """
        RSA under 3072 bits, DSA-like or unknown types, and garbage are
        refused with L{InvalidSSHKey}.
        """
        line, _ = keygen(self.dir, "rsa", 2048)
        for bad in (line, "ssh-dss AAAA", "ssh-ed25519 !!!", "", "ssh-ed25519",
                    "x" * 20000):
            self.assertRaises(InvalidSSHKey, parse_ssh_public_key, bad)

    def test_privateKey(self) -> None:
        """
        A private key file's text (OpenSSH's own format, and the PEM formats
        of older ssh-keygen) is refused with a message that says it is a
        private key and to pass the C{.pub} file, not a complaint about a
        key type named C{-----BEGIN}.
        """
        keygen(self.dir, "ed25519")
        private = (self.dir / "key-ed25519-None").read_text()
        for text in (private, "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n",
                     "-----BEGIN EC PRIVATE KEY-----\nMHcC\n",
                     "-----BEGIN PRIVATE KEY-----\nMC4C\n"):
            e = self.assertRaises(InvalidSSHKey, parse_ssh_public_key, text)
            self.assertIn("private key", str(e))
            self.assertIn(".pub", str(e))
            self.assertNotIn("BEGIN", str(e))

    @given(st.text(max_size=200))
    def test_anyText(self, text: str) -> None:
        """
        Whatever the text, only L{InvalidSSHKey} is raised.
        """
        with contextlib.suppress(InvalidSSHKey):
            parse_ssh_public_key(text)


class StoreTests(SynchronousTestCase):
    """
    Registering, finding and removing SSH keys.
    """

    if shutil.which("ssh-keygen") is None:
        skip = "ssh-keygen not found: install the Debian package openssh-client"

    def setUp(self) -> None:
        self.dir = Path(self.mktemp())
        self.dir.mkdir()
        self.core = SQLiteStoreCore(self.dir / "db.sqlite3")
        self.addCleanup(self.core.close)
        self.core.create_account("acme")
        self.core.create_account("bravo")

    def test_lifecycle(self) -> None:
        """
        A registered key maps to its account (the exact key only); it cannot
        be registered twice; removed, it maps to nothing.
        """
        line, printed = keygen(self.dir, "ed25519")
        info = self.core.add_ssh_key("acme", line)
        self.assertEqual((info.fingerprint, info.account, info.label),
                         (printed, "acme", "test ed25519"))
        self.assertEqual(self.core.ssh_key_account(line.split(" test")[0]), "acme")
        self.assertRaises(StoreError, self.core.add_ssh_key, "bravo", line)
        other, _ = keygen(self.dir, "ecdsa", 256)
        self.assertIsNone(self.core.ssh_key_account(other))
        self.assertEqual([k.fingerprint for k in self.core.list_ssh_keys("acme")], [printed])
        self.assertEqual(self.core.list_ssh_keys("bravo"), [])
        self.core.remove_ssh_key(printed)
        self.assertIsNone(self.core.ssh_key_account(line))
        self.assertRaises(UnknownKey, self.core.remove_ssh_key, printed)
        self.assertRaises(UnknownAccount, self.core.add_ssh_key, "nobody", other)


class MigrationTests(SynchronousTestCase):
    """
    A database of schema version 1 (before SSH keys) is brought up to date,
    its accounts kept.
    """

    def test_fromVersion1(self) -> None:
        """
        Opening a version-1 database adds the SSH key table; the accounts
        written before are still there.
        """
        import sqlite3

        from nfltr.store._sqlite import _MIGRATIONS

        path = Path(self.mktemp())
        db = sqlite3.connect(path)
        for statement in _MIGRATIONS[0]:
            db.execute(statement)
        db.execute("INSERT INTO schema_version (version) VALUES (1)")
        db.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
        db.commit()
        db.close()
        core = SQLiteStoreCore(path)
        self.addCleanup(core.close)
        self.assertEqual([a.name for a in core.list_accounts()], ["acme"])
        self.assertEqual(core.list_ssh_keys("acme"), [])
