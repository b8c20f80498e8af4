# -*- test-case-name: tests.cli.test_login -*-
"""
Before C{nfltr login} saves a login, it tries it: one link to the relay as
a client, with the trust and the key to be saved (L{try_login}).  A relay
that welcomes it proves both; one that refuses it for good (an unknown or
revoked key, a certificate that is not the one trusted) says why; one that
does not answer within L{CHECK_TIMEOUT} is reported so.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import Any

#: Seconds the relay has to welcome the login's link.
CHECK_TIMEOUT = 15.0


def try_login(values: Mapping[str, str], timeout: float = CHECK_TIMEOUT) -> str | None:
    """
    Dial the relay as a client with C{values} (relay options, keyed by
    name; the key given as C{key}, or C{key-file}) on a reactor of its own.

    @return: L{None} if the relay welcomed the link, else why not (one line).
    """
    from nfltr.netio import install_reactor

    install_reactor()
    from twisted.internet import defer, task

    from nfltr.agent import ConfigError, DiallerObserver, RelayDialler, relay_settings
    from nfltr.wire.messages import client_hello

    outcome: list[str | None] = []

    class Verdict(DiallerObserver):
        def __init__(self, done: defer.Deferred[str | None]) -> None:
            self.done = done

        def relayUp(self, link: Any, welcome: dict[str, Any]) -> None:
            if not self.done.called:
                self.done.callback(None)

        def relayFatal(self, message: str) -> None:
            if not self.done.called:
                self.done.callback(message)

    async def main(reactor: Any) -> None:
        try:
            settings = relay_settings(values, {})
        except ConfigError as e:
            outcome.append(str(e))
            return
        done: defer.Deferred[str | None] = defer.Deferred()
        dialler = RelayDialler(settings.endpoint(reactor), reactor, client_hello(settings.key),
                               Verdict(done), settings.address)
        def late() -> None:
            if not done.called:
                done.callback(f"the relay at {settings.address} did not welcome us within "
                              f"{timeout:g}s")

        timer = reactor.callLater(timeout, late)
        dialler.start()
        outcome.append(await done)
        if timer.active():
            timer.cancel()
        await dialler.stop()

    with suppress(SystemExit):  # react() always exits
        task.react(main)
    return outcome[0] if outcome else "the check did not run"
