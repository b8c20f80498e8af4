"""
The processes of the tunnel benchmark (L{bench.tunnel}): an nfltr relay,
agents and connectors started as a user would (C{python -m nfltr ...}), the
services behind them (C{iperf3 -s}, nginx) and the load generators
(C{iperf3 -c}, C{wrk}), each in a process group of its own.

Long-lived processes are L{Proc}s (L{nfltr.cli.processes.Child} started under
C{setpriv --pdeathsig KILL} where util-linux has it, so that they die with
this process even if it is killed outright); L{run_bounded} runs a load
generator to completion within a deadline.  L{group_cpu} reads the CPU time
of whole process groups from C{/proc}, children included.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

from nfltr.cli.processes import Child, nfltr_command, wait_for_file

from ._system import ROOT, BenchError

_TICK = os.sysconf("SC_CLK_TCK")
# After the command name in /proc/PID/stat: pgrp, utime, stime, cutime, cstime.
_PGRP, _UTIME, _CSTIME = 2, 11, 14
READY = 30.0


class Proc(Child):
    """
    A long-lived child in its own process group (see the module).
    """

    def __init__(
        self, name: str, args: list[str], env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        guard = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        super().__init__(guard + args, env, name, cwd=cwd or ROOT)
        self.pid = self.popen.pid

    def check(self) -> None:
        """
        @raise BenchError: it has exited.
        """
        if self.popen.poll() is not None:
            raise BenchError(
                f"{self.name} exited ({self.popen.returncode}); it printed:\n{self.tail()}"
            )

    def tail(self, lines: int = 30) -> str:
        """
        The last lines it printed.
        """
        return "\n".join(self.lines[-lines:])

    def wait_for(self, pattern: str, timeout: float = READY) -> re.Match[str]:
        """
        L{Child.wait_for}, failing with L{BenchError}.
        """
        try:
            return super().wait_for(pattern, timeout)
        except RuntimeError as e:
            raise BenchError(str(e)) from None


class Processes:
    """
    Every long-lived process of a benchmark; L{stop_all} stops them, the
    most recently started first.
    """

    def __init__(self) -> None:
        self.all: list[Proc] = []

    def start(
        self, name: str, args: list[str], env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Proc:
        proc = Proc(name, args, env, cwd)
        self.all.append(proc)
        return proc

    def stop_all(self) -> None:
        while self.all:
            proc = self.all.pop()
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                proc.stop()

    def check(self) -> None:
        """
        @raise BenchError: one of them has exited.
        """
        for proc in self.all:
            proc.check()


#: A benchmark's load comes from 127.0.0.1 alone: the per-source limits off.
NO_SOURCE_LIMITS = ("--per-source-rate", "none", "--per-source-connections", "none")


def free_port() -> int:
    """
    A TCP port on 127.0.0.1 that was free a moment ago.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def group_cpu(pgids: set[int]) -> dict[int, float]:
    """
    CPU seconds (user + system, of every process in the group, plus the
    children they reaped) of each process group in C{pgids}.
    """
    totals = dict.fromkeys(pgids, 0.0)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue  # it ended meanwhile
        pgrp = int(fields[_PGRP])
        if pgrp in totals:
            totals[pgrp] += sum(int(v) for v in fields[_UTIME:_CSTIME + 1]) / _TICK
    return totals


