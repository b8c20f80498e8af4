"""
Agents given every replica's address (C{--relay A,B,C}), with real
processes: the replica holding an agent drains (SIGTERM) during 8 downloads
through its share, or is killed (C{kill -9}); the agent goes to another
replica with its name.  The kill test prints how long the agent took to be
back.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time

from .harness import Process, nfltr
from .service import pattern
from .test_redis_directory import NOTICE_WITHIN, eventually
from .test_replica_faults import echoed
from .test_replicas import SIZE, ReplicasCase

#: Seconds an agent may take to be back on another replica after its own was killed: the
#: reconnect schedule's first delays (250 ms each) over the addresses, and the claim.
BACK_WITHIN = 10.0
#: Seconds a replica may take to write a presence record once it welcomed the agent.
PRESENCE_WITHIN = 5.0


class AcrossReplicasCase(ReplicasCase):
    """
    Replicas sharing one relay CA, so an agent trusts all of them with one
    C{--ca}; where an agent is, as it says and as the directory says.
    """

    def prepare(self, i: int) -> None:
        """
        Every replica gets the first one's relay CA (as an operator copies
        it): the first replica makes it.
        """
        tls = self.tmp / f"replica{i}" / "relay" / "tls"
        if i == 0:
            return
        source = self.tmp / "replica0" / "relay" / "tls"
        tls.mkdir(parents=True)
        for name in ("ca.key", "ca.crt"):
            shutil.copy2(source / name, tls / name)

    def addresses(self) -> str:
        return ",".join(stack.address for stack in self.replicas)

    def holder(self, where: str) -> int:
        return [stack.address for stack in self.replicas].index(where)

    def presence(self) -> str:
        """
        The replica id the directory's presence record of C{web} names.
        """
        done = subprocess.run(
            ["redis-cli", "-s", str(self.redis.socket), "HGET", "nfltr:presence:agent:web",
             "replica"], capture_output=True, timeout=30, check=True)
        return done.stdout.decode().strip()

    def presenceOn(self, i: int) -> None:
        """
        Wait until the presence record of C{web} names replica C{i} (the
        replica writes it once it welcomed the agent).
        """
        eventually(lambda: self.presence() == self.ids[i], PRESENCE_WITHIN,
                   f"the presence record names replica {i}")


class AgentsAcrossReplicasTests(AcrossReplicasCase):
    """
    Three replicas sharing one relay CA; an agent and a connector given all
    three addresses.
    """

    presenceTTL = "3"
    #: The agents' and connectors' --transport.
    transport = "auto"

    def startAgent(self) -> tuple[Process, int, int]:
        """
        An agent C{web} of alice given every replica's address; it, the index
        of the replica it connected to, and its test service's port.
        """
        first = self.replicas[0]
        self.key = first.key("alice")
        service = first.service()
        agent = first.start(
            nfltr("tcp", str(service), "--name", "web", "--e2ee", "false",
                  "--state-dir", str(self.tmp / "agent-web"),
                  "--relay", self.addresses(), "--ca", first.ca, "--transport", self.transport),
            "agent web", {"NFLTR_KEY": self.key},
        )
        where = agent.wait_for(r"connected to the relay at (\S+)").group(1)
        return agent, self.holder(where), service

    def connect(self, through: int, service: int) -> int:
        """
        A connector to C{web} through replica C{through} only; its local port.
        """
        stack = self.replicas[through]
        _, local = stack.connector(self.key, "web", service, "--e2ee", "false",
                                   "--transport", self.transport)
        return local

    def test_drainHandsOver(self) -> None:
        """
        The replica holding the agent gets SIGTERM during 8 downloads through
        the agent's share (from another replica): 8 of 8 finish intact, the
        agent reconnects to another replica when asked to move, before its
        old link closed, and its name is reached there: the directory's
        presence record names the new replica.
        """
        agent, held, service = self.startAgent()
        self.presenceOn(held)
        other = (held + 1) % len(self.replicas)
        local = self.connect(other, service)
        socks = [socket.create_connection(("127.0.0.1", local), timeout=60) for _ in range(8)]
        for n, sock in enumerate(socks):
            self.addCleanup(sock.close)
            sock.sendall(f"DOWNLOAD {SIZE} {n}\n".encode())
        got = [bytearray(sock.recv(65536)) for sock in socks]
        self.assertTrue(all(got), "every download started")
        os.killpg(self.replicas[held].relay.popen.pid, signal.SIGTERM)
        moved = agent.wait_for(r"reconnected to the relay at (\S+)").group(1)
        for sock, received in zip(socks, got, strict=True):
            while chunk := sock.recv(256 * 1024):
                received.extend(chunk)
            sock.close()  # its session ends both ways: the drained replica does not wait for it
        self.assertEqual([bytes(g) == pattern(n, SIZE) for n, g in enumerate(got)], [True] * 8)
        agent.wait_for(re.escape(f"the relay at {self.replicas[held].address} is going away"))
        self.assertNotEqual(self.holder(moved), held)
        self.assertTrue(echoed(local), "the agent's name is not reached after the drain")
        self.presenceOn(self.holder(moved))
        # The drained replica, gone, withdrew only records that were still its own.
        self.replicas[held].relay.wait_exit()
        self.assertEqual(self.presence(), self.ids[self.holder(moved)])

    def test_killedHolder(self) -> None:
        """
        The replica holding the agent is killed: the agent is back on
        another replica with its name, reached through a replica that
        lives and through a connector given every address (which moves too
        if it was on the killed one); the time it took is printed.
        """
        agent, held, service = self.startAgent()
        other = (held + 1) % len(self.replicas)
        local = self.connect(other, service)
        self.assertTrue(echoed(local))
        every = self.replicas[0].start(
            nfltr("tcp-connect", "web", str(service), "--listen", "127.0.0.1:0", "--e2ee",
                  "false", "--relay", self.addresses(), "--ca", self.replicas[0].ca,
                  "--transport", self.transport),
            "tcp-connect web (every replica)", {"NFLTR_KEY": self.key},
        )
        spread = int(every.wait_for(r"listening on [\d.]+:(\d+)").group(1))
        self.assertTrue(echoed(spread))
        os.killpg(self.replicas[held].relay.popen.pid, signal.SIGKILL)
        killed = time.monotonic()
        moved = agent.wait_for(r"reconnected to the relay at (\S+)", timeout=BACK_WITHIN).group(1)
        back = time.monotonic() - killed
        self.assertNotEqual(self.holder(moved), held)
        while not (echoed(local) and echoed(spread)):
            self.assertLess(time.monotonic() - killed, BACK_WITHIN, "the name is not reached")
            time.sleep(0.1)
        reached = time.monotonic() - killed
        self.presenceOn(self.holder(moved))
        live = self.replicas[other]
        self.assertGreater(self.metric(live, "nfltr_directory_command_seconds_count"), 0)
        print(f"kill -9: the agent was back on another replica {back:.2f} s after the kill; "
              f"its name was reached through the live replicas {reached:.2f} s after it")


class AgentsAcrossReplicasOverWebSocketTests(AgentsAcrossReplicasTests):
    """
    The same with agents and connectors on the WebSocket transport.
    """

    transport = "websocket"


class ReadyzAcrossReplicasTests(ReplicasCase):
    """
    Each replica's readiness follows its reach of Redis.
    """

    def test_readyzWithoutRedis(self) -> None:
        """
        Redis stopped: every replica's C{/readyz} answers 503 (a load
        balancer sends no one there); Redis back: 200 again on every
        replica.
        """
        self.assertEqual([stack.readyz() for stack in self.replicas], [200] * len(self.replicas))
        self.redis.stop()
        for stack in self.replicas:
            eventually(lambda stack=stack: stack.readyz() == 503, NOTICE_WITHIN,
                       "/readyz answers 503 without Redis")
        self.redis.start()
        for stack in self.replicas:
            eventually(lambda stack=stack: stack.readyz() == 200, NOTICE_WITHIN,
                       "/readyz answers 200 with Redis back")
