# -*- test-case-name: tests.inspect.test_site -*-
"""
The inspector's web site (C{nfltr http PORT --inspect-ui 127.0.0.1:4040}):
a static page (files in C{static/}) over a small JSON API.

    GET  /                              the page
    GET  /api/requests?q=TEXT           kept exchanges, newest first (filtered)
    GET  /api/requests/ID               one, with headers and bodies
    POST /api/requests/ID/replay        send it again (JSON edits), 201 with the new one

Who may use it: on a loopback address, whoever can reach it (the user's
own machine), but only under a C{Host} naming the listener (no DNS
rebinding), and a replay only as JSON with no foreign C{Origin} (a web page
elsewhere cannot make the browser replay: its cross-origin JSON POST needs
a preflight this site never grants).  On any other address a token
(L{Inspector.token}, in a file the agent names) is needed: C{?token=...} once
(it becomes an C{HttpOnly}, C{SameSite=Strict} cookie) or
C{Authorization: Bearer ...}.  Every answer carries a strict
Content-Security-Policy; the page puts everything it shows in as text.
"""

from __future__ import annotations

import hmac
import json
from importlib import resources as files
from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.web import resource
from twisted.web.server import NOT_DONE_YET, Request, Site

from ._replay import MAX_REPLAY_BODY, ReplayError, replay
from ._ring import Ring

CSP = (b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
       b"img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
TOKEN_COOKIE = b"nfltr_inspect"
STATIC = {b"": ("index.html", b"text/html; charset=utf-8"),
          b"app.js": ("app.js", b"text/javascript; charset=utf-8"),
          b"app.css": ("app.css", b"text/css; charset=utf-8")}


class QuietSite(Site):
    """
    No access log (nothing per request at info), no tracebacks in answers.
    """

    noisy = False
    displayTracebacks = False

    def log(self, request: Any) -> None:
        """
        Nothing.
        """


class Inspector:
    """
    What the site serves: one share's ring, and how to replay to its
    service.

    @ivar hosts: the C{Host} values the site answers (its listener's).
    @ivar token: required when the site is not on loopback, else L{None}.
    @ivar note: why nothing is captured, if nothing can be (passthrough).
    """

    def __init__(self, reactor: Any, ring: Ring, port: int, host: bytes | None,
                 mode: str, note: str | None = None) -> None:
        self.reactor = reactor
        self.ring = ring
        self.port = port
        self.host = host
        self.mode = mode
        self.note = note
        self.hosts: set[bytes] = set()
        self.token: str | None = None

    def bound(self, host: str, port: int) -> None:
        """
        The listener is on C{host}, port C{port}: answer under that address
        only (and C{localhost}'s, on loopback).
        """
        from . import is_loopback

        names = {host, "localhost", "127.0.0.1"} if is_loopback(host) else {host}
        shown = {f"[{n}]" if ":" in n else n for n in names}
        self.hosts = {f"{n}:{port}".encode().lower() for n in shown}


def secure(request: Request) -> None:
    request.setHeader(b"content-security-policy", CSP)
    request.setHeader(b"x-content-type-options", b"nosniff")
    request.setHeader(b"x-frame-options", b"DENY")
    request.setHeader(b"referrer-policy", b"same-origin")
    request.setHeader(b"cache-control", b"no-store")


def _json(request: Request, status: int, payload: Any) -> bytes:
    request.setResponseCode(status)
    request.setHeader(b"content-type", b"application/json")
    return json.dumps(payload, separators=(",", ":")).encode() + b"\n"


class InspectorSite(resource.Resource):
    """
    The root: checks the caller, then serves the page or the API.
    """

    isLeaf = True

    def __init__(self, inspector: Inspector) -> None:
        super().__init__()
        self.inspector = inspector
        self.static = {
            path: ((files.files(__package__) / "static" / name).read_bytes(), kind)
            for path, (name, kind) in STATIC.items()
        }

    def render(self, request: Request) -> Any:
        secure(request)
        refusal = self._refusal(request)
        if refusal is not None:
            return _json(request, refusal[0], {"error": refusal[1]})
        path = request.postpath or [b""]
        if request.method in (b"GET", b"HEAD") and len(path) == 1 and path[0] in self.static:
            body, kind = self.static[path[0]]
            request.setHeader(b"content-type", kind)
            return body
        if path[:2] == [b"api", b"requests"]:
            return self._api(request, path[2:])
        return _json(request, 404, {"error": "not found"})

    def _refusal(self, request: Request) -> tuple[int, str] | None:
        inspector = self.inspector
        if inspector.hosts and (request.getHeader(b"host") or b"").lower() not in inspector.hosts:
            return 421, "this inspector answers only under its own address"
        token = inspector.token
        if token is None:
            return None
        given = request.getCookie(TOKEN_COOKIE)
        header = request.getHeader(b"authorization") or b""
        if header.lower().startswith(b"bearer "):
            given = header[7:].strip()
        query = (request.args or {}).get(b"token")
        if query:
            given = query[0]
            if hmac.compare_digest(given, token.encode()):
                request.addCookie(TOKEN_COOKIE, given, path=b"/", httpOnly=True,
                                  secure=request.isSecure(), sameSite="strict")
        if given is None or not hmac.compare_digest(given, token.encode()):
            return 401, "this inspector needs its token (printed with its URL)"
        return None

    def _api(self, request: Request, rest: list[bytes]) -> Any:
        ring = self.inspector.ring
        if not rest and request.method == b"GET":
            query = (request.args or {}).get(b"q", [b""])[0].decode("utf-8", "replace")
            return _json(request, 200, {"requests": ring.listing(query),
                                        "mode": self.inspector.mode,
                                        "note": self.inspector.note})
        record = ring.find(int(rest[0])) if rest and rest[0].isdigit() else None
        if record is None:
            return _json(request, 404, {"error": "no such request (the oldest are dropped)"})
        if len(rest) == 1 and request.method == b"GET":
            return _json(request, 200, record.json())
        if rest[1:] == [b"replay"] and request.method == b"POST":
            return self._replay(request, record)
        return _json(request, 405, {"error": "method not allowed"})

    def _replay(self, request: Request, record: Any) -> Any:
        kind = (request.getHeader(b"content-type") or b"").split(b";")[0].strip().lower()
        origin = request.getHeader(b"origin")
        if kind != b"application/json":
            return _json(request, 415, {"error": "a replay is a JSON POST"})
        if origin is not None and origin.split(b"://", 1)[-1].lower() not in self.inspector.hosts:
            return _json(request, 403, {"error": "a replay from another origin"})
        raw = request.content.read(MAX_REPLAY_BODY * 2) if request.content else b""
        try:
            edits = json.loads(raw or b"{}")
        except ValueError:
            return _json(request, 400, {"error": "the body is not JSON"})
        if not isinstance(edits, dict):
            return _json(request, 400, {"error": "the body is not a JSON object"})
        inspector = self.inspector
        lost: list[object] = []
        request.notifyFinish().addErrback(lost.append)

        async def run() -> None:
            try:
                new = await replay(inspector.reactor, inspector.ring, record, edits,
                                   inspector.port, inspector.host)
                answer = _json(request, 201, new.json())
            except ReplayError as e:
                answer = _json(request, 400, {"error": str(e)})
            if not lost:
                request.write(answer)
                request.finish()

        ensureDeferred(run())
        return NOT_DONE_YET
