# -*- test-case-name: tests.relay.ssh.test_server -*-
"""
Who an SSH client is: the account its public key is registered to
(C{nfltr keys add-ssh}), or, where the operator turned password
authentication on (C{--ssh-password-auth}), the account of the API key it
gives as its password.

The signature of a public-key login is checked here with the key the store
matched (the same key, not only the same fingerprint), and only with a
signature algorithm without SHA-1.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from twisted.conch.error import ValidPublicKey
from twisted.conch.ssh import keys
from twisted.cred.checkers import ICredentialsChecker
from twisted.cred.credentials import ISSHPrivateKey, IUsernamePassword
from twisted.cred.error import UnauthorizedLogin
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.relay.store_health import StoreHealth
from nfltr.store import IStore, KeyInfo, StoreUnavailable

#: Why a login is refused while the store is down.
STORE_UNAVAILABLE = "the relay cannot check keys now; try again later"

#: Signature algorithms a client may sign its login with: no C{ssh-rsa}
#: (SHA-1).
SIGNATURE_ALGORITHMS = frozenset({
    b"ssh-ed25519", b"rsa-sha2-512", b"rsa-sha2-256", b"ecdsa-sha2-nistp256",
    b"ecdsa-sha2-nistp384", b"ecdsa-sha2-nistp521",
})


class KeysUnavailable(UnauthorizedLogin):
    """
    A login refused because the store cannot say whose key it is now
    (L{STORE_UNAVAILABLE}): the client is told why
    (L{nfltr.relay.ssh._server.RelayUserAuth}), not only that it failed.
    """


@dataclass(frozen=True)
class SSHIdentity:
    """
    An authenticated SSH client.

    @ivar account: its account.
    @ivar user: the user name it logged in with (names its agent).
    @ivar credential: what it proved: C{ssh:FINGERPRINT} of its key, or the
        id of its API key.
    @ivar proof: what another replica checks to find its account
        (L{nfltr.relay.cluster.holder.ReplicaTarget}): C{publickey:BLOB}
        (the public key, base64) or C{password:KEY} (a secret: never shown).
    """

    account: str
    user: str
    credential: str
    proof: str = field(default="", repr=False)


def _user(raw: bytes) -> str:
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        raise UnauthorizedLogin("the user name is not ASCII") from None


@implementer(ICredentialsChecker)
class AccountKeyChecker:
    """
    Public-key logins: the key must be registered to an account.
    """

    credentialInterfaces = (ISSHPrivateKey,)

    def __init__(self, accountOf: Callable[[str], Deferred[str | None]]) -> None:
        """
        @param accountOf: the account a public key (C{TYPE BASE64}) is
            registered to (L{nfltr.relay.agents.Relay.sshKeyAccount}: the
            store, with its health, and what the relay remembers while it
            cannot answer); a L{StoreUnavailable} failure when it cannot
            say.
        """
        self.accountOf = accountOf

    def requestAvatarId(self, credentials: Any) -> Deferred[Any]:
        """
        The identity of the key's account; a L{ValidPublicKey} failure for a
        registered key offered without a signature (so the client signs);
        L{UnauthorizedLogin} otherwise.
        """
        if credentials.algName not in SIGNATURE_ALGORITHMS:
            return _fail(UnauthorizedLogin("signature algorithm not accepted"))
        try:
            key = keys.Key.fromString(credentials.blob)
            line = key.toString("OPENSSH").decode("ascii")
        except (keys.BadKeyError, ValueError, TypeError) as e:
            return _fail(UnauthorizedLogin(f"unreadable public key: {e}"))
        d = self.accountOf(line).addErrback(_unavailable)

        def verdict(account: str | None) -> SSHIdentity:
            if account is None:
                raise UnauthorizedLogin("key not registered")
            if not credentials.signature:
                raise ValidPublicKey()
            if not key.verify(credentials.signature, credentials.sigData):
                raise UnauthorizedLogin("bad signature")
            fingerprint = key.fingerprint(keys.FingerprintFormats.SHA256_BASE64)
            return SSHIdentity(account, _user(credentials.username),
                               f"ssh:SHA256:{fingerprint.removeprefix('SHA256:')}",
                               f"publickey:{base64.b64encode(key.blob()).decode('ascii')}")

        return d.addCallback(verdict)


@implementer(ICredentialsChecker)
class APIKeyPasswordChecker:
    """
    Password logins, if the operator allows them: the password is an API
    key of the account, not revoked.
    """

    credentialInterfaces = (IUsernamePassword,)

    def __init__(self, store: IStore, isRevoked: Any, health: StoreHealth | None = None) -> None:
        """
        @param isRevoked: whether the relay saw a key id revoked.
        @param health: whether the store is up (L{None}: not watched).
        """
        self.store = store
        self.isRevoked = isRevoked
        self.health = health

    def requestAvatarId(self, credentials: Any) -> Deferred[Any]:
        """
        The identity of the API key's account, or L{UnauthorizedLogin}.
        """
        try:
            password = credentials.password.decode("ascii")
        except UnicodeDecodeError:
            return _fail(UnauthorizedLogin("not an API key"))
        d = _checked(self.health, lambda: self.store.verify_key(password))

        def verdict(info: KeyInfo | None) -> SSHIdentity:
            if info is None or info.revoked or self.isRevoked(info.keyid):
                raise UnauthorizedLogin("not a valid API key")
            return SSHIdentity(info.account, _user(credentials.username), info.keyid,
                               f"password:{password}")

        return d.addCallback(verdict)


def _checked(health: StoreHealth | None, call: Callable[[], Deferred[Any]]) -> Deferred[Any]:
    """
    C{call()}, which asks the store, unless the store is down: then, or if
    the call finds it unavailable, L{KeysUnavailable} (the outage is logged
    once, by C{health}, not once per login).
    """
    if health is not None and not health.available:
        return _fail(KeysUnavailable(STORE_UNAVAILABLE))

    def failed(failure: Failure) -> Failure:
        if health is not None and health.failed(failure):
            return Failure(KeysUnavailable(STORE_UNAVAILABLE))
        return failure

    return call().addErrback(failed)


def _unavailable(failure: Failure) -> Failure:
    """
    A L{StoreUnavailable} failure as L{KeysUnavailable}; any other as it is.
    """
    if failure.check(StoreUnavailable):
        return Failure(KeysUnavailable(STORE_UNAVAILABLE))
    return failure


def _fail(error: Exception) -> Deferred[Any]:
    d: Deferred[Any] = Deferred()
    d.errback(error)
    return d
