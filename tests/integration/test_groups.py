"""
Load-balancing groups and health checks with real processes
(L{nfltr.relay.groups}, L{nfltr.agent._health}): two agents of one
account share one URL, one killed mid-load; a failing health check
withdraws the service and it comes back.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import time
from urllib.parse import urlsplit

from nfltr.link import PRESETS

from .harness import Process, StackTestCase, nfltr
from .web_service import pattern

#: The liveness preset the agents state: a dead link is found within its
#: interval plus its timeout.
PRESET = "fast"
SIZE = 2000
#: Seconds of load after the kill.
LOAD_AFTER = 3.0
INTERVAL, TIMEOUT = 1.0, 0.5
#: Slack for process scheduling on a shared machine (not a speed claim).
SLACK = 3.0


class GroupStack(StackTestCase):
    """
    Helpers: agents of one account under one name, and GETs of the URL.
    """

    def agent(self, key: str, port: int, label: str, *extra: str) -> tuple[Process, str]:
        agent = self.stack.start(
            nfltr("http", str(port), "--name", "web", "--state-dir",
                  str(self.stack.tmp / f"agent-{label}"), "--keepalive", PRESET,
                  *self.stack.relay_args(), *extra),
            f"http agent {label}", {"NFLTR_KEY": key},
        )
        return agent, agent.wait_for(r"share (https://\S+) ").group(1)

    def get(self, url: str, path: str) -> tuple[int, bytes]:
        """
        One GET of C{path} on a new connection; the status and body.
        """
        parts = urlsplit(url)
        context = ssl.create_default_context(cafile=str(self.stack.data / "tls" / "share-ca.crt"))
        sock = socket.create_connection(("127.0.0.1", parts.port or 443), timeout=10)
        conn = http.client.HTTPSConnection(parts.hostname or "", parts.port, context=context,
                                           timeout=10)
        conn.sock = context.wrap_socket(sock, server_hostname=parts.hostname)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


class GroupTests(GroupStack):
    """
    Two agents in a group behind one URL.
    """

    def test_memberKilledMidLoad(self) -> None:
        """
        Both members serve; one is killed mid-load; every request that
        starts once its link is declared dead (the preset's interval plus
        timeout after the kill) succeeds, through the other.
        """
        key = self.stack.key("alice")
        logs = [self.stack.tmp / "a.log", self.stack.tmp / "b.log"]
        ports = [self.stack.web_service("--log", str(log)) for log in logs]
        a, url = self.agent(key, ports[0], "a", "--group", "blue")
        _, url_b = self.agent(key, ports[1], "b", "--group", "blue")
        self.assertEqual(url, url_b)
        for _ in range(6):
            self.assertEqual(self.get(url, f"/bytes/{SIZE}"), (200, pattern(SIZE)))
        self.assertTrue(all(log.exists() and log.read_text() for log in logs),
                        "both members served")
        a.popen.kill()
        killed = time.monotonic()
        dead = killed + PRESETS[PRESET].interval + PRESETS[PRESET].timeout
        failures_after = []
        while time.monotonic() < dead + LOAD_AFTER:
            started = time.monotonic()
            try:
                outcome = self.get(url, f"/bytes/{SIZE}")
            except OSError as e:
                outcome = (0, str(e).encode())
            if started >= dead and outcome != (200, pattern(SIZE)):
                failures_after.append(outcome[0])
        self.assertEqual(failures_after, [])

    def test_otherAccountCannotJoin(self) -> None:
        """
        Another account's agent naming the same name and group is refused.
        """
        port = self.stack.web_service()
        self.agent(self.stack.key("alice"), port, "a", "--group", "blue")
        evil = self.stack.start(
            nfltr("http", str(port), "--name", "web", "--group", "blue", "--state-dir",
                  str(self.stack.tmp / "agent-evil"), *self.stack.relay_args()),
            "evil", {"NFLTR_KEY": self.stack.key("mallory")},
        )
        evil.wait_for(r"leased to another account")


class HealthTests(GroupStack):
    """
    A failing health check withdraws the service; passing, it is back.
    """

    def test_withdrawAndReturn(self) -> None:
        """
        The service stops: within one interval (plus the check's timeout)
        visitors get 503 from the relay; restarted on its port, it is
        served again.
        """
        from .harness import start_web_service

        key = self.stack.key("alice")
        service, port = start_web_service(self.stack.tmp)
        self.stack.processes.append(service)
        check = f"http:/bytes/1,interval={INTERVAL}s,timeout={TIMEOUT}s,fall=1,rise=1"
        _, url = self.agent(key, port, "a", "--mode", "inspect", "--health-check", check)
        self.assertEqual(self.get(url, "/bytes/10")[0], 200)
        service.stop()
        stopped = time.monotonic()
        status = 0
        while status != 503 and time.monotonic() < stopped + INTERVAL + TIMEOUT + SLACK:
            status = self.get(url, "/bytes/10")[0]
        self.assertEqual(status, 503)
        withdrawn = time.monotonic() - stopped
        self.assertLessEqual(withdrawn, INTERVAL + TIMEOUT + SLACK)
        again, _ = start_web_service(self.stack.tmp, "--port", str(port))
        self.stack.processes.append(again)
        restarted = time.monotonic()
        while status != 200 and time.monotonic() < restarted + 2 * INTERVAL + SLACK:
            status = self.get(url, "/bytes/10")[0]
        self.assertEqual(status, 200)



    def test_withdrawnMemberGetsNobody(self) -> None:
        """
        In a group, the member whose service fails its checks is withdrawn
        within one interval (plus the timeout); from then on every request
        succeeds through the other member.
        """
        from .harness import start_web_service

        key = self.stack.key("alice")
        service, port_a = start_web_service(self.stack.tmp)
        self.stack.processes.append(service)
        port_b = self.stack.web_service()
        check = f"http:/bytes/1,interval={INTERVAL}s,timeout={TIMEOUT}s"
        _, url = self.agent(key, port_a, "a", "--group", "blue", "--health-check", check)
        self.agent(key, port_b, "b", "--group", "blue", "--health-check", check)
        service.stop()
        withdrawn = time.monotonic() + INTERVAL + TIMEOUT + SLACK
        while time.monotonic() < withdrawn:
            with contextlib.suppress(OSError):  # some may fail: A is not withdrawn yet
                self.get(url, "/bytes/10")
        statuses = {self.get(url, f"/bytes/{SIZE}")[0] for _ in range(20)}
        self.assertEqual(statuses, {200})
