"""
Tests for L{nfltr.relay.agent_update}: an agent's C{update} on its link,
over real dialer links (iosim on a L{Clock}).
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire.messages import PASSTHROUGH, HttpShare, TcpShare, agent_hello
from nfltr.wire.update import update_message

from .helpers import Dialer, share_relay
from .test_link_handler import A_KEY, B_KEY


def share(name: str, port: int = 443) -> HttpShare:
    return HttpShare(name, port, PASSTHROUGH)


class UpdateTests(SynchronousTestCase):
    """
    An agent replaces its declaration on the link it has.
    """

    def setUp(self) -> None:
        self.registry, self.h = share_relay(self)
        self.keyA = self.h.store.addKey(A_KEY, "acme")
        self.keyB = self.h.store.addKey(B_KEY, "bravo")
        self.agent = self.h.dial(agent_hello(self.keyA, "web", [TcpShare(22), TcpShare(80)],
                                             [share("blog"), share("docs")]))
        self.blog = self.registry.route("blog")

    def update(self, agent: Dialer, message: dict[str, Any]) -> dict[str, Any]:
        agent.link.sendControl(message)
        self.h.run()
        return agent.controls[-1]

    def test_applied(self) -> None:
        """
        New ports and shares are routed, removed ones are not, a kept share
        keeps its very route; the answer lists what was published, and the
        agent stays on the one link.
        """
        answer = self.update(self.agent, update_message(
            7, [TcpShare(22), TcpShare(443, e2ee=False)], [share("blog"), share("wiki", 8080)],
        ))
        self.assertEqual(answer, {"type": "updated", "seq": 7, "shares": [
            {"name": "wiki", "mode": "passthrough", "url": "https://wiki.localhost/"}]})
        entry = self.h.relay.directory.agent("web")
        assert entry is not None
        self.assertEqual((entry.ports, entry.plain), (frozenset({22, 443}), frozenset({443})))
        self.assertIs(self.registry.route("blog"), self.blog)
        self.assertIsNotNone(self.registry.route("wiki"))
        self.assertIsNone(self.registry.route("docs"))
        self.assertFalse(self.agent.closed)
        self.assertIn("agent web (account acme) updated", "\n".join(self.h.messages()))

    def test_nameOfAnotherAccount(self) -> None:
        """
        A share name another account holds refuses the update: nothing
        changes, the link stays.
        """
        self.h.dial(agent_hello(self.keyB, "other", [], [share("taken")]))
        answer = self.update(self.agent, update_message(1, [TcpShare(9)], [share("taken")]))
        self.assertEqual((answer["type"], answer["seq"], answer["refused"]),
                         ("updated", 1, "conflict"))
        self.assertIn("taken", answer["message"])
        entry = self.h.relay.directory.agent("web")
        assert entry is not None
        self.assertEqual(entry.ports, frozenset({22, 80}))
        self.assertIsNotNone(self.registry.route("docs"))
        self.assertFalse(self.agent.closed)

    def test_invalid(self) -> None:
        """
        A malformed update is refused as invalid; the link stays.
        """
        answer = self.update(self.agent, {"type": "update", "seq": 3, "tcp": [{"port": 0}]})
        self.assertEqual((answer["seq"], answer["refused"]), (3, "invalid"))
        answer = self.update(self.agent, {"type": "update", "seq": True})
        self.assertEqual((answer["seq"], answer["refused"]), (0, "invalid"))
        self.assertFalse(self.agent.closed)

    def test_clientIgnored(self) -> None:
        """
        A client's update is ignored, as any control message it sends.
        """
        client = self.h.client(self.keyA)
        before = list(client.controls)
        client.link.sendControl(update_message(1, [TcpShare(1)], []))
        self.h.run()
        self.assertEqual(client.controls, before)
