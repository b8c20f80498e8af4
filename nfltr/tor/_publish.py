# -*- test-case-name: tests.tor.test_options,tests.integration.test_tor -*-
"""
Publish an onion service on a tor through its control port: C{ADD_ONION} with
nfltr's own key (L{nfltr.tor.OnionKey}), each virtual port mapped to a local
target, C{ClientAuthV3} keys if the operator gave any; done once the
descriptor reached a first hidden service directory (the C{HS_DESC UPLOADED}
event).  The service lives as long as the control connection (not
C{Detach}ed): a relay that stops or dies takes it with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from twisted.internet.defer import Deferred

from ._keys import OnionKey


class PublishError(Exception):
    """
    Tor refused the service or did not publish it in time; the message says which.
    """


def add_onion_command(
    key: OnionKey, ports: Sequence[tuple[int, str]], client_keys: Sequence[str] = (),
) -> str:
    """
    The C{ADD_ONION} command line: C{ports} as (virtual port, target) pairs, the target
    C{HOST:PORT} or C{unix:PATH}.
    """
    parts = ["ADD_ONION", key.control_blob()]
    if client_keys:
        parts.append("Flags=V3Auth")
    parts += [f"Port={virtual},{target}" for virtual, target in ports]
    parts += [f"ClientAuthV3={client}" for client in client_keys]
    return " ".join(parts)


async def publish(
    protocol: Any, key: OnionKey, ports: Sequence[tuple[int, str]],
    client_keys: Sequence[str], reactor: Any, timeout: float,
) -> None:
    """
    Add the service on C{protocol} (a txtorcon C{TorControlProtocol}) and wait until its
    descriptor is uploaded (L{UploadRound}).

    @raise PublishError: tor said no, or no upload within C{timeout} seconds.
    """
    uploaded: Deferred[None] = Deferred()
    uploads = UploadRound(key.service_id)

    def on_descriptor(text: str) -> None:
        if uploads.event(text) and not uploaded.called:
            uploaded.callback(None)

    await protocol.add_event_listener("HS_DESC", on_descriptor)
    try:
        try:
            reply = await protocol.queue_command(add_onion_command(key, ports, client_keys))
        except Exception as e:  # noqa: BLE001 - txtorcon's TorProtocolError carries tor's words
            raise PublishError(f"tor refused the onion service: {e}") from None
        if f"ServiceID={key.service_id}" not in str(reply):
            raise PublishError(f"tor answered ADD_ONION unexpectedly: {reply}")
        uploaded.addTimeout(timeout, reactor)
        try:
            await uploaded
        except Exception:  # noqa: BLE001 - the timeout
            raise PublishError(
                f"the onion service's descriptor was not published within {timeout:g} s "
                f"({uploads.describe()}; is tor bootstrapped? see its log)"
            ) from None
    finally:
        protocol.remove_event_listener("HS_DESC", on_descriptor)


def remove_command(key: OnionKey) -> str:
    """
    The C{DEL_ONION} command line for C{key}'s service.
    """
    return f"DEL_ONION {key.service_id}"


class UploadRound:
    """
    Follows the C{HS_DESC} events of one service until its first round of uploads ended:
    every directory it started to upload to (C{UPLOAD}) before the first answer answered
    (C{UPLOADED} or C{FAILED}), one at least well, so any client finds the descriptor,
    whichever directory it asks.  Later rounds (tor uploads again on each new consensus, on a
    test network every few seconds) are not waited for: they could go on for ever.  A later
    round's start ends the wait for a first-round directory that never answered (tor moved on
    to the next round) once one directory took the descriptor.
    """

    def __init__(self, service_id: str) -> None:
        self.service_id = service_id
        self.pending: set[str] = set()
        self.started = 0
        self.took = 0
        self.answered = False
        self.uploaded = False

    def event(self, text: str) -> bool:
        """
        Take one event's text (C{ACTION ADDRESS AUTH DIRECTORY ...}); whether the first round
        has ended well.
        """
        fields = text.split()
        if len(fields) < 4 or fields[1] != self.service_id:  # noqa: PLR2004 - action, address, auth, directory
            return False
        action, directory = fields[0], fields[3]
        if action == "UPLOAD":
            if not self.answered:
                self.pending.add(directory)
                self.started += 1
            elif self.uploaded:
                self.pending.clear()  # the next round began: the first is over
        elif action in ("UPLOADED", "FAILED"):
            self.answered = True
            first = directory in self.pending
            self.pending.discard(directory)
            if action == "UPLOADED":
                self.uploaded = True
                self.took += first
        return self.uploaded and not self.pending

    def describe(self) -> str:
        """
        Where the first round stands, in words (for an attempt that ran out of time).
        """
        if not self.started:
            return "no upload started"
        answered = self.started - len(self.pending)
        waiting = ", ".join(sorted(self.pending))
        return (f"{answered} of {self.started} directories answered, {self.took} took it"
                + (f"; waiting for {waiting}" if waiting else ""))