def children_cpu() -> float:
    """
    CPU seconds of this process's reaped children (the load generators).
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_bounded(
    args: list[str], timeout: float, cwd: Path | None = None, env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """
    Run C{args} in its own process group to completion; kill the group on
    a timeout (L{BenchError}) or any exception, ^C included.
    """
    proc = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, cwd=cwd, env=env,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise BenchError(f"{args[0]} did not finish within {timeout:g}s") from None
    except BaseException:
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def tool_versions() -> dict[str, str]:
    """
    The versions of the services and load generators.
    """

    def first(args: list[str], pattern: str) -> str:
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return "missing"
        m = re.search(pattern, done.stdout + done.stderr)
        return m.group(1) if m else "unknown"

    return {
        "iperf3": first(["iperf3", "--version"], r"iperf (\S+)"),
        "nginx": first(["nginx", "-v"], r"nginx/(\S+)"),
        "wrk": first(["wrk", "--version"], r"wrk (\S+)"),
        "py-spy": first(["py-spy", "--version"], r"py-spy (\S+)"),
        "nfltr": first(nfltr_command("version"), r"nfltr (\S+)"),
    }


def tree_state() -> dict[str, Any]:
    """
    The repository's commit and the files that differ from it.
    """

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], capture_output=True, text=True, cwd=ROOT, timeout=10, check=False
            ).stdout.rstrip("\n")
        except (OSError, subprocess.TimeoutExpired):
            return ""

    diff = git("diff", "HEAD", "--", "nfltr")
    return {
        "commit": git("rev-parse", "--short", "HEAD").strip(),
        "modified": [line[3:] for line in git("status", "--porcelain").splitlines()],
        # What of the library differed from the commit (the data path, maybe).
        "nfltr_diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff else None,
        "nfltr_diff_files": git("diff", "HEAD", "--name-only", "--", "nfltr").split(),
    }


# -- services -------------------------------------------------------------------

PAGE = "/1k.bin"
PAGE_SIZE = 1024
#: The large file (the 1 MiB rows).
BIG_PAGE = "/1m.bin"
BIG_PAGE_SIZE = 1024 * 1024


class Services:
    """
    The services on 127.0.0.1: C{iperf3 -s} (bulk) and nginx serving 1 KiB
    and 1 MiB files with keep-alive (HTTP: L{bench._nginx.Nginx}), also over
    TLS with a certificate for C{tls_names} if given.

    @ivar ports: service name (C{iperf3}, C{nginx}, C{nginx-tls}) to port.
    """

    def __init__(
        self, tmp: Path, procs: Processes, nginx_workers: int, tls_names: list[str] | None = None
    ) -> None:
        self.tmp = tmp
        self.procs = procs
        self.ports: dict[str, int] = {}
        self.groups: dict[str, Proc] = {}
        self.nginx_workers = nginx_workers
        self.tls_names = tls_names
        self.start_iperf()
        self.start_nginx()

    def start_iperf(self) -> None:
        """
        (Re)start the iperf3 server on its port (a new one the first time).
        """
        old = self.groups.pop("iperf3", None)
        if old is not None:
            old.stop()
            self.procs.all.remove(old)
        port = self.ports.setdefault("iperf3", free_port())
        proc = self.procs.start(
            "iperf3 -s", ["iperf3", "-s", "-p", str(port), "-i", "0", "--forceflush"]
        )
        proc.wait_for(rf"Server listening on {port}")
        self.groups["iperf3"] = proc

    def start_nginx(self) -> None:
        from ._nginx import Nginx  # here: it imports this module

        self.nginx = Nginx(self.tmp, self.procs, self.nginx_workers, self.tls_names)
        self.ports["nginx"] = self.nginx.http_port
        if self.nginx.tls_port is not None:
            self.ports["nginx-tls"] = self.nginx.tls_port
        self.groups["nginx"] = self.nginx.proc


def fetch(port: int, timeout: float = 10.0) -> bytes:
    """
    GET the 1 KiB page from 127.0.0.1:C{port}.

    @raise OSError: no connection, or not the page.
    """
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", PAGE)
        response = conn.getresponse()
        body = response.read()
    except http.client.HTTPException as e:
        raise OSError(str(e)) from e
    finally:
        conn.close()
    if response.status != http.HTTPStatus.OK or len(body) != PAGE_SIZE:
        raise OSError(f"GET {PAGE}: {response.status}, {len(body)} bytes")
    return body


# -- nfltr ----------------------------------------------------------------------


class Tunnel:
    """
    A relay with one account, and for each mode (C{e2ee}, C{plain}, C{ws})
    an agent sharing every service port and a connector for each service.

    A variant of the stack (to compare builds in one run) runs the nfltr of
    another source tree (C{tree}: its processes start there, with it first
    on C{PYTHONPATH}) and/or with more environment variables (C{env}).

    @ivar agents: mode to agent.
    @ivar connectors: (mode, service) to (connector, its local port).
    """

    MODES = ("e2ee", "plain", "ws", "public")
    #: Each mode's agent and connector options: end-to-end TLS or not, and
    #: the transport to the relay (C{ws}: e2ee over the WebSocket transport).
    #: C{public}: no connector; the agent publishes each service on a public
    #: port of the relay (C{--public-port 0}) that visitors reach straight.
    OPTIONS = {
        "e2ee": ["--e2ee", "true", "--transport", "link"],
        "plain": ["--e2ee", "false", "--transport", "link"],
        "ws": ["--e2ee", "true", "--transport", "websocket"],
        "public": ["--transport", "link"],
    }
    #: Options added to every agent's and every connector's command (a
    #: variant: C{--tls-ticket-lifetime 0} and C{--resume false} turn TLS
    #: resumption off on the end-to-end leg).
    AGENT_EXTRA: tuple[str, ...] = ()
    CONNECTOR_EXTRA: tuple[str, ...] = ()

    def __init__(
        self, tmp: Path, procs: Processes, ports: dict[str, int], *,
        modes: tuple[str, ...] | None = None, tree: Path | None = None,
        env: dict[str, str] | None = None, label: str = "",
    ) -> None:
        self.procs = procs
        self.modes = modes or self.MODES
        self.tree = tree
        extra = dict(env or {})
        if tree is not None:
            extra["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(tree), os.environ.get("PYTHONPATH")])
            )
        self.env = extra
        suffix = f" {label}" if label else ""
        data = tmp / "relay"

        def start(name: str, args: list[str], env: dict[str, str] | None = None) -> Proc:
            return procs.start(name + suffix, args, {**extra, **(env or {})}, tree)

        public: list[str] = []
        if "public" in self.modes:
            # Every visitor of a public port comes from 127.0.0.1: the per-source limits
            # (200 new connections a second) would cap the close workloads, as designed.
            public = [
                *NO_SOURCE_LIMITS,
                "--public-ports", ",".join(str(free_port()) for _ in ports),
                "--public-ports-interface", "127.0.0.1",
                "--max-public-ports-per-account", str(len(ports)),
            ]
        self.relay = start("relay", nfltr_command(
            "relay", "--data-dir", str(data), "--tls", "tcp:0:interface=127.0.0.1",
            "--admin", "tcp:0:interface=127.0.0.1", "--http", "none", "--log-level", "warn",
            *public,
        ))
        try:
            info = json.loads(wait_for_file(data / "relay.json", READY))
        except RuntimeError as e:
            raise BenchError(f"{e}; the relay printed:\n{self.relay.tail()}") from None
        self.info = info
        key = self._key(data)
        env = {"NFLTR_KEY": key}
        relay = ["--relay", info["tls"], "--ca", info["ca"]]
        self.agents: dict[str, Proc] = {}
        self.connectors: dict[tuple[str, str], tuple[Proc, int]] = {}
        #: service to the relay's public port for it (mode C{public}).
        self.public: dict[str, int] = {}
        for mode in self.modes:
            e2ee = self.OPTIONS[mode]
            name = f"bench-{mode}"
            asks = ["--public-port", "0"] * len(ports) if mode == "public" else []
            agent = start(f"agent {mode}", nfltr_command(
                "tcp", *(str(p) for p in ports.values()), "--name", name,
                "--state-dir", str(tmp / f"agent-{mode}"), *relay, *e2ee, *asks,
                *self.AGENT_EXTRA,
            ), env)
            if mode == "public":
                for service, port in ports.items():
                    self.public[service] = int(agent.wait_for(
                        rf"public port [\d.]+:(\d+) -> port {port}\b").group(1))
                agent.wait_for("connected to the relay")
                self.agents[mode] = agent
                continue
            pin: list[str] = []
            if "true" in e2ee:
                pin = ["--pin", agent.wait_for(r"(sha256:[0-9a-f]{64})").group(1)]
            agent.wait_for("connected to the relay")
            self.agents[mode] = agent
            for service, port in ports.items():
                connector = start(f"connector {mode} {service}", nfltr_command(
                    "tcp-connect", name, str(port), "--listen", "127.0.0.1:0", *pin, *relay,
                    *e2ee, *self.CONNECTOR_EXTRA,
                ), env)
                local = int(connector.wait_for(r"listening on [\d.]+:(\d+)").group(1))
                self.connectors[mode, service] = (connector, local)

    def local_port(self, mode: str, service: str) -> int:
        """
        The port a visitor of C{service} connects to in C{mode}: its
        connector's, or the relay's public port.
        """
        if mode == "public":
            return self.public[service]
        return self.connectors[mode, service][1]

    def connector_pid(self, mode: str, service: str) -> int | None:
        """
        The pid of C{service}'s connector in C{mode}; C{None} for C{public}.
        """
        if mode == "public":
            return None
        return self.connectors[mode, service][0].pid

    def _key(self, data: Path) -> str:
        def nfltr(*args: str) -> subprocess.CompletedProcess[str]:
            done = run_bounded(
                nfltr_command(*args, "--data-dir", str(data)), READY, cwd=self.tree,
                env={**os.environ, **self.env},
            )
            if done.returncode != 0:
                raise BenchError(f"nfltr {' '.join(args)} failed: {done.stderr}")
            return done

        nfltr("accounts", "create", "bench")
        return nfltr("keys", "create", "--account", "bench").stdout.strip().splitlines()[0]
