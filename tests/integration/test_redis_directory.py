"""
A relay on a Redis directory, with real processes: C{redis-server} (with an
append-only file, so that a restart keeps the keys), C{nfltr relay
--directory}, C{nfltr keys ... --directory}, agents and connectors.

Waits are bounded and poll for what they wait for.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.config import DATABASE_NAME
from nfltr.relay.link_handler import STORE_UNAVAILABLE

from .harness import Process, Stack, missing, nfltr, run
from .test_revocation import echoes

#: How long an announced revocation may take to end its agent's link, from
#: the moment C{nfltr keys revoke} returned.
AT_ONCE = 1.0
#: How long the relay may take to see Redis gone (a poll, then the 5 s
#: command timeout) or back (the retry, the reconnect schedule).
NOTICE_WITHIN = 15.0
_READY = r"(?i)ready to accept connections"


class RedisProcess:
    """
    A C{redis-server} on a unix socket, with an append-only file: stopped
    and started again, it has the same keys.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        # Trial's directories can be too deep for a unix socket's path.
        self.short = Path(tempfile.mkdtemp(prefix="nfltr-redis-"))
        self.socket = self.short / "redis.sock"
        self.url = f"redis+unix://{self.socket}"
        self.process: Process | None = None

    def start(self) -> None:
        server = shutil.which("redis-server")
        assert server is not None
        self.process = Process(
            [server, "--port", "0", "--unixsocket", str(self.socket), "--unixsocketperm", "700",
             "--save", "", "--appendonly", "yes", "--appendfsync", "always",
             "--dir", str(self.directory)],
            name="redis-server",
        )
        self.process.wait_for(_READY)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.short, ignore_errors=True)


def start_redis_process(testCase: SynchronousTestCase) -> tuple[Path, RedisProcess]:
    """
    A temporary directory of C{testCase}'s and a C{redis-server} started in
    it, removed in its cleanup.
    """
    tmp = Path(testCase.mktemp()).absolute()
    redis = RedisProcess(tmp / "redis")
    testCase.addCleanup(redis.remove)
    redis.start()
    return tmp, redis


class RedisStack(Stack):
    """
    A L{Stack} whose relay and key commands use the Redis directory C{url}.
    """

    def __init__(self, tmp: Path, url: str, *extra: str) -> None:
        self.url = url
        super().__init__(tmp, relay_extra=("--directory", url, *extra))

    def key(self, account: str) -> str:
        run("accounts", "create", account, "--directory", self.url)
        done = run("keys", "create", "--account", account, "--directory", self.url)
        if done.returncode != 0:
            raise AssertionError(f"keys create failed: {done.stderr}")
        return done.stdout.strip().splitlines()[0]

    def readyz(self) -> int:
        """
        The status of the relay's C{/readyz}.
        """
        try:
            with urllib.request.urlopen(f"http://{self.info['admin']}/readyz",
                                        timeout=30) as response:
                return int(response.status)
        except urllib.error.HTTPError as e:
            return e.code


def eventually(check: object, within: float, what: str) -> None:
    """
    Poll C{check()} until it is true; a test failure naming C{what} after
    C{within} seconds.
    """
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:g} s: {what}")
        time.sleep(0.1)


