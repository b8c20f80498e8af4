"""
C{nfltr relay --takeover} under load (real processes): wrk keeps 50
keep-alive connections busy on a share URL (e2ee: the relay splices the
visitor's TLS to the agent) and 50 on a TCP tunnel (tcp-connect, resumable
sessions) while the relay is replaced by a new process five times in a row.
Neither wrk run counts an error of any kind (connect, read, write, status,
timeout), and nginx, the service, logged every request wrk counted, each
answered 200 (a request cut by the relay would be logged 499, or not at
all, and counted by wrk as a read error).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from bench.shares import WRK_SCRIPT
from tests.integration.harness import Process, Stack, missing, nfltr
from tests.integration.test_proxy_protocol import start_nginx
from tests.integration.test_public_ports import free_ports

#: Relays replaced in a row.
ROUNDS = 5
#: Keep-alive connections of each wrk run.
CONNECTIONS = 50
#: Seconds a wrk run may last at most; it is stopped (SIGINT: it reports) once the
#: replacements are done and L{SETTLE} seconds passed.
WRK_SECONDS = 120
SETTLE = 2.0
#: Seconds between a successor taking over and the next one starting.
GAP = 1.0
#: Seconds a draining relay lets sessions in flight finish (its --drain-timeout):
#: well within the wrk runs, so a session that held a relay to its end is cut.
DRAIN_TIMEOUT = 10.0
#: The request paths of the two runs, told apart in nginx's log.
SHARE_PATH, TUNNEL_PATH = "/via-share", "/via-tunnel"
#: nginx's log line per request: the status, then the request line.
LOG_FORMAT = "$status $request"
_LOGGED = re.compile(r"^(\d{3}) GET (\S+) HTTP/1\.1$")


class Wrk:
    """
    One wrk run, in the background, with the script that reports in JSON
    (L{bench.shares.WRK_SCRIPT}: it connects to 127.0.0.1 whatever the URL's
    host, which it still sends as the TLS server name and in C{Host}).
    """

    def __init__(self, url: str, script: Path) -> None:
        self.url = url
        self.popen = subprocess.Popen(
            ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{WRK_SECONDS}s", "--timeout", "10s",
             "-s", str(script), url],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        )

    def report(self) -> dict[str, Any]:
        """
        Stop the run (wrk reports on SIGINT); what it counted.
        """
        self.popen.send_signal(signal.SIGINT)
        out, _ = self.popen.communicate(timeout=30)
        lines = [line for line in out.splitlines() if line.startswith('{"requests"')]
        if self.popen.returncode != 0 or not lines:
            raise AssertionError(f"wrk {self.url} ({self.popen.returncode}): {out[-2000:]}")
        report: dict[str, Any] = json.loads(lines[-1])
        return report


class TakeoverLoadTests(SynchronousTestCase):
    """
    A share URL and a tunnel under wrk while the relay is replaced.
    """

    skip = missing("wrk", "nginx")

    def setUp(self) -> None:
        self.stack = Stack(Path(self.mktemp()).absolute(),
                           relay_extra=("--drain-timeout", str(DRAIN_TIMEOUT)))
        self.addCleanup(self.stack.close)

    def successor(self) -> Process:
        """
        Start a relay with C{--takeover} on the stack's data directory; it,
        once listening.
        """
        relay = self.stack.start(nfltr(
            "relay", "--takeover", "--data-dir", str(self.stack.data),
            "--tls", "tcp:0:interface=127.0.0.1", "--admin", "tcp:0:interface=127.0.0.1",
            "--http", "tcp:0:interface=127.0.0.1", "--drain-timeout", str(DRAIN_TIMEOUT),
        ), "relay (successor)")
        relay.wait_for(r"relay listening")
        return relay

    def test_noRequestFails(self) -> None:
        """
        While relays replace each other five times, wrk at 50 connections on
        a share URL and on a tunnel counts no error; nginx logged each
        request wrk counted (at most one more a connection: those in flight
        when wrk stopped), every one answered 200; each old relay exits 0
        once its sessions left, before its drain timeout would cut them.
        """
        stack = self.stack
        (web,) = free_ports(1)
        log = start_nginx(stack, web, proxy_protocol=False, log_format=LOG_FORMAT)
        key = stack.key("alice")
        _, url = stack.http_agent(key, "site", web)
        _, pin = stack.agent(key, "tun", web)
        assert pin is not None
        _, local = stack.connector(key, "tun", web, "--pin", pin)
        script = stack.tmp / "wrk.lua"
        script.write_text(WRK_SCRIPT)
        runs = {SHARE_PATH: Wrk(url.rstrip("/") + SHARE_PATH, script),
                TUNNEL_PATH: Wrk(f"http://127.0.0.1:{local}{TUNNEL_PATH}", script)}
        for run in runs.values():
            self.addCleanup(run.popen.kill)
        handed, old = [], stack.relay
        for _ in range(ROUNDS):
            time.sleep(GAP)
            new = self.successor()
            old.wait_for(r"handed the listeners")
            handed.append((old, time.monotonic()))
            old = new
        # Each old relay ends once its sessions left, not by its drain timeout (which cuts them).
        exits: list[int | str] = []
        for relay, at in handed:
            try:
                exits.append(relay.wait_exit(max(at + DRAIN_TIMEOUT - 1 - time.monotonic(), 0.1)))
            except subprocess.TimeoutExpired:
                exits.append(f"still draining {DRAIN_TIMEOUT - 1:g} s on")
        time.sleep(SETTLE)
        reports = {path: run.report() for path, run in runs.items()}
        logged: dict[str, Counter[str]] = {SHARE_PATH: Counter(), TUNNEL_PATH: Counter()}
        for line in log.read_text().splitlines():
            match = _LOGGED.match(line)
            self.assertIsNotNone(match, f"nginx logged {line!r}")
            assert match is not None
            logged[match.group(2)][match.group(1)] += 1
        for path, report in reports.items():
            errors = report["errors"]
            self.assertEqual(errors, dict.fromkeys(errors, 0), f"{path}: {report}")
            served = logged[path]
            self.assertEqual(set(served), {"200"}, f"{path}: nginx logged {dict(served)}")
            self.assertGreater(report["requests"], 0)
            self.assertGreaterEqual(served["200"], report["requests"], path)
            self.assertLessEqual(served["200"], report["requests"] + CONNECTIONS, path)
        self.assertEqual(exits, [0] * ROUNDS)
        for relay, _ in handed:
            self.assertNotIn("Traceback", relay.output())
