"""
A revoked key reaches a draining link, with real processes: an agent stopped
with SIGTERM while an echo session through it is open drains (its sessions
may go on for up to 30 s), its key is revoked with C{nfltr keys revoke}, and
the session's data stops within the relay's revocation poll.

Waits are bounded and poll for what they wait for.
"""

from __future__ import annotations

import signal
import socket
import time

from nfltr.relay.config import DEFAULT_REVOCATION_POLL

from .harness import StackTestCase, run

#: Time for the revocation's effects to travel once the poll found it
#: (relay to agent and connector, over loopback), on a loaded machine.
SLACK = 3.0
CHUNK = b"x" * 1024


def echoes(sock: socket.socket) -> bool:
    """
    Whether one chunk sent through C{sock} comes back.
    """
    try:
        sock.sendall(CHUNK)
        got = b""
        while len(got) < len(CHUNK):
            data = sock.recv(len(CHUNK) - len(got))
            if not data:
                return False
            got += data
        return True
    except OSError:  # reset, or timed out: the data stopped
        return False


class RevokeDrainingAgentTests(StackTestCase):
    """
    C{nfltr keys revoke} cuts an agent that is draining.
    """

    def test_revokedWhileDraining(self) -> None:
        """
        Data flows through a draining agent until its key is revoked, and
        stops within the revocation poll (plus a little slack) after: not
        at the end of the agent's 30 s drain.
        """
        agentKey, clientKey = self.stack.key("alice"), self.stack.key("alice")
        service = self.stack.service()
        agent, pin = self.stack.agent(agentKey, "web", service)
        _, local = self.stack.connector(clientKey, "web", service, "--pin", pin)
        with socket.create_connection(("127.0.0.1", local), timeout=SLACK) as sock:
            sock.sendall(b"ECHO\n")
            self.assertTrue(echoes(sock))
            agent.popen.send_signal(signal.SIGTERM)
            # 1 session, or 2 while the connector's start-up probe session is still ending.
            agent.wait_for(r"draining [12] sessions?")
            self.assertTrue(echoes(sock), "the drain lets the session go on")
            done = run("keys", "revoke", agentKey.split("_")[1], "--data-dir",
                       str(self.stack.data))
            self.assertEqual(done.returncode, 0, done.stderr)
            revoked = time.monotonic()
            while echoes(sock):
                elapsed = time.monotonic() - revoked
                self.assertLess(elapsed, DEFAULT_REVOCATION_POLL + SLACK,
                                "data still flows through the revoked, draining agent")
        self.assertLess(time.monotonic() - revoked, DEFAULT_REVOCATION_POLL + SLACK)
        self.stack.relay.wait_for(r"API key \w+ was revoked: closing 1 link")
