"""
Tests for L{nfltr.cli.keys}: C{nfltr accounts ...} and C{nfltr keys ...}, run
through L{nfltr.cli.main} in this process against a temporary database.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
from pathlib import Path

from twisted.trial import unittest
from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli import main
from nfltr.store import RedisStore, SQLiteStoreCore, parse_redis_url
from tests.redis_helpers import REDIS_SERVER, SKIP_REASON, start_redis
from tests.store.test_ssh import keygen

#: The tree under test: C{python -m nfltr} runs from it.
REPO = Path(__file__).resolve().parent.parent.parent

KEY = re.compile(r"nfltr_([0-9a-f]{12})_[A-Za-z0-9_-]{43}")


class _CommandTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.dataDir = Path(self.mktemp()).absolute()

    def run_(self, *argv: str, dataDir: bool = True) -> tuple[int, str, str]:
        """
        Run C{nfltr ARGV --data-dir DIR}; return status, stdout and stderr.
        """
        stdout, stderr = io.StringIO(), io.StringIO()
        self.patch(sys, "stdout", stdout)
        self.patch(sys, "stderr", stderr)
        args = [*argv, "--data-dir", str(self.dataDir)] if dataDir else list(argv)
        status = main(args)
        return status, stdout.getvalue(), stderr.getvalue()

    def assertError(self, result: tuple[int, str, str], message: str) -> None:
        status, out, err = result
        self.assertEqual(status, 2)
        self.assertEqual(out, "")
        self.assertEqual(err, f"nfltr: error: {message}\n")

    def createKey(self, account: str = "acme", *extra: str) -> str:
        status, out, _ = self.run_("keys", "create", "--account", account, *extra)
        self.assertEqual(status, 0)
        return out.strip()


class AccountsTests(_CommandTests):
    """
    C{nfltr accounts create} and C{nfltr accounts list}.
    """

    def test_create(self) -> None:
        """
        C{accounts create} creates the database (0600, in a 0700 directory)
        and the account, says so, and exits 0.
        """
        self.assertEqual(self.run_("accounts", "create", "acme"), (0, "created account acme\n", ""))
        self.assertEqual(self.dataDir.stat().st_mode & 0o777, 0o700)
        self.assertEqual((self.dataDir / "nfltr.sqlite3").stat().st_mode & 0o777, 0o600)
        core = SQLiteStoreCore(self.dataDir / "nfltr.sqlite3")
        self.addCleanup(core.close)
        self.assertEqual([a.name for a in core.list_accounts()], ["acme"])

    def test_createTwice(self) -> None:
        """
        Creating an existing account is an error, exit 2.
        """
        self.run_("accounts", "create", "acme")
        self.assertError(
            self.run_("accounts", "create", "acme"), "an account named 'acme' already exists"
        )

    def test_badName(self) -> None:
        """
        A malformed account name is an error naming the rule, exit 2.
        """
        status, out, err = self.run_("accounts", "create", "Not Valid")
        self.assertEqual((status, out), (2, ""))
        self.assertTrue(err.startswith("nfltr: error: invalid account name 'Not Valid'"), err)
        self.assertEqual(len(err.splitlines()), 1)

    def test_list(self) -> None:
        """
        C{accounts list} prints a header and one row per account, by name.
        """
        self.run_("accounts", "create", "zeta")
        self.run_("accounts", "create", "acme")
        status, out, err = self.run_("accounts", "list")
        self.assertEqual((status, err), (0, ""))
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "CREATED"])
        self.assertEqual([line.split()[0] for line in lines[1:]], ["acme", "zeta"])
        self.assertRegex(lines[1].split()[1], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

    def test_noDatabase(self) -> None:
        """
        Listing without a database is an error that says how to make one, and
        creates nothing.
        """
        path = self.dataDir / "nfltr.sqlite3"
        self.assertError(
            self.run_("accounts", "list"),
            f"no relay database at {path}: create an account first "
            "(nfltr accounts create NAME), or pass the relay's --data-dir",
        )
        self.assertFalse(self.dataDir.exists())

    def test_defaultDataDir(self) -> None:
        """
        Without C{--data-dir}, the relay's default data directory is used.
        """
        self.patch(os, "environ", {"XDG_DATA_HOME": str(self.dataDir), "HOME": "/nonexistent"})
        self.assertEqual(self.run_("accounts", "create", "acme", dataDir=False)[0], 0)
        self.assertTrue((self.dataDir / "nfltr" / "relay" / "nfltr.sqlite3").exists())


class KeysTests(_CommandTests):
    """
    C{nfltr keys create}, C{list} and C{revoke}.
    """

    def setUp(self) -> None:
        super().setUp()
        self.run_("accounts", "create", "acme")
        self.run_("accounts", "create", "bravo")

    def test_create(self) -> None:
        """
        C{keys create} prints the new key alone on standard output and a hint
        naming its id on standard error; the store accepts the key for the
        account.
        """
        status, out, err = self.run_("keys", "create", "--account", "acme", "--label", "laptop")
        self.assertEqual(status, 0)
        match = KEY.fullmatch(out.rstrip("\n"))
        self.assertIsNotNone(match, out)
        self.assertEqual(out.count("\n"), 1)
        self.assertIn(f"API key {match.group(1)} for account acme", err)
        self.assertIn("shown only this once", err)
        core = SQLiteStoreCore(self.dataDir / "nfltr.sqlite3")
        self.addCleanup(core.close)
        info = core.verify_key(out.strip())
        self.assertEqual((info.account, info.label, info.revoked), ("acme", "laptop", False))

    def test_createErrors(self) -> None:
        """
        An unknown account or a bad label is an error, exit 2, and no key is
        made; a missing C{--account} is argparse's usage error, exit 2.
        """
        self.assertError(
            self.run_("keys", "create", "--account", "nobody"),
            "no account named 'nobody'; create it first with: nfltr accounts create nobody",
        )
        status, _, err = self.run_("keys", "create", "--account", "acme", "--label", "a\nb")
        self.assertEqual(status, 2)
        self.assertTrue(err.startswith("nfltr: error: invalid key label"), err)
        status, _, err = self.run_("keys", "create")
        self.assertEqual(status, 2)
        self.assertIn("the following arguments are required: --account", err)
        self.assertEqual(self.run_("keys", "list")[1].splitlines()[1:], [])

    def test_list(self) -> None:
        """
        C{keys list} shows id, account, label ("-" if none), creation time and
        revocation ("-" while valid), oldest first; C{--account} filters.
        """
        first = KEY.fullmatch(self.createKey("acme", "--label", "ci")).group(1)
        second = KEY.fullmatch(self.createKey("bravo")).group(1)
        status, out, _ = self.run_("keys", "list")
        self.assertEqual(status, 0)
        rows = [line.split() for line in out.splitlines()]
        self.assertEqual(rows[0], ["ID", "ACCOUNT", "LABEL", "CREATED", "REVOKED"])
        self.assertEqual(
            [(r[0], r[1], r[2], r[4]) for r in rows[1:]],
            [(first, "acme", "ci", "-"), (second, "bravo", "-", "-")],
        )
        out = self.run_("keys", "list", "--account", "bravo")[1]
        self.assertEqual([line.split()[0] for line in out.splitlines()[1:]], [second])
        self.assertError(
            self.run_("keys", "list", "--account", "nobody"),
            "no account named 'nobody'; create it first with: nfltr accounts create nobody",
        )

    def test_revoke(self) -> None:
        """
        C{keys revoke ID} revokes the key (the store refuses it afterwards),
        says so, and C{keys list} shows when.
        """
        key = self.createKey()
        keyid = KEY.fullmatch(key).group(1)
        status, out, err = self.run_("keys", "revoke", keyid)
        self.assertEqual(status, 0)
        self.assertEqual(out, f"revoked API key {keyid} of account acme\n")
        self.assertIn("end the links and SSH connections that use this key within their", err)
        core = SQLiteStoreCore(self.dataDir / "nfltr.sqlite3")
        self.addCleanup(core.close)
        self.assertTrue(core.verify_key(key).revoked)
        row = self.run_("keys", "list")[1].splitlines()[1].split()
        self.assertRegex(row[4], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

    def test_revokeUnknown(self) -> None:
        """
        Revoking an id no key has is an error, exit 2.
        """
        self.assertError(self.run_("keys", "revoke", "0123456789ab"),
                         "no API key with id '0123456789ab'")
        self.assertError(self.run_("keys", "revoke", "junk"), "no API key with id 'junk'")


class SSHKeyCommandTests(_CommandTests):
    """
    C{nfltr keys add-ssh}, C{list-ssh} and C{remove-ssh} (SQLite).
    """

    if shutil.which("ssh-keygen") is None:
        skip = "ssh-keygen not found: install the Debian package openssh-client"

    def setUp(self) -> None:
        super().setUp()
        self.run_("accounts", "create", "acme")
        self.keys = Path(self.mktemp())
        self.keys.mkdir()

    def test_privateKey(self) -> None:
        """
        Given the private key file instead of the C{.pub}, C{add-ssh} says
        that it is a private key and to pass the C{.pub} file, exit 2.
        """
        keygen(self.keys, "ed25519")
        status, out, err = self.run_("keys", "add-ssh", "--account", "acme",
                                     str(self.keys / "key-ed25519-None"))
        self.assertEqual((status, out), (2, ""))
        self.assertTrue(err.startswith("nfltr: error: this is a private key: pass the public "
                                       "key, the matching .pub file"), err)

    def test_lifecycle(self) -> None:
        """
        A public key file is added, listed with its fingerprint, and removed.
        """
        _, printed = keygen(self.keys, "ed25519")
        status, out, _ = self.run_("keys", "add-ssh", "--account", "acme",
                                   str(self.keys / "key-ed25519-None.pub"))
        self.assertEqual((status, out), (0, f"added SSH key {printed} (ssh-ed25519) for account "
                                            "acme\n"))
        self.assertEqual(self.run_("keys", "list-ssh")[1].splitlines()[1].split()[:3],
                         [printed, "acme", "ssh-ed25519"])
        self.assertEqual(self.run_("keys", "remove-ssh", printed),
                         (0, f"removed SSH key {printed} of account acme\n", ""))


class DirectoryOptionTests(_CommandTests):
    """
    C{--directory URL}, checked before anything connects.
    """

    def test_malformed(self) -> None:
        """
        A malformed Redis URL is an error naming the problem, exit 2.
        """
        self.assertError(
            self.run_("accounts", "list", "--directory", "redis://h/x", dataDir=False),
            "the path of a redis:// URL is the database number, not '/x'",
        )

    def test_notBoth(self) -> None:
        """
        C{--directory} and C{--data-dir} exclude each other (argparse's
        usage error, exit 2).
        """
        status, _, err = self.run_("accounts", "list", "--directory", "redis://h")
        self.assertEqual(status, 2)
        self.assertIn("not allowed with argument", err)


class RedisCommandTests(unittest.TestCase):
    """
    The commands against a real C{redis-server}, each in a process of its own
    (L{twisted.internet.task.react} runs and stops the global reactor).
    """

    if REDIS_SERVER is None:
        skip = SKIP_REASON

    async def setUp(self) -> None:  # type: ignore[override]
        self.server = await start_redis(self)

    async def nfltr(self, *argv: str) -> tuple[int, str, str]:
        """
        Run C{python -m nfltr ARGV --directory URL}; status, stdout, stderr.
        """
        from twisted.internet import reactor
        from twisted.internet.utils import getProcessOutputAndValue

        out, err, status = await getProcessOutputAndValue(
            sys.executable, ["-m", "nfltr", *argv, "--directory", self.server.url],
            env={**os.environ, "NFLTR_REDIS_PASSWORD": ""}, path=str(REPO), reactor=reactor,
        )
        return status, out.decode(), err.decode()

    async def test_accountsAndKeys(self) -> None:
        """
        Accounts and keys made by the command are in the Redis directory: a
        store verifies the key, sees the revocation, and the listings show
        both.
        """
        from twisted.internet import reactor

        self.assertEqual(await self.nfltr("accounts", "create", "acme"),
                         (0, "created account acme\n", ""))
        status, out, err = await self.nfltr("accounts", "create", "acme")
        self.assertEqual((status, err), (2, "nfltr: error: an account named 'acme' already "
                                            "exists\n"))
        status, out, err = await self.nfltr("keys", "create", "--account", "acme", "--label", "ci")
        self.assertEqual(status, 0, err)
        key = out.strip()
        keyid = KEY.fullmatch(key).group(1)
        store = RedisStore(reactor, parse_redis_url(self.server.url))
        self.addCleanup(store.close)
        self.assertEqual((await store.verify_key(key)).label, "ci")
        status, out, _ = await self.nfltr("keys", "list")
        self.assertEqual([line.split()[:3] for line in out.splitlines()[1:]],
                         [[keyid, "acme", "ci"]])
        status, out, err = await self.nfltr("keys", "revoke", keyid)
        self.assertEqual((status, out), (0, f"revoked API key {keyid} of account acme\n"))
        self.assertIn("use this key at once (they are told through the directory)", err)
        self.assertTrue((await store.verify_key(key)).revoked)
        self.assertEqual(await store.revoked_since(0), [keyid])
        status, out, _ = await self.nfltr("accounts", "list")
        self.assertEqual([line.split()[0] for line in out.splitlines()], ["NAME", "acme"])
        self.assertEqual((await self.nfltr("keys", "revoke", "0123456789ab"))[::2],
                         (2, "nfltr: error: no API key with id '0123456789ab'\n"))
