"""
Tests for L{nfltr.store._owner}: one process at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from nfltr.store import DirectoryInUse, claim_owner


class ClaimTests(SynchronousTestCase):
    """
    L{claim_owner} takes a lock file for this process, or names who holds it.
    """

    def setUp(self) -> None:
        self.path = Path(self.mktemp())
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def test_secondRefusedWithPid(self) -> None:
        """
        While one holder has the lock a second claim is refused, naming what, the holder's pid
        and the hint; once released, the lock can be taken again.
        """
        first = claim_owner(self.path, "the data directory D", "use another --data-dir")
        self.addCleanup(first.release)
        self.assertEqual(self.path.read_text(), f"{os.getpid()}\n")
        self.assertEqual(self.path.stat().st_mode & 0o777, 0o600)
        with self.assertRaises(DirectoryInUse) as caught:
            claim_owner(self.path, "the data directory D", "use another --data-dir")
        self.assertEqual(
            str(caught.exception),
            f"the data directory D is in use by another process (pid {os.getpid()}); stop it or "
            "use another --data-dir",
        )
        first.release()
        first.release()
        self.assertFalse(first.held)
        again = claim_owner(self.path, "D", "h")
        self.addCleanup(again.release)
        self.assertTrue(again.held)

    def test_anotherProcess(self) -> None:
        """
        A lock held by another process refuses this one, naming that process; when it exits
        (however it ends) the lock is free, with no stale file to clean up.
        """
        code = (
            "import sys, time; from pathlib import Path; from nfltr.store import claim_owner;"
            "claim_owner(Path(sys.argv[1]), 'x', 'y'); print('held', flush=True);"
            "sys.stdin.read()"
        )
        child = subprocess.Popen(
            [sys.executable, "-c", code, str(self.path)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True,
        )
        assert child.stdout is not None and child.stdin is not None
        self.addCleanup(child.kill)
        self.assertEqual(child.stdout.readline(), "held\n")
        with self.assertRaises(DirectoryInUse) as caught:
            claim_owner(self.path, "the state of agent web", "use another --name")
        self.assertIn(f"(pid {child.pid})", str(caught.exception))
        child.kill()
        child.wait()
        claim_owner(self.path, "x", "y").release()

    def test_garbageInFile(self) -> None:
        """
        A lock file that holds something else than a pid is still a lock; the refusal then
        names no pid rather than repeating the file's text.
        """
        first = claim_owner(self.path, "x", "y")
        self.addCleanup(first.release)
        self.path.write_text("<script>\n")
        with self.assertRaises(DirectoryInUse) as caught:
            claim_owner(self.path, "x", "y")
        self.assertEqual(str(caught.exception), "x is in use by another process; stop it or y")
