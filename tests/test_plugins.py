"""
Tests for C{twisted/plugins/nfltr_plugins.py}, the twistd plugins.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from twisted.application.service import IServiceMaker
from twisted.plugin import getPlugins
from twisted.trial.unittest import SynchronousTestCase

REPO = Path(__file__).resolve().parent.parent

# Run in a fresh interpreter: which modules plugin discovery imports cannot be told in a process
# where other tests may already have imported them.
_DISCOVER = """
import json, sys
from twisted.application.service import IServiceMaker
from twisted.plugin import getPlugins
makers = {m.tapname: m.module for m in getPlugins(IServiceMaker)}
loaded = sorted(name for name in sys.modules if name == "nfltr" or name.startswith("nfltr."))
print(json.dumps({"makers": makers, "loaded": loaded}))
"""


class PluginTests(SynchronousTestCase):
    """
    Tests for the C{nfltr-relay} and C{nfltr-agent} service makers.
    """

    def _maker(self, tapname: str) -> IServiceMaker:
        makers = [m for m in getPlugins(IServiceMaker) if m.tapname == tapname]
        self.assertEqual(len(makers), 1, f"{tapname}: {makers!r}")
        return makers[0]

    def test_relay(self) -> None:
        """
        Plugin discovery finds exactly one C{nfltr-relay} service maker, lazy on
        C{nfltr.relay_tap}, with a description for C{twistd --help}.
        """
        maker = self._maker("nfltr-relay")
        self.assertTrue(IServiceMaker.providedBy(maker))
        self.assertEqual(maker.module, "nfltr.relay_tap")  # type: ignore[attr-defined]
        self.assertTrue(maker.description)

    def test_agent(self) -> None:
        """
        Plugin discovery finds exactly one C{nfltr-agent} service maker, lazy on
        C{nfltr.agent_tap}, with a description for C{twistd --help}.
        """
        maker = self._maker("nfltr-agent")
        self.assertTrue(IServiceMaker.providedBy(maker))
        self.assertEqual(maker.module, "nfltr.agent_tap")  # type: ignore[attr-defined]
        self.assertTrue(maker.description)

    def test_discoveryImportsNoNfltrModule(self) -> None:
        """
        Discovering the plugins in a fresh interpreter finds both service makers without
        importing any nfltr module: not C{nfltr.relay_tap}, not C{nfltr.agent_tap}, not even
        C{nfltr}. (twistd lists every plugin at start-up; none may pay for nfltr's imports.)
        """
        cwd = self.mktemp()
        os.makedirs(cwd)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        result = subprocess.run(
            [sys.executable, "-c", _DISCOVER],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        report = json.loads(result.stdout.strip().splitlines()[-1])
        self.assertEqual(report["makers"].get("nfltr-relay"), "nfltr.relay_tap")
        self.assertEqual(report["makers"].get("nfltr-agent"), "nfltr.agent_tap")
        self.assertEqual(report["loaded"], [])
