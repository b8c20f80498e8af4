"""
The relay's SSH port drains when the relay stops (SIGTERM), as its links do,
driven by the real OpenSSH client: a download through C{ssh -L} that is in
flight when the relay is told to stop finishes intact; OpenSSH is then
disconnected with the relay's reason and exits on its own; the relay exits
0 well before its drain timeout.
"""

from __future__ import annotations

import hashlib
import os
import signal

from .service import pattern
from .test_faults import DRAINED_EXIT_TIMEOUT, KiB, MiB, Visitor
from .test_ssh import SSHTestCase

#: A slow visitor: the download outlasts the relay's stop by seconds.
SIZE, RATE = 8 * MiB, 2 * MiB


class SSHDrainTests(SSHTestCase):
    """
    SIGTERM on a relay with an C{ssh -L} session in flight.
    """

    def setUp(self) -> None:
        super().setUp()
        self.service = self.stack.service()
        self.stack.agent(self.stack.key("alice"), "web", self.service, "--e2ee", "false")

    def test_localForwardFinishes(self) -> None:
        """
        SIGTERM on the relay while a slow visitor downloads 8 MiB through
        C{ssh -L}: every byte arrives (sha256) and the stream ends cleanly;
        then OpenSSH prints the relay's reason and exits; the relay exits
        0, soon.
        """
        local, ssh = self.ssh.forward(self.ssh.user_key("alice"), f"web:{self.service}",
                                      "-o", "LogLevel=INFO")
        visitor = Visitor(local, SIZE, 1)
        visitor.read_until(256 * KiB)
        os.kill(self.stack.relay.popen.pid, signal.SIGTERM)
        visitor.read_all(RATE)
        self.assertTrue(visitor.eof and visitor.error is None, visitor.describe())
        self.assertEqual(hashlib.sha256(visitor.got).hexdigest(),
                         hashlib.sha256(pattern(1, SIZE)).hexdigest(), visitor.describe())
        self.assertEqual(ssh.wait_exit(DRAINED_EXIT_TIMEOUT), 255)
        self.assertIn("the relay is stopping", ssh.output())
        self.assertEqual(self.stack.relay.wait_exit(DRAINED_EXIT_TIMEOUT), 0)
