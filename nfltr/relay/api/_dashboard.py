# -*- test-case-name: tests.relay.api.test_dashboard -*-
"""
C{/dashboard}: a static page (L{STATIC}: HTML, one script, one style
sheet, all in this package, no third-party asset) over the API and its
event stream.

  - C{GET /dashboard}: the dashboard with a live session, else the login
    form.
  - C{POST /dashboard/login} (form field C{token}): the admin token is
    checked (failures limited per source, as for the API), then a session
    starts: its id in the cookie L{SESSION_COOKIE} (C{HttpOnly},
    C{SameSite=Strict}, C{Path=/}, C{Secure} when the listener is TLS),
    and C{303} to C{/dashboard}.  A browser's C{Origin}, if sent, must be
    this listener's (no login CSRF).
  - C{POST /dashboard/logout}: ends the session (its CSRF token in
    C{X-CSRF-Token}).
  - C{GET /dashboard/app.js}, C{/dashboard/app.css}: the assets (no
    secret in them: served without a session).
"""

from __future__ import annotations

import html
from importlib import resources as files
from string import Template
from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.logger import Logger
from twisted.web import resource
from twisted.web.server import NOT_DONE_YET, Request

from nfltr.store import StoreError

from ._auth import SESSION_COOKIE, csrf_matches, source_of
from ._resource import AdminApi, same_origin, secure
from ._routes import MAX_BODY

#: The dashboard's files: name, content type.
STATIC = {
    "app.js": b"text/javascript; charset=utf-8",
    "app.css": b"text/css; charset=utf-8",
}
LOGIN_FAILED = "That admin token is not valid (or was revoked)."
TOO_MANY = "Too many failed attempts from this address: try again later."
UNAVAILABLE = "The relay's store does not answer: try again later."


def _read(name: str) -> bytes:
    return (files.files(__package__) / "static" / name).read_bytes()


class Asset(resource.Resource):
    """
    One static file of the dashboard.
    """

    isLeaf = True

    def __init__(self, body: bytes, contentType: bytes) -> None:
        super().__init__()
        self.body = body
        self.contentType = contentType

    def render_GET(self, request: Request) -> bytes:
        secure(request)
        request.setHeader(b"content-type", self.contentType)
        return self.body


class Dashboard(resource.Resource):
    """
    C{/dashboard}; see the module.
    """

    log = Logger()

    def __init__(self, api: AdminApi) -> None:
        super().__init__()
        self.api = api
        self.page = _read("dashboard.html")
        self.login = Template(_read("login.html").decode("utf-8"))
        for name, contentType in STATIC.items():
            self.putChild(name.encode("ascii"), Asset(_read(name), contentType))
        self.putChild(b"login", Login(self))
        self.putChild(b"logout", Logout(self))

    def getChild(self, path: bytes, request: Request) -> resource.Resource:
        if path == b"":
            return self
        return resource.NoResource()

    def render_GET(self, request: Request) -> bytes:
        """
        The dashboard, or the login form.
        """
        secure(request)
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        if self.session(request) is not None:
            return self.page
        return self.loginPage("")

    def loginPage(self, message: str) -> bytes:
        return self.login.substitute(message=html.escape(message)).encode("utf-8")

    def session(self, request: Request) -> Any:
        sid = request.getCookie(SESSION_COOKIE)
        return None if sid is None else self.api.sessions.find(sid.decode("ascii", "replace"))


class Login(resource.Resource):
    """
    C{POST /dashboard/login}.
    """

    isLeaf = True

    def __init__(self, dashboard: Dashboard) -> None:
        super().__init__()
        self.dashboard = dashboard

    def render_POST(self, request: Request) -> Any:
        secure(request)
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        ensureDeferred(self._login(request))
        return NOT_DONE_YET

    async def _login(self, request: Request) -> None:
        api = self.dashboard.api
        source = source_of(request)
        token = (request.args or {}).get(b"token", [b""])[0]
        if not same_origin(request) or len(token) > MAX_BODY:
            request.setResponseCode(403)
            self._finish(request, "A login from another site is refused.")
            return
        if api.limiter.blocked(source):
            request.setResponseCode(429)
            self._finish(request, TOO_MANY)
            return
        try:
            info = await api.tokens.verify_admin_token(token.decode("ascii", "replace"))
        except StoreError:
            request.setResponseCode(503)
            self._finish(request, UNAVAILABLE)
            return
        if info is None or info.revoked:
            api.limiter.failed(source)
            request.setResponseCode(401)
            self._finish(request, LOGIN_FAILED)
            return
        sid, _ = api.sessions.create(info)
        request.addCookie(SESSION_COOKIE, sid.encode("ascii"), path=b"/", httpOnly=True,
                          secure=request.isSecure(), sameSite="strict")
        request.setResponseCode(303)
        request.setHeader(b"location", b"/dashboard")
        request.finish()

    def _finish(self, request: Request, message: str) -> None:
        request.write(self.dashboard.loginPage(message))
        request.finish()


class Logout(resource.Resource):
    """
    C{POST /dashboard/logout}: ends the session (with its CSRF token).
    """

    isLeaf = True

    def __init__(self, dashboard: Dashboard) -> None:
        super().__init__()
        self.dashboard = dashboard

    def render_POST(self, request: Request) -> bytes:
        secure(request)
        request.setHeader(b"content-type", b"application/json")
        session = self.dashboard.session(request)
        if session is None:
            request.setResponseCode(401)
            return b'{"error":"no such session"}\n'
        if not csrf_matches(session, request.getHeader(b"x-csrf-token")):
            request.setResponseCode(403)
            return b'{"error":"a logout needs the session\'s CSRF token"}\n'
        self.dashboard.api.sessions.end(session)
        request.addCookie(SESSION_COOKIE, b"", path=b"/", httpOnly=True, max_age="0",
                          secure=request.isSecure(), sameSite="strict")
        return b'{"logged_out":true}\n'
