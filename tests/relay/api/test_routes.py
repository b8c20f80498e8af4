"""
Tests for L{nfltr.relay.api}'s routes and refusals, over raw HTTP on a
L{StringTransport}, against a relay with real agents over iosim and a real
SQLite store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.api import ROUTES
from nfltr.relay.api._auth import FAILURE_BURST, FAILURE_INTERVAL
from nfltr.relay.api._resource import CSP
from nfltr.relay.api._routes import MAX_BODY
from tests.store.test_ssh import keygen

from .helpers import ApiFixture

#: A value for each path parameter, so every route has a concrete path.
SAMPLE = {"name": "web", "keyid": "0123456789ab", "fingerprint": "SHA256:nope",
          "tokenid": "0123456789ab"}


def sample_path(template: str) -> str:
    for name, value in SAMPLE.items():
        template = template.replace("{" + name + "}", value)
    return template


class RefusalTests(SynchronousTestCase):
    """
    What every route refuses.
    """

    def setUp(self) -> None:
        self.f = ApiFixture(Path(self.mktemp()))

    def test_noToken(self) -> None:
        """
        Every route answers 401 without a token, with a JSON error naming
        what is needed, and the security headers.
        """
        for route in ROUTES:
            answer = self.f.call(route.method, sample_path(route.template))
            self.assertEqual(answer.status, 401, route.template)
            self.assertIn("admin token", answer.json()["error"])
            self.assertEqual(answer.header("content-security-policy"), CSP.decode())
            self.assertEqual(answer.header("x-content-type-options"), "nosniff")

    def test_wrongAndRevokedTokens(self) -> None:
        """
        A wrong token, a well-formed unknown one, an API key and a revoked
        admin token are all 401.
        """
        info, revoked = self.f.core.create_admin_token("old")
        self.f.core.revoke_admin_token(info.tokenid)
        for token in ("junk", self.f.admin[:-2] + "xx", revoked,
                      "nfltr_0123456789ab_" + "A" * 43):
            answer = self.f.call("GET", "/api/v1/agents", token, source=f"10.0.0.{len(token)}")
            self.assertEqual(answer.status, 401, token)

    def test_failuresLimited(self) -> None:
        """
        After L{FAILURE_BURST} failures a source gets 429, even with the
        right token; another source does not; time lets it in again.
        """
        for _ in range(FAILURE_BURST):
            self.assertEqual(self.f.call("GET", "/api/v1/relay", "bad").status, 401)
        self.assertEqual(self.f.call("GET", "/api/v1/relay", self.f.admin).status, 429)
        other = self.f.call("GET", "/api/v1/relay", self.f.admin, source="10.9.9.9")
        self.assertEqual(other.status, 200)
        self.f.harness.clock.advance(FAILURE_INTERVAL)
        self.assertEqual(self.f.call("GET", "/api/v1/relay", self.f.admin).status, 200)

    def test_readOnlyRefusedChanges(self) -> None:
        """
        A read-only token reads every read route and is refused (403) on
        every change route; nothing changes.
        """
        for route in ROUTES:
            if route.template.endswith("/events"):
                continue
            answer = self.f.call(route.method, sample_path(route.template), self.f.reader,
                                 body={} if route.change else None)
            if route.change:
                self.assertEqual(answer.status, 403, route.template)
                self.assertIn("read-only", answer.json()["error"])
            else:
                self.assertIn(answer.status, (200, 404), route.template)
        self.assertEqual(self.f.drains, [])

    def test_unknownPathAndMethod(self) -> None:
        """
        An unknown API path is 404, a known one with the wrong method 405
        with C{Allow}, both only once authenticated.
        """
        self.assertEqual(self.f.call("GET", "/api/v1/nothing").status, 401)
        self.assertEqual(self.f.call("GET", "/api/v1/nothing", self.f.admin).status, 404)
        answer = self.f.call("PUT", "/api/v1/agents", self.f.admin)
        self.assertEqual(answer.status, 405)
        self.assertEqual(answer.header("allow"), "GET")

    def test_badBodies(self) -> None:
        """
        A body that is not JSON, not an object, lacks a field, or is over
        L{MAX_BODY} is refused with 400 or 413.
        """
        def post(raw: bytes) -> int:
            return self.f.call("POST", "/api/v1/accounts", self.f.admin, raw=raw).status

        self.assertEqual(post(b"{nope"), 400)
        self.assertEqual(post(b"[1]"), 400)
        self.assertEqual(post(b'{"name": 3}'), 400)
        self.assertEqual(post(b'{"name": "' + b"a" * MAX_BODY + b'"}'), 413)

    def test_storeErrors(self) -> None:
        """
        Store errors keep their meaning: a bad name 400, an existing account
        409, unknown keys and accounts 404.
        """
        admin = self.f.admin
        self.assertEqual(self.f.call("POST", "/api/v1/accounts", admin, {"name": "B!"}).status,
                         400)
        self.assertEqual(self.f.call("POST", "/api/v1/accounts", admin, {"name": "b"}).status,
                         201)
        self.assertEqual(self.f.call("POST", "/api/v1/accounts", admin, {"name": "b"}).status,
                         409)
        self.assertEqual(self.f.call("DELETE", "/api/v1/keys/0123456789ab", admin).status, 404)
        self.assertEqual(self.f.call("GET", "/api/v1/keys?account=zz", admin).status, 404)
        self.assertEqual(self.f.call("POST", "/api/v1/keys", admin, {"account": "zz"}).status,
                         404)
        self.assertEqual(
            self.f.call("DELETE", "/api/v1/admin-tokens/0123456789ab", admin).status, 404
        )
        self.assertEqual(self.f.call("POST", "/api/v1/admin-tokens", admin,
                                     {"read_only": "yes"}).status, 400)


class RouteTests(SynchronousTestCase):
    """
    What each route does, with a read-write token.
    """

    def setUp(self) -> None:
        self.f = ApiFixture(Path(self.mktemp()))
        self.logged: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(self.logged.append)
        self.addCleanup(globalLogPublisher.removeObserver, self.logged.append)

    def get(self, path: str) -> Any:
        answer = self.f.call("GET", path, self.f.admin)
        self.assertEqual(answer.status, 200, answer.body)
        return answer.json()

    def test_agentsAndShares(self) -> None:
        """
        A connected agent is listed with its account, address, figures and
        shares; its share with its mode, policy and lease; one agent can be
        read alone; an unknown one is 404.
        """
        self.f.agent("acme", "web", share="blog")
        [agent] = self.get("/api/v1/agents")["agents"]
        self.assertEqual((agent["name"], agent["account"], agent["kind"], agent["shares"]),
                         ("web", "acme", "link", ["blog"]))
        for name in ("address", "connected_since", "sessions", "bytes_in", "bytes_out", "rtt",
                     "data_links", "ports"):
            self.assertIn(name, agent)
        self.assertGreater(agent["bytes_in"], 0)
        self.assertEqual(self.get("/api/v1/agents/web")["name"], "web")
        self.assertEqual(self.f.call("GET", "/api/v1/agents/nope", self.f.admin).status, 404)
        [share] = self.get("/api/v1/shares")["shares"]
        self.assertEqual((share["name"], share["mode"], share["agent"], share["account"]),
                         ("blog", "passthrough", "web", "acme"))
        self.assertEqual(share["lease"], {"account": "acme", "lease_time": 60})
        self.assertEqual(share["policy"]["allow"], [])
        status = self.get("/api/v1/relay")
        self.assertEqual((status["agents"], status["shares"], status["version"]),
                         (1, 1, "0.test"))

    def test_sessions(self) -> None:
        """
        A session a client opens to an agent's port is listed: its agent,
        link, kind, where it goes, its age and the bytes it carried each
        way; the count says all.
        """
        from nfltr.wire.messages import TcpShare, agent_hello, client_target

        from ...link.twisted_helpers import RecordingHandler
        from ..test_link_handler import Recorder

        harness = self.f.harness
        key = harness.store.addKey("00000000aaaa", "acme")
        served: list[Recorder] = []
        harness.dial(agent_hello(key, "web", [TcpShare(3000)]),
                     RecordingHandler(lambda s: served.append(Recorder()) or served[-1]))
        self.assertEqual(self.get("/api/v1/sessions"), {"sessions": [], "total": 0})
        client = harness.client(key)
        visitor = Recorder()
        client.link.openSession(client_target("web", 3000), visitor)
        harness.run()
        visitor.transport.write(b"x" * 100)
        served[0].transport.write(b"y" * 30)
        harness.run()
        harness.clock.advance(5)
        listing = self.get("/api/v1/sessions")
        self.assertEqual(listing["total"], 1)
        [session] = listing["sessions"]
        self.assertEqual(
            {k: session[k] for k in ("agent", "account", "link", "kind", "to", "from", "age",
                                     "bytes_to_agent", "bytes_from_agent")},
            {"agent": "web", "account": "acme", "link": "agent", "kind": "tcp",
             "to": "web:3000", "from": None, "age": 5.0, "bytes_to_agent": 100,
             "bytes_from_agent": 30},
        )

    def test_kick(self) -> None:
        """
        Kicking an agent closes its link and withdraws its shares; kicking
        one that is not there is 404.
        """
        agent = self.f.agent("acme", "web", share="blog")
        answer = self.f.call("POST", "/api/v1/agents/web/kick", self.f.admin)
        self.assertEqual(answer.status, 200)
        self.f.harness.run()
        self.assertTrue(agent.closed)
        self.assertEqual(self.get("/api/v1/agents")["agents"], [])
        self.assertEqual(self.get("/api/v1/shares")["shares"], [])
        self.assertEqual(self.f.call("POST", "/api/v1/agents/web/kick", self.f.admin).status,
                         404)

    def test_drain(self) -> None:
        """
        Draining starts once (202), and the relay says it drains.
        """
        self.assertEqual(self.f.call("POST", "/api/v1/relay/drain", self.f.admin).status, 202)
        self.assertEqual(self.f.call("POST", "/api/v1/relay/drain", self.f.admin).json(),
                         {"draining": True, "started": False})
        self.assertEqual(self.f.drains, [1])
        self.assertTrue(self.get("/api/v1/relay")["draining"])

    def test_accountsAndKeys(self) -> None:
        """
        An account and a key are created, listed and revoked through the
        API; the key's text is in the creation's answer only, and revoking
        it closes the links that use it at once.
        """
        admin = self.f.admin
        self.assertEqual(self.f.call("POST", "/api/v1/accounts", admin, {"name": "acme"}).status,
                         201)
        self.assertEqual([a["name"] for a in self.get("/api/v1/accounts")["accounts"]], ["acme"])
        made = self.f.call("POST", "/api/v1/keys", admin, {"account": "acme", "label": "ci"})
        self.assertEqual(made.status, 201)
        key = made.json()
        self.assertTrue(key["key"].startswith("nfltr_"))
        [listed] = self.get("/api/v1/keys?account=acme")["keys"]
        self.assertEqual((listed["keyid"], listed["label"]), (key["keyid"], "ci"))
        self.assertNotIn("key", listed)
        relayKey = self.f.harness.store.addKey(key["keyid"], "acme")
        from nfltr.wire.messages import agent_hello

        agent = self.f.harness.dial(agent_hello(relayKey, "web", []))
        revoked = self.f.call("DELETE", f"/api/v1/keys/{key['keyid']}", admin).json()
        self.assertEqual(revoked["links_closed"], 1)
        self.assertIsNotNone(revoked["revoked_at"])
        self.f.harness.run()
        self.assertTrue(agent.closed)
        texts = " ".join(formatEvent(e) for e in self.logged)
        self.assertNotIn(key["key"], texts)
        self.assertNotIn(admin, texts)

    def test_sshKeys(self) -> None:
        """
        An SSH key is registered, listed and removed (its fingerprint,
        slashes and all, percent-encoded in the path).
        """
        from urllib.parse import quote

        self.f.core.create_account("acme")
        line = keygen(self.f.tmp, "ed25519")[0]
        added = self.f.call("POST", "/api/v1/ssh-keys", self.f.admin,
                            {"account": "acme", "key": line})
        self.assertEqual(added.status, 201, added.body)
        fingerprint = added.json()["fingerprint"]
        [listed] = self.get("/api/v1/ssh-keys")["ssh_keys"]
        self.assertEqual(listed["fingerprint"], fingerprint)
        removed = self.f.call("DELETE", f"/api/v1/ssh-keys/{quote(fingerprint, safe='')}",
                              self.f.admin)
        self.assertEqual(removed.status, 200, removed.body)
        self.assertEqual(self.get("/api/v1/ssh-keys")["ssh_keys"], [])
        bad = self.f.call("POST", "/api/v1/ssh-keys", self.f.admin,
                          {"account": "acme", "key": "ssh-dss AAAA"})
        self.assertEqual(bad.status, 400)

    def test_adminTokens(self) -> None:
        """
        Admin tokens are created (text once), listed and revoked; a revoked
        token is refused from then on.
        """
        made = self.f.call("POST", "/api/v1/admin-tokens", self.f.admin,
                           {"label": "ci", "read_only": True}).json()
        self.assertTrue(made["token"].startswith("nfltradm_"))
        self.assertEqual(self.get("/api/v1/session"),
                         {"tokenid": self.f.admin.split("_")[1], "read_only": False,
                          "csrf": None})
        tokens = self.get("/api/v1/admin-tokens")["admin_tokens"]
        self.assertIn(made["tokenid"], [t["tokenid"] for t in tokens])
        self.assertTrue(all("token" not in t for t in tokens))
        self.assertEqual(self.f.call("GET", "/api/v1/relay", made["token"]).status, 200)
        self.f.call("DELETE", f"/api/v1/admin-tokens/{made['tokenid']}", self.f.admin)
        self.assertEqual(self.f.call("GET", "/api/v1/relay", made["token"]).status, 401)

    def test_markupInert(self) -> None:
        """
        Markup in an agent's name comes out as JSON text, served as
        C{application/json} with C{nosniff}: never as HTML.
        """
        self.f.agent("acme", "x-script-alert")
        answer = self.f.call("POST", "/api/v1/accounts", self.f.admin,
                             {"name": "<script>alert(1)</script>"})
        self.assertEqual(answer.status, 400)
        self.assertEqual(answer.header("content-type"), "application/json")
        self.assertEqual(answer.header("x-content-type-options"), "nosniff")
