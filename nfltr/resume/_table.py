# -*- test-case-name: tests.resume.test_security -*-
"""
An agent's resumable sessions by token, and the suspensions' deadlines (sans-I/O).

A token is random (L{TOKEN_SIZE} bytes), held by the two ends only, and used once: a resume
that succeeds retires it and issues the session's next one. The table belongs to one agent of
one account: a resume presented on behalf of another account is refused before the token is
looked at. A refused resume leaves the session it may have named as it was.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable

from ._records import TOKEN_SIZE
from ._stream import ResumableStream, ResumeRefused

# How long a suspended session waits for its peer before both ends reset it (seconds).
DEFAULT_RESUME_TIMEOUT = 30.0
# The bounds of C{--resume-timeout}.
MIN_RESUME_TIMEOUT = 1.0
MAX_RESUME_TIMEOUT = 3600.0
# Seconds between a connector's attempts to resume a suspended session.
RESUME_RETRY = 0.5


def check_resume_timeout(seconds: float) -> float:
    """
    C{seconds} if it is a valid resume timeout: 0 (no resumption), or L{MIN_RESUME_TIMEOUT}
    to L{MAX_RESUME_TIMEOUT}.

    @raise ValueError: anything else.
    """
    if seconds != 0 and not MIN_RESUME_TIMEOUT <= seconds <= MAX_RESUME_TIMEOUT:
        raise ValueError(f"a resume timeout is 0 (off) or {MIN_RESUME_TIMEOUT:g} to "
                         f"{MAX_RESUME_TIMEOUT:g} seconds")
    return seconds


def _key(token: bytes) -> bytes:
    # Sessions are found by a digest of their token, so that the lookup's timing says nothing
    # about how much of a guessed token matches.
    return hashlib.sha256(token).digest()


class ResumeTable:
    """
    The resumable sessions of one agent.

    @ivar account: the account the agent authenticated as; tokens are bound to it.
    """

    def __init__(self, account: str, timeout: float = DEFAULT_RESUME_TIMEOUT,
                 random: Callable[[int], bytes] = os.urandom) -> None:
        self.account = account
        if not check_resume_timeout(timeout):
            raise ValueError("a table of resumable sessions needs a resume timeout")
        self.timeout = timeout
        self._random = random
        self._sessions: dict[bytes, ResumableStream] = {}
        self._keys: dict[ResumableStream, list[bytes]] = {}
        self._deadlines: dict[ResumableStream, float] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def _index(self, stream: ResumableStream) -> None:
        # Map the tokens the stream accepts now, and only those, to it.
        for key in self._keys.pop(stream, []):
            del self._sessions[key]
        keys = [_key(t) for t in (stream.token, stream.presented) if t is not None]
        for key in keys:
            self._sessions[key] = stream
        self._keys[stream] = keys

    def _new_token(self) -> bytes:
        token = self._random(TOKEN_SIZE)
        if len(token) != TOKEN_SIZE or _key(token) in self._sessions:
            raise RuntimeError("the random source repeated a token")
        return token

    def add(self, stream: ResumableStream) -> bytes:
        """
        Issue a token for a new session (its first record carries it to the connector).
        """
        token = self._new_token()
        stream.token = token
        self._index(stream)
        return token

    def remove(self, stream: ResumableStream) -> None:
        """
        Forget a session that ended (cleanly or with a reset).
        """
        for key in self._keys.pop(stream, []):
            del self._sessions[key]
        self._deadlines.pop(stream, None)

    def suspend(self, stream: ResumableStream, now: float) -> None:
        """
        C{stream}'s link is lost at C{now}: it waits for a resume until L{timeout} later.
        """
        stream.suspend()
        self._index(stream)
        self._deadlines[stream] = now + self.timeout

    def resume(
        self, account: str, token: bytes, offset: int,
    ) -> tuple[ResumableStream, list[bytes]]:
        """
        A connector's resume, forwarded by the relay with the account the connector
        authenticated as: the session and the bytes that answer it.

        @raise ResumeRefused: another account, an unknown or used token, or an offset the
            session cannot resume from; nothing changes.
        """
        if account != self.account:
            raise ResumeRefused("a token of another account")
        stream = self._sessions.get(_key(token))
        if stream is None or not stream.accepts(token):
            raise ResumeRefused("no session has this token")
        reply = stream.resume(offset, token, self._new_token())
        self._index(stream)
        self._deadlines.pop(stream, None)
        return stream, reply

    def expire(self, now: float) -> list[ResumableStream]:
        """
        Remove and return the sessions suspended for L{timeout} or more by C{now}: the agent
        resets their local connections.
        """
        expired = [stream for stream, deadline in self._deadlines.items() if deadline <= now]
        for stream in expired:
            self.remove(stream)
        return expired

    def next_deadline(self) -> float | None:
        """
        When the next suspension expires, for the adapter's timer.
        """
        return min(self._deadlines.values(), default=None)
