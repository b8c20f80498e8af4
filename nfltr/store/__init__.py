# -*- test-case-name: tests.store -*-
"""
Where the relay keeps accounts, API keys and accounts' SSH public keys.

Both stores provide L{IStore}: C{SQLiteStore} is the embedded default (one
relay process, or several on one host sharing the file), its synchronous core
C{SQLiteStoreCore} serves the command line; C{RedisStore} is the directory
several relays share (L{parse_redis_url} reads where it is), and also
provides L{IRevocationFeed} and keeps name leases (C{lease_table}: an
L{INameLeaseTable}).  All raise the typed L{StoreError}s below.

C{RedisStore} is imported on first use: txredisapi imports the global
reactor, which must not happen before twistd installs the one it was asked
for.  The SQLite store (and C{sqlite3}) is imported on first use too: agents
use this package for L{OwnerLock} alone.
"""

from typing import TYPE_CHECKING, Any

from nfltr.store._admin import AdminTokenInfo, UnknownAdminToken
from nfltr.store._command_times import COMMAND_TIME_BOUNDS, CommandTimes
from nfltr.store._model import (
    AccountExists,
    AccountInfo,
    InvalidLabel,
    InvalidName,
    KeyInfo,
    LeaseTaken,
    SchemaTooNew,
    StoreCorrupt,
    StoreError,
    StoreUnavailable,
    UnknownAccount,
    UnknownKey,
)
from nfltr.store._owner import DirectoryInUse, OwnerLock
from nfltr.store._owner import claim as claim_owner
from nfltr.store._redis_url import (
    DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_PORT,
    DEFAULT_PREFIX,
    MAX_UNIX_PATH,
    PASSWORD_ENV,
    REVOKED_CHANNEL,
    SSH_REMOVED_CHANNEL,
    InvalidRedisURL,
    RedisAddress,
    parse_redis_url,
)
from nfltr.store._ssh import InvalidSSHKey, SSHKey, SSHKeyInfo, parse_ssh_public_key
from nfltr.store.interfaces import (
    PRESENCE_MEMBER,
    IAdminTokens,
    ICommandTimes,
    INameLeaseTable,
    IPresenceTable,
    IRevocationFeed,
    IRevocationSubscription,
    ISSHKeyRemovals,
    IStore,
)

__all__ = [
    "COMMAND_TIME_BOUNDS", "CommandTimes", "ICommandTimes",
    "AdminTokenInfo",
    "IAdminTokens",
    "UnknownAdminToken",
    "DirectoryInUse",
    "OwnerLock",
    "claim_owner",
    "DEFAULT_COMMAND_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_PORT",
    "DEFAULT_PREFIX",
    "PASSWORD_ENV",
    "REVOKED_CHANNEL",
    "SSH_REMOVED_CHANNEL",
    "SCHEMA_VERSION",
    "INameLeaseTable",
    "IPresenceTable",
    "PRESENCE_MEMBER",
    "IRevocationFeed",
    "IRevocationSubscription",
    "ISSHKeyRemovals",
    "IStore",
    "InvalidRedisURL",
    "RedisAddress",
    "RedisStore",
    "StoreCorrupt",
    "StoreUnavailable",
    "parse_redis_url",
    "MAX_UNIX_PATH",
    "AccountExists",
    "AccountInfo",
    "InvalidLabel",
    "InvalidSSHKey",
    "InvalidName",
    "KeyInfo",
    "LeaseTaken",
    "SQLiteStore",
    "SQLiteStoreCore",
    "SSHKey",
    "SSHKeyInfo",
    "SchemaTooNew",
    "StoreError",
    "UnknownAccount",
    "UnknownKey",
    "parse_ssh_public_key",
]

if TYPE_CHECKING:
    from nfltr.store._redis import RedisStore
    from nfltr.store._sqlite import SCHEMA_VERSION, SQLiteStore, SQLiteStoreCore


def __getattr__(name: str) -> Any:
    if name == "RedisStore":
        from nfltr.store._redis import RedisStore

        return RedisStore
    if name in ("SCHEMA_VERSION", "SQLiteStore", "SQLiteStoreCore"):
        from nfltr.store import _sqlite

        return getattr(_sqlite, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
