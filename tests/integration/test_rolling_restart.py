"""
A rolling restart fails no visit (issue 17), with real processes: three
replicas sharing their CAs, a TCP agent and an inspect share's agent given
every replica's address, and visitors through a replica that holds
neither, running without a pause (C{tcp-connect} downloads and uploads,
share URL downloads), while each replica holding an agent gets SIGTERM in
turn and exits: every visit answers, byte-exact or by its sha256.

The draining replica asks its agents to move (L{nfltr.relay.handover}):
they dial another replica while their old links still take the sessions
the other replicas forward, and drain those links themselves once welcomed
elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable

from .harness import Process, exchange, nfltr
from .service import pattern
from .test_redis_directory import eventually
from .test_replica_dialler import AcrossReplicasCase
from .test_replica_faults import echoed
from .test_tcp_tunnel import upload
from .web_service import pattern as web_pattern

#: Bytes of each visit.
VISIT = 256 * 1024
#: Seconds a SIGTERMed replica may take to exit: its agents' hand-over (at most 5 s) and its
#: drain (at most the default --drain-timeout, 30 s; the visits in flight are short ones).
EXIT_WITHIN = 60.0
#: Seconds the visits go on after the last replica exited.
AFTER = 1.0
#: Seconds a share may take to answer through another replica once its agent connected (the
#: presence record written).
READY = 10.0


def answers(visit: Callable[[int], bool]) -> bool:
    """
    Whether C{visit} answers right now (a warm-up, not counted).
    """
    try:
        return visit(0)
    except (OSError, AssertionError):
        return False


class Visits:
    """
    Visitors that run until stopped, each recording its failures (with the
    time they started).
    """

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.done: dict[str, int] = {}
        self.failed: list[str] = []
        self.lock = threading.Lock()

    def run(self, kind: str, visit: Callable[[int], bool]) -> None:
        def loop() -> None:
            n = 0
            while not self.stopping.is_set():
                started = time.monotonic()
                try:
                    ok, why = visit(n), "wrong bytes"
                except (OSError, AssertionError) as e:
                    ok, why = False, str(e).strip()
                with self.lock:
                    self.done[kind] = self.done.get(kind, 0) + 1
                    if not ok:
                        self.failed.append(f"{kind} visit started at {started:.2f}: {why}")
                n += 1

        thread = threading.Thread(target=loop, daemon=True)
        self.threads.append(thread)
        thread.start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(120)


class RollingRestartTests(AcrossReplicasCase):
    """
    Three replicas sharing the relay CA and the share CA (as replicas behind
    one name do, docs/replicas.md).
    """

    presenceTTL = "15"

    def prepare(self, i: int) -> None:
        if i == 0:
            return
        source = self.tmp / "replica0" / "relay" / "tls"
        target = self.tmp / f"replica{i}" / "relay" / "tls"
        target.mkdir(parents=True)
        for name in ("ca.crt", "ca.key", "share-ca.crt", "share-ca.key"):
            shutil.copy2(source / name, target / name)

    def startAgent(self, command: str, port: int, name: str, *extra: str) -> int:
        """
        An agent (C{nfltr tcp} or C{nfltr http}) given every replica's
        address; the index of the replica it connected to.
        """
        first = self.replicas[0]
        agent = first.start(
            nfltr(command, str(port), "--name", name, "--state-dir", str(self.tmp / name),
                  "--relay", self.addresses(), "--ca", first.ca, *extra),
            f"agent {name}", {"NFLTR_KEY": self.key},
        )
        self.agents.append(agent)
        return self.holder(agent.wait_for(r"connected to the relay at (\S+)").group(1))

    def test_rollingRestartFailsNoVisit(self) -> None:
        """
        Each replica holding an agent gets SIGTERM in turn and exits while
        visitors through the replica holding none run: none of their visits
        fails, and the agents logged that they moved.
        """
        first = self.replicas[0]
        self.key = first.key("alice")
        self.agents: list[Process] = []
        service, web = first.service(), first.web_service()
        holders = [self.startAgent("tcp", service, "web", "--e2ee", "false"),
                   self.startAgent("http", web, "page", "--mode", "inspect")]
        through = next(i for i in range(len(self.replicas)) if i not in holders)
        stack = self.replicas[through]
        _, local = stack.connector(self.key, "web", service, "--e2ee", "false")
        port = int(stack.address.rsplit(":", 1)[1])
        ca = str(first.data / "tls" / "share-ca.crt")
        url = f"https://page.localhost:{port}/bytes/{VISIT}"
        expected = hashlib.sha256(web_pattern(VISIT)).hexdigest()

        def share(n: int) -> bool:
            body = self.curl(ca, "page.localhost", port, url)
            return hashlib.sha256(body).hexdigest() == expected

        def download(n: int) -> bool:
            return exchange(local, f"DOWNLOAD {VISIT} {n}\n".encode()) == pattern(n, VISIT)

        self.assertTrue(echoed(local))
        eventually(lambda: answers(share), READY, "the share answers through the replica")
        visits = Visits()
        self.addCleanup(visits.stop)
        visits.run("tcp download", download)
        visits.run("tcp upload", lambda n: upload(local, n, VISIT))
        visits.run("share", share)
        for held in dict.fromkeys(holders):
            time.sleep(0.5)
            relay = self.replicas[held].relay
            os.killpg(relay.popen.pid, signal.SIGTERM)
            relay.wait_exit(EXIT_WITHIN)
        time.sleep(AFTER)
        visits.stop()
        self.assertEqual(visits.failed, [])
        self.assertEqual(sorted(visits.done), ["share", "tcp download", "tcp upload"])
        for agent in self.agents:
            agent.wait_for(r"is going away: .* its link takes sessions until another relay")
        print(f"rolling restart: visits through replica {through}: {visits.done}, none failed")
