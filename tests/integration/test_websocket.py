"""
Links over WebSocket, end to end: an agent and a connector forced onto the
WebSocket transport (directly, and through an HTTP CONNECT proxy) move 32
MiB each way, verified, and keep per-session isolation.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from .connect_proxy import ConnectProxy
from .harness import StackTestCase
from .test_tcp_tunnel import download, upload


class WebSocketTransportTests(StackTestCase):
    """
    C{--transport websocket} on both ends.
    """

    def tunnel(self, *extra: str) -> int:
        key = self.stack.key("alice")
        service = self.stack.service()
        agent, pin = self.stack.agent(key, "web", service, "--transport", "websocket", *extra)
        self.agent = agent
        _, local = self.stack.connector(key, "web", service, "--pin", str(pin),
                                        "--transport", "websocket", *extra)
        return local

    def test_bothWays(self) -> None:
        """
        32 MiB up and 32 MiB down, 4 sessions of each at once, all verified.
        """
        local = self.tunnel()
        jobs = [(f, n) for n in range(4) for f in (upload, download)]
        with ThreadPoolExecutor(len(jobs)) as pool:
            results = list(pool.map(lambda job: job[0](local, job[1]), jobs))
        self.assertEqual(results, [True] * len(jobs))

    def test_throughConnectProxy(self) -> None:
        """
        Through an HTTP CONNECT proxy (the only way out, here): the agent and
        the connector each tunnel to the relay's port, and bytes flow.
        """
        proxy = ConnectProxy()
        self.addCleanup(proxy.close)
        local = self.tunnel("--proxy", f"http://127.0.0.1:{proxy.port}")
        self.assertTrue(download(local, 7))
        relayPort = self.stack.address.rsplit(":", 1)[1]
        self.assertGreaterEqual(len(proxy.tunnels), 2)
        self.assertTrue(all(t.endswith(f":{relayPort}") for t in proxy.tunnels), proxy.tunnels)
