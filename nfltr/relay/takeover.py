# -*- test-case-name: tests.relay.test_takeover -*-
"""
A relay that hands its listening sockets to its successor
(C{nfltr relay --takeover}), so a replacement refuses no connection.

The running relay listens on a Unix socket named for its data directory
(L{socket_name}: in Linux's abstract namespace, so a long data directory
path is no obstacle and no file is left behind; only a peer of the same user
is answered, checked with C{SO_PEERCRED}).  A new
relay started with C{--takeover} on that data directory connects before it
listens and sends C{take}; the running relay answers with the descriptors
of its listening sockets (SCM_RIGHTS), then one JSON line naming them in
order (C{{"listeners": ["tls", "http", "ssh"]}}), and starts to stop as on
SIGTERM: it lets the data directory go, closes its own copies of the
sockets and drains.  The sockets stay open in the successor, which adopts
them: a connection made meanwhile waits in the socket's queue, never
refused.  The admin listener passes as in an ordinary rolling restart
(L{nfltr.relay.succession}).

Limits: a successor waits L{TAKEOVER_TIMEOUT} seconds for the answer; the
answer is at most L{MAX_ANSWER} bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import UNIXClientEndpoint
from twisted.internet.error import CannotListenError, ConnectError
from twisted.internet.interfaces import IFileDescriptorReceiver
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

#: The prefix of the abstract Unix socket name of a running relay.
TAKEOVER_PREFIX = "nfltr-takeover-"
#: Seconds a successor waits for the running relay's answer.
TAKEOVER_TIMEOUT = 10.0
#: The most an answer (or a request) may hold, in bytes.
MAX_ANSWER = 4096
#: The listeners handed over, in this order where they exist.
ROLES = ("tls", "http", "ssh")
TAKE = b"take\n"

_log = Logger()


class TakeoverError(Exception):
    """
    No running relay handed its sockets over; the message says why.
    """


def socket_name(dataDir: Path) -> str:
    """
    The abstract Unix socket name of the relay running on C{dataDir}.
    """
    digest = hashlib.sha256(str(dataDir.resolve()).encode()).hexdigest()[:32]
    return f"\0{TAKEOVER_PREFIX}{digest}"


def peer_uid(transport: Any) -> int | None:
    """
    The user id of a Unix socket's peer (SO_PEERCRED), or L{None} if
    unknown.
    """
    handle = getattr(transport, "getHandle", None)
    if handle is None:
        return None
    try:
        raw = handle().getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    return int(struct.unpack("3i", raw)[1])


class _Giver(Protocol):
    """
    The running relay's side of one takeover.
    """

    transport: Any  # a Unix socket's: it sends descriptors
    def __init__(self, listeners: Callable[[], Mapping[str, int]],
                 handedOver: Callable[[], None]) -> None:
        self.listeners = listeners
        self.handedOver = handedOver
        self.buffer = b""
        self.gave = False

    def dataReceived(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > MAX_ANSWER:
            self.transport.loseConnection()
            return
        if not self.buffer.endswith(b"\n"):
            return
        if self.buffer != TAKE or peer_uid(self.transport) != os.getuid():
            _log.warn("takeover: refused a request that was not a successor's")
            self.transport.loseConnection()
            return
        fds = dict(self.listeners())
        for fd in fds.values():
            self.transport.sendFileDescriptor(fd)
        self.transport.write(json.dumps({"listeners": list(fds)}).encode() + b"\n")
        self.gave = True
        self.transport.loseConnection()  # once written: then connectionLost
        _log.info("handed the listeners ({roles}) to a successor: stopping",
                  roles=", ".join(fds) or "none")

    def connectionLost(self, reason: Failure | None = None) -> None:
        """
        The answer went (the connection closes once it is written): the
        relay may stop now, not before, or its last bytes would be lost.
        """
        if self.gave:
            self.handedOver()


async def listen_for_successor(
    reactor: Any, dataDir: Path, listeners: Callable[[], Mapping[str, int]],
    handedOver: Callable[[], None],
) -> Any:
    """
    Listen on the data directory's L{socket_name}; the port.

    @param listeners: the descriptors to hand over, by role.
    @param handedOver: called once they went (the relay then stops).
    @raise CannotListenError: another process listens there.
    """
    factory = Factory.forProtocol(lambda: _Giver(listeners, handedOver))
    factory.noisy = False
    return reactor.listenUNIX(socket_name(dataDir), factory)


@implementer(IFileDescriptorReceiver)
class _Taker(Protocol):
    """
    The successor's side: collects the descriptors and the line naming
    them.
    """

    transport: Any
    def __init__(self, done: Deferred[dict[str, int]]) -> None:
        self.done = done
        self.fds: list[int] = []
        self.buffer = b""

    def connectionMade(self) -> None:
        self.transport.write(TAKE)

    def fileDescriptorReceived(self, descriptor: int) -> None:
        self.fds.append(descriptor)

    def dataReceived(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > MAX_ANSWER:
            self._fail("an answer too long")
            self.transport.loseConnection()

    def connectionLost(self, reason: Failure | None = None) -> None:
        if self.done.called:
            return
        try:
            roles = json.loads(self.buffer)["listeners"]
            valid = (isinstance(roles, list) and len(roles) == len(self.fds)
                     and all(r in ROLES for r in roles) and len(set(roles)) == len(roles))
        except (ValueError, KeyError, TypeError):
            valid = False
        if not valid:
            self._fail("no answer" if not self.buffer else "an answer it could not read")
            return
        self.done.callback(dict(zip(roles, self.fds, strict=True)))

    def _fail(self, why: str) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        if not self.done.called:
            self.done.errback(TakeoverError(f"the running relay gave {why}"))


async def take_over(reactor: Any, dataDir: Path, timeout: float = TAKEOVER_TIMEOUT
                    ) -> dict[str, int]:
    """
    Ask the relay running on C{dataDir} for its listening sockets; their
    descriptors by role (this process owns them).

    @raise TakeoverError: no relay answered, or not as expected.
    """
    done: Deferred[dict[str, int]] = Deferred()
    factory = Factory.forProtocol(lambda: _Taker(done))
    factory.noisy = False
    try:
        await UNIXClientEndpoint(reactor, socket_name(dataDir), timeout=timeout).connect(factory)
    except ConnectError:
        raise TakeoverError(f"no relay runs on {dataDir}") from None
    done.addTimeout(timeout, reactor)
    try:
        return await done
    except TakeoverError:
        raise
    except Exception:  # noqa: BLE001 - the timeout
        raise TakeoverError(f"the running relay did not answer within {timeout:g} s") from None


def adopt(reactor: Any, fd: int, factory: Any) -> Any:
    """
    Listen with C{factory} on the taken-over socket C{fd}; the port (which
    holds its own copy: C{fd} is closed).
    """
    try:
        return reactor.adoptStreamPort(fd, family_of(fd), factory)
    finally:
        os.close(fd)


async def claim_when_free(reactor: Any, claim: Callable[[], Any]) -> Any:
    """
    C{claim()} (the data directory's lock), tried again while the relay
    that handed its sockets over still holds it (it lets it go as it starts
    to stop), for at most L{TAKEOVER_TIMEOUT} seconds.
    """
    from nfltr.store import DirectoryInUse

    deadline = reactor.seconds() + TAKEOVER_TIMEOUT
    while True:
        try:
            return claim()
        except DirectoryInUse:
            if reactor.seconds() > deadline:
                raise
        await deferLater(reactor, 0.02, lambda: None)


async def offer_listeners(reactor: Any, dataDir: Path, ports: Mapping[str, Any]
                          ) -> Callable[[], Any]:
    """
    Answer a successor's C{--takeover} with the listening sockets of
    C{ports} (by role; L{None}: not listening); the relay then stops as on
    SIGTERM.  What stops answering (a warning, and nothing to stop, if the
    socket cannot be had).
    """
    listening = {role: port for role, port in ports.items() if port is not None}

    def handedOver() -> None:
        for handed in listening.values():
            keep_socket_open(handed)
        reactor.callLater(0, reactor.stop)

    try:
        port = await listen_for_successor(
            reactor, dataDir, lambda: {r: p.fileno() for r, p in listening.items()}, handedOver,
        )
    except CannotListenError as e:
        _log.warn("no takeover for a successor (--takeover): {why}", why=e.socketError)
        return lambda: None
    return port.stopListening


def keep_socket_open(port: Any) -> None:
    """
    Make C{port} close only this process's descriptor when it stops.

    Twisted's TCP port calls C{shutdown()} on a socket it bound itself
    before closing it, and C{shutdown()} acts on the socket, not on one
    descriptor: the successor holding the same socket would stop accepting
    too.  For sockets it adopted Twisted already skips it; this says the
    same of a socket handed over (a private attribute of Twisted's port,
    listed in L{nfltr.netio.internals}; C{tests.integration.test_takeover}
    fails without it).
    """
    port._shouldShutdown = False


def family_of(fd: int) -> socket.AddressFamily:
    """
    The address family of the socket C{fd}.
    """
    probe = socket.socket(fileno=fd)
    try:
        return probe.family
    finally:
        probe.detach()


__all__ = [
    "MAX_ANSWER", "ROLES", "TAKEOVER_PREFIX", "TAKEOVER_TIMEOUT", "TakeoverError", "adopt",
    "claim_when_free", "family_of", "listen_for_successor", "offer_listeners", "socket_name",
    "take_over",
]
