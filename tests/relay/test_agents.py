"""
Tests for L{nfltr.relay.link_handler}: what an agent's hello brings besides its
name (share URLs), the relay's agent limit, and an agent's extra data
connections; real dialer links over iosim on a L{Clock}.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error
from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.agents import NO_SHARE_URLS
from nfltr.wire.messages import PASSTHROUGH, HttpShare, agent_hello, client_target

from ..link.twisted_helpers import RecordingHandler
from .helpers import RelayHarness, share_relay
from .test_link_handler import A2_KEY, A_KEY, B_KEY, Recorder


class ShareTests(SynchronousTestCase):
    """
    Agents publishing share URLs through their hello.
    """

    def setUp(self) -> None:
        self.registry, self.h = share_relay(self)
        self.keyA = self.h.store.addKey(A_KEY, "acme")
        self.keyB = self.h.store.addKey(B_KEY, "bravo")

    def publish(self, key: str, agent: str, share: str) -> Any:
        hello = agent_hello(key, agent, [], [HttpShare(share, 443, PASSTHROUGH)])
        return self.h.dial(hello)

    def test_publishedAndWithdrawn(self) -> None:
        """
        The welcome names the share's URL; the route exists while the link
        lives and is removed when it is lost.
        """
        agent = self.publish(self.keyA, "web", "blog")
        [welcome] = agent.controls
        self.assertEqual(
            welcome["shares"], [{"name": "blog", "mode": "passthrough",
                                 "url": "https://blog.localhost/"}]
        )
        self.assertIsNotNone(self.registry.route("blog"))
        agent.cut(error.ConnectionLost("gone"))
        self.h.run()
        self.assertIsNone(self.registry.route("blog"))

    def test_nameOfAnotherAccount(self) -> None:
        """
        An agent of another account asking for a leased share name is
        refused as a conflict, naming the share, and nothing of it is
        registered (not its agent name either).
        """
        self.publish(self.keyA, "web", "blog")
        other = self.publish(self.keyB, "other", "blog")
        self.assertRefused(other, "name blog is leased to another account")
        self.assertIsNone(self.h.relay.directory.agent("other"))

    def test_relayWithoutShares(self) -> None:
        """
        A relay with no share registry refuses agents that ask for share URLs.
        """
        self.h = RelayHarness()
        self.h.store.addKey(A_KEY, "acme")
        agent = self.publish(self.keyA, "web", "blog")
        self.assertRefused(agent, NO_SHARE_URLS)

    def assertRefused(self, dialer: Any, message: str) -> None:
        [answer] = dialer.controls
        self.assertEqual(answer["type"], "refused")
        self.assertEqual(answer["message"], message)
        self.assertTrue(dialer.closed)


class AgentLimitTests(SynchronousTestCase):
    """
    C{maxAgents}: at most that many agents at once, admitted atomically.
    """

    def test_racingAgents(self) -> None:
        """
        32 agents whose keys are verified at the same moment into room for 2:
        exactly 2 are welcomed, the others refused with C{limit} and a
        message naming the option; an agent of the same account replacing a
        connected one is not counted twice.
        """
        h = RelayHarness()
        h.relay.maxAgents = 2
        key = h.store.addKey(A_KEY, "acme")
        h.store.hold = True
        agents = [h.agent(key, f"a{i}") for i in range(32)]
        h.store.release()
        h.run()
        welcomed = [a for a in agents if a.controls and a.controls[0]["type"] == "welcome"]
        refused = [a for a in agents if a.controls and a.controls[0]["type"] == "refused"]
        self.assertEqual((len(welcomed), len(refused)), (2, 30))
        self.assertEqual(
            refused[0].controls[0],
            {"type": "refused", "reason": "limit",
             "message": "the relay's agent limit is reached (2 agents, --max-agents)"},
        )
        h.store.hold = False
        name = welcomed[0].controls[0]["name"]
        again = h.agent(key, name)
        self.assertEqual(again.controls[0]["type"], "welcome")


class DataLinkTests(SynchronousTestCase):
    """
    An agent's extra data connections, bound by the token of its welcome.
    """

    def setUp(self) -> None:
        from nfltr.wire.messages import data_hello

        self.data_hello = data_hello
        self.h = RelayHarness()
        self.keyA = self.h.store.addKey(A_KEY, "acme")
        self.keyA2 = self.h.store.addKey(A2_KEY, "acme")
        self.agentHandler = RecordingHandler(lambda session: Recorder())
        self.agent = self.h.agent(self.keyA, "web", handler=self.agentHandler)
        self.token = self.agent.controls[0]["data_token"]

    def test_boundAndUsed(self) -> None:
        """
        A data connection with the token and the agent's key is welcomed
        (not as an agent); new sessions go to whichever of the agent's links
        has the fewest.
        """
        dataHandler = RecordingHandler(lambda session: Recorder())
        data = self.h.dial(self.data_hello(self.keyA, self.token), dataHandler)
        self.assertEqual(data.controls[0]["type"], "welcome")
        self.assertEqual(self.h.relay.directory.counts()[0], 1)
        client = self.h.client(self.keyA)
        for _ in range(4):
            client.link.openSession(client_target("web", 3000), Recorder())
            self.h.run()
        self.assertEqual((len(self.agentHandler.sessions), len(dataHandler.sessions)), (2, 2))

    def test_refusals(self) -> None:
        """
        A wrong token, or another key's, is refused as not found; past the
        limit, as a limit; a data connection cannot open sessions.
        """
        other = self.h.dial(self.data_hello(self.keyA, "0" * 32))
        self.assertEqual(other.controls[0]["reason"], "not_found")
        other = self.h.dial(self.data_hello(self.keyA2, self.token))
        self.assertEqual(other.controls[0]["reason"], "not_found")
        links = [self.h.dial(self.data_hello(self.keyA, self.token)) for _ in range(4)]
        self.assertEqual([d.controls[0]["type"] for d in links],
                         ["welcome", "welcome", "welcome", "refused"])
        self.assertEqual(links[3].controls[0]["reason"], "limit")
        opened = Recorder()
        links[0].link.openSession("tcp:web:3000", opened)
        self.h.run()
        self.assertIsNotNone(opened.lost)

    def test_endWithTheFirstLink(self) -> None:
        """
        When the agent's first link is lost, its data connections are
        closed and its token no longer binds.
        """
        data = self.h.dial(self.data_hello(self.keyA, self.token))
        self.agent.cut(error.ConnectionLost("gone"))
        self.h.run()
        self.assertTrue(data.closed)
        late = self.h.dial(self.data_hello(self.keyA, self.token))
        self.assertEqual(late.controls[0]["reason"], "not_found")
