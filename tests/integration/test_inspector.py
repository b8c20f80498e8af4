"""
The agent's request inspector (L{nfltr.inspect}) on real processes: a
relay, C{nfltr http PORT --inspect-ui 127.0.0.1:0} in e2ee and in inspect
mode, a web service that logs the requests it gets, and curl as the
visitor.  A request through the share is listed (its secret redacted), and
its replay reaches the service (its log says so); in passthrough the
inspector says why it sees nothing.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from .cdp import Browser
from .harness import StackTestCase, missing

CURL_TIMEOUT = 60.0


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def post(url: str, body: Any) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.status, json.loads(answer.read())


class InspectorStack:
    """
    A share of mode C{mode} with its inspector; mixed into a
    L{StackTestCase}.
    """

    mode: str
    stack: Any

    def start(self) -> tuple[str, str, Any]:
        """
        A web service logging to a file, and an agent publishing it with an
        inspector on a free loopback port; the share URL, the inspector URL
        and the log file.
        """
        t: Any = self
        self.log = self.stack.tmp / "service.log"
        port = self.stack.web_service("--log", str(self.log))
        key = self.stack.key("alice")
        agent, url = self.stack.http_agent(key, "blog", port, "--mode", self.mode,
                                           "--inspect-ui", "127.0.0.1:0")
        inspector = agent.wait_for(r"inspector (http://\S+) ").group(1)
        t.assertTrue(inspector.startswith("http://127.0.0.1:"))
        return url, inspector, agent

    def curl(self, url: str, *args: str) -> bytes:
        parts = urlsplit(url)
        done = subprocess.run(
            ["curl", "--silent", "--show-error", "--fail", "--cacert",
             str(self.stack.data / "tls" / "share-ca.crt"),
             "--resolve", f"{parts.hostname}:{parts.port}:127.0.0.1", *args, url],
            capture_output=True, timeout=CURL_TIMEOUT, check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"curl failed: {done.stderr.decode()}")
        return done.stdout



class InspectorMixin(InspectorStack):
    """
    What the inspector does in every mode where the agent sees HTTP.
    """

    def test_requestSeenAndReplayed(self) -> None:
        """
        A request through the share is in the inspector, its Authorization
        redacted; replaying it (edited) reaches the service.
        """
        t: Any = self
        url, inspector, _ = self.start()
        self.curl(f"{url}headers?probe=1", "--header", "Authorization: Bearer s3cret")
        listed = get(f"{inspector}api/requests")["requests"]
        [seen] = [r for r in listed if r["target"] == "/headers?probe=1"]
        t.assertEqual((seen["method"], seen["status"], seen["outcome"]),
                      ("GET", 200, "complete"))
        detail = get(f"{inspector}api/requests/{seen['id']}")
        t.assertEqual(dict(detail["headers"])["authorization"], "[redacted]")
        # (The service echoes the head it got: its body has the secret, as the visitor saw.)
        t.assertNotIn("s3cret", json.dumps(detail["headers"]))
        t.assertIn("GET /headers?probe=1", detail["response_body"]["text"])
        status, replayed = post(f"{inspector}api/requests/{seen['id']}/replay",
                                {"target": "/headers?probe=replayed"})
        t.assertEqual((status, replayed["status"], replayed["replay"]), (201, 200, True))
        lines = self.log.read_text().splitlines()
        t.assertEqual(sum("/headers?probe=1" in line for line in lines), 1, lines)
        t.assertEqual(sum("/headers?probe=replayed" in line for line in lines), 1, lines)


class E2EEInspectorTests(InspectorMixin, StackTestCase):
    """
    The inspector of an e2ee share (the agent ends TLS).
    """

    mode = "e2ee"
    skip = missing("curl")


class InspectModeInspectorTests(InspectorMixin, StackTestCase):
    """
    The inspector of an inspect share (the relay ends TLS).
    """

    mode = "inspect"
    skip = missing("curl")


class PassthroughInspectorTests(StackTestCase):
    """
    In passthrough the inspector says why it sees nothing.
    """

    def test_saysWhy(self) -> None:
        """
        The agent's line and the API's note say the agent sees only
        ciphertext.
        """
        port = self.stack.web_service()
        key = self.stack.key("alice")
        agent, _ = self.stack.http_agent(key, "blog", port, "--mode", "passthrough",
                                         "--inspect-ui", "127.0.0.1:0")
        match = agent.wait_for(r"inspector (http://\S+) \((.*)\)")
        self.assertIn("only ciphertext", match.group(2))
        self.assertIn("only ciphertext", get(f"{match.group(1)}api/requests")["note"])


class InspectorBrowserTests(InspectorStack, StackTestCase):
    """
    The inspector's page in headless Chromium (L{tests.integration.cdp}):
    a request made through the share appears, its markup shown as text,
    and the page's Replay button makes the service get it again.
    Screenshot: C{inspector.png} in the test's temporary directory.
    """

    mode = "e2ee"
    skip = missing("curl", "chromium")

    def test_seeAndReplay(self) -> None:
        """
        See the request live, open it, replay it from the page.
        """
        url, inspector, _ = self.start()
        browser = Browser(self.stack.tmp / "chromium")
        self.addCleanup(browser.close)
        browser.navigate(inspector)
        self.curl(f"{url}headers?q=%3Cimg%20src=x%20onerror=alert(1)%3E",
                  "--header", "X-Note: <script>window.pwned=1</script>")
        row = "#requests tbody tr"
        browser.until(f"document.querySelectorAll('{row}').length === 1")
        browser.evaluate(f"document.querySelector('{row}').click(); true")
        browser.until("!document.getElementById('detail').hidden"
                      " && document.getElementById('response-body').textContent !== ''")
        self.assertEqual(browser.evaluate("document.querySelectorAll('main img').length"), 0)
        self.assertIsNone(browser.evaluate("window.pwned ?? null"))
        browser.evaluate("document.getElementById('replay').click(); true")
        browser.until("document.getElementById('replay-result').textContent"
                      ".startsWith('replayed as')")
        browser.until(f"document.querySelectorAll('{row}').length === 2")
        browser.screenshot(self.stack.tmp / "inspector.png")
        lines = self.log.read_text().splitlines()
        self.assertEqual(sum("onerror" in line for line in lines), 2, lines)
