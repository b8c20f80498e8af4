# -*- test-case-name: tests.relay.ssh.test_refusals -*-
"""
The answer to a client's C{ssh -L}/C{-W} channel open (L{when_accepted}):
confirmed once the agent accepted the session (link C{ACCEPT}: it reached its
service), refused with the agent's words if it reset the session (its
service is down; on a cluster, the holding replica's refusal), or refused
when no answer came within C{SSHConfig.open_timeout}.

An agent whose link did not announce C{accepts} (an older one) cannot
answer: its sessions are taken as accepted at once and the channel is
confirmed at once, as before; a reset then comes after the confirmation (an
SSH debug message, L{nfltr.ssh.channel.ForwardChannel.abortWith}).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.conch.ssh.connection import OPEN_CONNECT_FAILED
from twisted.internet import defer
from twisted.python.failure import Failure

from nfltr.link import code_name
from nfltr.link.twisted import SessionResetError
from nfltr.ssh import SSHConfig
from nfltr.wire import peerText

from ..tcp_route import SessionEnd

#: The channel open failure's text when the agent did not answer in time.
NO_ANSWER = "the agent did not answer within {timeout:g} s"


def when_accepted(end: Any, channel: Callable[[Any], Any], config: SSHConfig, clock: Any,
                  refusal: Callable[[int, str], Exception]) -> Any:
    """
    The channel for C{end} (a L{nfltr.relay.tcp_route.SessionEnd} opened
    with C{wantAccept}) built by C{channel}: at once if the agent's answer
    is already known (no answer to wait for), else a Deferred of it.

    @param refusal: builds the exception that refuses the open, from the SSH
        reason code and the text the client prints.
    @raise Exception: C{refusal}'s, when the refusal is already known.
    """
    # A SessionEnd opened with wantAccept waits for the agent's answer.
    accepted = end.accepted if isinstance(end, SessionEnd) else None
    if accepted is None:
        return channel(end)

    def refused(failure: Failure) -> Failure:
        if failure.check(defer.TimeoutError):
            text = NO_ANSWER.format(timeout=config.open_timeout)
        elif failure.check(SessionResetError):
            reset = failure.value
            assert isinstance(reset, SessionResetError)
            text = peerText(reset.reason) or code_name(reset.code)
        else:
            return failure
        return Failure(refusal(OPEN_CONNECT_FAILED, text))

    # The timeout cancels the wait, which resets the agent's session (CANCEL).
    accepted.addTimeout(config.open_timeout, clock)
    d = accepted.addCallbacks(lambda _: channel(end), refused)
    if not d.called:
        return d
    outcome: list[Any] = []
    d.addBoth(outcome.append)
    if isinstance(outcome[0], Failure):
        outcome[0].raiseException()
    return outcome[0]
