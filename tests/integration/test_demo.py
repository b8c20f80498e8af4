"""
The README's demo command works and cleans up after itself.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from nfltr.cli.demo_steps import PAGE, Demo


class DemoTests(SynchronousTestCase):
    """
    C{nfltr demo} end to end.
    """

    def test_demo(self) -> None:
        """
        The demo fetches its page through a real relay, agent and connector,
        and through an e2ee share URL, says so, explains the manual steps,
        and leaves no process or directory behind.
        """
        said: list[str] = []
        demo = Demo(said.append)
        self.assertEqual(demo.run(), 0, "\n".join(said))
        self.assertTrue(any("answered 200" in line and PAGE.decode().strip() in line
                            for line in said), said)
        self.assertTrue(any("nfltr tcp-connect" in line for line in said))
        self.assertTrue(any(line.startswith("8. GET https://demo-site.localhost:")
                            and "answered 200" in line for line in said), said)
        self.assertFalse(demo.tmp.exists())
        self.assertEqual([c.popen.poll() is not None for c in demo.children],
                         [True] * len(demo.children))
        # relay, accounts create, keys create, agent, connector, share agent
        self.assertEqual(len(demo.children), 6)