class RelayOnRedisTests(SynchronousTestCase):
    """
    C{nfltr relay --directory redis+unix://...}.
    """

    skip = missing("redis-server")

    def setUp(self) -> None:
        self.tmp, self.redis = start_redis_process(self)

    def stack(self, *extra: str) -> RedisStack:
        stack = RedisStack(self.tmp / "stack", self.redis.url, *extra)
        self.addCleanup(stack.close)
        return stack

    def agent(self, stack: RedisStack, key: str, name: str, port: int) -> Process:
        """
        Start an agent without waiting for it to connect.
        """
        return stack.start(
            nfltr("tcp", str(port), "--name", name, "--state-dir",
                  str(stack.tmp / f"agent-{name}-{time.monotonic_ns()}"), *stack.relay_args()),
            f"agent {name}", {"NFLTR_KEY": key},
        )

    def test_leaseSurvivesRestart(self) -> None:
        """
        An agent name whose agent left is still its account's after the
        relay restarted (the lease is in the directory, not in the relay's
        memory): another account's agent is refused it, the account's own
        gets it.
        """
        stack = self.stack()
        aliceKey, bobKey = stack.key("alice"), stack.key("bob")
        service = stack.service()
        alice, _ = stack.agent(aliceKey, "web", service)
        alice.stop()
        stack.relay.wait_for(r"agent web \(account alice\) (disconnected|is draining)")
        stack.close()
        again = self.stack()
        service = again.service()
        bob = self.agent(again, bobKey, "web", service)
        bob.wait_for(r"name web is leased to another account")
        back = self.agent(again, aliceKey, "web", service)
        back.wait_for(r"online|connected|welcome")

    def test_servedAndRevokedAtOnce(self) -> None:
        """
        Keys made with C{nfltr keys create --directory} serve an agent and a
        connector through a relay on the same directory, which keeps no
        SQLite database; C{nfltr keys revoke --directory} ends the agent's
        link within L{AT_ONCE} though the relay polls once an hour: the
        announcement did it.
        """
        stack = self.stack("--revocation-poll", "3600")
        agentKey, clientKey = stack.key("alice"), stack.key("alice")
        service = stack.service()
        _, pin = stack.agent(agentKey, "web", service)
        _, local = stack.connector(clientKey, "web", service, "--pin", pin)
        self.assertFalse((stack.data / DATABASE_NAME).exists())
        with socket.create_connection(("127.0.0.1", local), timeout=5) as sock:
            sock.sendall(b"ECHO\n")
            self.assertTrue(echoes(sock))
            keyid = agentKey.split("_")[1]
            done = run("keys", "revoke", keyid, "--directory", stack.url)
            self.assertEqual(done.returncode, 0, done.stderr)
            revoked = time.monotonic()
            stack.relay.wait_for(rf"API key {keyid} was revoked: closing 1 link",
                                 timeout=AT_ONCE)
            self.assertLess(time.monotonic() - revoked, AT_ONCE)

    def test_outage(self) -> None:
        """
        Redis stopped: an established tunnel keeps carrying bytes, C{/readyz}
        answers 503, a new agent is refused with the message to try later,
        and the relay logs the outage once.  Redis started again: C{/readyz}
        answers 200 and the waiting agent gets in, the tunnel still up.
        """
        stack = self.stack("--revocation-poll", "0.5")
        agentKey, clientKey, laterKey = (stack.key("alice") for _ in range(3))
        service = stack.service()
        _, pin = stack.agent(agentKey, "web", service)
        _, local = stack.connector(clientKey, "web", service, "--pin", pin)
        self.assertEqual(stack.readyz(), 200)
        with socket.create_connection(("127.0.0.1", local), timeout=5) as sock:
            sock.sendall(b"ECHO\n")
            self.assertTrue(echoes(sock))
            self.redis.stop()
            eventually(lambda: stack.readyz() == 503, NOTICE_WITHIN, "/readyz answers 503")
            self.assertTrue(echoes(sock), "the established tunnel carries bytes")
            later = stack.start(
                nfltr("tcp", str(service), "--name", "api", "--state-dir",
                      str(stack.tmp / "agent-api"), *stack.relay_args()),
                "agent api", {"NFLTR_KEY": laterKey},
            )
            later.wait_for(STORE_UNAVAILABLE.split(";")[0])
            self.redis.start()
            eventually(lambda: stack.readyz() == 200, NOTICE_WITHIN, "/readyz answers 200")
            later.wait_for(r"online|connected|welcome", timeout=NOTICE_WITHIN)
            self.assertTrue(echoes(sock), "the tunnel outlived the outage")
        outages = [line for line in stack.relay.lines if "is unavailable" in line]
        self.assertEqual(len(outages), 1, stack.relay.output())
