"""
Tests for L{nfltr.cli.admin} (C{nfltr admin token ...}) on a temporary
database, and the C{--api} options' refusals that need no relay
(L{nfltr.cli.api_client}; the API itself: L{tests.integration.test_api}).
"""

from __future__ import annotations

import re

from nfltr.store import SQLiteStoreCore
from nfltr.store._admin import hash_admin_token

from .test_keys import _CommandTests

TOKEN = re.compile(r"nfltradm_([0-9a-f]{12})_[A-Za-z0-9_-]{43}")


class AdminTokenCommandTests(_CommandTests):
    """
    C{nfltr admin token create/list/revoke}.
    """

    def test_lifecycle(self) -> None:
        """
        C{create} prints the token alone on standard output (once), creating
        the database if needed; the store keeps its digest; C{list} shows its
        id and access, never the token; C{revoke} revokes it.
        """
        status, out, err = self.run_("admin", "token", "create", "--read-only", "--label", "dash")
        self.assertEqual(status, 0, err)
        match = TOKEN.fullmatch(out.strip())
        assert match is not None, out
        self.assertIn("read-only admin token", err)
        core = SQLiteStoreCore(self.dataDir / "nfltr.sqlite3")
        self.addCleanup(core.close)
        info = core.verify_admin_token(out.strip())
        assert info is not None
        self.assertTrue(info.read_only)
        self.assertNotIn(out.strip().encode(), (self.dataDir / "nfltr.sqlite3").read_bytes())
        self.assertEqual(len(hash_admin_token(out.strip())), 32)
        status, listed, _ = self.run_("admin", "token", "list")
        self.assertIn(match.group(1), listed)
        self.assertIn("read-only", listed)
        self.assertNotIn(out.strip(), listed)
        status, out2, _ = self.run_("admin", "token", "revoke", match.group(1))
        self.assertEqual((status, out2), (0, f"revoked admin token {match.group(1)}\n"))
        revoked = core.verify_admin_token(out.strip())
        assert revoked is not None
        self.assertTrue(revoked.revoked)

    def test_revokeUnknown(self) -> None:
        """
        An unknown id is one line of error.
        """
        self.run_("admin", "token", "create")
        self.assertError(self.run_("admin", "token", "revoke", "0123456789ab"),
                         "no admin token with id '0123456789ab'")

    def test_apiNeedsTokenFile(self) -> None:
        """
        C{--api} without C{--admin-token-file}, a token file without
        C{--api}, an unreadable token file and a URL that is not HTTP are
        each one line of error.
        """
        self.assertError(self.run_("accounts", "list", "--api", "http://127.0.0.1:1",
                                   dataDir=False),
                         "--api needs --admin-token-file FILE (nfltr admin token create)")
        self.assertError(self.run_("accounts", "list", "--admin-token-file", "x"),
                         "--admin-token-file goes with --api")
        missing = str(self.dataDir / "nope")
        status, _, err = self.run_("accounts", "list", "--api", "http://127.0.0.1:1",
                                   "--admin-token-file", missing, dataDir=False)
        self.assertEqual(status, 2)
        self.assertIn(f"cannot read the admin token file {missing}", err)
        token = self.dataDir / "token"
        self.dataDir.mkdir(parents=True, exist_ok=True)
        token.write_text("t\n")
        self.assertError(self.run_("accounts", "list", "--api", "ftp://x",
                                   "--admin-token-file", str(token), dataDir=False),
                         "--api ftp://x: give the admin listener's URL, http://HOST:PORT")
