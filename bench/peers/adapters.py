"""
The tools under test, each behind the same small interface: L{Tool.start}
sets up its relay and exposer in front of the services and returns, per
service, the 127.0.0.1 port a visitor connects to; L{Tool.roots} are the
pids whose process trees are the tool's (for CPU accounting);
L{Tool.stop} tears everything down.

  - C{direct}: no tunnel, the service's own port.
  - C{nfltr}: relay, agent (C{nfltr tcp}) and connector (C{nfltr
    tcp-connect}), end-to-end TLS over the raw link: L{bench._stack.Tunnel}
    with its C{e2ee} mode only.
  - C{ssh}: OpenSSH as a relay: C{sshd} on a loopback port with its own
    configuration, host key and authorized key in a temporary directory;
    the exposer is C{ssh -N -R RPORT:127.0.0.1:SERVICE} and the visitor a
    second client, C{ssh -N -L LPORT:127.0.0.1:RPORT}.  OpenSSH's default
    cipher negotiation.
  - C{socat}: a plain forwarder (C{TCP-LISTEN:...,fork TCP:...}), one per
    service: the floor of what any user-space relay costs.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from .._stack import READY, Proc, Processes, Tunnel, fetch, free_port, run_bounded
from .._system import BenchError


def listening(port: int) -> bool:
    """
    Whether something listens on TCP C{port} (IPv4, any address).
    """
    suffix = f":{port:04X}"
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1].endswith(suffix) and fields[3] == "0A":
                return True
    return False


def wait_until(what: str, ready: object, procs: list[Proc], timeout: float = READY) -> None:
    """
    Poll C{ready()} until true; fail if one of C{procs} exits meanwhile.
    """
    deadline = time.monotonic() + timeout
    while True:
        for proc in procs:
            proc.check()
        try:
            if ready():  # type: ignore[operator]
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            tails = "\n".join(f"{p.name}:\n{p.tail()}" for p in procs)
            raise BenchError(f"{what} never became ready; they printed:\n{tails}")
        time.sleep(0.05)


class Tool:
    """
    A tool under test (see the module).
    """

    name = ""

    def __init__(self, tmp: Path, services: dict[str, int]) -> None:
        self.tmp = tmp
        self.services = services
        self.procs = Processes()

    def start(self) -> dict[str, int]:
        raise NotImplementedError

    def roots(self) -> list[int]:
        return [p.pid for p in self.procs.all]

    def check(self) -> None:
        self.procs.check()

    def stop(self) -> None:
        self.procs.stop_all()


class Direct(Tool):
    name = "direct"

    def start(self) -> dict[str, int]:
        return dict(self.services)


class _E2eeTunnel(Tunnel):
    MODES = ("e2ee",)


class Nfltr(Tool):
    name = "nfltr"

    def start(self) -> dict[str, int]:
        tunnel = _E2eeTunnel(self.tmp / "nfltr", self.procs, self.services)
        ports = {service: tunnel.connectors["e2ee", service][1] for service in self.services}
        wait_until("the nfltr tunnel", lambda: fetch(ports["nginx"]), self.procs.all)
        return ports


SSHD_CONFIG = """\
ListenAddress 127.0.0.1
Port {port}
HostKey {dir}/host_ed25519
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowTcpForwarding yes
GatewayPorts no
X11Forwarding no
PrintMotd no
UseDNS no
LogLevel ERROR
"""


class Ssh(Tool):
    name = "ssh"

    def start(self) -> dict[str, int]:
        d = self.tmp / "ssh"
        d.mkdir(parents=True, exist_ok=True)
        for key in ("host_ed25519", "client_ed25519"):
            if not (d / key).exists():
                done = run_bounded(
                    ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], READY
                )
                if done.returncode != 0:
                    raise BenchError(f"ssh-keygen: {done.stderr}")
        shutil.copy(d / "client_ed25519.pub", d / "authorized_keys")
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation directory
        port = free_port()
        (d / "sshd_config").write_text(SSHD_CONFIG.format(port=port, dir=d))
        sshd = self.procs.start(
            "sshd", [shutil.which("sshd") or "/usr/sbin/sshd", "-D", "-e", "-f",
                     str(d / "sshd_config")]
        )
        wait_until("sshd", lambda: listening(port), [sshd])
        client = [
            "ssh", "-F", "/dev/null", "-N", "-p", str(port), "-i", str(d / "client_ed25519"),
            "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "ExitOnForwardFailure=yes",
            "-o", "LogLevel=ERROR", "-o", "ServerAliveInterval=0",
        ]
        remote = {service: free_port() for service in self.services}
        forwards = [
            a for s, p in self.services.items() for a in ("-R", f"{remote[s]}:127.0.0.1:{p}")
        ]
        exposer = self.procs.start(
            "ssh -R", [*client, *forwards, f"{getpass.getuser()}@127.0.0.1"]
        )
        wait_until(
            "ssh -R", lambda: all(listening(p) for p in remote.values()), [sshd, exposer]
        )
        local = {service: free_port() for service in self.services}
        forwards = [
            a for s in self.services for a in ("-L", f"127.0.0.1:{local[s]}:127.0.0.1:{remote[s]}")
        ]
        visitor = self.procs.start(
            "ssh -L", [*client, *forwards, f"{getpass.getuser()}@127.0.0.1"]
        )
        wait_until("ssh -L", lambda: fetch(local["nginx"]), [sshd, exposer, visitor])
        return local

    def stop(self) -> None:
        # sshd's per-connection processes start sessions of their own; they
        # end when their clients (stopped first) hang up, or with this.
        leftovers = descendants(self.roots())
        super().stop()
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


class Socat(Tool):
    name = "socat"

    def start(self) -> dict[str, int]:
        local = {}
        for service, port in self.services.items():
            local[service] = free_port()
            self.procs.start(f"socat {service}", [
                "socat", f"TCP-LISTEN:{local[service]},bind=127.0.0.1,reuseaddr,fork,nodelay",
                f"TCP:127.0.0.1:{port},nodelay",
            ])
        wait_until(
            "socat", lambda: all(listening(p) for p in local.values()), self.procs.all
        )
        return local


TOOLS: dict[str, type[Tool]] = {t.name: t for t in (Direct, Nfltr, Ssh, Socat)}


# -- accounting -----------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def _table() -> dict[int, tuple[int, float]]:
    """
    Every process: pid to (parent pid, its own CPU seconds, user + system).
    """
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # After the command name: state, ppid, ..., utime (11), stime (12).
        table[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK)
    return table


def _tree(table: dict[int, tuple[int, float]], roots: list[int]) -> set[int]:
    wanted = set(roots)
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _) in table.items():
            if ppid in wanted and pid not in wanted:
                wanted.add(pid)
                changed = True
    return wanted


def descendants(roots: list[int]) -> list[int]:
    """
    The pids of C{roots}' process trees, C{roots} excluded.
    """
    return sorted(_tree(_table(), roots) - set(roots))


class TreeCpu:
    """
    CPU seconds of the process trees under some roots between L{start} and
    L{stop}, each process's own time only, sampled every C{interval} from
    C{/proc} by a thread (trees, not process groups: sshd's per-connection
    processes start sessions of their own; sampling, not the parents'
    reaped-children totals: socat's children are reaped without them).
    A process that ends loses at most its last C{interval}.
    """

    def __init__(self, roots: list[int], interval: float = 0.1) -> None:
        self.roots = roots
        self.interval = interval
        self.before: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> dict[int, float]:
        table = _table()
        return {pid: table[pid][1] for pid in _tree(table, self.roots) if pid in table}

    def _loop(self) -> None:
        while not self._done.wait(self.interval):
            self.last.update(self._sample())

    def start(self) -> None:
        self.before = self._sample()
        self.last = dict(self.before)
        self._thread.start()

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        self.last.update(self._sample())
        return sum(cpu - self.before.get(pid, 0.0) for pid, cpu in self.last.items())


def versions() -> dict[str, str]:
    def out(args: list[str]) -> str:
        try:
            done = subprocess.run(args, capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return "missing"
        text = (done.stdout + done.stderr).strip().splitlines()
        return text[0] if text else "unknown"

    socat = "missing"
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        text = subprocess.run(
            ["socat", "-V"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        socat = next(
            (line.split(" on ")[0] for line in text.splitlines()
             if line.startswith("socat version")), "unknown",
        )
    return {"openssh": out(["ssh", "-V"]), "socat": socat}
