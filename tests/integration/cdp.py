"""
Headless Chromium driven over the DevTools protocol, for the browser tests
of the dashboard (L{tests.integration.test_dashboard}): a page, JavaScript
evaluated in it, screenshots.  The browser is Debian's C{chromium}; the
protocol runs over a WebSocket (the C{websockets} test dependency's
synchronous client).  Nothing is downloaded.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

from .test_browser import CHROMIUM_FLAGS

#: Seconds for the browser to start, and for one protocol command.
BROWSER_TIMEOUT = 30.0
#: How long a condition on the page may take to hold.
PAGE_TIMEOUT = 20.0


class Browser:
    """
    One headless Chromium with one page; L{close} ends it and its helpers.

    @ivar messages: console messages and log entries the page produced.
    """

    def __init__(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        profile = home / "profile"
        self.process = subprocess.Popen(
            ["chromium", *CHROMIUM_FLAGS, "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--user-data-dir={profile}",
             "--window-size=1400,900", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "HOME": str(home)}, start_new_session=True,
        )
        self.messages: list[str] = []
        self._id = 0
        try:
            port = _active_port(profile / "DevToolsActivePort")
            self.ws: ClientConnection = connect(_page_socket(port), max_size=None,
                                                open_timeout=BROWSER_TIMEOUT)
            self.send("Page.enable")
            self.send("Runtime.enable")
            self.send("Log.enable")
        except BaseException:
            self.close()
            raise

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """
        One protocol command; its result (events met meanwhile are kept in
        L{messages} when they are console or log lines).
        """
        self._id += 1
        ident = self._id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + BROWSER_TIMEOUT
        while True:
            message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self._keep(message)

    def _keep(self, message: dict[str, Any]) -> None:
        params = message.get("params", {})
        if message.get("method") == "Runtime.consoleAPICalled":
            self.messages.append(" ".join(str(a.get("value")) for a in params.get("args", [])))
        elif message.get("method") == "Log.entryAdded":
            self.messages.append(params.get("entry", {}).get("text", ""))

    def evaluate(self, expression: str) -> Any:
        """
        The value of a JavaScript expression in the page (promises awaited).
        """
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def navigate(self, url: str) -> None:
        """
        Load C{url} and wait until its document is complete.
        """
        self.send("Page.navigate", url=url)
        self.until("document.readyState === 'complete' && location.href !== 'about:blank'")

    def until(self, expression: str, timeout: float = PAGE_TIMEOUT) -> Any:
        """
        Evaluate C{expression} until it is truthy; its value.

        @raise AssertionError: it never was.
        """
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(RuntimeError):
                value = self.evaluate(expression)
                if value:
                    return value
            if time.monotonic() > deadline:
                raise AssertionError(f"never true on the page: {expression}\n"
                                     f"console: {self.messages}")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> Path:
        """
        Save a PNG of the page to C{path}.
        """
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        """
        End the browser and its helper processes.
        """
        with contextlib.suppress(Exception):
            self.ws.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(BROWSER_TIMEOUT)


def _active_port(path: Path) -> int:
    """
    The DevTools port Chromium chose (it writes it once it listens).
    """
    deadline = time.monotonic() + BROWSER_TIMEOUT
    while not (path.exists() and path.read_text().strip()):
        if time.monotonic() > deadline:
            raise RuntimeError("Chromium did not open its DevTools port")
        time.sleep(0.05)
    return int(path.read_text().split()[0])


def _page_socket(port: int) -> str:
    """
    The DevTools WebSocket of Chromium's first page.
    """
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list",
                                timeout=BROWSER_TIMEOUT) as answer:
        targets = json.loads(answer.read())
    page = next(t for t in targets if t.get("type") == "page")
    return str(page["webSocketDebuggerUrl"])
