# -*- test-case-name: tests.bench.test_soak -*-
"""
The cluster of the soak (L{bench.soak}): a C{redis-server} on a free TCP
port with an append-only file (so a restart keeps accounts, keys and
leases), and relay replicas sharing it and one cluster CA, each on fixed
ports so that it can be killed and started again where it was.  Each
replica's replica link is reached through a fault-injecting proxy
(L{tests.integration.cut_proxy.CutProxy}): cutting it partitions the
replica from the others.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
from collections import Counter
from pathlib import Path

from nfltr.cli.processes import nfltr_command, wait_for_file
from tests.integration.cut_proxy import CutProxy

from ._relay import loopback_port, relay_command
from ._stack import NO_SOURCE_LIMITS, READY, Proc, free_port, run_bounded
from ._stack import Processes as BaseProcesses
from ._system import BenchError

#: The files of the relay CA and the share CA every replica must share (docs/replicas.md).
SHARED_CA_FILES = ("ca.key", "ca.crt", "share-ca.key", "share-ca.crt")
#: Seconds a replica may take to exit on SIGTERM (its drain included).
EXIT_TIMEOUT = 60.0


#: What in a process's output the report lists (nfltr's warnings and errors, tracebacks).
COMPLAINT = re.compile(r"Traceback|Unhandled|\b(error|critical|warn)\b", re.IGNORECASE)


class Processes(BaseProcesses):
    """
    L{bench._stack.Processes} that keeps what the processes it stopped
    complained about (L{complaints}).
    """

    def __init__(self) -> None:
        super().__init__()
        self.gone: list[Proc] = []

    def complaints(self, limit: int = 20) -> list[str]:
        """
        The distinct complaining lines of every process, with its name and
        how often each came (the most frequent first).
        """
        seen: Counter[str] = Counter()
        for proc in [*self.gone, *self.all]:
            for line in list(proc.lines):
                if COMPLAINT.search(line):
                    seen[f"{proc.name}: {TIMESTAMP.sub('', line)[:300]}"] += 1
        return [f"{count} x {line}" for line, count in seen.most_common(limit)]


#: A log line's leading timestamp (left out so that repeated lines count as one).
TIMESTAMP = re.compile(r"^\S*\d{4}-\d\d-\d\d\S*\s+(\S*\d\d:\d\d\S*\s+)?")


def retire(procs: Processes, proc: Proc) -> None:
    """
    C{proc} (stopped) leaves C{procs}; its output is kept for L{complaints}.
    """
    procs.all.remove(proc)
    procs.gone.append(proc)


class Redis:
    """
    A C{redis-server} on 127.0.0.1:C{port}, persisted to an append-only file
    in C{directory}.
    """

    def __init__(self, procs: Processes, directory: Path) -> None:
        self.procs = procs
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: Proc | None = None
        self.start()

    def start(self) -> None:
        """
        Start the server (again) on its port; return once it accepts
        connections.
        """
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
                "--dir", str(self.directory), "--loglevel", "notice"]
        self.proc = self.procs.start("redis-server", args)
        self.proc.wait_for(r"(?i)ready to accept connections")

    def kill(self) -> None:
        """
        SIGKILL the server and wait for it to be gone.
        """
        old = self.proc
        if old is None:
            return
        kill_group(old, signal.SIGKILL)
        retire(self.procs, old)
        self.proc = None

    def keys(self) -> int | None:
        """
        The number of keys in database 0 (C{DBSIZE}); L{None} if it does not
        answer.
        """
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                sock.sendall(b"*1\r\n$6\r\nDBSIZE\r\n")
                answer = sock.recv(64)
        except OSError:
            return None
        return int(answer[1:].split(b"\r\n")[0]) if answer.startswith(b":") else None


def kill_group(proc: Proc, sig: signal.Signals, timeout: float = EXIT_TIMEOUT) -> None:
    """
    Send C{sig} to C{proc}'s process group and wait for it to exit (then
    SIGKILL it if it lingers).
    """
    try:
        os.killpg(proc.pid, sig)
        proc.popen.wait(timeout)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.popen.wait(10)


class Replica:
    """
    One relay replica on fixed ports: TLS, admin, its replica link (and the
    proxy the others reach it through), and an SSH port if C{ssh}.
    """

    def __init__(self, cluster: Cluster, index: int, ssh: bool) -> None:
        self.cluster = cluster
        self.index = index
        self.data = cluster.tmp / f"replica{index}"
        self.tls = free_port()
        self.admin = free_port()
        self.link = free_port()
        self.ssh = free_port() if ssh else None
        self.proxy = CutProxy()
        self.proxy.target = ("127.0.0.1", self.link)
        self.address = f"127.0.0.1:{self.tls}"
        self.proc: Proc | None = None
        self.starts = 0

    def command(self) -> list[str]:
        c = self.cluster
        ssh = ("--ssh", loopback_port(self.ssh)) if self.ssh else ()
        return relay_command(
            self.data, "--directory", c.redis.url, "--cluster-ca", str(c.ca),
            "--replica-listen", loopback_port(self.link),
            "--replica-address", f"127.0.0.1:{self.proxy.port}",
            "--presence-ttl", str(c.presence_ttl), "--drain-timeout", str(c.drain_timeout),
            "--log-level", c.log_level, *ssh, *NO_SOURCE_LIMITS, tls=loopback_port(self.tls),
            admin=loopback_port(self.admin),
        )

    def start(self) -> None:
        """
        Start the replica (again); return once it wrote its C{relay.json}.
        """
        info = self.data / "relay.json"
        info.unlink(missing_ok=True)
        self.proc = self.cluster.procs.start(f"replica {self.index}", self.command())
        self.starts += 1
        try:
            wait_for_file(info, READY)
        except RuntimeError as e:
            raise BenchError(f"{e}; replica {self.index} printed:\n{self.proc.tail()}") from None

    def stop(self, sig: signal.Signals) -> None:
        """
        Send C{sig} (SIGKILL, SIGTERM) and wait for the replica to exit.
        """
        if self.proc is None:
            return
        kill_group(self.proc, sig)
        retire(self.cluster.procs, self.proc)
        self.proc = None

    def signal(self, sig: signal.Signals) -> None:
        """
        Send C{sig} (SIGSTOP, SIGCONT) to the replica's process group.
        """
        if self.proc is not None:
            os.killpg(self.proc.pid, sig)


class Cluster:
    """
    Redis and C{count} replicas sharing it, one cluster CA, one relay CA and
    one share CA (made by the first replica, copied into the others' data
    directories before their first start); the first replica has an SSH
    port if C{ssh}.
    """

    def __init__(
        self, tmp: Path, procs: Processes, count: int, *, ssh: bool, presence_ttl: float,
        drain_timeout: float, log_level: str = "warn",
    ) -> None:
        self.tmp = tmp
        self.log_level = log_level
        self.procs = procs
        self.presence_ttl = presence_ttl
        self.drain_timeout = drain_timeout
        self.redis = Redis(procs, tmp / "redis")
        self.ca = tmp / "cluster-ca"
        self.nfltr("cluster-ca", "init", str(self.ca))
        self.replicas = [Replica(self, i, ssh and i == 0) for i in range(count)]
        first = self.replicas[0]
        first.start()
        for replica in self.replicas[1:]:
            tls = replica.data / "tls"
            tls.mkdir(parents=True)
            for name in SHARED_CA_FILES:
                shutil.copy2(first.data / "tls" / name, tls / name)
            replica.start()

    @property
    def relay_ca(self) -> str:
        return str(self.replicas[0].data / "tls" / "ca.crt")

    @property
    def share_ca(self) -> str:
        return str(self.replicas[0].data / "tls" / "share-ca.crt")

    def addresses(self) -> str:
        """
        Every replica's TLS address, as C{--relay} takes them.
        """
        return ",".join(replica.address for replica in self.replicas)

    def nfltr(self, *args: str) -> str:
        """
        Run C{nfltr ARGS} to completion; what it printed.
        """
        done = run_bounded(nfltr_command(*args), READY)
        if done.returncode != 0:
            raise BenchError(f"nfltr {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def key(self, account: str) -> str:
        """
        A new API key of C{account} (created if needed) in the directory.
        """
        url = self.redis.url
        run_bounded(nfltr_command("accounts", "create", account, "--directory", url), READY)
        return self.nfltr("keys", "create", "--account", account, "--directory", url
                          ).strip().splitlines()[0]

    def close(self) -> None:
        """
        Thaw every replica (a fault may have stopped one) and close the
        proxies; L{Processes.stop_all} stops the processes.
        """
        for replica in self.replicas:
            if replica.proc is not None and replica.proc.popen.poll() is None:
                replica.signal(signal.SIGCONT)
            replica.proxy.close()

