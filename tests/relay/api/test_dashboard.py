"""
Tests for L{nfltr.relay.api._dashboard} and the dashboard's sessions
(L{nfltr.relay.api._auth}): login, cookie, CSRF, origin, expiry, logout.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.api._auth import FAILURE_BURST, SESSION_LIFETIME, SESSION_RECHECK
from nfltr.relay.api._dashboard import LOGIN_FAILED, _read

from .helpers import Answer, ApiFixture

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


class DashboardTests(SynchronousTestCase):
    """
    The dashboard's page, login and session.
    """

    def setUp(self) -> None:
        self.f = ApiFixture(Path(self.mktemp()))

    def login(self, token: str, **headers: str) -> Answer:
        body = urlencode({"token": token}).encode()
        return self.f.call("POST", "/dashboard/login", raw=body, headers={**FORM, **headers})

    def session(self, token: str | None = None) -> tuple[str, str]:
        """
        Log in; the cookie header and the session's CSRF token.
        """
        answer = self.login(token or self.f.admin)
        self.assertEqual(answer.status, 303)
        cookie = answer.header("set-cookie") or ""
        value = cookie.split(";")[0]
        me = self.f.call("GET", "/api/v1/session", headers={"Cookie": value}).json()
        return value, me["csrf"]

    def test_loginPage(self) -> None:
        """
        Without a session C{/dashboard} is the login form, under a strict
        CSP, with no inline script.
        """
        answer = self.f.call("GET", "/dashboard")
        self.assertEqual(answer.status, 200)
        self.assertIn(b'action="/dashboard/login"', answer.body)
        self.assertIn("default-src 'none'", answer.header("content-security-policy") or "")
        self.assertNotIn(b"<script", answer.body)

    def test_loginCookie(self) -> None:
        """
        A good token logs in: a 303 to the dashboard and a cookie that is
        HttpOnly, SameSite=Strict, for the whole listener (not Secure: this
        listener is plain TCP).
        """
        answer = self.login(self.f.admin)
        self.assertEqual((answer.status, answer.header("location")), (303, "/dashboard"))
        cookie = answer.header("set-cookie") or ""
        for part in ("httponly", "samesite=strict", "path=/"):
            self.assertIn(part, cookie.lower())
        self.assertNotIn("secure", cookie.lower().replace("samesite", ""))
        page = self.f.call("GET", "/dashboard", headers={"Cookie": cookie.split(";")[0]})
        self.assertIn(b'src="/dashboard/app.js"', page.body)
        self.assertEqual(re.findall(rb"<script(?![^>]*src=)", page.body), [])

    def test_secureCookieOnTLS(self) -> None:
        """
        On a TLS admin listener the cookie is also C{Secure}, and the
        origin it expects is C{https}.
        """
        body = urlencode({"token": self.f.admin}).encode()
        self.f.tls = True
        answer = self.f.call("POST", "/dashboard/login", raw=body,
                             headers={**FORM, "Origin": "https://admin.test"})
        self.assertEqual(answer.status, 303)
        self.assertIn("secure", (answer.header("set-cookie") or "").lower().split("; "))
        plain = self.f.call("POST", "/dashboard/login", raw=body,
                            headers={**FORM, "Origin": "http://admin.test"})
        self.assertEqual(plain.status, 403)

    def test_loginRefused(self) -> None:
        """
        A bad token gets the form again with a message (401); a login from
        another origin is 403; failures are limited like the API's.
        """
        answer = self.login("nope")
        self.assertEqual(answer.status, 401)
        self.assertIn(LOGIN_FAILED.replace("'", "&#x27;").encode(), answer.body)
        self.assertEqual(self.login(self.f.admin, Origin="https://evil.example").status, 403)
        for _ in range(FAILURE_BURST):
            self.login("nope")
        self.assertEqual(self.login(self.f.admin).status, 429)

    def test_csrf(self) -> None:
        """
        With a session, reads need nothing more; a change needs the
        session's CSRF token (missing or wrong: 403) and, when a browser
        names its origin, this listener's.
        """
        cookie, csrf = self.session()
        headers = {"Cookie": cookie}
        self.assertEqual(self.f.call("GET", "/api/v1/agents", headers=headers).status, 200)
        body = {"name": "acme"}
        missing = self.f.call("POST", "/api/v1/accounts", body=body, headers=headers)
        self.assertEqual(missing.status, 403)
        self.assertIn("CSRF", missing.json()["error"])
        wrong = {**headers, "X-CSRF-Token": csrf[:-1] + "x"}
        self.assertEqual(self.f.call("POST", "/api/v1/accounts", body=body,
                                     headers=wrong).status, 403)
        good = {**headers, "X-CSRF-Token": csrf}
        foreign = {**good, "Origin": "http://evil.example"}
        self.assertEqual(self.f.call("POST", "/api/v1/accounts", body=body,
                                     headers=foreign).status, 403)
        self.assertEqual(self.f.core.list_accounts(), [])
        same = {**good, "Origin": "http://admin.test"}
        self.assertEqual(self.f.call("POST", "/api/v1/accounts", body=body,
                                     headers=same).status, 201)

    def test_readOnlySession(self) -> None:
        """
        A read-only token's session reads, and is refused changes even with
        its CSRF token.
        """
        cookie, csrf = self.session(self.f.reader)
        headers = {"Cookie": cookie, "X-CSRF-Token": csrf}
        self.assertEqual(self.f.call("GET", "/api/v1/keys", headers=headers).status, 200)
        self.assertEqual(self.f.call("POST", "/api/v1/relay/drain", headers=headers).status, 403)

    def test_sessionEnds(self) -> None:
        """
        A session ends when its token is revoked through the API (at once),
        in the store by another process (within L{SESSION_RECHECK}), and
        when it expires; an unknown session id is a failure.
        """
        cookie, _ = self.session(self.f.reader)
        tokenid = self.f.reader.split("_")[1]
        self.f.call("DELETE", f"/api/v1/admin-tokens/{tokenid}", self.f.admin)
        self.assertEqual(self.f.call("GET", "/api/v1/relay", headers={"Cookie": cookie}).status,
                         401)
        info, token = self.f.core.create_admin_token("other")
        cookie, _ = self.session(token)
        self.f.core.revoke_admin_token(info.tokenid)
        self.assertEqual(self.f.call("GET", "/api/v1/relay", headers={"Cookie": cookie}).status,
                         200)
        self.f.harness.clock.advance(SESSION_RECHECK)
        self.assertEqual(self.f.call("GET", "/api/v1/relay", headers={"Cookie": cookie}).status,
                         401)
        cookie, _ = self.session()
        self.f.harness.clock.advance(SESSION_LIFETIME)
        self.assertEqual(self.f.call("GET", "/api/v1/relay", headers={"Cookie": cookie}).status,
                         401)
        page = self.f.call("GET", "/dashboard", headers={"Cookie": cookie})
        self.assertIn(b"/dashboard/login", page.body)

    def test_logout(self) -> None:
        """
        Logout needs the CSRF token; then the session is gone.
        """
        cookie, csrf = self.session()
        self.assertEqual(self.f.call("POST", "/dashboard/logout",
                                     headers={"Cookie": cookie}).status, 403)
        answer = self.f.call("POST", "/dashboard/logout",
                             headers={"Cookie": cookie, "X-CSRF-Token": csrf})
        self.assertEqual(answer.status, 200)
        self.assertEqual(self.f.call("GET", "/api/v1/relay", headers={"Cookie": cookie}).status,
                         401)

    def test_assets(self) -> None:
        """
        The script and style sheet are served with their types; the script
        puts text in with C{textContent} only (no C{innerHTML}, no
        C{eval}), and nothing loads from another origin.
        """
        script = self.f.call("GET", "/dashboard/app.js")
        self.assertEqual(script.header("content-type"), "text/javascript; charset=utf-8")
        for unsafe in (b"innerHTML", b"outerHTML", b"eval(", b"insertAdjacentHTML",
                       b"document.write"):
            self.assertNotIn(unsafe, script.body)
        self.assertEqual(self.f.call("GET", "/dashboard/app.css").status, 200)
        for name in ("dashboard.html", "login.html", "app.js", "app.css"):
            self.assertNotIn(b"https://", _read(name).replace(b"http://www.w3.org", b""))
        self.assertEqual(self.f.call("GET", "/dashboard/nothing").status, 404)
