# -*- test-case-name: tests.netio.test_internals -*-
"""
The private names of Twisted, pyOpenSSL and conch that nfltr relies on, in
one list.

nfltr reaches below its libraries' public API in a few places, each for a
reason its module gives: its TCP transport, epoll reactor and memory-BIO
TLS are subclasses that read their base's state (L{nfltr.netio},
L{nfltr.tls}, PERFORMANCE.md), L{nfltr.tls._direct} calls OpenSSL through
pyOpenSSL's own C{cffi} handles, and nfltr's SSH transport extends conch's
key exchange.  L{PRIVATE} names every such attribute, where it lives and
which nfltr modules touch it; L{missing} checks them against the installed
libraries.  An upgrade that renames one then fails in one place
(C{tests.netio.test_internals}), with a message naming the name, the
library's version and its users, instead of deep inside a connection.

A class's names include the attributes its instances get in its methods
(C{self._x = ...}), not only those on the class.

Code that needs a private module's objects takes them from here where that
costs nothing: L{openssl_ffi} and L{openssl_lib} (pyOpenSSL's
C{OpenSSL._util}), L{None} when this pyOpenSSL has none.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from importlib import metadata
from typing import Any

try:
    from OpenSSL._util import ffi as openssl_ffi
    from OpenSSL._util import lib as openssl_lib
except ImportError:  # pragma: no cover - another pyOpenSSL
    openssl_ffi = openssl_lib = None


@dataclass(frozen=True)
class Private:
    """
    Private names of one module or class of a library.

    @ivar owner: the module or class, dotted (C{package.module.Class}).
    @ivar names: its attributes nfltr reads, sets or overrides.
    @ivar users: the nfltr modules that touch them.
    """

    owner: str
    names: tuple[str, ...]
    users: tuple[str, ...]


_TLS_STATE = (
    "_tlsConnection", "_lostTLSConnection", "_handshakeDone", "_appSendBuffer", "_aborted",
    "_reason",
)
_TLS_METHODS = (
    "_write", "_bufferedWrite", "_flushSendBIO", "_flushReceiveBIO", "_unbufferPendingWrites",
    "_checkHandshakeStatus", "_shutdownTLS", "_tlsShutdownFinished",
)
_SSH_KEX = (
    "_KEY_EXCHANGE_NONE", "_KEY_EXCHANGE_REQUESTED", "_KEY_EXCHANGE_PROGRESSING",
    "_keyExchangeState", "_blockedByKeyExchange", "_allowedKeyExchangeMessageType",
    "_peerSupportsExtensions", "_getKey", "_keySetup", "_encodeECPublicKey",
    "_generateECPrivateKey",
)

#: Every private name nfltr touches.
PRIVATE: tuple[Private, ...] = (
    # The TCP transport (write now, sizes) and its port and connector.
    Private(
        "twisted.internet.tcp.Connection",
        ("_tempDataLen", "_writeDisconnecting", "_writeDisconnected", "_aborting"),
        ("nfltr.netio._tcp",),
    ),
    Private("twisted.internet.tcp.Client", ("_requiresResolution", "_setRealAddress"),
            ("nfltr.netio._tcp",)),
    Private("twisted.internet.tcp.Connector", ("_makeTransport",), ("nfltr.netio._tcp",)),
    Private("twisted.internet.tcp.Port", ("_fromListeningDescriptor", "_shouldShutdown"),
            ("nfltr.netio._reactor", "nfltr.relay.takeover")),
    # The epoll reactor without the legacy log context.
    Private(
        "twisted.internet.epollreactor.EPollReactor",
        ("_poller", "_selectables", "_doReadOrWrite", "_disconnectSelectable"),
        ("nfltr.netio._poll",),
    ),
    # Batching TLS and the end-to-end TLS of a tunnel on top of it.
    Private("twisted.protocols.tls.TLSMemoryBIOProtocol", _TLS_STATE + _TLS_METHODS,
            ("nfltr.tls._batching", "nfltr.tls._e2ee")),
    # OpenSSL called directly once a handshake is done.
    Private("OpenSSL._util", ("ffi", "lib"), ("nfltr.netio.internals",)),
    Private(
        "OpenSSL._util.lib",
        ("SSL_read", "SSL_write", "SSL_get_error", "BIO_read", "BIO_write",
         "SSL_ERROR_WANT_READ", "SSL_clear_mode", "SSL_MODE_RELEASE_BUFFERS"),
        ("nfltr.tls._direct",),
    ),
    Private("OpenSSL.SSL.Connection", ("_ssl", "_into_ssl", "_from_ssl", "_raise_ssl_error"),
            ("nfltr.tls._direct",)),
    # A listener's backlog set in its endpoint description.
    Private("twisted.internet.endpoints", ("_parse",), ("nfltr.relay.backlog",)),
    # The hardened SSH transport: key exchange, strict KEX, quiet logs.
    Private("twisted.conch.ssh._kex", ("isPQHybrid", "getPQHybridKex", "getHashProcessor"),
            ("nfltr.ssh.transport", "nfltr.ssh.client")),
    Private("twisted.conch.ssh.transport.SSHTransportBase", (*_SSH_KEX, "_log"),
            ("nfltr.ssh.transport", "nfltr.ssh.client", "nfltr.relay.ssh._server")),
    Private("twisted.conch.ssh.transport.SSHServerTransport",
            ("_ssh_KEX_ECDH_INIT", "_ssh_KEX_HYBRID_INIT"), ("nfltr.ssh.transport",)),
    Private("twisted.conch.ssh.transport.SSHClientTransport", ("_ssh_KEX_ECDH_REPLY",),
            ("nfltr.ssh.client",)),
    Private("twisted.conch.ssh.service.SSHService", ("_log",), ("nfltr.relay.ssh._server",)),
    Private("twisted.conch.ssh.factory.SSHFactory", ("_log",), ("nfltr.relay.ssh._server",)),
    # A login the key store cannot check now is first explained in a banner.
    Private("twisted.conch.ssh.userauth.SSHUserAuthServer", ("_ebBadAuth",),
            ("nfltr.relay.ssh._server",)),
    # The observer twistd itself would start (--logfile, --syslog, -n), behind our level filter.
    Private("twisted.scripts.twistd", ("_SomeApplicationRunner",), ("nfltr.cli.logs",)),
    Private("twisted.application.app.AppLogger", ("_getLogObserver",), ("nfltr.cli.logs",)),
)

#: The distribution that installs each top-level package, for messages.
DISTRIBUTIONS = {"twisted": "Twisted", "OpenSSL": "pyOpenSSL"}


def missing(private: tuple[Private, ...] = PRIVATE) -> list[str]:
    """
    Check C{private} against the installed libraries.

    @return: one message per owner or name that is gone, naming it, the
        library's version and the nfltr modules that use it.
    """
    problems = []
    for entry in private:
        users = ", ".join(entry.users)
        where = _version(entry.owner)
        owner = resolve(entry.owner)
        if owner is None:
            problems.append(f"{entry.owner} is gone ({where}); used by {users}")
            continue
        problems.extend(
            f"{entry.owner}.{name} is gone ({where}); used by {users}"
            for name in entry.names if not has(owner, name)
        )
    return problems


def resolve(dotted: str) -> Any:
    """
    The module or object C{dotted} names (the longest importable module,
    then attributes), or L{None} if there is none.
    """
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name, None)
            if found is None:
                return None
        return found
    return None


def has(owner: Any, name: str) -> bool:
    """
    Whether C{owner} has C{name}: as an attribute, or (for a class) as an
    attribute one of its or its bases' methods sets on C{self}.
    """
    if hasattr(owner, name):
        return True
    if not inspect.isclass(owner):
        return False
    assigned = re.compile(rf"\bself\.{re.escape(name)}\s*(:[^=\n]*)?=[^=]")
    for cls in owner.__mro__:
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):
            continue  # a builtin, or no source installed
        if assigned.search(source):
            return True
    return False


def _version(dotted: str) -> str:
    package = dotted.split(".", maxsplit=1)[0]
    distribution = DISTRIBUTIONS.get(package, package)
    try:
        return f"{distribution} {metadata.version(distribution)}"
    except metadata.PackageNotFoundError:
        return f"{distribution}, version unknown"
