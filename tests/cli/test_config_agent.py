"""
Tests for L{nfltr.cli.config_agent}: what a reload of C{nfltr up}'s file
does with each kind of change (the reload on a live link runs in
L{tests.agent.test_update} and L{tests.integration.test_config}).
"""

from __future__ import annotations

from pathlib import Path

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import prepare_agent
from nfltr.cli.config_agent import ConfigAgent
from nfltr.cli.config_check import Config, check_config
from nfltr.cli.config_file import ConfigFileError
from tests.agent.helpers import LogCapture

PIN = "sha256:" + "ab" * 32


class ReloadTests(SynchronousTestCase):
    """
    L{ConfigAgent.reload}, with the link down (the new entries are the
    next hello's).
    """

    def setUp(self) -> None:
        self.dir = Path(self.mktemp()).absolute()
        self.dir.mkdir()
        self.path = self.dir / "nfltr.toml"
        self.logs = LogCapture(self)
        self.write("[[tcp]]\nport = 22\n")
        config = self.load()
        self.agent = ConfigAgent(Clock(), config, prepare_agent(config.options), self.load)

    def write(self, entries: str, top: str = "") -> None:
        self.path.write_text(f'relay-pin = "{PIN}"\nkey = "k"\nstate-dir = "s"\n{top}\n'
                             + entries)
        self.path.chmod(0o600)

    def load(self) -> Config:
        return check_config(self.path, {})

    def ports(self) -> tuple[int, ...]:
        return self.agent.agent.setup.options.ports

    def test_changed(self) -> None:
        """
        New entries are served; the log counts what started, stopped, stayed.
        """
        self.write("[[tcp]]\nport = 22\n[[tcp]]\nport = 23\n")
        self.agent.reload()
        self.assertEqual(self.ports(), (22, 23))
        self.assertIn("1 entries started, 0 stopped, 1 unchanged", self.logs.allText())

    def test_noChange(self) -> None:
        """
        The same entries: nothing to do.
        """
        setup = self.agent.agent.setup
        self.agent.reload()
        self.assertIs(self.agent.agent.setup, setup)
        self.assertIn("reloaded: no change", self.logs.allText())

    def test_broken(self) -> None:
        """
        A broken file keeps the running entries; the log names its lines.
        """
        self.write("[[tcp]]\nport = 0\n")
        self.assertRaises(ConfigFileError, self.load)
        self.agent.reload()
        self.assertEqual(self.ports(), (22,))
        self.assertIn(f"{self.path}:6: [[tcp]] 1: port 0", self.logs.allText())

    def test_topChanged(self) -> None:
        """
        A changed relay, key or name is not applied to a running agent.
        """
        self.write("[[tcp]]\nport = 23\n", top='name = "other"')
        self.agent.reload()
        self.assertEqual(self.ports(), (22,))
        self.assertIn("restart to apply it", self.logs.allText())

    def test_udpChanged(self) -> None:
        """
        Changed [[udp]] entries are applied as the others are.
        """
        self.write("[[tcp]]\nport = 22\n[[udp]]\nport = 53\n")
        self.agent.reload()
        self.assertEqual(self.agent.agent.setup.options.udp, (53,))
        self.assertIn("1 entries started, 0 stopped, 1 unchanged", self.logs.allText())
