"""
Agent names are leased like share names, with real processes: a relay with
a short C{--lease-time}, Alice's C{nfltr http --name blog} away for a moment
(paused with SIGSTOP until the relay finds its link dead), Bob's
C{nfltr tcp --name blog} meanwhile and after the lease.

Waits are bounded and poll for what they wait for (output lines).
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from nfltr.link import PRESETS

from .harness import Process, Stack, StackTestCase, nfltr

#: Short enough to wait out, long enough to outlast the relay finding the
#: paused agent dead (the fast preset's interval + timeout) and Bob's try.
LEASE_TIME = 15.0
FAST = PRESETS["fast"]
TAKEN = "name blog is leased to another account"
POLL = 0.05


def wait_count(process: Process, pattern: str, count: int, timeout: float) -> None:
    """
    Wait until C{count} lines of C{process} match C{pattern}.
    """
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while sum(1 for line in list(process.lines) if regex.search(line)) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{process.name}: fewer than {count} lines matching "
                                 f"{pattern!r}:\n{process.output()}")
        time.sleep(POLL)


class AgentNameLeaseTests(StackTestCase):
    """
    Bob cannot take the agent name of Alice's share while her lease lives.
    """

    def setUp(self) -> None:
        self.stack = Stack(Path(self.mktemp()).absolute(),
                           relay_extra=("--lease-time", f"{LEASE_TIME:g}"))
        self.addCleanup(self.stack.close)
        self.alice, self.bob = self.stack.key("alice"), self.stack.key("bob")
        self.port = self.stack.web_service()

    def bobTries(self) -> Process:
        """
        Start Bob's C{nfltr tcp --name blog}.
        """
        return self.stack.start(
            nfltr("tcp", str(self.port), "--name", "blog", "--e2ee", "false", "--state-dir",
                  str(self.stack.tmp / "bob"), *self.stack.relay_args()),
            "bob's agent", {"NFLTR_KEY": self.bob},
        )

    def test_leaseHoldsTheAgentName(self) -> None:
        """
        While Alice's agent is away (paused until the relay dropped its
        link), Bob's agent is refused with the lease's words and exits 1;
        Alice's agent, resumed, reconnects and gets her name and share URL
        back; once she stopped and the lease ran out, Bob's agent is
        welcomed under the name.
        """
        alice, url = self.stack.http_agent(self.alice, "blog", self.port, "--keepalive", "fast")
        relay = self.stack.relay
        os.killpg(alice.popen.pid, signal.SIGSTOP)
        try:
            relay.wait_for(r"agent blog \(account alice\) disconnected",
                           FAST.interval + FAST.timeout + 10)
            refused = self.bobTries()
            self.assertEqual(refused.wait_exit(), 1, refused.output())
            self.assertIn(TAKEN, refused.output())
        finally:
            os.killpg(alice.popen.pid, signal.SIGCONT)
        alice.wait_for(r"reconnected to the relay .* \(account alice\)", 30)
        wait_count(relay, r"agent blog \(account alice\) connected .* URLs " + re.escape(url),
                   2, 30)
        self.assertIsNone(alice.popen.poll(), alice.output())
        alice.stop()
        relay.wait_for(r"agent blog \(account alice\) (disconnected|is draining)")
        stopped = time.monotonic()
        early = self.bobTries()
        self.assertEqual(early.wait_exit(), 1, early.output())
        self.assertIn(TAKEN, early.output())
        time.sleep(max(0.0, LEASE_TIME + 1 - (time.monotonic() - stopped)))
        late = self.bobTries()
        late.wait_for(r"online|connected|welcome")
        relay.wait_for(r"agent blog \(account bob\) connected")
        self.assertIsNone(late.popen.poll())
