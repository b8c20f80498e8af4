"""
The relay's dashboard (L{nfltr.relay.api._dashboard}) in headless Chromium,
driven over the DevTools protocol (L{tests.integration.cdp}), on a real
relay: log in with an admin token, see an agent appear live when it
connects, revoke its key from the page and watch it leave; markup in a key's
label stays text; CSRF and the CSP hold in the browser.  Screenshots are
saved in the test's temporary directory (C{dashboard-*.png}).

Needs the Debian package C{chromium}; skipped without it.
"""

from __future__ import annotations

import json
import shutil

from .cdp import Browser
from .harness import StackTestCase, exchange, run
from .test_api import admin_token, call

#: A label an attacker would like the page to parse.
MARKUP = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'


def missing_browser() -> str | None:
    if shutil.which("chromium") is None:
        return "chromium not found: install the Debian package chromium"
    return None


class DashboardBrowserTests(StackTestCase):
    """
    The dashboard in a real browser.
    """

    skip = missing_browser()

    def setUp(self) -> None:
        super().setUp()
        self.base = "http://" + self.stack.info["admin"]
        self.token = admin_token(str(self.stack.data))
        self.browser = Browser(self.stack.tmp / "chromium")
        self.addCleanup(self.browser.close)

    def login(self) -> None:
        browser = self.browser
        browser.navigate(self.base + "/dashboard")
        self.assertTrue(browser.evaluate("!!document.getElementById('token')"))
        browser.evaluate(f"document.getElementById('token').value = {json.dumps(self.token)};"
                         " document.querySelector('form').submit(); true")
        browser.until("location.pathname === '/dashboard' && !!document.getElementById('agents')"
                      " && document.getElementById('whoami').textContent !== ''")

    def test_agentAppearsAndLeavesOnRevoke(self) -> None:
        """
        Logged in, the page shows an agent as soon as it connects (no
        reload); the markup in its key's label is shown as text; revoking
        the key from the page makes the agent leave, live.
        """
        self.stack.key("alice")
        made = run("keys", "create", "--account", "alice", "--label", MARKUP,
                   "--data-dir", str(self.stack.data))
        key = made.stdout.strip()
        keyid = key.split("_")[1]
        self.login()
        browser = self.browser
        self.assertEqual(browser.evaluate("document.querySelectorAll('#agents tbody tr').length"),
                         0)
        port = self.stack.service()
        agent, pin = self.stack.agent(key, "db", port)
        browser.until("!!document.querySelector('#agents tr[data-agent=\"db\"]')")
        _, local = self.stack.connector(key, "db", port, "--pin", str(pin))
        for size in (1, 3, 2):
            self.assertEqual(len(exchange(local, f"DOWNLOAD {size << 20} 1\n".encode())),
                             size << 20)
            browser.until("document.querySelector('#agents svg.spark polyline')"
                          f"?.getAttribute('points').split(' ').length >= {size + 3}")
        browser.screenshot(self.stack.tmp / "dashboard-agent.png")
        row = f"#keys tr[data-keyid=\"{keyid}\"]"
        label = browser.until(f"document.querySelector('{row}')?.children[2].textContent")
        self.assertEqual(label, MARKUP)
        self.assertEqual(browser.evaluate("document.querySelectorAll('main img').length"), 0)
        self.assertIsNone(browser.evaluate("window.pwned ?? null"))
        browser.evaluate(f"document.querySelector('{row} button').click(); true")
        agent.wait_for(r"revoked")
        browser.until("!document.querySelector('#agents tr[data-agent=\"db\"]')")
        browser.until(f"document.querySelector('{row}').children[4].textContent !== '-'")
        browser.screenshot(self.stack.tmp / "dashboard-revoked.png")
        csp = [m for m in browser.messages if "Content Security Policy" in m]
        self.assertEqual(csp, [])

    def test_csrfAndCSPInBrowser(self) -> None:
        """
        In the logged-in page, a change without the CSRF token is refused
        (403), the answers carry the CSP, and an injected inline script does
        not run.
        """
        self.login()
        browser = self.browser
        status = browser.evaluate(
            "fetch('/api/v1/accounts', {method: 'POST', body: '{\"name\": \"x\"}',"
            " headers: {'Content-Type': 'application/json'}}).then(r => r.status)"
        )
        self.assertEqual(status, 403)
        policy = browser.evaluate(
            "fetch('/dashboard').then(r => r.headers.get('content-security-policy'))"
        )
        self.assertIn("script-src 'self'", policy)
        browser.evaluate("const s = document.createElement('script');"
                         " s.textContent = 'window.inline = 1'; document.body.appendChild(s); true")
        self.assertIsNone(browser.evaluate("window.inline ?? null"))
        self.assertTrue(any("Content Security Policy" in m for m in browser.messages))

    def test_adminTokenFromPage(self) -> None:
        """
        An admin token made from the page is shown once, works on the API,
        and once revoked from the page is refused.
        """
        self.login()
        browser = self.browser
        browser.until("document.querySelectorAll('#admin-tokens tbody tr').length === 1")
        browser.evaluate("document.querySelector('#token-form input[name=label]').value = 'ci';"
                         " document.querySelector('#token-form button').click(); true")
        token = browser.until("document.getElementById('new-token').hidden === false"
                              " && document.getElementById('new-token-text').textContent")
        self.assertEqual(call(self.base, "GET", "/api/v1/relay", token)[0], 200)
        row = f"#admin-tokens tr[data-tokenid=\"{token.split('_')[1]}\"]"
        browser.until(f"!!document.querySelector('{row} button')")
        browser.evaluate(f"document.querySelector('{row} button').click(); true")
        browser.until(f"document.querySelector('{row}').children[4].textContent !== '-'")
        self.assertEqual(call(self.base, "GET", "/api/v1/relay", token)[0], 401)
