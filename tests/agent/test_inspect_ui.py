"""
Tests for L{nfltr.agent._inspect_ui}: C{--inspect-ui}, and the inspector
of a share listening for real (on loopback, port 0).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from twisted.internet import reactor, threads
from twisted.trial.unittest import SynchronousTestCase, TestCase

from nfltr.agent._inspect_ui import InspectUI, parse_inspect_keep, parse_inspect_ui
from nfltr.agent._settings import ConfigError
from nfltr.agent._shares import HttpOption, ShareServer
from nfltr.wire.messages import E2EE, PASSTHROUGH


class ParseTests(SynchronousTestCase):
    """
    C{--inspect-ui}'s values.
    """

    def test_values(self) -> None:
        """
        Loopback port 4040 by default; C{PORT} alone is on 127.0.0.1;
        C{none} is off; anything else is an error naming the option.
        """
        self.assertEqual(parse_inspect_ui(None), ("127.0.0.1", 4040))
        self.assertEqual(parse_inspect_ui("5050"), ("127.0.0.1", 5050))
        self.assertEqual(parse_inspect_ui("[::1]:0"), ("::1", 0))
        self.assertIsNone(parse_inspect_ui("none"))
        with self.assertRaises(ConfigError) as caught:
            parse_inspect_ui("x:y")
        self.assertIn("--inspect-ui", str(caught.exception))


    def test_keep(self) -> None:
        """
        C{--inspect-requests} and C{--inspect-body}: defaults 100 and 16 KiB,
        units K and M, 0 bytes allowed; out of range or junk is an error
        naming the option.
        """
        self.assertEqual(parse_inspect_keep(None, None), (100, 16384))
        self.assertEqual(parse_inspect_keep("5", "1K"), (5, 1024))
        self.assertEqual(parse_inspect_keep("10000", "1m"), (10000, 1 << 20))
        self.assertEqual(parse_inspect_keep("1", "0"), (1, 0))
        for requests, body, option in (("0", None, "--inspect-requests"),
                                       ("10001", None, "--inspect-requests"),
                                       ("x", None, "--inspect-requests"),
                                       (None, "2M", "--inspect-body"),
                                       (None, "-1", "--inspect-body"),
                                       (None, "", "--inspect-body"),
                                       (None, "K", "--inspect-body")):
            with self.assertRaises(ConfigError) as caught:
                parse_inspect_keep(requests, body)
            self.assertIn(option, str(caught.exception))

    def test_options(self) -> None:
        """
        The agent's options carry them to its share.
        """
        from nfltr.agent._options import http_option

        option = http_option(3000, {"inspect-requests": "7", "inspect-body": "2K"}, {})
        self.assertEqual(option.inspect_keep, (7, 2048))


class ListenTests(TestCase):
    """
    The inspector of a share, on a real listener.
    """

    def server(self, mode: str) -> ShareServer:
        return ShareServer("blog", HttpOption(3000, mode), object(), reactor, None)

    async def test_listens(self) -> None:
        """
        It listens where told, taps the share's proxies and says where its
        page is; its API answers there; stopping closes it.
        """
        share = self.server(E2EE)
        ui = InspectUI(reactor, share, ("127.0.0.1", 0))
        line = await ui.start()
        self.addCleanup(ui.stop)
        self.assertTrue(line.startswith("inspector http://127.0.0.1:"), line)
        assert share.proxy is not None
        self.assertIs(share.proxy.tap, ui.ring)
        url = f"{ui.url}api/requests"
        answer = await threads.deferToThread(lambda: urllib.request.urlopen(url, timeout=10).read())
        self.assertEqual(json.loads(answer)["requests"], [])
        await ui.stop()

    async def test_keepsWhatItIsTold(self) -> None:
        """
        Its ring holds as many requests and body bytes as the share says.
        """
        option = HttpOption(3000, E2EE, inspect_keep=(7, 2048))
        ui = InspectUI(reactor, ShareServer("blog", option, object(), reactor, None),
                       ("127.0.0.1", 0))
        self.assertEqual((ui.ring.exchanges.maxlen, ui.ring.bodyCap), (7, 2048))

    async def test_passthroughSaysWhy(self) -> None:
        """
        In passthrough it says plainly why it sees no requests.
        """
        ui = InspectUI(reactor, self.server(PASSTHROUGH), ("127.0.0.1", 0))
        line = await ui.start()
        self.addCleanup(ui.stop)
        self.assertIn("only ciphertext", line)

    async def test_addressTaken(self) -> None:
        """
        An address in use is one line, and the agent goes on.
        """
        first = InspectUI(reactor, self.server(E2EE), ("127.0.0.1", 0))
        await first.start()
        self.addCleanup(first.stop)
        assert first.url is not None
        port = int(first.url.rsplit(":", 1)[1].strip("/"))
        second = InspectUI(reactor, self.server(E2EE), ("127.0.0.1", port))
        line = await second.start()
        self.assertIn("going on without it", line)
        self.assertIsNone(second.url)

    async def test_tokenNeverShown(self) -> None:
        """
        Off loopback the line shown (and logged under twistd) holds no
        token: it names a file in the state directory, mode 0600, holding
        the URL with the token, which the page accepts.
        """
        state = Path(self.mktemp())
        ui = InspectUI(reactor, self.server(E2EE), ("0.0.0.0", 0), state)
        line = await ui.start()
        self.addCleanup(ui.stop)
        token = ui.inspector.token
        assert token is not None and ui.url is not None
        self.assertNotIn(token, line)
        [saved] = state.glob("inspector-*.url")
        self.assertIn(str(saved), line)
        self.assertEqual(saved.stat().st_mode & 0o777, 0o600)
        self.assertEqual(saved.read_text(), ui.url + "\n")
        self.assertIn(f"?token={token}", ui.url)
