"""
Tests for C{ssh -R PORT:...} of a port within the relay's public ports
(L{nfltr.relay.ssh._forwards}): a public port, not a TCP share.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.relay.ssh import _forwards as fw
from nfltr.wire.messages import public_target

PUBLIC = range(20000, 20010)


class PublicForwardTests(SynchronousTestCase):
    """
    L{fw.classify} and L{fw.ForwardTable} with public ports.
    """

    def test_classify(self) -> None:
        """
        A port in the public ports, on an agent address, is a public port
        (whatever the user name); outside them, a TCP share as before.
        """
        for address in ("", "localhost", "*", "0.0.0.0"):
            self.assertEqual(fw.classify(address, 20001, "Not A Name", PUBLIC), (fw.PUBLIC, ""))
        self.assertEqual(fw.classify("localhost", 22, "box", PUBLIC), (fw.TCP, "box"))
        self.assertEqual(fw.classify("localhost", 20001, "box"), (fw.TCP, "box"))

    def test_table(self) -> None:
        """
        The table finds a public forward by its visitors' target, with the
        visitor as originator, and refuses the same port twice.
        """
        table = fw.ForwardTable(4)
        forward = table.check("localhost", 20001, "x", PUBLIC)
        table.add(forward)
        found = table.for_target(public_target(20001, "192.0.2.1:5"))
        self.assertEqual(found, (forward, "192.0.2.1:5"))
        self.assertIsNone(table.for_target(public_target(20002, "192.0.2.1:5")))
        self.assertIsNone(table.for_target("tcp:20001"))
        with self.assertRaises(fw.RequestError):
            table.check("", 20001, "x", PUBLIC)
        self.assertEqual(fw.split_visitor(found[1] if found else None), ("192.0.2.1", 5))
