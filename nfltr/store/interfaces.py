# -*- test-case-name: tests.store.test_behaviour -*-
"""
What a store promises the relay and the C{nfltr keys} command, whatever
holds the data (L{nfltr.store.SQLiteStore}: a file; L{nfltr.store.RedisStore}:
a directory several relays share).

Every method returns a L{Deferred}; failures are the typed
L{nfltr.store.StoreError}s, the same for every kind of store, with
L{nfltr.store.StoreUnavailable} when the data could not be reached at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from twisted.internet.defer import Deferred
from zope.interface import Attribute, Interface

from nfltr.store._admin import AdminTokenInfo
from nfltr.store._model import AccountInfo, KeyInfo
from nfltr.store._ssh import SSHKeyInfo


class IStore(Interface):
    """
    Accounts, their API keys (kept as SHA-256 digests only) and their SSH
    public keys, with a revision counter and a log of revocations.
    """

    def create_account(name: str) -> Deferred[AccountInfo]:
        """
        Create an account.

        @raise InvalidName: C{name} is malformed.
        @raise AccountExists: an account has this name already.
        """

    def list_accounts() -> Deferred[list[AccountInfo]]:
        """
        All accounts, by name.
        """

    def create_key(account: str, label: str | None = None) -> Deferred[tuple[KeyInfo, str]]:
        """
        Create an API key for C{account}: its record and its plaintext, which
        exists nowhere else afterwards.

        @raise InvalidName: C{account} is malformed.
        @raise InvalidLabel: C{label} is too long or not printable.
        @raise UnknownAccount: no account has this name.
        """

    def verify_key(plaintext: str) -> Deferred[KeyInfo | None]:
        """
        The record of the key C{plaintext} is (check L{KeyInfo.revoked}), or
        L{None} if it is malformed, names no key, or has a wrong secret.  An
        unknown key id costs the same hash comparison as a wrong secret.
        """

    def list_keys(account: str | None = None) -> Deferred[list[KeyInfo]]:
        """
        The keys of C{account}, or of every account, oldest first (then by
        id), revoked ones included.

        @raise InvalidName: C{account} is malformed.
        @raise UnknownAccount: no account has this name.
        """

    def revoke_key(keyid: str) -> Deferred[KeyInfo]:
        """
        Revoke a key: bump the L{revision} and log the key id under it.
        Revoking a revoked key changes nothing and returns its record.

        @raise UnknownKey: no key has this id.
        """

    def add_ssh_key(account: str, line: str, label: str | None = None) -> Deferred[SSHKeyInfo]:
        """
        Register an SSH public key (an OpenSSH line) for C{account}, by its
        fingerprint; its comment is the label unless one is given.

        @raise InvalidSSHKey: not an accepted public key.
        @raise UnknownAccount: no account has this name.
        @raise StoreError: the key is registered already (to any account).
        """

    def list_ssh_keys(account: str | None = None) -> Deferred[list[SSHKeyInfo]]:
        """
        The SSH keys of C{account}, or of every account, oldest first.

        @raise UnknownAccount: no account has this name.
        """

    def remove_ssh_key(fingerprint: str) -> Deferred[SSHKeyInfo]:
        """
        Unregister an SSH key.

        @raise UnknownKey: no key has this fingerprint.
        """

    def ssh_key_account(line: str) -> Deferred[str | None]:
        """
        The account an SSH public key (C{TYPE BASE64}) is registered to, if
        it is, exactly (the same key, not just the same fingerprint).
        """

    def revision() -> Deferred[int]:
        """
        The change counter: 0 at first, one more with every revocation
        (and, in a store that logs them, L{ISSHKeyRemovals}, every SSH key
        removal), whichever process made it.
        """

    def revoked_since(revision: int) -> Deferred[list[str]]:
        """
        The ids of the keys revoked after L{revision} returned C{revision},
        in the order of their revocation.
        """

    def close() -> Deferred[None]:
        """
        Let go of the store's file or connections.
        """


class IRevocationSubscription(Interface):
    """
    A live subscription to a store's revocations.
    """

    channel = Attribute("The name of the channel listened to (text).")

    def stop() -> Deferred[None]:
        """
        Stop listening and close the subscription's connection.
        """


class IRevocationFeed(Interface):
    """
    A store that announces each revocation as it happens, so that a relay
    closes a revoked key's links at once instead of at its next poll.  The
    poll (L{IStore.revision}, L{IStore.revoked_since}) stays the source of
    truth: an announcement can be missed while a subscriber reconnects.
    """

    def subscribe_revocations(
        callback: Callable[[str], object],
        removed: Callable[[str], object] | None = None,
    ) -> Deferred[IRevocationSubscription]:
        """
        Call C{callback} with the key id of every key revoked from now on,
        by any process, and C{removed} (if given) with the fingerprint of
        every SSH key removed (L{ISSHKeyRemovals}), until the subscription
        is stopped; resubscribe on its own after a lost connection.

        @return: fires with the subscription once it listens.
        @raise StoreUnavailable: it could not start listening in time.
        """


class ISSHKeyRemovals(Interface):
    """
    A store that logs each SSH key removal (L{IStore.remove_ssh_key}) under
    the L{IStore.revision}, which a removal bumps as a revocation does, so
    that a relay that remembers SSH keys for when the store cannot answer
    (L{nfltr.relay.cluster.ssh_key_cache}) forgets a removed one: found by
    the poll, as revocations are, and announced at once by a store that
    announces revocations (L{IRevocationFeed}).
    """

    def ssh_keys_removed_since(revision: int) -> Deferred[list[str]]:
        """
        The fingerprints of the SSH keys removed after L{IStore.revision}
        returned C{revision}, in the order of their removal (a key removed
        again, after it was added again, only at its last removal).
        """


class INameLeaseTable(Interface):
    """
    Name leases where several relays see them (a Redis directory): which
    account holds each name, and which relays have holders of it.  A relay
    keeps its own table of its holders (L{nfltr.relay.leases.ILeases}) and
    this one beside it, so that a name stays its account's across relays and
    restarts.
    """

    def reserve(names: Sequence[str], account: str, relay: str, ttl: float) -> Deferred[None]:
        """
        At once for all C{names}: if another account holds one, change
        nothing and fail; else hold each for C{account}, with C{relay} among
        its relays, for at least C{ttl} seconds from now (the relay renews it
        while it has holders).

        @raise LeaseTaken: naming the first name another account holds.
        @raise StoreUnavailable: the table could not be reached.
        """

    def release(name: str, account: str, relay: str, lease_time: float) -> Deferred[bool]:
        """
        C{relay} has no holder of C{name} any more; when no relay has one,
        the lease runs for C{lease_time} seconds from now (0: it ends now).

        @return: whether C{account} held the name.
        """

    def holder(name: str) -> Deferred[str | None]:
        """
        The account that holds C{name}, if any.
        """


#: A load-balancing group's presence record holds one field named this and a replica's id for
#: each replica that holds a member (L{IPresenceTable}).
PRESENCE_MEMBER = "member:"


class IPresenceTable(Interface):
    """
    Presence in a directory several relay replicas share (a Redis
    directory): which replica holds each agent and share now, and where each
    replica's replica link listens.  Every record lives for the C{ttl} its
    writer gave it and is refreshed by that writer while it holds what the
    record says: a replica that dies leaves records that run out.

    Records are flat maps of text to text, under a C{kind} (C{agent},
    C{share}, C{replica}) and a name; what the fields mean is the caller's
    (L{nfltr.relay.cluster.presence}), but for C{group}: a record whose
    fields name one is a load-balancing group's, which every replica that
    holds a member writes and withdraws its own member of
    (L{PRESENCE_MEMBER}C{<replica>} fields, each with its deadline and the
    writer's C{state} field; see L{nfltr.store._redis_presence}).  A
    look-up names only the members whose deadline has not passed.
    """

    def announce(kind: str, name: str, fields: dict[str, str], ttl: float,
                 replica: str, take: bool) -> Deferred[bool]:
        """
        Write the record C{kind}/C{name} for C{replica}, living C{ttl}
        seconds from now, if no other replica's record is there (or, with
        C{take}, in any case: a newer holder takes the name over).

        @return: whether the record is C{replica}'s now (L{False}: another
            replica's record is there and C{take} was not given).
        @raise StoreUnavailable: the directory could not be reached.
        """

    def withdraw(kind: str, name: str, replica: str) -> Deferred[bool]:
        """
        Remove the record C{kind}/C{name} if it is C{replica}'s.

        @return: whether it was.
        """

    def lookup(kind: str, name: str) -> Deferred[dict[str, str] | None]:
        """
        The record C{kind}/C{name} (its fields, the writing replica's under
        C{replica}), or L{None} if there is none.
        """


class IAdminTokens(Interface):
    """
    The admin tokens of the relay's API and dashboard
    (L{nfltr.store._admin}): kept as SHA-256 digests only, in the same
    store as the accounts, so every relay on a shared directory takes the
    same tokens.
    """

    def create_admin_token(
        label: str | None = None, read_only: bool = False,
    ) -> Deferred[tuple[AdminTokenInfo, str]]:
        """
        Create an admin token: its record and its plaintext, which exists
        nowhere else afterwards.

        @raise InvalidLabel: C{label} is too long or not printable.
        """

    def verify_admin_token(plaintext: str) -> Deferred[AdminTokenInfo | None]:
        """
        The record of the token C{plaintext} is (check
        L{AdminTokenInfo.revoked}), or L{None} if it is malformed, names no
        token or has a wrong secret (digests compared in constant time; an
        unknown id costs the same comparison).
        """

    def list_admin_tokens() -> Deferred[list[AdminTokenInfo]]:
        """
        Every admin token, oldest first (then by id), revoked ones included.
        """

    def revoke_admin_token(tokenid: str) -> Deferred[AdminTokenInfo]:
        """
        Revoke a token; revoking a revoked one changes nothing.

        @raise UnknownAdminToken: no token has this id.
        """


class ICommandTimes(Interface):
    """
    How long a directory's calls took: a histogram with fixed bounds.
    """

    bounds = Attribute("The upper bounds, in seconds, ascending (a tuple of floats; +Inf implied).")
    total = Attribute("The sum of every duration counted, in seconds.")

    def observe(seconds: float) -> None:
        """
        Count one call that took C{seconds}.
        """

    def cumulative() -> list[int]:
        """
        For each bound and then +Inf, how many calls took at most that long.
        """
