"""
Resumable sessions across the replicas of a cluster, with real processes: a C{redis-server},
two replicas, an agent and a C{tcp-connect} each given both replicas' addresses (C{--relay A
--relay B}), echo transfers through the tunnel sha256-verified both ways
(L{tests.integration.test_resume.EchoTransfer}); the replica holding the agent is killed
(SIGKILL) mid-transfer, with the connector on it too or on the other replica (the sessions then
cross the replica link). Both ends go on through the replica that lives, and every transfer
completes byte-exact with a clean end.

The presence records live far longer than the resume timeout here (C{--presence-ttl 300}):
the agent's name moves to the live replica because the agent claims it there (the newer
holder takes the name over at once), not because the dead replica's record ran out.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from .harness import Process
from .test_faults import RECOVERY_TIMEOUT, poll_until
from .test_replica_dialler import BACK_WITHIN, AcrossReplicasCase
from .test_resume import SIZE, TRANSFERS, EchoTransfer, assert_all_exact

#: How many connectors may be started (each shuffles the two addresses) until one is on the
#: replica a test wants: a wrong one every time has a chance of 2**-20.
PLACEMENT_TRIES = 20
CONNECTED = r"connected to the relay at (\S+)"


class ResumeAcrossReplicasTests(AcrossReplicasCase):
    """
    Two replicas; the one holding the agent is killed during transfers.
    """

    replicaCount = 2
    #: Longer than the resume timeout (30 s) by far: nothing may wait for a record to run out.
    presenceTTL = "300"

    def tunnel(self, together: bool) -> tuple[Process, Process, int, int]:
        """
        An agent sharing an echo service end to end encrypted, and a connector to it, each
        given both replicas; the connector on the agent's replica if C{together}, else on the
        other.  The agent, the connector, its local port and the agent's replica.
        """
        first, second = self.replicas
        key = first.key("alice")
        service = first.service()
        agent, pin = first.agent(key, "web", service, "--relay", second.address)
        assert pin is not None
        held = self.holder(agent.wait_for(CONNECTED).group(1))
        self.presenceOn(held)
        for _ in range(PLACEMENT_TRIES):
            client, local = first.connector(key, "web", service, "--pin", pin,
                                            "--relay", second.address)
            if (self.holder(client.wait_for(CONNECTED).group(1)) == held) == together:
                return agent, client, local, held
            client.stop()
        raise AssertionError(f"no connector on the wanted replica in {PLACEMENT_TRIES} tries")

    def killHolder(self, together: bool) -> None:
        """
        L{TRANSFERS} echo transfers of L{SIZE} bytes each way, the second half on its way when
        the agent's replica is killed (SIGKILL); the agent (and the connector, if it was
        there) redial the other replica, the presence record names it, and every transfer
        completes byte-exact with a clean end of stream.  The echo service ends its echo only
        at the clean end the agent passes on, so a service connection reset by the agent
        would leave its transfer short.
        """
        agent, client, local, held = self.tunnel(together)
        other = 1 - held
        gate = threading.Event()
        transfers = [EchoTransfer(local, SIZE, gate) for _ in range(TRANSFERS)]
        for transfer in transfers:
            self.addCleanup(transfer.sock.close)
        poll_until(lambda: all(t.got >= SIZE // 2 for t in transfers), RECOVERY_TIMEOUT,
                   "the first half of every echo")
        gate.set()
        os.killpg(self.replicas[held].relay.popen.pid, signal.SIGKILL)
        killed = time.monotonic()
        cut = [t.got for t in transfers]
        self.assertTrue(all(got < SIZE for got in cut), f"done before the kill: {cut}")
        moved = agent.wait_for(r"reconnected to the relay at (\S+)", BACK_WITHIN).group(1)
        self.assertEqual(self.holder(moved), other)
        if together:
            moved = client.wait_for(r"reconnected to the relay at (\S+)", BACK_WITHIN).group(1)
            self.assertEqual(self.holder(moved), other)
        self.presenceOn(other)
        back = time.monotonic() - killed
        assert_all_exact(self, transfers, [client, agent])
        done = time.monotonic() - killed
        print(f"\nreplica killed: the agent was announced on the other {back:.2f} s after the "
              f"kill; {TRANSFERS} transfers done {done:.2f} s after it (bytes echoed at the "
              f"kill: {', '.join(map(str, cut))})")

    def test_bothOnKilledReplica(self) -> None:
        """
        The agent and the connector on one replica, which is killed: both redial the other
        replica, where the sessions resume; every transfer completes byte-exact.
        """
        self.killHolder(together=True)

    def test_acrossReplicaLink(self) -> None:
        """
        The agent on one replica, the connector on the other (the sessions cross the replica
        link as C{replica-rtcp:}); the agent's replica is killed: the agent redials the live
        replica and the connector's resumptions, refused while the agent is not back (the
        dead replica does not answer), reach it there; every transfer completes byte-exact.
        """
        self.killHolder(together=False)
