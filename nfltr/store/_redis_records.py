# -*- test-case-name: tests.store.test_redis -*-
"""
Reading the records L{nfltr.store.RedisStore} keeps in Redis hashes.  Pure:
replies in (lists of bytes, as txredisapi gives them with C{charset=None}),
records out, and L{StoreCorrupt} naming the Redis key for anything else.
"""

from __future__ import annotations

from typing import Any

from nfltr.store._model import AccountInfo, KeyInfo, StoreCorrupt
from nfltr.store._ssh import SSHKeyInfo

_DIGEST_BYTES = 32

# Records listed in the order of a sorted set, each as id, HGETALL.
# KEYS: the sorted set, accounts.  ARGV: the records' key prefix, account ('' for all).
LIST_SCRIPT = """
if ARGV[2] ~= '' and redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then
  return redis.error_reply('NFLTR unknown-account')
end
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGETALL', ARGV[1] .. id)
end
return out
"""


def float_text(value: float) -> str:
    """
    A time as Redis keeps it: the shortest text that reads back equal.
    """
    return repr(float(value))


def _fields(reply: Any, key: str) -> dict[str, bytes]:
    """
    An C{HGETALL} reply as a dictionary.
    """
    if not isinstance(reply, list) or len(reply) % 2:
        raise StoreCorrupt(f"Redis key {key} does not hold an nfltr record")
    fields: dict[str, bytes] = {}
    for name, value in zip(reply[::2], reply[1::2], strict=True):
        if not isinstance(name, bytes) or not isinstance(value, bytes):
            raise StoreCorrupt(f"Redis key {key} does not hold an nfltr record")
        fields[name.decode("ascii", "replace")] = value
    return fields


def _text(fields: dict[str, bytes], name: str, key: str) -> str:
    try:
        return fields[name].decode("utf-8")
    except KeyError:
        raise StoreCorrupt(f"Redis key {key} lacks the field {name!r}") from None
    except UnicodeDecodeError:
        raise StoreCorrupt(f"Redis key {key} has a field {name!r} that is not UTF-8") from None


def _optional_text(fields: dict[str, bytes], name: str, key: str) -> str | None:
    return _text(fields, name, key) if name in fields else None


def _time(fields: dict[str, bytes], name: str, key: str) -> float:
    try:
        return float(_text(fields, name, key))
    except ValueError:
        raise StoreCorrupt(f"Redis key {key} has a field {name!r} that is not a time") from None


def digest_field(fields: dict[str, bytes], key: str) -> bytes:
    """
    The SHA-256 digest a record keeps in its field C{digest}, in hex.

    @raise StoreCorrupt: missing or malformed.
    """
    try:
        digest = bytes.fromhex(_text(fields, "digest", key))
    except ValueError:
        digest = b""
    if len(digest) != _DIGEST_BYTES:
        raise StoreCorrupt(f"Redis key {key} has a malformed 'digest'")
    return digest


def key_info(keyid: str, reply: Any, key: str) -> tuple[KeyInfo, bytes]:
    """
    An API key's record and its stored digest, from an C{HGETALL} of
    C{key}.

    @raise StoreCorrupt: a field is missing or malformed.
    """
    fields = _fields(reply, key)
    digest = digest_field(fields, key)
    revoked_at = _time(fields, "revoked_at", key) if "revoked_at" in fields else None
    info = KeyInfo(keyid, _text(fields, "account", key), _optional_text(fields, "label", key),
                   _time(fields, "created_at", key), revoked_at)
    return info, digest


def ssh_info(fingerprint: str, reply: Any, key: str) -> tuple[SSHKeyInfo, str]:
    """
    A registered SSH key's record and its C{TYPE BASE64} line, from an
    C{HGETALL} of C{key}.

    @raise StoreCorrupt: a field is missing or malformed.
    """
    fields = _fields(reply, key)
    info = SSHKeyInfo(fingerprint, _text(fields, "account", key),
                      _text(fields, "algorithm", key), _optional_text(fields, "label", key),
                      _time(fields, "created_at", key))
    return info, _text(fields, "key", key)


def account_list(reply: Any, key: str) -> list[AccountInfo]:
    """
    The accounts, by name, from an C{HGETALL} of the accounts hash C{key}.
    """
    fields = _fields(reply, key)
    accounts = []
    for name in sorted(fields):
        accounts.append(AccountInfo(name, _time(fields, name, key)))
    return accounts


def _pairs(reply: Any, prefix: str) -> list[tuple[str, Any, str]]:
    """
    The C{(id, HGETALL reply, key)} triples of the listing script's reply.
    """
    if not isinstance(reply, list) or len(reply) % 2:
        raise StoreCorrupt(f"Redis gave a malformed listing of {prefix}*")
    triples = []
    for ident, record in zip(reply[::2], reply[1::2], strict=True):
        if not isinstance(ident, bytes):
            raise StoreCorrupt(f"Redis gave a malformed listing of {prefix}*")
        text = ident.decode("utf-8", "replace")
        triples.append((text, record, prefix + text))
    return triples


def key_list(reply: Any, prefix: str) -> list[KeyInfo]:
    """
    API key records from the listing script's reply.
    """
    return [key_info(keyid, record, key)[0] for keyid, record, key in _pairs(reply, prefix)]


def ssh_list(reply: Any, prefix: str) -> list[SSHKeyInfo]:
    """
    SSH key records from the listing script's reply.
    """
    return [ssh_info(fp, record, key)[0] for fp, record, key in _pairs(reply, prefix)]
