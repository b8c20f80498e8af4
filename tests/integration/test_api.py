"""
The relay's API (L{nfltr.relay.api}) on a real relay process: admin tokens
made with C{nfltr admin token create}, every read route and the changes
through the API, the refusals, and the C{nfltr accounts/keys/admin ...
--api URL --admin-token-file F} commands managing the relay without its
data directory.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from .harness import StackTestCase, missing, run
from .test_redis_directory import RedisProcess, RedisStack

#: How long a state change of the relay may take to show.
SETTLE = 15.0


def eventually(check: Any) -> None:
    """
    Poll C{check} until it is true, for up to L{SETTLE} seconds.
    """
    deadline = time.monotonic() + SETTLE
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the relay never got there")
        time.sleep(0.05)


def admin_token(data: str, *extra: str) -> str:
    """
    A new admin token made on the relay's data directory.
    """
    done = run("admin", "token", "create", "--data-dir", data, *extra)
    if done.returncode != 0:
        raise AssertionError(done.stderr)
    return done.stdout.strip()


def call(base: str, method: str, path: str, token: str | None = None,
         body: Any = None) -> tuple[int, Any]:
    """
    One API request; its status and JSON answer.
    """
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


class ApiTests(StackTestCase):
    """
    The API of a real relay.
    """

    def setUp(self) -> None:
        super().setUp()
        self.data = str(self.stack.data)
        self.base = "http://" + self.stack.info["admin"]
        self.admin = admin_token(self.data, "--label", "ops")
        self.reader = admin_token(self.data, "--read-only")
        self.tokenFile = self.stack.tmp / "admin-token"
        self.tokenFile.write_text(self.admin + "\n")

    def test_agentAppearsAndKeyRevoked(self) -> None:
        """
        An agent that connects is listed with its account and share; revoking
        its key through the API closes its link at once.
        """
        key = self.stack.key("alice")
        agent, _ = self.stack.agent(key, "db", self.stack.service())
        status, listing = call(self.base, "GET", "/api/v1/agents", self.reader)
        self.assertEqual(status, 200)
        [entry] = listing["agents"]
        self.assertEqual((entry["name"], entry["account"], entry["kind"]), ("db", "alice", "link"))
        self.assertTrue(entry["address"].startswith("127.0.0.1:"))
        keyid = key.split("_")[1]
        status, revoked = call(self.base, "DELETE", f"/api/v1/keys/{keyid}", self.admin)
        self.assertEqual((status, revoked["links_closed"]), (200, 1))
        agent.wait_for(r"revoked")
        eventually(lambda: call(self.base, "GET", "/api/v1/agents", self.reader)[1]["agents"] == [])

    def test_refusals(self) -> None:
        """
        No token, a wrong token and a revoked one are 401; a read-only token
        is refused changes (403).
        """
        self.assertEqual(call(self.base, "GET", "/api/v1/relay")[0], 401)
        self.assertEqual(call(self.base, "GET", "/api/v1/relay", "nfltradm_x")[0], 401)
        self.assertEqual(call(self.base, "POST", "/api/v1/accounts", self.reader,
                              {"name": "x"})[0], 403)
        doomed = admin_token(self.data)
        self.assertEqual(call(self.base, "GET", "/api/v1/relay", doomed)[0], 200)
        tokenid = doomed.split("_")[1]
        done = run("admin", "token", "revoke", tokenid, "--data-dir", self.data)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(call(self.base, "GET", "/api/v1/relay", doomed)[0], 401)
        self.assertEqual(call(self.base, "GET", "/api/v1/relay", self.admin)[0], 200)

    def test_commandsThroughApi(self) -> None:
        """
        C{nfltr accounts/keys/admin ... --api} create, list and revoke
        through the relay; the keys work; a wrong token file is a clear
        error that does not print the token.
        """
        api = ["--api", self.base, "--admin-token-file", str(self.tokenFile)]
        done = run("accounts", "create", "bob", *api)
        self.assertEqual(done.returncode, 0, done.stderr)
        listed = run("accounts", "list", *api)
        self.assertIn("bob", listed.stdout)
        made = run("keys", "create", "--account", "bob", "--label", "ci", *api)
        self.assertEqual(made.returncode, 0, made.stderr)
        key = made.stdout.strip()
        self.stack.agent(key, "web", self.stack.service())
        keys = run("keys", "list", "--account", "bob", *api)
        self.assertIn(key.split("_")[1], keys.stdout)
        revoked = run("keys", "revoke", key.split("_")[1], *api)
        self.assertEqual(revoked.returncode, 0, revoked.stderr)
        tokens = run("admin", "token", "list", *api)
        self.assertIn("read-only", tokens.stdout)
        bad = self.stack.tmp / "bad-token"
        bad.write_text("nfltradm_000000000000_" + "A" * 43)
        refused = run("accounts", "list", "--api", self.base, "--admin-token-file", str(bad))
        self.assertEqual(refused.returncode, 2)
        self.assertIn("invalid or revoked admin token", refused.stderr)
        self.assertNotIn("AAAA", refused.stderr)
        missing = run("accounts", "list", "--api", self.base)
        self.assertIn("--admin-token-file", missing.stderr)

    def test_drain(self) -> None:
        """
        Draining through the API stops the relay: C{/readyz} goes away and
        the process ends.
        """
        status, answer = call(self.base, "POST", "/api/v1/relay/drain", self.admin)
        self.assertEqual((status, answer["draining"]), (202, True))
        self.assertEqual(self.stack.relay.wait_exit(), 0)


class ApiOnRedisTests(SynchronousTestCase):
    """
    Two relays on one Redis directory: an admin token made on the directory
    works on both, what one's API changes the other's shows, and a token
    revoked through one is refused by the other at once.
    """

    skip = missing("redis-server")

    def test_cluster(self) -> None:
        """
        See the class.
        """
        tmp = Path(self.mktemp()).absolute()
        redis = RedisProcess(tmp / "redis")
        self.addCleanup(redis.remove)
        redis.start()
        stacks = [RedisStack(tmp / f"relay-{n}", redis.url) for n in (1, 2)]
        for stack in stacks:
            self.addCleanup(stack.close)
        one, two = ("http://" + s.info["admin"] for s in stacks)
        done = run("admin", "token", "create", "--directory", redis.url)
        self.assertEqual(done.returncode, 0, done.stderr)
        token = done.stdout.strip()
        self.assertEqual(call(one, "POST", "/api/v1/accounts", token, {"name": "acme"})[0], 201)
        accounts = call(two, "GET", "/api/v1/accounts", token)[1]["accounts"]
        self.assertEqual([a["name"] for a in accounts], ["acme"])
        status, other = call(one, "POST", "/api/v1/admin-tokens", token, {"read_only": True})
        self.assertEqual(status, 201)
        self.assertEqual(call(two, "GET", "/api/v1/relay", other["token"])[0], 200)
        call(one, "DELETE", f"/api/v1/admin-tokens/{other['tokenid']}", token)
        self.assertEqual(call(two, "GET", "/api/v1/relay", other["token"])[0], 401)
