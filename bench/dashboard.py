# -*- test-case-name: tests.test_bench_dashboard -*-
"""
The dashboard's live updates with many agents connected: what they cost
the relay and how soon they show a change.  A benchmark, not a test.

    python -m bench.dashboard [--agents N] [--seconds S] [--probes P] [--streams K]

A relay (per-source limits off: every agent comes from 127.0.0.1) with N
agent links held by one load process (L{bench._budget_load}: real TLS
links, not N Python processes) and an admin token; then:

  - idle: the relay's CPU over S seconds with no event stream open;
  - streaming: the same with K streams of C{GET /api/v1/events} open (what
    K dashboards in browsers read), each snapshot's size and arrival time
    recorded;
  - probes: P times, an agent process (C{nfltr tcp 9 --name probe-I}) is
    started; from the moment it prints its welcome line to the first
    snapshot that lists it (the update latency a user sees), and, once it
    is stopped, until a snapshot no longer lists it.

Results as Markdown on standard output and JSON (C{--json FILE}).  The
relay's CPU is its process's utime + stime from C{/proc}.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from nfltr.cli.processes import nfltr_command

from ._relay import account_key, start_relay
from ._stack import NO_SOURCE_LIMITS, Processes
from ._system import BenchError


def parse_events(buffer: bytes) -> tuple[list[tuple[str, bytes]], bytes]:
    """
    The complete server-sent events in C{buffer} as (event, data) pairs,
    and the bytes left over (an event not yet ended by its blank line).
    """
    events = []
    while True:
        end = buffer.find(b"\n\n")
        if end < 0:
            return events, buffer
        block, buffer = buffer[:end], buffer[end + 2:]
        name, data = "message", []
        for line in block.split(b"\n"):
            key, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if key == b"event":
                name = value.decode()
            elif key == b"data":
                data.append(value)
        if data:
            events.append((name, b"\n".join(data)))


@dataclass
class Snapshot:
    at: float
    size: int
    agents: frozenset[str]


@dataclass
class Stream:
    """
    One event stream, read in a thread: every snapshot with its arrival.
    """

    port: int
    token: str
    snapshots: list[Snapshot] = field(default_factory=list)
    error: str | None = None

    def start(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            conn.request("GET", "/api/v1/events",
                         headers={"Authorization": f"Bearer {self.token}"})
            response = conn.getresponse()
            if response.status != 200:  # noqa: PLR2004
                self.error = f"events: {response.status} {response.read()[:200]!r}"
                return
            buffer = b""
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    return
                buffer += chunk
                events, buffer = parse_events(buffer)
                for name, data in events:
                    if name == "snapshot":
                        names = frozenset(a["name"] for a in json.loads(data)["agents"])
                        self.snapshots.append(Snapshot(time.monotonic(), len(data), names))
        except Exception as e:  # noqa: BLE001 - reported, not raised, from its thread
            self.error = f"events: {e}"

    def first(self, after: float, present: bool, name: str, timeout: float) -> float:
        """
        When the first snapshot after C{after} that lists C{name} (or, with
        C{present} false, does not) arrived.
        """
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for snapshot in self.snapshots[seen:]:
                seen += 1
                if snapshot.at >= after and (name in snapshot.agents) == present:
                    return snapshot.at
            if self.error:
                raise BenchError(self.error)
            time.sleep(0.01)
        raise BenchError(f"no snapshot {'with' if present else 'without'} {name} in {timeout} s")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def relay_cpu(pid: int, seconds: float) -> float:
    """
    Cores the relay used over the next C{seconds}.
    """
    before, start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - start)


def admin_token(data: Path) -> str:
    import subprocess

    done = subprocess.run(
        nfltr_command("admin", "token", "create", "--data-dir", str(data), "--read-only",
                      "--label", "bench"),
        capture_output=True, text=True, timeout=60, check=False,
    )
    if done.returncode:
        raise BenchError(f"admin token create: {done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1]


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    procs = Processes()
    data = tmp / "relay"
    try:
        relay, info = start_relay(procs, data, *NO_SOURCE_LIMITS)
        key, token = account_key(data), admin_token(data)
        admin = int(info["admin"].rsplit(":", 1)[1])
        load = procs.start("load", [sys.executable, "-m", "bench._budget_load", info["tls"],
                                    info["ca"], key, str(args.agents), "0"])
        started = time.monotonic()
        load.wait_for(r"^agents up$", timeout=600)
        connect_s = time.monotonic() - started
        time.sleep(2.0)
        idle = relay_cpu(relay.pid, args.seconds)
        streams = [Stream(admin, token) for _ in range(args.streams)]
        for stream in streams:
            stream.start()
        streams[0].first(0.0, False, "-", 60)  # the first snapshot: streaming
        window_start = len(streams[0].snapshots)
        streaming = relay_cpu(relay.pid, args.seconds)
        window = streams[0].snapshots[window_start:]
        latencies, gone = [], []
        for n in range(args.probes):
            name = f"probe-{n}"
            probe = procs.start(name, nfltr_command(
                "tcp", "9", "--name", name, "--relay", info["tls"], "--ca", info["ca"],
                "--state-dir", str(tmp / name)), {"NFLTR_KEY": key})
            probe.wait_for(r"tcp-connect|connected|share", timeout=60)
            welcomed = time.monotonic()
            latencies.append(streams[0].first(welcomed, True, name, 30) - welcomed)
            probe.stop()
            stopped = time.monotonic()
            gone.append(streams[0].first(stopped, False, name, 30) - stopped)
            procs.all.remove(probe)
        sizes = [s.size for s in window]
        gaps = [b.at - a.at for a, b in pairwise(window)]
        return {
            "agents": args.agents, "streams": args.streams, "seconds": args.seconds,
            "agents_up_s": round(connect_s, 2),
            "relay_cores_idle": round(idle, 4), "relay_cores_streaming": round(streaming, 4),
            "snapshots": len(window),
            "snapshot_bytes_median": int(statistics.median(sizes)) if sizes else None,
            "snapshot_cpu_ms": round((streaming - idle) * args.seconds / len(window) * 1000, 2)
            if window else None,
            "snapshot_gap_s": [round(min(gaps), 3), round(statistics.median(gaps), 3),
                               round(max(gaps), 3)] if gaps else None,
            "appear_s": [round(x, 3) for x in latencies],
            "leave_s": [round(x, 3) for x in gone],
        }
    finally:
        procs.stop_all()


def markdown(result: dict[str, Any]) -> str:
    def spread(values: list[float]) -> str:
        return (f"{statistics.median(values):.2f} (min {min(values):.2f},"
                f" max {max(values):.2f})") if values else "n/a"

    gap = result["snapshot_gap_s"]
    return "\n".join([
        "| agents | streams | relay cores, idle | relay cores, streaming | CPU ms per snapshot"
        " | snapshot size | snapshot interval s (min/median/max) | agent appears after s"
        " | agent leaves after s |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {result['agents']} | {result['streams']} | {result['relay_cores_idle']:.4f}"
        f" | {result['relay_cores_streaming']:.4f} | {result['snapshot_cpu_ms']}"
        f" | {result['snapshot_bytes_median'] / 1024:.0f} KiB"
        f" | {'n/a' if gap is None else ' / '.join(f'{g:.2f}' for g in gap)}"
        f" | {spread(result['appear_s'])} | {spread(result['leave_s'])} |",
    ])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__.split(
        "\n\n")[0])
    p.add_argument("--agents", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=20.0, help="each CPU window")
    p.add_argument("--probes", type=int, default=5)
    p.add_argument("--streams", type=int, default=1, help="event streams open at once")
    p.add_argument("--json", help="write the results there too")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nfltr-bench-") as tmp:
        try:
            result = run(args, Path(tmp))
        except BenchError as e:
            print(f"bench.dashboard: {e}", file=sys.stderr)
            return 1
    result["command"] = "python -m bench.dashboard " + " ".join(argv or sys.argv[1:])
    print(markdown(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
