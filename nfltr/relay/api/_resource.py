# -*- test-case-name: tests.relay.api.test_routes -*-
"""
L{AdminApi}: the API's state (store, view of the relay, sessions, failure
limiter) and its authentication (L{nfltr.relay.api._auth}); L{ApiResource}:
the twisted.web resource at C{/api}, which authenticates every request
before it looks at its path, then dispatches it through the route table
(L{nfltr.relay.api._handlers.ROUTES}) and answers JSON.

Every answer carries L{SECURITY_HEADERS} (a strict Content-Security-Policy
among them) and C{Cache-Control: no-store}.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import resource
from twisted.web.server import NOT_DONE_YET, Request

from nfltr.relay.config import DEFAULT_API_LIMITS, ApiLimits
from nfltr.store import IAdminTokens, IStore, StoreError

from ._auth import (
    CSRF_HEADER,
    SESSION_COOKIE,
    SESSION_RECHECK,
    FailureLimiter,
    Principal,
    Session,
    Sessions,
    bearer,
    csrf_matches,
    source_of,
)
from ._handlers import ROUTES, store_refusal
from ._routes import API_PREFIX, ApiError, Call, Route, find
from ._view import RelayView

#: The Content-Security-Policy of every answer: nothing but this origin's
#: own scripts, styles and connections; no frames, no plugins, no inline code.
CSP = (b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = (
    (b"content-security-policy", CSP),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)
EVENTS_PATH = f"{API_PREFIX}/events"
_READS = (b"GET", b"HEAD")
# Referrer-Policy: same-origin, not no-referrer: under no-referrer a browser sends Origin: null
# with its own same-origin POSTs, which the origin check would then refuse.


def secure(request: Request) -> None:
    """
    Put L{SECURITY_HEADERS} on C{request}'s answer.
    """
    for name, value in SECURITY_HEADERS:
        request.setHeader(name, value)


def same_origin(request: Request) -> bool:
    """
    Whether a browser's C{Origin}, if the request has one, is this
    listener's own.
    """
    origin = request.getHeader(b"origin")
    if origin is None:
        return True
    host = request.getHeader(b"host") or b""
    scheme = b"https" if request.isSecure() else b"http"
    return bool(origin == scheme + b"://" + host)


class AdminApi:
    """
    The API's state; see the module.

    @ivar events: serves C{/api/v1/events} (L{nfltr.relay.api._events}),
        once set.
    """

    log = Logger()

    def __init__(
        self, view: RelayView, store: IStore, clock: IReactorTime,
        routes: Sequence[Route] = ROUTES, limits: ApiLimits = DEFAULT_API_LIMITS,
    ) -> None:
        self.view = view
        self.store = store
        self.tokens = IAdminTokens(store)
        self.clock = clock
        self.routes = routes
        self.limits = limits
        self.sessions = Sessions(clock, maxSessions=limits.sessions)
        self.limiter = FailureLimiter(clock, limits.failure_burst, limits.failure_interval)
        self.events: Any = None

    async def authenticate(self, request: Request) -> Principal:
        """
        Who C{request} comes from; see L{nfltr.relay.api._auth}.

        @raise ApiError: 401 (no or a bad token or session), 403 (a
            session's change without its CSRF token, or from another
            origin), 429 (the source failed too often), 503 (the store
            does not answer).
        """
        source = source_of(request)
        if self.limiter.blocked(source):
            raise ApiError(429, "too many failed authentications from this address: "
                                "try again later")
        token = bearer(request)
        if token is not None:
            try:
                info = await self.tokens.verify_admin_token(token)
            except StoreError as e:
                raise store_refusal(e) from None
            if info is None or info.revoked:
                self.limiter.failed(source)
                raise ApiError(401, "invalid or revoked admin token")
            return Principal(info.tokenid, info.read_only)
        sid = request.getCookie(SESSION_COOKIE)
        if sid is None:
            raise ApiError(401, "an admin token is required: Authorization: Bearer TOKEN "
                                "(make one with: nfltr admin token create)")
        session = self.sessions.find(sid.decode("ascii", "replace"))
        if session is None:
            self.limiter.failed(source)
            raise ApiError(401, "no such session: log in again")
        await self.recheck(session)
        if request.method not in _READS:
            if not csrf_matches(session, request.getHeader(CSRF_HEADER)):
                raise ApiError(403, "a change from a session needs its CSRF token "
                                    "(the X-CSRF-Token header)")
            if not same_origin(request):
                raise ApiError(403, "a change from another origin")
        return Principal(session.tokenid, session.readOnly, session)

    async def recheck(self, session: Session) -> None:
        """
        Look C{session}'s token up again if it was last seen valid over
        L{SESSION_RECHECK} seconds ago (revoked by another relay, or with
        the command?); end the session if it is gone or revoked.

        @raise ApiError: 401, it ended.
        """
        now = self.clock.seconds()
        if now - session.checked < SESSION_RECHECK:
            return
        try:
            tokens = await self.tokens.list_admin_tokens()
        except StoreError as e:
            raise store_refusal(e) from None
        if not any(t.tokenid == session.tokenid and not t.revoked for t in tokens):
            self.sessions.end(session)
            raise ApiError(401, "the session's admin token was revoked: log in again")
        session.checked = now


class ApiResource(resource.Resource):
    """
    C{/api}: see the module.
    """

    isLeaf = True
    log = Logger()

    def __init__(self, api: AdminApi) -> None:
        super().__init__()
        self.api = api

    def render(self, request: Request) -> Any:
        """
        Answer C{request} (later).
        """
        secure(request)
        lost: list[Failure] = []
        request.notifyFinish().addErrback(lost.append)
        d = ensureDeferred(self._serve(request, lost))
        d.addErrback(self._failed, request, lost)
        return NOT_DONE_YET

    async def _serve(self, request: Request, lost: list[Failure]) -> None:
        api = self.api
        try:
            principal = await api.authenticate(request)
            path = [*(request.prepath or []), *(request.postpath or [])]
            segments = [s.decode("utf-8", "replace") for s in path]
            method = (request.method or b"").decode("ascii", "replace")
            route, params, allowed = find(api.routes, method, segments)
            if route is None:
                if allowed:
                    request.setHeader(b"allow", ", ".join(allowed).encode("ascii"))
                    raise ApiError(405, f"{method} is not allowed here")
                raise ApiError(404, "no such API route")
            if route.change and principal.readOnly:
                raise ApiError(403, "a read-only admin token cannot change anything")
            if route.template == EVENTS_PATH and api.events is not None:
                api.events.serve(request, principal)
                return
            call = Call(request, params, principal, api.view, api.store, api.sessions)
            try:
                status, payload = await route.handler(call)
            except StoreError as e:
                raise store_refusal(e) from None
        except ApiError as e:
            status, payload = e.status, {"error": e.message}
        if not lost:
            answer(request, status, payload)

    def _failed(self, failure: Failure, request: Request, lost: list[Failure]) -> None:
        self.log.failure("admin API: an unexpected error", failure)
        if not lost:
            answer(request, 500, {"error": "internal error (see the relay's log)"})


def answer(request: Request, status: int, payload: Any) -> None:
    """
    Finish C{request} with C{status} and C{payload} as JSON.
    """
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"application/json")
    body = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if request.method != b"HEAD":
        request.write(body + b"\n")
    request.finish()
