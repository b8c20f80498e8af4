# -*- test-case-name: tests.store.test_redis -*-
"""
Listening for revocations (and SSH key removals) on Redis channels: a
connection of its own in subscriber mode (Redis allows nothing else on it),
subscribed to each channel, which subscribes again after each reconnect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import txredisapi
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from nfltr.store._model import StoreUnavailable, is_keyid
from nfltr.store._redis_client import RedisConnection
from nfltr.store._redis_url import RedisAddress
from nfltr.store.interfaces import IRevocationSubscription


class _SubscriberProtocol(txredisapi.SubscriberProtocol):
    """
    Hands each message to its factory's C{feed}.
    """

    def messageReceived(self, pattern: Any, channel: Any, message: Any) -> None:
        self.factory.feed((channel, message))


@dataclass(frozen=True)
class Listened:
    """
    A channel listened to: who hears its messages, and what they look like.

    @ivar what: what a message names, for log lines (C{"key"}).
    @ivar valid: whether a message (text) is well-formed.
    """

    callback: Callable[[str], object]
    what: str
    valid: Callable[[str], bool]


@implementer(IRevocationSubscription)
class RevocationSubscription:
    """
    A subscription to the revocations published on C{channel}, and to what
    the other channels of C{more} carry.

    @ivar stopped: fires once L{stop} has closed the connection.
    """

    _log = Logger()

    def __init__(self, reactor: Any, address: RedisAddress, channel: str,
                 callback: Callable[[str], object], *, connect_timeout: float,
                 command_timeout: float, more: dict[str, Listened] | None = None) -> None:
        self.channel = channel
        self.stopped: Deferred[None] = Deferred()
        self._reactor = reactor
        self._channels = {channel: Listened(callback, "key", is_keyid), **(more or {})}
        self._timeout = command_timeout
        self._waiting: list[Deferred[IRevocationSubscription]] = []
        self._listening = False
        self._redis = RedisConnection(
            reactor, address, connect_timeout=connect_timeout, command_timeout=command_timeout,
            protocol=_SubscriberProtocol, on_ready=self._subscribe, feed=self._deliver,
        )

    def _subscribe(self, protocol: Any) -> None:
        d: Deferred[Any] = protocol.subscribe(list(self._channels))
        d.addCallbacks(self._subscribed, self._refused)

    def _subscribed(self, _: object) -> None:
        self._listening = True
        self._log.info("listening for revocations on {channels}",
                       channels=", ".join(self._channels))
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.callback(self)

    def _refused(self, failure: Failure) -> None:
        # A lost connection is dialled again, and subscribes again.
        self._log.warn("could not subscribe to {channel}: {error}", channel=self.channel,
                       error=failure.getErrorMessage())

    def started(self) -> Deferred[IRevocationSubscription]:
        """
        Fires with this subscription once it listens, or fails with
        L{StoreUnavailable} (and stops it) if it does not listen within the
        command timeout.
        """
        d: Deferred[IRevocationSubscription] = Deferred()
        if self._listening:
            d.callback(self)
            return d
        self._waiting.append(d)
        d.addTimeout(self._timeout, self._reactor)

        def failed(failure: Failure) -> Deferred[IRevocationSubscription]:
            if d in self._waiting:
                self._waiting.remove(d)
            where = self._redis.address.describe()
            error = StoreUnavailable(
                f"could not subscribe to {self.channel} on Redis at {where} "
                f"within {self._timeout:g} s"
            )

            def fail(_: object) -> Failure:
                return Failure(error)

            return self.stop().addCallback(fail)

        return d.addErrback(failed)

    def _deliver(self, received: object) -> None:
        channel, message = received if isinstance(received, tuple) else (None, received)
        name = channel.decode("utf-8", "replace") if isinstance(channel, bytes) else str(channel)
        listened = self._channels.get(name)
        text = message.decode("ascii", "replace") if isinstance(message, bytes) else ""
        if listened is None or not listened.valid(text):
            self._log.warn("ignored a malformed message on {channel}: {message!r}",
                           channel=name, message=message)
            return
        try:
            listened.callback(text)
        except Exception:  # noqa: BLE001 - one bad callback must not end the subscription
            self._log.failure("callback failed on {channel} for {what} {name}",
                              channel=name, what=listened.what, name=text)

    def stop(self) -> Deferred[None]:
        """
        See L{IRevocationSubscription.stop}.
        """

        def done(_: object) -> None:
            if not self.stopped.called:
                self.stopped.callback(None)

        return self._redis.close().addCallback(done)
