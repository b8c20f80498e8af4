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

    def killReplica(self, together: bool, agents: bool = True) -> None:
        """
        L{TRANSFERS} echo transfers of L{SIZE} bytes each way, the second half on its way when
        a replica is killed (SIGKILL): the agent's if C{agents}, else the connector's (on
        the other replica); the ends that were on it redial the other replica, the presence
        record names the agent's replica, and every transfer completes byte-exact with a
        clean end of stream.  The echo service ends its echo only at the clean end the agent
        passes on, so a service connection reset by the agent would leave its transfer short.
        """
        agent, client, local, held = self.tunnel(together)
        killed = held if agents else 1 - held
        other = 1 - killed
        gate = threading.Event()
        transfers = [EchoTransfer(local, SIZE, gate) for _ in range(TRANSFERS)]
        for transfer in transfers:
            self.addCleanup(transfer.sock.close)
        poll_until(lambda: all(t.got >= SIZE // 2 for t in transfers), RECOVERY_TIMEOUT,
                   "the first half of every echo")
        gate.set()
        os.killpg(self.replicas[killed].relay.popen.pid, signal.SIGKILL)
        start = time.monotonic()
        cut = [t.got for t in transfers]
        self.assertTrue(all(got < SIZE for got in cut), f"done before the kill: {cut}")
        for end, moves in ((agent, agents), (client, together or not agents)):
            if moves:
                moved = end.wait_for(r"reconnected to the relay at (\S+)", BACK_WITHIN)
                self.assertEqual(self.holder(moved.group(1)), other)
        self.presenceOn(other)
        back = time.monotonic() - start
        assert_all_exact(self, transfers, [client, agent])
        done = time.monotonic() - start
        print(f"\n{'the agent' if agents else 'the connector'}'s replica killed: the presence "
              f"record named the live replica {back:.2f} s after the kill; {TRANSFERS} transfers "
              f"done {done:.2f} s after it (bytes echoed at the kill: {', '.join(map(str, cut))})")

    def test_bothOnKilledReplica(self) -> None:
        """
        The agent and the connector on one replica, which is killed: both redial the other
        replica, where the sessions resume; every transfer completes byte-exact.
        """
        self.killReplica(together=True)

    def test_acrossReplicaLink(self) -> None:
        """
        The agent on one replica, the connector on the other (the sessions cross the replica
        link as C{replica-rtcp:}); the agent's replica is killed: the agent redials the live
        replica and the connector's resumptions, refused while the agent is not back (the
        dead replica does not answer), reach it there; every transfer completes byte-exact.
        """
        self.killReplica(together=False)

    def test_connectorsReplicaKilled(self) -> None:
        """
        The agent on one replica, the connector on the other, which is killed: the connector
        redials the agent's replica (its sessions no longer cross the replica link) and
        resumes there; the agent's sessions, reset by its replica when the replica link was
        lost, were suspended meanwhile; every transfer completes byte-exact.
        """
        self.killReplica(together=False, agents=False)
