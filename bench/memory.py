# -*- test-case-name: tests.bench.test_memory -*-
"""
The memory a user sees in C{top}: resident memory of an nfltr relay, agent
and connector idle, after a bounded load, and after a settle period; OpenSSH
(C{sshd}, C{ssh -R}, C{ssh -L}) in the same shape beside them when
C{/usr/sbin/sshd} exists.

    python -m bench.memory [--mib 256] [--big 500] [--requests 5000] [--new 300]
                           [--settle 20] [--variant NAME:tree=DIR,VAR=VALUE]...
                           [--no-ssh] [--maps] [--json FILE]

Each stack is one tunnel on 127.0.0.1 (ports chosen by the kernel, data in a
temporary directory): C{nfltr relay}, C{nfltr tcp PORT} (the agent, default
options: e2ee, transport C{auto}) and C{nfltr tcp-connect} (the connector),
in front of a small service in threads of this process
(L{bench._memory_load}).  For each process (for C{sshd}, the listener and
the per-connection processes it forked) it reads, from C{/proc}:

  - C{idle}: after one request through the tunnel and C{--idle} seconds;
  - C{peak}: C{VmHWM}, the highest resident memory since the start;
  - C{after}: one second after the load (L{bench._memory_load.run_load}:
    C{--mib} MiB each way over C{--streams} connections, C{--big} 1 MiB
    and C{--requests} 1 KiB requests on C{--connections} keep-alive
    connections, C{--new} requests each on a new connection);
  - C{settled}: C{--settle} seconds after the load.

RSS is what C{top} shows (C{RES}); PSS splits shared pages among their
users; USS is the process's private pages (what ending it would free).
Figures are MiB (2^20 bytes).  C{--variant} runs another stack after the
first, from another source tree (C{tree=DIR}, e.g. a worktree of the base
commit) and/or with more environment variables, as L{bench.tunnel} does.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._memory_load import Load, Service, probe, run_load
from ._stack import Proc, Processes, Tunnel, free_port, tree_state
from ._system import BenchError

# /proc/PID/status's VmHWM lines read like smaps_rollup's: NAME: N kB.
from .peers.accounting import Window, table, tree
from .peers.accounting import parse_smaps_rollup as parse_kib
from .tunnel import parse_variant

SSHD = "/usr/sbin/sshd"
MIB = 1024.0
#: The readings, in order.
PHASES = ("idle", "after", "settled")


def smaps_rollup(pid: int) -> dict[str, int]:
    """
    KiB of C{pid}: C{rss}, C{pss}, C{uss} (private clean + dirty),
    C{anon} (anonymous), from C{/proc/PID/smaps_rollup}, and C{hwm}
    (C{VmHWM}, the peak RSS) from C{/proc/PID/status}.
    """
    with open(f"/proc/{pid}/smaps_rollup") as f:
        sizes = parse_kib(f.read())
    with open(f"/proc/{pid}/status") as f:
        status = parse_kib(f.read())
    return {
        "rss": sizes.get("Rss", 0), "pss": sizes.get("Pss", 0),
        "uss": sizes.get("Private_Clean", 0) + sizes.get("Private_Dirty", 0),
        "anon": sizes.get("Anonymous", 0), "hwm": status.get("VmHWM", 0),
    }


def rss_by_mapping(pid: int, top: int = 12) -> list[tuple[str, int]]:
    """
    C{pid}'s resident KiB by what is mapped (a file's name, C{[heap]},
    C{[anon]} for anonymous mappings), largest first, C{top} of them and
    the rest summed as C{other}.
    """
    sizes: dict[str, int] = {}
    name = "[anon]"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(maxsplit=5)
            if head and "-" in head[0] and len(head) >= 5 and ":" not in head[0]:  # noqa: PLR2004
                name = head[5].strip() if len(head) == 6 else "[anon]"  # noqa: PLR2004
                name = Path(name).name if name.startswith("/") else name
            elif line.startswith("Rss:"):
                sizes[name] = sizes.get(name, 0) + int(line.split()[1])
    ranked = sorted(sizes.items(), key=lambda kv: -kv[1])
    return [*ranked[:top], ("other", sum(v for _, v in ranked[top:]))]


def tree_memory(root: int) -> dict[str, int]:
    """
    L{smaps_rollup} summed over C{root} and its descendants (C{hwm}: the
    sum of each one's peak, an upper bound of the tree's), and how many
    processes that was.
    """
    total = {"rss": 0, "pss": 0, "uss": 0, "anon": 0, "hwm": 0, "processes": 0}
    for pid in sorted(tree(table(), [root])):
        with contextlib.suppress(OSError):  # it ended meanwhile
            for name, value in smaps_rollup(pid).items():
                total[name] += value
            total["processes"] += 1
    return total


@dataclass
class Stack:
    """
    One tunnel: its processes by role (C{relay}, C{agent}, C{connector})
    and the visitor's port.
    """

    name: str
    roles: dict[str, Proc]
    port: int
    procs: Processes
    notes: list[str] = field(default_factory=list)


class _DefaultTunnel(Tunnel):
    """
    L{Tunnel} with one mode: the agent's and connector's defaults (e2ee,
    transport C{auto}).
    """

    MODES = ("default",)
    OPTIONS = {"default": ["--e2ee", "true"]}


def nfltr_stack(
    tmp: Path, service: int, name: str, tree_dir: Path | None, env: dict[str, str],
) -> Stack:
    """
    An nfltr relay, agent and connector in front of port C{service}.
    """
    procs = Processes()
    try:
        tunnel = _DefaultTunnel(tmp / name, procs, {"svc": service}, tree=tree_dir, env=env,
                                label=name)
    except BaseException:
        procs.stop_all()
        raise
    connector, port = tunnel.connectors["default", "svc"]
    roles = {"relay": tunnel.relay, "agent": tunnel.agents["default"], "connector": connector}
    notes = [f"tree {tree_dir}" if tree_dir else "this tree"]
    notes += [f"{k}={v}" for k, v in env.items()]
    return Stack(name, roles, port, procs, notes)


def ssh_missing() -> str | None:
    """
    Why OpenSSH cannot be the comparison here, or None.
    """
    if not os.path.exists(SSHD):
        return f"{SSHD} does not exist (apt-get install openssh-server)"
    absent = [p for p in ("ssh", "ssh-keygen") if shutil.which(p) is None]
    return f"not installed: {', '.join(absent)}" if absent else None


def ssh_stack(tmp: Path, service: int) -> Stack:
    """
    OpenSSH as the relay: C{sshd} (its own configuration and keys), the
    exposer C{ssh -N -R} and the connector C{ssh -N -L}.
    """
    from .peers.adapters import Ssh, ssh_client, start_sshd, wait_until

    procs = Processes()
    try:
        directory = tmp / "ssh"
        sshd, sshd_port = start_sshd(directory, procs)
        client = ssh_client(directory, sshd_port)
        user = f"{Ssh.user}@127.0.0.1"
        remote, local = free_port(), free_port()
        exposer = procs.start("ssh -R", [*client, "-R", f"{remote}:127.0.0.1:{service}", user])
        connector = procs.start(
            "ssh -L", [*client, "-L", f"127.0.0.1:{local}:127.0.0.1:{remote}", user]
        )
        wait_until("ssh -L", lambda: probe(local) or True, [sshd, exposer, connector])
    except BaseException:
        procs.stop_all()
        raise
    roles = {"relay": sshd, "agent": exposer, "connector": connector}
    return Stack("openssh", roles, local, procs, ["sshd, ssh -N -R, ssh -N -L"])


def measure(stack: Stack, load: Load, idle: float, settle: float) -> dict[str, Any]:
    """
    The readings of one stack (see the module).
    """
    from .peers.adapters import wait_until

    wait_until(f"{stack.name} tunnel", lambda: probe(stack.port) or True,
               list(stack.roles.values()))
    window = Window({role: [proc.pid] for role, proc in stack.roles.items()}, [])
    time.sleep(idle)
    readings: dict[str, dict[str, Any]] = {role: {} for role in stack.roles}

    def read(phase: str) -> None:
        for role, proc in stack.roles.items():
            readings[role][phase] = tree_memory(proc.pid)

    read("idle")
    mappings = {role: rss_by_mapping(proc.pid) for role, proc in stack.roles.items()}
    loaded = run_load(stack.port, load)
    time.sleep(1.0)
    read("after")
    time.sleep(max(0.0, settle - 1.0))
    read("settled")
    for proc in stack.roles.values():
        proc.check()
    return {"stack": stack.name, "notes": stack.notes, "load": loaded,
            "memory_kib": readings, "idle_mappings_kib": mappings, "machine": window.close()}


def markdown(results: list[dict[str, Any]], settle: float) -> str:
    """
    The table of a run's results: one row per stack and role.
    """
    lines = [
        f"| stack | process | idle RSS | idle PSS | idle USS | peak RSS | after load RSS |"
        f" after {settle:g} s RSS | after {settle:g} s USS | settled ÷ idle (RSS) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        for role, phases in result["memory_kib"].items():
            idle, after, settled = (phases[p] for p in PHASES)
            lines.append(
                f"| {result['stack']} | {role} | {idle['rss'] / MIB:.1f} |"
                f" {idle['pss'] / MIB:.1f} | {idle['uss'] / MIB:.1f} |"
                f" {settled['hwm'] / MIB:.1f} | {after['rss'] / MIB:.1f} |"
                f" {settled['rss'] / MIB:.1f} | {settled['uss'] / MIB:.1f} |"
                f" {settled['rss'] / max(idle['rss'], 1):.2f} |"
            )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.split("\n")[1])
    p.add_argument("--mib", type=int, default=256, help="MiB each way in the bulk step")
    p.add_argument("--streams", type=int, default=8, help="bulk connections in parallel")
    p.add_argument("--big", type=int, default=500, help="1 MiB keep-alive requests")
    p.add_argument("--requests", type=int, default=5000, help="1 KiB keep-alive requests")
    p.add_argument("--connections", type=int, default=50, help="keep-alive connections")
    p.add_argument("--new", type=int, default=300, help="requests on a new connection each")
    p.add_argument("--deadline", type=float, default=60.0, help="seconds the load may take")
    p.add_argument("--idle", type=float, default=3.0, help="seconds before the idle reading")
    p.add_argument("--settle", type=float, default=20.0,
                   help="seconds after the load before the last reading")
    p.add_argument("--variant", action="append", default=[], metavar="NAME:SETTINGS",
                   help="another nfltr stack: tree=DIR and/or VAR=VALUE, comma-separated")
    p.add_argument("--no-ssh", action="store_true", help="leave OpenSSH out")
    p.add_argument("--maps", action="store_true",
                   help="also print each process's idle RSS by mapping (file, heap, anonymous)")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    try:
        args.variants = [parse_variant(v) for v in args.variant]
    except ValueError as e:
        p.error(f"--variant: {e}")
    if min(args.mib, args.streams, args.big, args.requests, args.connections, args.new) < 1:
        p.error("the load's sizes must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """
    Measure each stack in turn; print the table (and write the JSON).
    """
    args = parse_args(argv)
    load = Load(args.mib, args.streams, args.big, args.requests, args.connections, args.new,
                args.deadline)
    doc: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python -m bench.memory", *(argv if argv is not None
                                                         else sys.argv[1:])]),
        "tree": tree_state(), "load": vars(load), "settle_s": args.settle, "results": [],
    }
    started = time.monotonic()
    service = Service()
    try:
        with tempfile.TemporaryDirectory(prefix="nfltr-memory-") as tmp:
            stacks: list[tuple[str, Any]] = [("nfltr", lambda: nfltr_stack(
                Path(tmp), service.port, "nfltr", None, {}))]
            for name, tree_dir, env in args.variants:
                stacks.append((name, lambda n=name, t=tree_dir, e=env: nfltr_stack(
                    Path(tmp), service.port, n, t, e)))
            why = "--no-ssh" if args.no_ssh else ssh_missing()
            if why is None:
                stacks.append(("openssh", lambda: ssh_stack(Path(tmp), service.port)))
            else:
                doc["openssh_skipped"] = why
            for name, start in stacks:
                print(f"{name}: starting", file=sys.stderr)
                stack = start()
                try:
                    doc["results"].append(measure(stack, load, args.idle, args.settle))
                finally:
                    stack.procs.stop_all()
    except (BenchError, subprocess.SubprocessError) as e:
        print(f"bench.memory: {e}", file=sys.stderr)
        return 1
    finally:
        service.stop()
    doc["seconds"] = round(time.monotonic() - started, 1)
    report(doc, args)
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


def report(doc: dict[str, Any], args: argparse.Namespace) -> None:
    """
    Print a run's table and notes.
    """
    print(markdown(doc["results"], args.settle))
    if "openssh_skipped" in doc:
        print(f"\nOpenSSH left out: {doc['openssh_skipped']}")
    for result in doc["results"]:
        machine = result["machine"]
        print(f"{result['stack']}: load {result['load']}; others' CPU {machine['other_cores']}"
              f" cores, load average {machine['load_before']} -> {machine['load_after']}")
    if args.maps:
        for result in doc["results"]:
            for role, mappings in result["idle_mappings_kib"].items():
                listed = ", ".join(f"{name} {kib / MIB:.1f}" for name, kib in mappings)
                print(f"{result['stack']} {role} idle RSS by mapping (MiB): {listed}")


if __name__ == "__main__":
    sys.exit(main())
