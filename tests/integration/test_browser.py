"""
A real browser through a share URL: headless Chromium loads a page
(C{GET /page} of L{tests.integration.web_service}) from an e2ee share with
the relay's share CA trusted in its NSS database, and does not load it
without that CA.  Nothing weakens Chromium's verification: the chain must
verify, the CA's name constraint included.

The same check is the conformance script C{conformance/browser/run}, which
runs this module (C{python -m tests.integration.test_browser}): it starts
its own relay, agent and web service, prints what Chromium showed, and ends
with PASS or FAIL.

Needs the Debian packages C{chromium} and C{libnss3-tools} (C{certutil});
the tests are skipped without them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .harness import Stack, StackTestCase
from .web_service import PAGE_MARKER, PAGE_TITLE

PACKAGES = "chromium libnss3-tools"
BROWSER_TIMEOUT = 60.0
# Headless Chromium as a visitor: no sandbox (it refuses to start as root with one) and no GPU;
# no flag that touches certificate verification.
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-extensions")


def missing_tools() -> str | None:
    """
    Why the browser check cannot run here, or C{None}.
    """
    absent = [tool for tool in ("chromium", "certutil") if shutil.which(tool) is None]
    if absent:
        return f"{' and '.join(absent)} not found: install the Debian packages {PACKAGES}"
    return None


@dataclass
class Visit:
    """
    What Chromium showed for one URL: the DOM it dumped and its log.
    """

    url: str
    dom: str
    log: str
    timed_out: bool = False

    def title(self) -> str | None:
        match = re.search(r"<title>([^<]*)</title>", self.dom)
        return match.group(1) if match else None

    def protocol(self) -> str | None:
        """
        The protocol the page says it was fetched with (C{nextHopProtocol}).
        """
        match = re.search(r'<p id="protocol">([^<]*)</p>', self.dom)
        return match.group(1) if match else None

    def error(self) -> str | None:
        """
        The C{net::ERR_...} error Chromium reported, if any: in its log, or
        (Chromium 150 logs none) in the error page it showed.
        """
        match = re.search(r"net::(ERR_[A-Z_]+)", self.log) or re.search(
            r"\"errorCode\":\"net::(ERR_[A-Z_]+)\"", self.dom)
        return match.group(1) if match else None

    def describe(self) -> str:
        """
        A summary for a report or a failure message.
        """
        if self.timed_out:
            return f"no answer within {BROWSER_TIMEOUT:.0f} s"
        marker = "marker found" if PAGE_MARKER in self.dom else "no marker"
        return (f"title {self.title()!r}, {marker}, protocol {self.protocol()!r}, "
                f"error {self.error()!r}, DOM {len(self.dom)} characters")

    def details(self) -> str:
        """
        Everything, for a failure.
        """
        log = "\n".join(line for line in self.log.splitlines() if "dbus" not in line)
        return f"{self.url}: {self.describe()}\nDOM:\n{self.dom}\nlog (no D-Bus lines):\n{log}"


def visit(url: str, home: Path, ca: Path | None) -> Visit:
    """
    Load C{url} in headless Chromium with C{home} as its HOME, whose NSS
    database (C{home/.pki/nssdb}, where Chromium on Linux reads the
    authorities a user added) trusts C{ca} to identify websites, or trusts
    nothing more than Chromium's own roots when C{ca} is C{None}.
    """
    nssdb = home / ".pki" / "nssdb"
    nssdb.mkdir(parents=True)
    certutil = ["certutil", "-d", f"sql:{nssdb}"]
    subprocess.run([*certutil, "-N", "--empty-password"], check=True, capture_output=True,
                   timeout=BROWSER_TIMEOUT)
    if ca is not None:
        subprocess.run([*certutil, "-A", "-t", "C,,", "-n", "nfltr-share-ca", "-i", str(ca)],
                       check=True, capture_output=True, timeout=BROWSER_TIMEOUT)
    process = subprocess.Popen(
        ["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={home / 'profile'}", "--dump-dom", url],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "HOME": str(home)}, start_new_session=True,
    )
    timed_out = False
    try:
        out, err = process.communicate(timeout=BROWSER_TIMEOUT)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
    finally:
        # Its helpers (zygotes, crash handler) are in its process group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return Visit(url, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), timed_out)


def trusted_problems(seen: Visit) -> list[str]:
    """
    What is wrong with a visit made with the share CA trusted: the page
    must load over HTTP/2 (the share's TLS offers C{h2} by ALPN, which
    Chromium takes).
    """
    problems = []
    if seen.timed_out:
        problems.append(seen.describe())
    if PAGE_MARKER not in seen.dom:
        problems.append(f"the marker {PAGE_MARKER!r} is not in the DOM")
    if seen.title() != PAGE_TITLE:
        problems.append(f"title {seen.title()!r}, not {PAGE_TITLE!r}")
    if seen.protocol() != "h2":
        problems.append(f"protocol {seen.protocol()!r}, not 'h2'")
    return problems


def untrusted_problems(seen: Visit) -> list[str]:
    """
    What is wrong with a visit made without the share CA: Chromium must
    refuse the certificate and show no page.
    """
    problems = []
    if seen.timed_out:
        problems.append(seen.describe())
    if PAGE_MARKER in seen.dom:
        problems.append("the page loaded without the share CA")
    if seen.error() != "ERR_CERT_AUTHORITY_INVALID":
        problems.append(f"error {seen.error()!r}, not 'ERR_CERT_AUTHORITY_INVALID'")
    return problems


def publish(stack: Stack) -> str:
    """
    A web service shared in e2ee mode on C{stack}; the URL of its page.
    """
    port = stack.web_service()
    _, url = stack.http_agent(stack.key("alice"), "blog", port, "--mode", "e2ee")
    return f"{url}page"


class BrowserTests(StackTestCase):
    """
    Headless Chromium visits an e2ee share.
    """

    skip = missing_tools()

    def setUp(self) -> None:
        super().setUp()
        self.url = publish(self.stack)
        self.ca = self.stack.data / "tls" / "share-ca.crt"

    def test_pageLoadsWithShareCATrusted(self) -> None:
        """
        With the share CA trusted, the page loads: its title and marker are
        in the DOM, fetched over HTTP/2.
        """
        seen = visit(self.url, self.stack.tmp / "browser-trusted", self.ca)
        self.assertEqual(trusted_problems(seen), [], seen.details())

    def test_noPageWithoutShareCA(self) -> None:
        """
        Without the share CA, Chromium refuses the certificate
        (C{ERR_CERT_AUTHORITY_INVALID}) and the page does not load.
        """
        seen = visit(self.url, self.stack.tmp / "browser-untrusted", None)
        self.assertEqual(untrusted_problems(seen), [], seen.details())


def main() -> int:
    """
    The conformance check: a relay, an e2ee agent and a web service in a
    temporary directory, the page loaded with and without the share CA.
    """
    if reason := missing_tools():
        print(f"FAIL: {reason}")
        return 1
    # Stopped by a signal: still stop the processes (the finally below).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    version = subprocess.run(["chromium", "--version"], capture_output=True, text=True,
                             timeout=BROWSER_TIMEOUT, check=False).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="nfltr-browser-") as directory:
        tmp = Path(directory)
        try:
            stack = Stack(tmp / "stack")
        except (AssertionError, RuntimeError) as e:
            print(f"the relay did not start: {e}\nFAIL")
            return 1
        try:
            url = publish(stack)
            ca = stack.data / "tls" / "share-ca.crt"
            print(f"{version}")
            print(f"relay, e2ee agent and web service up; page {url}")
            print(f"share CA {ca} (name-constrained to the share domain, localhost)")
            results = []
            for label, home, trusted, check in (
                ("with the share CA trusted", tmp / "trusted", ca, trusted_problems),
                ("without the share CA", tmp / "untrusted", None, untrusted_problems),
            ):
                seen = visit(url, home, trusted)
                problems = check(seen)
                print(f"{label}: {seen.describe()}: {'ok' if not problems else 'WRONG'}")
                for problem in problems:
                    print(f"  - {problem}")
                if problems:
                    print(seen.details())
                results.append(not problems)
        except (AssertionError, RuntimeError) as e:
            print(f"the agent or the web service did not start: {e}")
            results = [False]
        finally:
            stack.close()
    print("PASS" if all(results) else "FAIL")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
