# -*- test-case-name: tests.relay.api.test_auth -*-
"""
Who may use the API and the dashboard, and how often a source may get it
wrong.

  - An admin token (L{nfltr.store.IAdminTokens}, C{nfltr admin token
    create}) in C{Authorization: Bearer ...}, checked by the store (digests
    compared in constant time), on every request; or
  - a dashboard session: the token given once at login, then a random
    session id in a cookie (C{HttpOnly}, C{SameSite=Strict}, C{Secure} when
    the listener is TLS), held in memory by this relay for at most
    L{SESSION_LIFETIME}; every change made with it carries the session's
    CSRF token in L{CSRF_HEADER} (and a browser's C{Origin}, if it sends
    one, must be this listener's).  A session ends when its token is revoked
    (seen within L{SESSION_RECHECK}), at logout, or when it expires.
  - A read-only token (or its session) may read, never change.
  - Failed attempts (a wrong, unknown or revoked token, an unknown session)
    are limited per source address (L{FailureLimiter}): L{FAILURE_BURST} at
    once, then one per L{FAILURE_INTERVAL} seconds; over that, the source
    gets C{429} without its token being looked at.

No token, session id or CSRF token is ever logged; tokens are named by
their public id.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from nfltr.relay.config import ApiLimits
from nfltr.store import AdminTokenInfo

#: Failed authentications one source may make at once ...
FAILURE_BURST = ApiLimits.failure_burst
#: ... and then one every this many seconds.
FAILURE_INTERVAL = ApiLimits.failure_interval
#: Sources whose failures are remembered (the oldest forgotten first).
MAX_FAILING_SOURCES = 4096
#: Seconds a dashboard session lasts.
SESSION_LIFETIME = 8 * 3600.0
#: Sessions held at once (the oldest ended first).
MAX_SESSIONS = ApiLimits.sessions
#: Seconds after which a session's token is looked up again (revoked elsewhere?).
SESSION_RECHECK = 30.0
SESSION_COOKIE = b"nfltr_session"
CSRF_HEADER = b"x-csrf-token"
_SESSION_BYTES = 32


@dataclass
class Session:
    """
    One dashboard login.

    @ivar digest: SHA-256 of its id (the id itself is only in the cookie).
    @ivar csrf: the token its changes must carry.
    @ivar checked: when its token was last seen valid.
    """

    digest: bytes
    tokenid: str
    readOnly: bool
    csrf: str
    expires: float
    checked: float


@dataclass(frozen=True)
class Principal:
    """
    Who a request comes from: an admin token, directly or through a
    session.
    """

    tokenid: str
    readOnly: bool
    session: Session | None = None


class FailureLimiter:
    """
    Failed authentications per source, as token buckets: see the module.
    """

    log = Logger()

    def __init__(
        self, clock: IReactorTime, burst: int = FAILURE_BURST,
        interval: float = FAILURE_INTERVAL, maxSources: int = MAX_FAILING_SOURCES,
    ) -> None:
        self.clock = clock
        self.burst = burst
        self.interval = interval
        self.maxSources = maxSources
        self._buckets: dict[str, tuple[float, float]] = {}

    def _tokens(self, source: str) -> float:
        tokens, stamp = self._buckets.get(source, (float(self.burst), 0.0))
        elapsed = max(0.0, self.clock.seconds() - stamp)
        return min(float(self.burst), tokens + elapsed / self.interval)

    def blocked(self, source: str) -> bool:
        """
        Whether C{source} used up its failures.
        """
        return source in self._buckets and self._tokens(source) < 1

    def failed(self, source: str) -> None:
        """
        Count one failure of C{source}.
        """
        tokens = self._tokens(source) - 1
        self._buckets.pop(source, None)
        while len(self._buckets) >= self.maxSources:
            del self._buckets[next(iter(self._buckets))]
        self._buckets[source] = (max(0.0, tokens), self.clock.seconds())
        if tokens < 1:
            self.log.warn(
                "admin API: too many failed authentications from {source}: refused for a while",
                source=source,
            )


class Sessions:
    """
    The dashboard sessions of this relay, in memory.
    """

    def __init__(
        self, clock: IReactorTime, lifetime: float = SESSION_LIFETIME,
        maxSessions: int = MAX_SESSIONS,
    ) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.maxSessions = maxSessions
        self._sessions: dict[bytes, Session] = {}

    def create(self, token: AdminTokenInfo) -> tuple[str, Session]:
        """
        A new session for C{token}: its id (for the cookie) and record.
        """
        now = self.clock.seconds()
        sid = secrets.token_urlsafe(_SESSION_BYTES)
        session = Session(_digest(sid), token.tokenid, token.read_only,
                          secrets.token_urlsafe(_SESSION_BYTES), now + self.lifetime, now)
        while len(self._sessions) >= self.maxSessions:
            del self._sessions[next(iter(self._sessions))]
        self._sessions[session.digest] = session
        return sid, session

    def find(self, sid: str) -> Session | None:
        """
        The live session of id C{sid}, if any.
        """
        digest = _digest(sid)
        session = self._sessions.get(digest)
        if session is not None and session.expires <= self.clock.seconds():
            del self._sessions[digest]
            return None
        return session

    def live(self, session: Session) -> bool:
        """
        Whether C{session} is still one of ours, not expired.
        """
        return (self._sessions.get(session.digest) is session
                and session.expires > self.clock.seconds())

    def end(self, session: Session) -> None:
        """
        End C{session} (logout).
        """
        self._sessions.pop(session.digest, None)

    def endToken(self, tokenid: str) -> int:
        """
        End every session of token C{tokenid} (it was revoked).

        @return: how many.
        """
        ended = [d for d, s in self._sessions.items() if s.tokenid == tokenid]
        for digest in ended:
            del self._sessions[digest]
        return len(ended)

    def __len__(self) -> int:
        return len(self._sessions)


def csrf_matches(session: Session, given: bytes | None) -> bool:
    """
    Whether C{given} is C{session}'s CSRF token (compared in constant time).
    """
    return given is not None and hmac.compare_digest(given, session.csrf.encode("ascii"))


def bearer(request: Any) -> str | None:
    """
    The token of a request's C{Authorization: Bearer ...}, if any.
    """
    raw = request.getHeader(b"authorization")
    if raw is None:
        return None
    value = raw.decode("latin-1") if isinstance(raw, bytes) else str(raw)
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def source_of(request: Any) -> str:
    """
    The address failures are counted by: the peer's host.
    """
    return str(getattr(request.getClientAddress(), "host", "?"))


def _digest(sid: str) -> bytes:
    return hashlib.sha256(sid.encode("utf-8", "replace")).digest()
