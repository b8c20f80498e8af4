# -*- test-case-name: tests.store.test_redis_url -*-
"""
Where a Redis directory is, as a URL.  Pure: no I/O (the CA file is read when
the store connects, not here).

    redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]
    rediss://[[USER]:PASSWORD@]HOST[:PORT][/DB][?ca=/path/to/ca.pem]
    redis+unix://[[USER]:PASSWORD@]/path/to/redis.sock[?db=N]
    unix://[[USER]:PASSWORD@]/path/to/redis.sock[?db=N]

The port defaults to L{DEFAULT_PORT}, the database to 0.  C{rediss} is
Redis over TLS: the server's certificate must name HOST and chain to the CA
file given (C{ca=}), or to the system's trusted roots without one.  The
password comes from the URL's user information (percent-encoded) or, when
the URL has none, from the environment variable L{PASSWORD_ENV}; it is never
part of L{RedisAddress.describe} nor of its C{repr}.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from nfltr.store._model import StoreError

DEFAULT_PORT = 6379
#: The start of every key name of the directory (L{nfltr.store.RedisStore}).
DEFAULT_PREFIX = "nfltr:"
#: Appended to the prefix: the channel revocations are published on.
REVOKED_CHANNEL = "revoked"
#: Appended to the prefix: the channel SSH key removals are published on.
SSH_REMOVED_CHANNEL = "ssh-removed"
#: The longest unix socket path the kernel takes (C{sun_path} is 108 bytes
#: with its terminating NUL); Python raises an C{OSError} without an errno
#: past it, which Twisted cannot report.
MAX_UNIX_PATH = 107
#: Seconds one connection attempt may take.
DEFAULT_CONNECT_TIMEOUT = 5.0
#: Seconds after which a call fails with L{nfltr.store.StoreUnavailable}.
DEFAULT_COMMAND_TIMEOUT = 5.0
#: Read when the URL carries no password.
PASSWORD_ENV = "NFLTR_REDIS_PASSWORD"
#: Redis's own ceiling on a database index is its C{databases} setting; this
#: only keeps absurd numbers out of the command line.
MAX_DB = 2**31 - 1
_MAX_URL = 4096
_SCHEMES = ("redis", "rediss", "redis+unix", "unix")
_DB_PATH = re.compile(r"/(0|[1-9][0-9]{0,9})?")


class InvalidRedisURL(StoreError, ValueError):
    """
    A Redis URL that cannot be used; the message says why, without the
    password.
    """


@dataclass(frozen=True)
class RedisAddress:
    """
    A parsed Redis URL.

    @ivar host: the host name or IP address (TCP), or L{None} (unix socket).
    @ivar port: the TCP port, or L{None} (unix socket).
    @ivar path: the unix socket's path, or L{None} (TCP).
    @ivar db: the database index.
    @ivar tls: whether to speak TLS (C{rediss}).
    @ivar ca_file: a PEM file of the CA(s) to trust for C{rediss}, or
        L{None} for the system's roots.
    @ivar username: the ACL user, or L{None} (Redis's C{default}).
    @ivar password: the password, or L{None}; left out of C{repr}.
    """

    host: str | None = None
    port: int | None = None
    path: str | None = None
    db: int = 0
    tls: bool = False
    ca_file: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def describe(self) -> str:
        """
        The address for logs and messages: no user, no password.
        """
        if self.path is not None:
            return f"redis+unix://{self.path}?db={self.db}"
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{'rediss' if self.tls else 'redis'}://{host}:{self.port}/{self.db}"


def parse_redis_url(url: str, environ: Mapping[str, str] | None = None) -> RedisAddress:
    """
    Read a Redis URL (see the module's docstring).

    @param environ: where to find L{PASSWORD_ENV} (default: L{os.environ}).
    @raise InvalidRedisURL: the URL is malformed; nothing else is raised.
    """
    if not isinstance(url, str) or len(url) > _MAX_URL:
        raise InvalidRedisURL("a Redis URL must be text of at most 4096 characters")
    if any(c.isspace() or not c.isprintable() for c in url):
        raise InvalidRedisURL("a Redis URL holds no spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise InvalidRedisURL(f"malformed Redis URL: {_redact(str(e))}") from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise InvalidRedisURL(
            f"unknown Redis URL scheme {parts.scheme!r}: use redis://HOST:PORT/DB, "
            "rediss://HOST:PORT/DB or redis+unix:///path/to/redis.sock?db=N"
        )
    if parts.fragment:
        raise InvalidRedisURL("a Redis URL has no #fragment")
    query = _query(parts.query)
    username, password = _credentials(parts.username, parts.password, environ)
    if scheme in ("redis+unix", "unix"):
        return _unix(parts.hostname, port, parts.path, query, username, password)
    return _tcp(scheme == "rediss", parts.hostname, port, parts.path, query, username, password)


def _tcp(tls: bool, host: str | None, port: int | None, path: str,
         query: dict[str, str], username: str | None, password: str | None) -> RedisAddress:
    if not host:
        raise InvalidRedisURL("a redis:// URL needs a host: redis://HOST:PORT/DB")
    if port == 0:
        raise InvalidRedisURL("a Redis port is from 1 to 65535")
    if path not in ("", "/") and _DB_PATH.fullmatch(path) is None:
        raise InvalidRedisURL(f"the path of a redis:// URL is the database number, not {path!r}")
    db = int(path[1:]) if len(path) > 1 else 0
    if "db" in query:
        raise InvalidRedisURL("a redis:// URL names its database in the path: redis://HOST/DB")
    ca_file = query.pop("ca", None)
    if ca_file is not None and not tls:
        raise InvalidRedisURL("ca= is for TLS: use a rediss:// URL")
    if ca_file == "":
        raise InvalidRedisURL("ca= needs the path of a PEM file")
    _no_more(query)
    return RedisAddress(host=host, port=port or DEFAULT_PORT, db=_db(db), tls=tls,
                        ca_file=ca_file, username=username, password=password)


def _unix(host: str | None, port: int | None, path: str, query: dict[str, str],
          username: str | None, password: str | None) -> RedisAddress:
    if host or port is not None:
        raise InvalidRedisURL(
            "a unix socket URL has no host: redis+unix:///path/to/redis.sock?db=N "
            "(three slashes)"
        )
    if not path.startswith("/") or path.endswith("/"):
        raise InvalidRedisURL("a unix socket URL needs the socket's absolute path")
    db = query.pop("db", "0")
    if not db.isascii() or not db.isdigit() or len(db) > 10:  # noqa: PLR2004
        raise InvalidRedisURL(f"db= is a database number, not {db!r}")
    _no_more(query)
    if len(os.fsencode(unquote(path))) > MAX_UNIX_PATH:
        raise InvalidRedisURL(
            f"a unix socket path is at most {MAX_UNIX_PATH} bytes; use a shorter directory"
        )
    return RedisAddress(path=unquote(path), db=_db(int(db)), username=username,
                        password=password)


def _db(db: int) -> int:
    if db > MAX_DB:
        raise InvalidRedisURL(f"database number {db} is too large")
    return db


def _query(text: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text))
    except ValueError:
        raise InvalidRedisURL(f"malformed query {text!r}: use NAME=VALUE&...") from None
    query: dict[str, str] = {}
    for name, value in pairs:
        if name in query:
            raise InvalidRedisURL(f"{name}= is given twice")
        query[name] = value
    return query


def _no_more(query: dict[str, str]) -> None:
    if query:
        names = ", ".join(sorted(query))
        raise InvalidRedisURL(f"unknown Redis URL option(s): {names} (known: ca, db)")


def _credentials(username: str | None, password: str | None,
                 environ: Mapping[str, str] | None) -> tuple[str | None, str | None]:
    user = unquote(username) if username else None
    if password is not None:
        return user, unquote(password) or None
    if user is not None and password is None:
        # redis://secret@host: the lone field is the password, as in redis-cli.
        return None, user
    env = os.environ if environ is None else environ
    return None, env.get(PASSWORD_ENV) or None


def _redact(message: str) -> str:
    """
    C{urllib}'s messages quote what they could not read; a password never
    reaches them (they complain about ports and brackets), but cut any
    userinfo all the same.
    """
    return re.sub(r"//[^@/]*@", "//***@", message)
