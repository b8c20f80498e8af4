# -*- test-case-name: tests.store.test_admin_tokens -*-
"""
Admin tokens (L{nfltr.store.IAdminTokens}): the same behaviour tests on
L{SQLiteStore} and on L{RedisStore} (a real C{redis-server}), and the token
format.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial import unittest
from zope.interface.verify import verifyObject

from nfltr.store import (
    IAdminTokens,
    InvalidLabel,
    UnknownAdminToken,
)
from nfltr.store._admin import (
    ADMIN_TOKEN_PREFIX,
    hash_admin_token,
    new_admin_token,
    parse_admin_token,
)
from tests.store.test_behaviour import RedisStoreMaker, SQLiteStoreMaker


class TokenFormatTests(unittest.SynchronousTestCase):
    """
    The token text.
    """

    def test_roundTrip(self) -> None:
        """
        A new token parses back to its id and is unlike an API key.
        """
        tokenid, plaintext = new_admin_token()
        self.assertTrue(plaintext.startswith(ADMIN_TOKEN_PREFIX))
        self.assertEqual(parse_admin_token(plaintext), tokenid)
        self.assertIsNone(parse_admin_token("nfltr_" + plaintext[len(ADMIN_TOKEN_PREFIX):]))

    @given(st.one_of(st.text(max_size=200), st.binary(max_size=50), st.none(), st.integers()))
    def test_parseNeverRaises(self, value: object) -> None:
        """
        Anything that is not a token parses to L{None}, without raising.
        """
        if isinstance(value, str) and value.startswith(ADMIN_TOKEN_PREFIX):
            return
        self.assertIsNone(parse_admin_token(value))


class AdminTokenBehaviourMixin:
    """
    The behaviour tests; a subclass provides C{makeStore}.
    """

    store: Any

    async def makeStore(self) -> Any:
        raise NotImplementedError

    async def setUp(self) -> None:  # type: ignore[override]
        self.store = await self.makeStore()

    def test_interface(self) -> None:
        """
        The store provides L{IAdminTokens}.
        """
        t: Any = self
        t.assertTrue(verifyObject(IAdminTokens, self.store))

    async def test_createVerifyRevoke(self) -> None:
        """
        A token verifies to its record (label, read-only flag) until revoked,
        and then to its revoked record; a wrong secret, an unknown id and
        junk verify to L{None}; listing shows all, oldest first.
        """
        t: Any = self
        info, plaintext = await self.store.create_admin_token("dash", read_only=True)
        other, secret2 = await self.store.create_admin_token()
        t.assertEqual((info.label, info.read_only, info.revoked), ("dash", True, False))
        t.assertEqual((other.label, other.read_only), (None, False))
        t.assertEqual(await self.store.verify_admin_token(plaintext), info)
        t.assertEqual(await self.store.verify_admin_token(secret2), other)
        wrong = plaintext[:-1] + ("A" if plaintext[-1] != "A" else "B")
        t.assertIsNone(await self.store.verify_admin_token(wrong))
        unknown = new_admin_token()[1]
        t.assertIsNone(await self.store.verify_admin_token(unknown))
        t.assertIsNone(await self.store.verify_admin_token("junk"))
        listed = await self.store.list_admin_tokens()
        t.assertEqual(sorted(x.tokenid for x in listed), sorted([info.tokenid, other.tokenid]))
        revoked = await self.store.revoke_admin_token(info.tokenid)
        t.assertTrue(revoked.revoked)
        again = await self.store.revoke_admin_token(info.tokenid)
        t.assertEqual(again.revoked_at, revoked.revoked_at)
        checked = await self.store.verify_admin_token(plaintext)
        t.assertTrue(checked.revoked)

    async def test_refusals(self) -> None:
        """
        An unknown or malformed id is L{UnknownAdminToken}; a bad label
        L{InvalidLabel}.
        """
        t: Any = self
        await t.assertFailure(self.store.revoke_admin_token("0" * 12), UnknownAdminToken)
        await t.assertFailure(self.store.revoke_admin_token("nope"), UnknownAdminToken)
        await t.assertFailure(self.store.create_admin_token("x\n"), InvalidLabel)

    async def test_onlyDigestsStored(self) -> None:
        """
        The store holds the token's digest, never its text or secret.
        """
        t: Any = self
        _, plaintext = await self.store.create_admin_token("d")
        stored = await self.storedBytes()
        t.assertNotIn(plaintext.encode(), stored)
        # The secret after the prefix and the token id, whole: it may hold "_" itself (one
        # piece after its last "_" can be one character, found anywhere by chance).
        secret = plaintext.split("_", 2)[2]
        t.assertGreaterEqual(len(secret), 32)
        t.assertNotIn(secret.encode(), stored)
        digest = hash_admin_token(plaintext)
        t.assertTrue(digest in stored or digest.hex().encode() in stored)

    async def storedBytes(self) -> bytes:
        raise NotImplementedError


class SQLiteAdminTokenTests(SQLiteStoreMaker, AdminTokenBehaviourMixin, unittest.TestCase):
    """
    Admin tokens in L{SQLiteStore}.
    """


class RedisAdminTokenTests(RedisStoreMaker, AdminTokenBehaviourMixin, unittest.TestCase):
    """
    Admin tokens in L{RedisStore}, on a real C{redis-server}.
    """
