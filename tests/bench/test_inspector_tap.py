"""
A smoke test of L{bench.inspector_tap}: it runs with tiny numbers and
prints its table (no figure is checked: speed is never asserted).
"""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stdout

from twisted.trial.unittest import SynchronousTestCase

from bench import inspector_tap


class InspectorTapTests(SynchronousTestCase):
    """
    The in-process benchmark of the inspector's tap.
    """

    def test_runs(self) -> None:
        """
        With a few requests and rounds it prints the tap off and on, the
        tap's difference and what one kept exchange holds; a kept exchange
        holds something.
        """
        self.patch(sys, "argv", ["inspector_tap", "--requests", "5", "--rounds", "1"])
        out = io.StringIO()
        with redirect_stdout(out):
            inspector_tap.main()
        lines = out.getvalue().splitlines()
        self.assertEqual([line.split()[0] for line in lines], ["tap", "off", "on", "the"])
        self.assertIn("one kept exchange holds", lines[-1])
        self.assertGreater(inspector_tap.kept_bytes(), 0)
