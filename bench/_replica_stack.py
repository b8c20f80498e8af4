# -*- test-case-name: tests.bench.test_replicas -*-
"""
The processes of the replicas benchmark (L{bench.replicas}): a
C{redis-server} on a unix socket, the cluster CA (C{nfltr cluster-ca
init}), two relays A and B on that Redis directory with a replica-link
listener each, one agent on B sharing every service port, and for each
service a connector through A (C{cross}: carried over the replica link to
B) and one through B (C{same}: the agent's own replica), all started as a
user would, on top of L{bench._stack}.  L{Holder} is the service the idle
sessions end at.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

from nfltr.cli.processes import nfltr_command

from ._relay import LOOPBACK_ANY_PORT, start_relay
from ._stack import NO_SOURCE_LIMITS, READY, Proc, Processes, fetch, run_bounded
from ._system import BenchError

#: Each case's replica, the one its connectors dial (the agent is on B).
CASES = {"cross": "a", "same": "b"}
_REDIS_READY = r"(?i)ready to accept connections"
#: The account and agent name of the benchmark.
NAME = "bench"


def start_redis(procs: Processes, directory: Path) -> str:
    """
    Start C{redis-server} on a unix socket in C{directory} (no TCP port, no
    persistence); its C{redis+unix://} URL.
    """
    server = shutil.which("redis-server")
    if server is None:
        raise BenchError("redis-server is missing: apt-get install -y redis-server")
    sock = directory / "redis.sock"
    proc = procs.start("redis-server", [
        server, "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
        "--save", "", "--appendonly", "no", "--dir", str(directory),
    ])
    proc.wait_for(_REDIS_READY)
    return f"redis+unix://{sock}"


def _nfltr(*args: str) -> str:
    done = run_bounded(nfltr_command(*args), READY)
    if done.returncode != 0:
        raise BenchError(f"nfltr {' '.join(args)} failed: {done.stderr}")
    return done.stdout


class Cluster:
    """
    Redis, replicas A and B, the agent on B and the connectors (see the
    module).

    @ivar relays: C{a} and C{b} to the relay's process.
    @ivar infos: C{a} and C{b} to the relay's C{relay.json}.
    @ivar connectors: (case, service) to (connector, its local port).
    """

    def __init__(self, tmp: Path, procs: Processes, ports: dict[str, int]) -> None:
        self.procs = procs
        self.url = start_redis(procs, tmp)
        ca = tmp / "cluster-ca"
        _nfltr("cluster-ca", "init", str(ca))
        self.relays: dict[str, Proc] = {}
        self.infos: dict[str, dict[str, Any]] = {}
        for replica in ("a", "b"):
            self.relays[replica], self.infos[replica] = start_relay(
                procs, tmp / f"relay-{replica}", "--directory", self.url,
                "--replica-listen", LOOPBACK_ANY_PORT, "--cluster-ca", str(ca),
                *NO_SOURCE_LIMITS, name=f"relay {replica}",
            )
        _nfltr("accounts", "create", NAME, "--directory", self.url)
        key = _nfltr("keys", "create", "--account", NAME, "--directory", self.url)
        env = {"NFLTR_KEY": key.strip().splitlines()[0]}
        self.agent = procs.start("agent", nfltr_command(
            "tcp", *(str(p) for p in ports.values()), "--name", NAME,
            "--state-dir", str(tmp / "agent"), *self.relay_args("b"),
        ), env)
        pin = self.agent.wait_for(r"(sha256:[0-9a-f]{64})").group(1)
        self.agent.wait_for("connected to the relay")
        self.connectors: dict[tuple[str, str], tuple[Proc, int]] = {}
        for case, replica in CASES.items():
            for service, port in ports.items():
                connector = procs.start(f"connector {case} {service}", nfltr_command(
                    "tcp-connect", NAME, str(port), "--listen", "127.0.0.1:0", "--pin", pin,
                    *self.relay_args(replica),
                ), env)
                local = int(connector.wait_for(r"listening on [\d.]+:(\d+)").group(1))
                self.connectors[case, service] = (connector, local)

    def relay_args(self, replica: str) -> list[str]:
        info = self.infos[replica]
        return ["--relay", info["tls"], "--ca", info["ca"]]

    def local_port(self, case: str, service: str) -> int:
        return self.connectors[case, service][1]

    def wait_routed(self, timeout: float = READY) -> None:
        """
        Wait until the 1 KiB page comes through every case (A learns of the
        agent on B from the directory).

        @raise BenchError: not within C{timeout}.
        """
        deadline = time.monotonic() + timeout
        for case in CASES:
            while True:
                try:
                    fetch(self.local_port(case, "nginx"))
                    break
                except OSError as e:
                    self.procs.check()
                    if time.monotonic() > deadline:
                        raise BenchError(f"no page through {case}: {e}") from None
                    time.sleep(0.2)


class Holder:
    """
    A service on 127.0.0.1 (a thread of this process) that accepts
    connections and holds them open without reading: the far end of the
    idle sessions.
    """

    def __init__(self, backlog: int = 1024) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=backlog)
        self.port: int = self.listener.getsockname()[1]
        self.held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.held.append(conn)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.held)

    def release(self) -> None:
        """
        Close the connections held so far.
        """
        with self._lock:
            held, self.held = self.held, []
        for conn in held:
            with contextlib.suppress(OSError):
                conn.close()

    def close(self) -> None:
        self.release()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self._thread.join(5)


def rss_kib(pid: int) -> int:
    """
    The resident memory (KiB) of process C{pid}.
    """
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise BenchError(f"no VmRSS for {pid}")


def raise_nofile() -> tuple[int, int]:
    """
    Raise this process's soft limit of open files to the hard one (the
    children inherit it); the limits now.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def open_idle(port: int, count: int, holder: Holder, timeout: float) -> list[socket.socket]:
    """
    Open C{count} connections to 127.0.0.1:C{port} and wait until
    C{holder} holds them all (each a tunnel session, end to end); the
    sockets.

    @raise BenchError: not all within C{timeout}, or a connection failed.
    """
    start = holder.count
    clients: list[socket.socket] = []
    deadline = time.monotonic() + timeout
    try:
        for _ in range(count):
            clients.append(socket.create_connection(("127.0.0.1", port), timeout=timeout))
        while holder.count - start < count:
            if time.monotonic() > deadline:
                raise BenchError(
                    f"{holder.count - start} of {count} idle sessions reached the service"
                    f" within {timeout:g}s"
                )
            time.sleep(0.05)
    except BaseException:
        close_all(clients)
        raise
    return clients


def close_all(clients: list[socket.socket]) -> None:
    for sock in clients:
        with contextlib.suppress(OSError):
            sock.close()
