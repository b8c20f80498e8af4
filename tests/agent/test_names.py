"""
Tests for L{nfltr.agent._names}: the agent's name and state directory.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from nfltr.agent import ConfigError, agent_name, claim_name, default_state_dir, random_name
from nfltr.store import OwnerLock
from nfltr.wire.messages import MessageError, check_name


class NameTests(SynchronousTestCase):
    """
    L{agent_name} and L{random_name}.
    """

    def test_randomNamesValid(self) -> None:
        """
        Random names are valid agent names of the form adjective-noun-NNNN,
        and differ from draw to draw.
        """
        rand = random.Random(7)
        names = {random_name(rand) for _ in range(200)}
        self.assertGreater(len(names), 190)
        for name in names:
            self.assertEqual(check_name(name), name)
            adjective, noun, number = name.split("-")
            self.assertTrue(adjective.isalpha() and noun.isalpha())
            self.assertTrue(1000 <= int(number) <= 9999)

    def test_keptAcrossRuns(self) -> None:
        """
        Without a given name, the first run makes one and writes it to the
        state directory (created if missing); later runs read it back.
        """
        state = Path(self.mktemp()) / "deep" / "state"
        first = agent_name(state, None, random.Random(1))
        self.assertEqual((state / "name").read_text(), first + "\n")
        self.assertEqual(agent_name(state, None, random.Random(2)), first)

    def test_givenName(self) -> None:
        """
        A given name wins and is not written.
        """
        state = Path(self.mktemp())
        self.assertEqual(agent_name(state, "box"), "box")
        self.assertFalse((state / "name").exists())

    def test_badNames(self) -> None:
        """
        A bad given name, or a bad name in the file, is an error; the file's
        error names the file.
        """
        state = Path(self.mktemp())
        self.assertRaises(MessageError, agent_name, state, "Not OK")
        state.mkdir()
        (state / "name").write_text("Not OK\n")
        e = self.assertRaises(MessageError, agent_name, state, None)
        self.assertIn(str(state / "name"), str(e))
        self.assertIn("fix or delete", str(e))

    def test_defaultStateDir(self) -> None:
        """
        The state directory is under C{XDG_STATE_HOME}, else under
        C{~/.local/state}.
        """
        self.assertEqual(
            default_state_dir({"XDG_STATE_HOME": "/s"}), Path("/s/nfltr/agent")
        )
        self.assertEqual(
            default_state_dir({"HOME": "/home/u"}), Path("/home/u/.local/state/nfltr/agent")
        )


class ClaimNameTests(SynchronousTestCase):
    """
    L{claim_name}: one process per agent name in a state directory.
    """

    def test_sameNameRefused(self) -> None:
        """
        A second agent of the same name in the same state directory is refused with a
        L{ConfigError} naming the agent, the holder's pid and what to do; another name in the
        same directory is fine.
        """
        state = Path(self.mktemp())
        state.mkdir()
        held = claim_name(state, "web")
        self.addCleanup(held.release)
        with self.assertRaises(ConfigError) as caught:
            claim_name(state, "web")
        self.assertEqual(
            str(caught.exception),
            f"agent web (state directory {state}) is in use by another process "
            f"(pid {os.getpid()}); stop it or give this one another --name or --state-dir",
        )
        other = claim_name(state, "db")
        self.addCleanup(other.release)
        self.assertIsInstance(other, OwnerLock)

    def test_unusableDirectory(self) -> None:
        """
        A state directory that cannot be made is a L{ConfigError}, not an C{OSError}.
        """
        blocker = Path(self.mktemp())
        blocker.write_text("a file, not a directory")
        with self.assertRaises(ConfigError) as caught:
            claim_name(blocker / "state", "web")
        self.assertIn("cannot use the state directory", str(caught.exception))
