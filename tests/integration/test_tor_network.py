"""
The tests' private Tor network (L{tests.tor_network}) works: its client tors
build circuits through its relays (and L{tests.tor_socks} speaks SOCKS5).
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from tests.tor_network import missing_tor, shared_network
from tests.tor_socks import echo_through


class TorNetworkTests(SynchronousTestCase):
    """
    The network bootstraps and carries streams.
    """

    skip = missing_tor()

    def test_exit_to_loopback(self) -> None:
        """
        A client tor carries a stream through the network's exits to a service on
        loopback and back.
        """
        network = shared_network()
        self.assertIn("bootstrapped", network.timings)
        for failure in network.unready:
            print(f"a first stream failed before the network was ready: {failure}")
        client = network.clients[1]
        try:
            answer = echo_through(client.socks_port)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{network.logs(client.node)}") from e
        self.assertEqual(answer, b"rot hguorht")
