"""
Many agents at once (the C{agents} row of L{bench.peers}): N exposers
register with one relay at the same moment; the time until all are
registered, until all answer, and the relay's memory per idle tunnel.

  - C{nfltr}: a relay (per-source limits off: every agent comes from
    127.0.0.1) and N agent links from one process (L{bench._budget_load}, as
    L{bench.budgets} does: real TLS links, not N Python processes).
    Registered: all N welcomed (from the load process's start, its Python
    start-up excluded); answered: each agent accepted a session opened to
    it through the relay (one per agent, from client links).
  - C{ssh}: C{sshd} and N C{ssh -N -R} clients, each forwarding its own
    remote port to nginx.  Registered: all N remote ports listen (from the
    first client's start); answered: a GET through each of them worked.

Memory: the relay's process tree (C{Pss}, summed: sshd runs two
processes per connection) with the N tunnels idle, less before them,
divided by N; the nfltr figure is also given as C{VmRSS} for comparison
with L{bench.budgets}.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from .._relay import account_key, start_relay
from .._stack import NO_SOURCE_LIMITS, Processes, free_port
from ..budgets import rss, settle
from .accounting import listening, memory_kib, table, tree, tree_memory_kib
from .adapters import Ssh, get, ssh_client, start_sshd, wait_until
from .loads import Endpoint

FLEET_TOOLS = ("nfltr", "ssh")


def nfltr_fleet(tmp: Path, agents: int) -> dict[str, Any]:
    """
    See the module.
    """
    procs = Processes()
    data = tmp / "relay"
    try:
        relay, info = start_relay(procs, data, *NO_SOURCE_LIMITS)
        key = account_key(data)
        time.sleep(1.0)
        base, base_rss = memory_kib([relay.pid]), rss(relay.pid)
        load = procs.start("agents", [
            sys.executable, "-m", "bench._budget_load", info["tls"], info["ca"], key,
            str(agents), str(agents),
        ])
        load.wait_for(r"^connecting$")
        started = time.monotonic()
        load.wait_for(r"^agents up$", timeout=300)
        registered = time.monotonic() - started
        settle(info["admin"], "nfltr_agents_connected", agents)
        time.sleep(1.0)
        idle, idle_rss = memory_kib([relay.pid]), rss(relay.pid)
        asked = time.monotonic()
        os.kill(load.pid, signal.SIGUSR1)  # a session to each agent
        load.wait_for(r"^sessions up$", timeout=300)
        answered = time.monotonic() - asked + registered
        return {
            "agents": agents, "registered_s": round(registered, 3),
            "answered_s": round(answered, 3),
            "relay_pss_kib_base": base["pss_kib"],
            "relay_kib_per_tunnel": round((idle["pss_kib"] - base["pss_kib"]) / agents, 1),
            "relay_rss_kib_per_tunnel": round((idle_rss - base_rss) / 1024 / agents, 1),
        }
    finally:
        procs.stop_all()


def ssh_fleet(tmp: Path, agents: int, service: int) -> dict[str, Any]:
    """
    See the module; C{service} is the port the clients forward to (nginx).
    """
    procs = Processes()
    d = tmp / "ssh"
    try:
        sshd, port = start_sshd(d, procs)
        time.sleep(1.0)
        base = tree_memory_kib([sshd.pid])
        remote = _ports(agents)
        client = ssh_client(d, port)
        started = time.monotonic()
        for i, r in enumerate(remote):
            procs.start(f"ssh -R {i}", [
                *client, "-R", f"{r}:127.0.0.1:{service}", f"{Ssh.user}@127.0.0.1",
            ])
        wait_until(f"{agents} ssh -R", lambda: set(remote) <= listening(), procs.all,
                   timeout=300, poll=0.02)
        registered = time.monotonic() - started
        for r in remote:
            get(Endpoint(r), timeout=30)
        answered = time.monotonic() - started
        time.sleep(1.0)
        idle = tree_memory_kib([sshd.pid])
        clients = memory_kib([p.pid for p in procs.all if p is not sshd])
        return {
            "agents": agents, "registered_s": round(registered, 3),
            "answered_s": round(answered, 3), "relay_pss_kib_base": base["pss_kib"],
            "relay_kib_per_tunnel": round((idle["pss_kib"] - base["pss_kib"]) / agents, 1),
            "relay_processes_per_tunnel": round(
                (len(tree(table(), [sshd.pid])) - 1) / agents, 2
            ),
            "exposer_pss_kib_each": round(clients["pss_kib"] / agents, 1),
        }
    finally:
        roots = [p.pid for p in procs.all]
        leftovers = tree(table(), roots) - set(roots)
        procs.stop_all()
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _ports(n: int) -> list[int]:
    """
    C{n} distinct ports that were free a moment ago.
    """
    ports: set[int] = set()
    while len(ports) < n:
        ports.add(free_port())
    return sorted(ports)
