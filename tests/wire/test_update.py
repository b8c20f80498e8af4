"""
Tests for L{nfltr.wire.update}: the C{update} and C{updated} control
messages, and what an update changes in the share URLs.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.wire.messages import AGENT_FEATURES, INSPECT, HttpShare, MessageError, TcpShare, welcome
from nfltr.wire.udp import UdpShare
from nfltr.wire.update import (
    FEATURE,
    MAX_SEQ,
    Updated,
    changed_shares,
    parse_update,
    parse_updated,
    update_message,
    update_refused,
    updated_message,
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=10,
)


class UpdateTests(SynchronousTestCase):
    """
    C{update}: the agent's new declaration.
    """

    def test_roundTrip(self) -> None:
        """
        What the agent sends, the relay reads back, through JSON.
        """
        tcp = [TcpShare(22), TcpShare(80, e2ee=False)]
        http = [HttpShare("blog", 3000, INSPECT, plain=True)]
        update = parse_update(json.loads(json.dumps(update_message(MAX_SEQ, tcp, http))))
        self.assertEqual((update.seq, update.tcp, update.http), (MAX_SEQ, tuple(tcp), tuple(http)))
        self.assertIsNone(update.udp)

    def test_udp(self) -> None:
        """
        The UDP ports travel when given, an empty list included (none left).
        """
        udp = [UdpShare(53, 20053), UdpShare(5353)]
        for shares in (udp, []):
            message = json.loads(json.dumps(update_message(1, [], [], shares)))
            self.assertEqual(parse_update(message).udp, tuple(shares))
        error = self.assertRaises(MessageError, parse_update,
                                  {"seq": 1, "udp": [{"port": 53}, {"port": 53}]})
        self.assertIn("twice", str(error))

    def test_bad(self) -> None:
        """
        A bad sequence number, port list or share list is named.
        """
        for message, words in (
            ({"seq": -1}, "seq"), ({"seq": MAX_SEQ + 1}, "seq"), ({"seq": True}, "seq"),
            ({"seq": "1"}, "seq"), ({"seq": 1, "tcp": [{"port": 1}, {"port": 1}]}, "twice"),
            ({"seq": 1, "tcp": {}}, "tcp must be a list"),
            ({"seq": 1, "http": [{"name": "a", "port": 1, "mode": "e2ee"}]}, "csr"),
        ):
            error = self.assertRaises(MessageError, parse_update, {"type": "update", **message})
            self.assertIn(words, str(error))

    @given(st.dictionaries(st.sampled_from(["seq", "tcp", "http", "udp", "type"]), JSON))
    def test_onlyMessageError(self, message: dict[str, Any]) -> None:
        """
        Whatever a peer sends, reading it raises nothing but L{MessageError}.
        """
        for parse in (parse_update, parse_updated):
            with contextlib.suppress(MessageError):
                parse(message)


class UpdatedTests(SynchronousTestCase):
    """
    C{updated}: the relay's answer.
    """

    def test_done(self) -> None:
        """
        Done: the published shares.
        """
        shares = [{"name": "a", "url": "https://a.example/"}]
        self.assertEqual(parse_updated(updated_message(4, shares)), Updated(4, tuple(shares)))

    def test_publicPorts(self) -> None:
        """
        Done with public ports: kept, keyed as in the welcome; anything but
        a list under those keys is left out.
        """
        ports = {"public_ports": [{"port": 22, "public_port": 20001}],
                 "public_udp_ports": [{"port": 53, "public_port": 20053}]}
        self.assertEqual(parse_updated(updated_message(4, [], ports)).ports, ports)
        self.assertEqual(parse_updated({"seq": 1, "public_ports": 3}).ports, {})

    def test_refused(self) -> None:
        """
        Refused: the reason and the message.
        """
        self.assertEqual(parse_updated(update_refused(4, "conflict", "taken")),
                         Updated(4, (), "conflict", "taken"))

    def test_bad(self) -> None:
        """
        Shares that are not a list of objects.
        """
        self.assertRaises(MessageError, parse_updated, {"seq": 1, "shares": [1]})
        self.assertRaises(MessageError, parse_updated, {"seq": 1, "shares": {}})

    def test_feature(self) -> None:
        """
        An agent's welcome lists the feature; a client's lists none.
        """
        self.assertIn(FEATURE, AGENT_FEATURES)
        self.assertIn(FEATURE, welcome("a", "b", [], "0" * 32)["features"])
        self.assertNotIn("features", welcome("a", None))


class ChangedTests(SynchronousTestCase):
    """
    L{changed_shares}.
    """

    def test_changed(self) -> None:
        """
        New shares and shares changed in any field are published, a new
        signing request alone changes nothing; shares gone are withdrawn.
        """
        kept = HttpShare("kept", 1, csr="old")
        changed = HttpShare("changed", 2, INSPECT)
        old = (kept, changed, HttpShare("gone", 3, INSPECT))
        new = (HttpShare("kept", 1, csr="new"), HttpShare("changed", 2, INSPECT, plain=True),
               HttpShare("added", 4, INSPECT))
        publish, withdraw = changed_shares(old, new)
        self.assertEqual([s.name for s in publish], ["changed", "added"])
        self.assertEqual(withdraw, ["gone"])
