# -*- test-case-name: tests.store.test_redis -*-
"""
The Redis plumbing under L{nfltr.store.RedisStore}: a txredisapi connection
that reconnects on nfltr's one schedule, with every call bounded in time and
every failure turned into a typed L{StoreError}.

Limits (each a keyword of L{RedisConnection}):

  - L{DEFAULT_CONNECT_TIMEOUT}: one connection attempt (TCP or unix connect,
    TLS not included) gives up after this many seconds;
  - L{DEFAULT_COMMAND_TIMEOUT}: a call gives up this many seconds after it
    was made, waiting for a connection included, and fails with
    L{StoreUnavailable}.  A connection whose server leaves a command
    unanswered that long is aborted and dialled again, so a hung server does
    not keep a dead connection.

txredisapi quirks handled here:

  - its L{txredisapi.PeekableQueue} hands out peek Deferreds without a
    canceller: a call that times out while no connection is up leaves its
    peek in the queue until a connection comes back (Twisted then ignores
    the late callback), so an outage holds one per timed-out call.
    L{_PeekQueue} drops a cancelled peek at once.
  - it schedules reconnects and its connection hand-offs on the global
    reactor (its L{ClientService} gets no clock): a L{RedisConnection} works
    with the global reactor only.  The reactor given is used for the
    endpoints, the command and reply timeouts and the reconnect schedule.
  - its own reply timeout (C{replyTimeout}) fails every command waiting on
    the connection from inside a loop over the waiters, so a command that a
    failed caller sends at once, from its errback, is failed in the same
    loop, and so on: a caller that retries spins without the reactor ever
    running.  It is not used; L{RedisConnection.call} times out each call
    and aborts the connection itself.
  - numbers and text are converted by default; here neither is
    (C{convertNumbers=False}, C{charset=None}): replies are bytes and ints.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import txredisapi
from twisted.internet.defer import CancelledError, Deferred, TimeoutError
from twisted.internet.endpoints import HostnameEndpoint, UNIXClientEndpoint, wrapClientTLS
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.ssl import Certificate, optionsForClientTLS, trustRootFromCertificates
from twisted.logger import Logger
from twisted.python.failure import Failure

from nfltr.backoff import ReconnectSchedule
from nfltr.store._model import StoreCorrupt, StoreError, StoreUnavailable
from nfltr.store._redis_url import DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, RedisAddress
from nfltr.store.interfaces import ICommandTimes

# Replies that say the server is there but cannot serve now.
_UNAVAILABLE = ("NOAUTH", "WRONGPASS", "NOPERM", "LOADING", "READONLY", "MASTERDOWN", "BUSY",
                "TRYAGAIN", "CLUSTERDOWN")
_PEM_CERT = b"-----BEGIN CERTIFICATE-----"

_log = Logger()


class _PeekQueue(txredisapi.PeekableQueue):
    """
    txredisapi's pool queue, with peeks that can be cancelled (see the
    module's docstring).
    """

    def peek(self) -> Deferred[Any]:
        if self.pending:
            return super().peek()

        def cancel(d: Deferred[Any]) -> None:
            if d in self.peekers:
                self.peekers.remove(d)
            d.errback(CancelledError())

        d: Deferred[Any] = Deferred(cancel)
        self.peekers.append(d)
        return d


class _Factory(txredisapi.RedisFactory):
    """
    A txredisapi pool factory that takes its time from C{reactor}, dials
    again on L{ReconnectSchedule}, and remembers why the last connection
    attempt was refused (an authentication failure stops txredisapi for
    good: the message is worth showing).
    """

    def __init__(self, reactor: Any, address: RedisAddress, protocol: type[Any],
                 on_ready: Callable[[Any], None] | None = None) -> None:
        super().__init__(
            address.describe(), address.db or None, 1, isLazy=True, charset=None,
            password=address.password, username=address.username,
            replyTimeout=None, convertNumbers=False,
        )
        self.protocol = protocol
        self.connectionQueue = _PeekQueue()
        self.last_error: str | None = None
        # What a subscriber protocol hands each message to (RedisConnection sets it).
        self.feed: Callable[[object], None] | None = None
        self._reactor = reactor
        self._schedule = ReconnectSchedule()
        self._on_ready = on_ready
        self.deferred.addErrback(self._refused)

    def _refused(self, failure: Failure) -> None:
        self.last_error = failure.getErrorMessage()
        _log.warn("{error}", error=self.last_error)

    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        lost = protocol.connectionLost

        def connectionLost(reason: Failure) -> None:
            # Why a connection ended (a TLS verification failure, say) is
            # worth a caller's error message.
            if not reason.check(ConnectionDone):
                self.last_error = f"connection lost: {reason.getErrorMessage()}"
            lost(reason)

        protocol.connectionLost = connectionLost
        return protocol

    def retryDelay(self, attempt: int) -> float:
        return self._schedule.next_delay(self._reactor.seconds())

    def addConnection(self, conn: Any) -> None:
        super().addConnection(conn)
        if conn.connected and not self.disconnectCalled:
            self._schedule.connected(self._reactor.seconds())
            self.last_error = None
            if self._on_ready is not None:
                self._on_ready(conn)


def make_endpoint(reactor: Any, address: RedisAddress,
                  connect_timeout: float) -> IStreamClientEndpoint:
    """
    The endpoint that reaches C{address}: a unix socket, TCP, or TLS over TCP
    checked against the address's CA file (or the system's roots).

    @raise StoreError: the CA file cannot be read or holds no certificate.
    """
    if address.path is not None:
        return UNIXClientEndpoint(reactor, address.path, timeout=connect_timeout)
    assert address.host is not None and address.port is not None
    endpoint: IStreamClientEndpoint = HostnameEndpoint(
        reactor, address.host, address.port, timeout=connect_timeout
    )
    if not address.tls:
        return endpoint
    trust: Any = None
    if address.ca_file is not None:
        trust = trustRootFromCertificates(_read_ca(address.ca_file))
    return wrapClientTLS(optionsForClientTLS(address.host, trustRoot=trust), endpoint)


def _read_ca(path: str) -> list[Certificate]:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise StoreError(f"cannot read the Redis CA file {path}: {e.strerror}") from None
    blocks = [_PEM_CERT + block for block in data.split(_PEM_CERT)[1:]]
    try:
        certificates = [Certificate.loadPEM(block) for block in blocks]
    except Exception as e:  # noqa: BLE001 - pyOpenSSL raises its own Error or ValueError
        raise StoreError(f"the Redis CA file {path} is not PEM: {e}") from None
    if not certificates:
        raise StoreError(f"the Redis CA file {path} holds no PEM certificate")
    return certificates


def _timed(result: Any, times: ICommandTimes, clock: Any, started: float) -> Any:
    times.observe(clock.seconds() - started)
    return result


class RedisConnection:
    """
    One txredisapi connection to a Redis server, kept up, with each call
    bounded by C{command_timeout} and its errors translated.

    @ivar address: where the server is.
    @ivar times: counts how long each call took (L{None}: nothing counts).
    """

    def __init__(self, reactor: Any, address: RedisAddress, *,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
                 command_timeout: float = DEFAULT_COMMAND_TIMEOUT,
                 protocol: type[Any] = txredisapi.RedisProtocol,
                 on_ready: Callable[[Any], None] | None = None,
                 feed: Callable[[object], None] | None = None) -> None:
        """
        Start connecting (in the background: calls made meanwhile wait, up to
        C{command_timeout}).

        @param protocol: the txredisapi protocol class (a subscriber's).
        @param on_ready: called with each protocol that is connected (and
            authenticated, and in its database).
        @param feed: called with each message a subscriber protocol receives.
        @raise StoreError: the TLS CA file is unusable.
        """
        self.address = address
        self._reactor = reactor
        self._command_timeout = command_timeout
        self.times: ICommandTimes | None = None
        endpoint = make_endpoint(reactor, address, connect_timeout)
        self._factory = _Factory(reactor, address, protocol, on_ready)
        self._factory.feed = feed
        self._factory.startConnecting(endpoint)

    def call(self, what: str, command: Callable[[Any], Deferred[Any]]) -> Deferred[Any]:
        """
        Run C{command} with a connected txredisapi protocol; give up after
        the command timeout (and abort the connection if the command was
        sent: its server is hung or gone).  Failures become L{StoreError}s (a
        reply that starts with C{NFLTR } is left as txredisapi's
        L{ResponseError}, for the caller to read).

        @param what: what the call does, for error messages.
        """
        sent: list[Any] = []

        def send(protocol: Any) -> Deferred[Any]:
            sent.append(protocol)
            return command(protocol)

        def abandon(result: Failure, timeout: float) -> Failure:
            for protocol in sent:
                if protocol.transport is not None:
                    _log.warn("Redis at {where} did not answer within {timeout} s: "
                              "dropping the connection", where=self.address.describe(),
                              timeout=timeout)
                    protocol.transport.abortConnection()
            return result

        d: Deferred[Any] = self._factory.getConnection(peek=True)
        d.addCallback(send)
        d.addTimeout(self._command_timeout, self._reactor, onTimeoutCancel=abandon)
        if self.times is not None:
            d.addBoth(_timed, self.times, self._reactor, self._reactor.seconds())
        d.addErrback(self._translate, what)
        return d

    def execute(self, what: str, *args: object) -> Deferred[Any]:
        """
        Run one Redis command (see L{call}).
        """
        return self.call(what, lambda handler: handler.execute_command(*args))

    def eval(self, what: str, script: str, keys: list[str], args: list[object]) -> Deferred[Any]:
        """
        Run a Lua script, by its digest when the server knows it (see
        L{call}).
        """
        return self.call(what, lambda handler: handler.eval(script, keys, args))

    def _translate(self, failure: Failure, what: str) -> Failure:
        error = failure.value
        where = self.address.describe()
        if isinstance(error, StoreError):
            return failure
        if isinstance(error, TimeoutError | CancelledError | txredisapi.TimeoutError):
            why = f" (last refusal: {self._factory.last_error})" if self._factory.last_error else ""
            raise StoreUnavailable(
                f"Redis at {where} did not answer within {self._command_timeout:g} s "
                f"to {what}{why}"
            )
        if isinstance(error, txredisapi.ConnectionError):
            why = self._factory.last_error or str(error)
            raise StoreUnavailable(f"Redis at {where} is not reachable to {what}: {why}")
        if isinstance(error, txredisapi.ResponseError):
            message = str(error)
            if message.startswith("NFLTR "):
                return failure
            if "WRONGTYPE" in message:
                raise StoreCorrupt(
                    f"Redis at {where} holds a value of the wrong type where nfltr keeps "
                    f"its records ({what}): another program wrote under nfltr's prefix? "
                    f"Redis said: {message}"
                )
            if message.split(" ", 1)[0] in _UNAVAILABLE:
                raise StoreUnavailable(f"Redis at {where} cannot {what} now: {message}")
            raise StoreError(f"Redis at {where} refused to {what}: {message}")
        if isinstance(error, txredisapi.RedisError):
            raise StoreError(f"Redis at {where} failed to {what}: {error}")
        return failure

    def close(self) -> Deferred[None]:
        """
        Stop reconnecting and close the connection.
        """
        d: Deferred[Any] = self._factory.disconnect()
        return d.addCallback(lambda _: None)
