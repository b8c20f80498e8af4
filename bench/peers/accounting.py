"""
CPU and memory of process trees, and of the rest of the machine, from
C{/proc}.

A tool's role (relay, exposer, connector) is one or more root processes and
everything under them.  Its CPU over a window is the change of the sum, over
the tree's processes, of their own user + system time and the time of the
children they reaped (C{/proc/PID/stat} fields 14-17): a forked helper that
ended meanwhile (socat's and sshd's per-connection processes) is counted
once its parent reaps it, whatever its life was.  (Only a process whose
parent ignores SIGCHLD is lost; none of the tools here does that.)

Others' CPU is the machine's user + nice + system time (C{/proc/stat}) less
every process of ours (tools, services, load generators, this one) and
less the kernel's softirq threads (loopback traffic is processed there):
what other users of the machine took during the window.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass, field
from typing import Any

from .._system import loadavg, system_cpu

TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    """
    One process: its command name, parent, own CPU seconds (user + system),
    that of the children it reaped, and its start time (clock ticks after
    boot: with the pid, what identifies it; kernel workers rename
    themselves).
    """

    comm: str
    ppid: int
    own: float
    reaped: float
    start: int = 0


def parse_stat(data: bytes) -> ProcStat:
    """
    Parse C{/proc/PID/stat} (the command name may hold spaces and
    parentheses: it ends at the last C{)}).
    """
    head, _, tail = data.rpartition(b")")
    comm = head.partition(b"(")[2].decode("utf-8", "replace")
    fields = tail.split()
    # After the command name: state (0), ppid (1), ..., utime (11), stime (12),
    # cutime (13), cstime (14), ..., starttime (19).
    return ProcStat(
        comm, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK,
        (int(fields[13]) + int(fields[14])) / TICK, int(fields[19]),
    )


def table() -> dict[int, ProcStat]:
    """
    Every process now.
    """
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                found[int(entry.name)] = parse_stat(f.read())
        except (OSError, IndexError, ValueError):
            continue  # it ended meanwhile
    return found


def tree(processes: dict[int, ProcStat], roots: list[int]) -> set[int]:
    """
    C{roots} and all their descendants (those alive in C{processes}).
    """
    children: dict[int, list[int]] = {}
    for pid, stat in processes.items():
        children.setdefault(stat.ppid, []).append(pid)
    found: set[int] = set()
    todo = [pid for pid in roots if pid in processes]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def tree_cpu(processes: dict[int, ProcStat], roots: list[int]) -> float:
    """
    The CPU seconds of C{roots}' trees so far: own and reaped children's.
    """
    return sum(processes[pid].own + processes[pid].reaped for pid in tree(processes, roots))


def parse_smaps_rollup(text: str) -> dict[str, int]:
    """
    C{/proc/PID/smaps_rollup}'s sizes, KiB, by name (C{Rss}, C{Pss}, ...).
    """
    sizes = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        parts = rest.split()
        if sep and len(parts) == 2 and parts[1] == "kB":  # noqa: PLR2004
            sizes[name] = int(parts[0])
    return sizes


def memory_kib(pids: set[int] | list[int]) -> dict[str, int]:
    """
    The summed C{Pss} (shared pages split among their users: a sum over
    processes that share a binary is not inflated) and C{Rss} of C{pids}.
    """
    total = {"pss_kib": 0, "rss_kib": 0}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                sizes = parse_smaps_rollup(f.read())
        except OSError:
            continue
        total["pss_kib"] += sizes.get("Pss", 0)
        total["rss_kib"] += sizes.get("Rss", 0)
    return total


def tree_memory_kib(roots: list[int]) -> dict[str, int]:
    return memory_kib(tree(table(), roots))


def listening_ports(text: str) -> set[int]:
    """
    The ports in state LISTEN in a C{/proc/net/tcp} (or C{tcp6}) table.
    """
    ports = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 3 and fields[3] == "0A":  # noqa: PLR2004
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def listening() -> set[int]:
    """
    The TCP ports something listens on now (IPv4 and IPv6).
    """
    ports: set[int] = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                ports |= listening_ports(f.read())
        except OSError:
            pass
    return ports


def _self_and_children() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


@dataclass
class Snapshot:
    """
    The machine at one moment.
    """

    t: float
    processes: dict[int, ProcStat]
    system: dict[str, float]
    load: list[float]
    me: float
    children: float

    @classmethod
    def take(cls) -> Snapshot:
        import time

        me, children = _self_and_children()
        return cls(time.monotonic(), table(), system_cpu(), loadavg(), me, children)


@dataclass
class Window:
    """
    The CPU of some roles (each a list of root pids), of the services and
    of everything else between two snapshots.
    """

    roles: dict[str, list[int]]
    services: list[int]
    before: Snapshot = field(default_factory=Snapshot.take)

    def close(self, after: Snapshot | None = None) -> dict[str, Any]:
        """
        End the window; its accounting (seconds and cores).
        """
        after = after or Snapshot.take()
        return account(self.before, after, self.roles, self.services)


def account(
    before: Snapshot, after: Snapshot, roles: dict[str, list[int]], services: list[int]
) -> dict[str, Any]:
    """
    See L{Window}: per role CPU seconds; the services', the load
    generators' (this process's reaped children) and this process's; the
    machine's busy cores and others' cores, and the three other processes
    that used most.
    """
    window = max(after.t - before.t, 1e-6)
    cpu = {
        role: max(0.0, tree_cpu(after.processes, roots) - tree_cpu(before.processes, roots))
        for role, roots in roles.items()
    }
    service = max(0.0, tree_cpu(after.processes, services) - tree_cpu(before.processes, services))
    loadgen = after.children - before.children
    me = after.me - before.me
    ours_pids = set().union(*(tree(after.processes, r) for r in roles.values()))
    ours_pids |= tree(after.processes, services) | {os.getpid()}
    busy = sum(after.system[k] - before.system[k] for k in ("user", "nice", "system"))
    softirq = sum(after.system[k] - before.system[k] for k in ("irq", "softirq"))
    # Kernel threads that do our loopback traffic's work, and everyone else.
    ksoftirqd = 0.0
    others: list[tuple[float, str]] = []
    for pid, stat in after.processes.items():
        if pid in ours_pids:
            continue
        old = before.processes.get(pid)
        used = stat.own - (old.own if old is not None and old.start == stat.start else 0.0)
        if used <= 0:
            continue
        if stat.comm.startswith("ksoftirqd"):
            ksoftirqd += used
        else:
            others.append((used, f"{stat.comm}[{pid}]"))
    other = busy - sum(cpu.values()) - service - loadgen - me - ksoftirqd
    others.sort(reverse=True)
    return {
        "window_s": round(window, 3),
        "cpu_s": {role: round(v, 3) for role, v in cpu.items()},
        "tool_cpu_s": round(sum(cpu.values()), 3),
        "service_cpu_s": round(service, 3), "loadgen_cpu_s": round(loadgen, 3),
        "harness_cpu_s": round(me, 3), "ksoftirqd_cpu_s": round(ksoftirqd, 3),
        "softirq_s": round(softirq, 3),
        "busy_cores": round(busy / window, 3),
        "other_cores": round(max(0.0, other) / window, 3),
        "top_others": [f"{name} {used:.2f}s" for used, name in others[:3]],
        "load_before": before.load, "load_after": after.load,
    }
