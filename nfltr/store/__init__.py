# -*- test-case-name: tests.store -*-
"""
Where the relay keeps accounts, API keys and accounts' SSH public keys.

C{SQLiteStore} is the embedded default (one relay process, or several on one
host sharing the file); its synchronous core C{SQLiteStoreCore} serves the
command line.  Both raise the typed L{StoreError}s below.
"""

from nfltr.store._model import (
    AccountExists,
    AccountInfo,
    InvalidLabel,
    InvalidName,
    KeyInfo,
    SchemaTooNew,
    StoreError,
    UnknownAccount,
    UnknownKey,
)
from nfltr.store._sqlite import SCHEMA_VERSION, SQLiteStore, SQLiteStoreCore
from nfltr.store._ssh import InvalidSSHKey, SSHKey, SSHKeyInfo, parse_ssh_public_key

__all__ = [
    "SCHEMA_VERSION",
    "AccountExists",
    "AccountInfo",
    "InvalidLabel",
    "InvalidSSHKey",
    "InvalidName",
    "KeyInfo",
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
