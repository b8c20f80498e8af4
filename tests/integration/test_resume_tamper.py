"""
The relay, in the middle of a resumable session, cannot make an end accept bytes the other did
not send: real processes, a relay (L{tests.integration.tamper_relay}) that flips one byte of the
bytes the agent resends after the relay was killed and started again.  The connector's
end-to-end TLS refuses the record: the visitor's connection is reset after an unaltered prefix
of the download (never a clean end, never an altered byte), and the connector and the agent each
say in one line that the session's bytes were altered on the way.
"""

from __future__ import annotations

import re
import signal
import sys

from .harness import StackTestCase
from .service import pattern
from .test_faults import RECOVERY_TIMEOUT, Visitor, poll_until, restart_relay

KiB = 1024
MiB = 1024 * KiB
SIZE = 64 * MiB
SEED = 22
# What the visitor reads before it stops reading (less than the relay passes on before it
# holds the agent's bytes, L{tamper_relay.HOLD}).
FIRST = 1 * MiB
# What the first relay holds when it is killed, at least: bytes that passed it and never
# reached the connector, which the agent resends.
HELD = 64 * KiB


class TamperedResumeTests(StackTestCase):
    """
    A byte of a resent record altered by the relay fails the session loudly.
    """

    relay_command = [sys.executable, "-m", "tests.integration.tamper_relay"]
    transport: tuple[str, ...] = ("--transport", "link")

    def sent(self) -> int:
        """
        The agent's DATA bytes through the (first) relay so far, as it printed them.
        """
        counts = [int(m.group(1)) for line in list(self.stack.relay.lines)
                  if (m := re.search(r"tamper: the agent sent (\d+)", line))]
        return max(counts, default=0)

    def test_resentByteAltered(self) -> None:
        """
        A download through tcp-connect, its visitor no longer reading once it has 1 MiB; the
        relay holds the agent's bytes after the first 2 MiB, and once it holds some it is
        killed and started again, and flips the byte near the start of the first DATA record
        the agent resends, a byte the agent had sent through the first relay: the visitor's
        connection is reset after an unaltered prefix, and both ends log that the bytes were
        altered.  (The relay's positions are in the agent's stream of TLS records; the
        visitor's bytes are their plaintext, fewer.)
        """
        key = self.stack.key("alice")
        service = self.stack.service()
        agent, pin = self.stack.agent(key, "web", service, "--keepalive", "fast",
                                      *self.transport)
        assert pin is not None
        client, local = self.stack.connector(key, "web", service, "--pin", pin,
                                             "--keepalive", "fast", *self.transport)
        visitor = Visitor(local, SIZE, SEED)
        self.addCleanup(visitor.sock.close)
        visitor.read_until(FIRST)
        held = int(self.stack.relay.wait_for(r"tamper: holding the agent's bytes from (\d+)",
                                              RECOVERY_TIMEOUT).group(1))
        poll_until(lambda: self.sent() >= held + HELD, RECOVERY_TIMEOUT,
                   "bytes held in the relay")
        self.stack.relay.popen.send_signal(signal.SIGKILL)
        self.stack.relay.wait_exit(RECOVERY_TIMEOUT)
        sent = self.sent()
        restart_relay(self.stack)
        done = self.stack.relay.wait_for(r"tamper: resumed from (\d+), flipped the byte at (\d+)",
                                         RECOVERY_TIMEOUT)
        resumed, flipped = int(done.group(1)), int(done.group(2))
        self.assertLessEqual(resumed, held, "the connector had none of the bytes held")
        self.assertLess(flipped, sent, "the byte altered had passed the first relay: resent")
        self.assertGreaterEqual(resumed, len(visitor.got))
        visitor.read_all()
        self.assertFalse(visitor.eof, visitor.describe())
        self.assertIsInstance(visitor.error, ConnectionResetError, visitor.describe())
        self.assertLessEqual(len(visitor.got), flipped, "no byte from the altered record")
        self.assertEqual(bytes(visitor.got), pattern(SEED, SIZE)[:len(visitor.got)])
        client.wait_for(r"end-to-end TLS failed \(.*bad record mac.*\): its bytes were altered "
                        r"between here and the agent; the session was reset", RECOVERY_TIMEOUT)
        agent.wait_for(r"end-to-end TLS failed \(.*\): its bytes were altered between the "
                       r"connector and here; the session was reset", RECOVERY_TIMEOUT)
        print(f"\nagent sent {sent} through the first relay, which held it from {held}; the "
              f"visitor had read {FIRST}; resumed from {resumed}; byte {flipped} altered; the "
              f"visitor got {len(visitor.got)} unaltered bytes, then a reset")


class TamperedResumeOverWebSocketTests(TamperedResumeTests):
    """
    The same, with the agent and the connector on the WebSocket transport.
    """

    transport = ("--transport", "websocket")
