"""
Resource budgets of a relay: memory per idle agent and per open session,
file descriptors per agent and per session.

    python -m bench.budgets [--agents 200] [--sessions 2000] [--json FILE]

It starts a real relay (C{nfltr relay}, its own process), then, from this
process, N agents (real links over TLS, each with its own name) and a
client that opens M sessions to them (over links of 1000 sessions each),
spread evenly; each agent accepts its sessions and holds them open, idle.
The relay's resident memory (VmRSS) and open file descriptors are read from
C{/proc} after each step, once the relay's counts (its C{/metrics}) show
every agent and every session, and differences are divided by N and M.
Sessions are multiplexed on the links, so they should cost no descriptor at the relay.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from nfltr.cli.processes import Child, nfltr_command, wait_for_file


def rss(pid: int) -> int:
    """
    Resident memory of C{pid}, bytes.
    """
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def fds(pid: int) -> int:
    """
    Open file descriptors of C{pid}.
    """
    return len(os.listdir(f"/proc/{pid}/fd"))


def metric(admin: str, name: str) -> float:
    """
    The sum of the samples of C{name} on the relay's /metrics.
    """
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=30) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
        and (len(line) == len(name) or line[len(name)] in " {")
    )


def settle(admin: str, name: str, want: float, timeout: float = 120.0) -> None:
    """
    Wait until the relay's C{name} metric reaches C{want}.
    """
    deadline = time.monotonic() + timeout
    while metric(admin, name) < want:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} never reached {want}: {metric(admin, name)}")
        time.sleep(0.2)


def measure(agents: int, sessions: int, tmp: Path) -> dict[str, Any]:
    """
    Run the measurement; the figures.
    """
    data = tmp / "relay"
    relay = Child(nfltr_command(
        "relay", "--data-dir", str(data), "--tls", "tcp:0:interface=127.0.0.1",
        "--admin", "tcp:0:interface=127.0.0.1", "--http", "none", "--log-level", "warn",
        "--per-source-connections", "none", "--per-source-rate", "none",
    ), name="relay")
    try:
        info = json.loads(wait_for_file(data / "relay.json"))
        key = _key(data)
        time.sleep(1.0)
        base = (rss(relay.popen.pid), fds(relay.popen.pid))
        child = Child([sys.executable, "-m", "bench._budget_load", info["tls"], info["ca"], key,
                       str(agents), str(sessions)], name="load")
        try:
            child.wait_for(r"^agents up$", timeout=300)
            settle(info["admin"], "nfltr_agents_connected", agents)
            time.sleep(1.0)
            withAgents = (rss(relay.popen.pid), fds(relay.popen.pid))
            os.kill(child.popen.pid, 10)  # SIGUSR1: open the sessions
            child.wait_for(r"^sessions up$", timeout=300)
            settle(info["admin"], "nfltr_agent_sessions_open", sessions)
            time.sleep(1.0)
            withSessions = (rss(relay.popen.pid), fds(relay.popen.pid))
        finally:
            child.stop()
    finally:
        relay.stop()
    clientLinks = -(-sessions // 1000)
    return {
        "agents": agents, "sessions": sessions,
        "relay_rss_base": base[0], "relay_fds_base": base[1],
        "rss_per_agent": (withAgents[0] - base[0]) / agents,
        "fds_per_agent": (withAgents[1] - base[1]) / agents,
        "rss_per_session": (withSessions[0] - withAgents[0]) / sessions,
        # The client links' own descriptors are not the sessions'.
        "fds_per_session": (withSessions[1] - withAgents[1] - clientLinks) / sessions,
    }


def _key(data: Path) -> str:
    from nfltr.store import SQLiteStoreCore

    core = SQLiteStoreCore(data / "nfltr.sqlite3")
    try:
        core.create_account("bench")
        _, key = core.create_key("bench")
    finally:
        core.close()
    return key


def main(argv: list[str] | None = None) -> int:
    """
    Measure and print (and write) the figures.
    """
    parser = argparse.ArgumentParser(prog="python -m bench.budgets")
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nfltr-budgets-") as tmp:
        figures = measure(args.agents, args.sessions, Path(tmp))
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
