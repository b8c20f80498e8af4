# -*- test-case-name: tests.bench.test_soak -*-
"""
A fault soak of several relays as one (not part of CI):

    python -m bench.soak [--duration 1800] [--interval 120] [--agents 30]
    python -m bench.soak --quick        # a smoke run of about a minute

It starts C{redis-server} (Debian C{redis-server}) and three replicas
sharing it (L{bench._soak_cluster}), agents spread over them and visitors
on every path through every replica (L{bench._soak_fleet}), then injects a
fault every C{--interval} seconds in rotation (L{bench._soak_faults}) for
C{--duration} seconds.  It prints, as Markdown, the availability of each
path outside fault windows, the failed visits of each fault, recovery
times and the growth of RSS, descriptors and Redis keys
(L{bench._soak_report}), and writes them with every fault's record as JSON.
Every process runs in a process group of its own and is stopped on exit,
^C and SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._cli import add_quick, comma_list
from ._soak_cluster import Cluster, Processes
from ._soak_faults import KINDS, Fault, Injector, recovered, rotation
from ._soak_fleet import Fleet
from ._soak_report import growth, markdown, summarize
from ._soak_visits import Visitors
from ._system import ROOT, BenchError

DEFAULT_JSON = ROOT / "docs" / "benchmarks" / "soak.json"
#: The link's liveness with the default preset (5 s + 10 s): a SIGSTOP held past it is noticed.
LIVENESS = 15.0
#: --quick: its duration, interval, hold, agents and drain timeout.
QUICK = {"duration": 75.0, "interval": 14.0, "hold": 3.0, "agents": 5, "drain_timeout": 2.0}


def _log(text: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--duration", type=float, default=1800.0,
                        help="seconds of visits and faults after the start")
    parser.add_argument("--interval", type=float, default=120.0,
                        help="seconds between two faults' starts")
    parser.add_argument("--hold", type=float, default=LIVENESS + 5,
                        help="seconds a replica stays stopped, partitioned, or Redis down")
    parser.add_argument("--agents", type=int, default=30, help="agents (OpenSSH's not counted)")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--faults", type=comma_list, default=list(KINDS),
                        help=f"the rotation, in order (of {', '.join(KINDS)})")
    parser.add_argument("--pace", type=float, default=1.0, help="seconds between visits of a path")
    parser.add_argument("--visit-timeout", type=float, default=10.0)
    parser.add_argument("--presence-ttl", type=float, default=15.0, help="the replicas' own")
    parser.add_argument("--drain-timeout", type=float, default=10.0, help="the replicas' own")
    parser.add_argument("--warmup-timeout", type=float, default=60.0,
                        help="seconds every path has to answer once before the first fault")
    parser.add_argument("--log-level", default="warn", help="the replicas' own")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--json", type=Path, default=None,
                        help="where the results go (default: docs/benchmarks/soak.json; "
                        "none with --quick)")
    add_quick(parser, "about a minute, few agents, short holds")
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            if f"--{name.replace('_', '-')}" not in argv:
                setattr(args, name, value)
    unknown = set(args.faults) - set(KINDS)
    if unknown or not args.faults:
        parser.error(f"--faults takes some of {', '.join(KINDS)}")
    return args


def snapshot(fleet: Fleet, cluster: Cluster, now: float) -> dict[str, Any]:
    """
    RSS and open descriptors of every live process, and Redis's key count.
    """
    processes = {}
    for name, pid in fleet.processes().items():
        try:
            with open(f"/proc/{pid}/status") as f:
                rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except (OSError, StopIteration):
            continue
        processes[name] = {"pid": pid, "rss_kib": rss, "fds": fds}
    return {"time": round(now, 1), "processes": processes, "redis_keys": cluster.redis.keys()}


class Soak:
    """
    One run: the cluster, the fleet, the visitors and the faults.
    """

    def __init__(self, args: argparse.Namespace, tmp: Path, procs: Processes) -> None:
        self.args = args
        self.cluster = Cluster(tmp, procs, args.replicas, ssh=True,
                               presence_ttl=args.presence_ttl, drain_timeout=args.drain_timeout,
                               log_level=args.log_level)
        _log(f"redis on {self.cluster.redis.port}, replicas {self.cluster.addresses()}")
        self.fleet = Fleet(tmp, procs, self.cluster, args.agents)
        _log(f"{len(self.fleet.visits)} paths; skipped: {self.fleet.skipped or 'none'}")
        self.origin = time.monotonic()
        self.visitors = Visitors(self.fleet.visits, self.origin, args.pace, args.visit_timeout)
        self.injector = Injector(self.cluster, args.hold, self.visitors.now, self.fleet.supervise)
        self.faults: list[Fault] = []
        self.samples: list[dict[str, Any]] = []

    def sample(self) -> dict[str, Any]:
        taken = snapshot(self.fleet, self.cluster, self.visitors.now())
        self.samples.append(taken)
        return taken

    def wait_recovered(self, since: float, until: float) -> float | None:
        """
        Wait until every path answered after C{since}, at most until
        C{until} (the soak's clock); when it did.
        """
        paths = list(self.fleet.visits)
        while self.visitors.now() < until:
            done = recovered(list(self.visitors.visits), paths, since)
            if done is not None:
                return done
            self.injector.wait(0.5)
        return None

    def run(self) -> dict[str, Any]:
        args = self.args
        self.visitors.start()
        ready = self.wait_recovered(0.0, args.warmup_timeout)
        _log("every path answered" if ready is not None else "not every path answered: going on")
        schedule = rotation(args.faults, args.replicas)
        next_at = self.visitors.now() + args.interval / 2
        while next_at + args.interval / 2 <= args.duration:
            self.injector.wait(max(0.0, next_at - self.visitors.now()))
            self.sample()
            kind, target = next(schedule)
            fault = self.injector.run(kind, target)
            # A fault that took longer than planned (a rolling restart) still gets an
            # interval to recover in; the next one comes after it.
            next_at = max(next_at + args.interval, fault.undone + args.interval / 2)
            fault.recovered = self.wait_recovered(fault.undone, next_at)
            self.faults.append(fault)
            took = "not recovered" if fault.recovered is None else (
                f"recovered after {fault.recovered - fault.start:.1f} s")
            _log(f"{fault.label} at {fault.start:.0f} s: {took}")
        self.injector.wait(max(0.0, args.duration - self.visitors.now()))
        end = self.visitors.now()
        last = self.sample()
        # The first snapshot after a quiet start: the one taken before the first fault.
        first = self.samples[0]
        self.visitors.stop()
        visits = [v for v in self.visitors.visits if v.start < end]
        config = {k: v for k, v in vars(args).items() if k not in ("json",)}
        config["agents"] = sum(len(names) for names in self.fleet.names.values())
        summary = summarize(visits, self.faults, end, growth(first, last), config)
        summary["skipped"] = self.fleet.skipped
        summary["samples"] = self.samples
        summary["complaints"] = self.cluster.procs.complaints()
        summary["exited"] = [proc.name for proc in self.cluster.procs.all
                             if proc.popen.poll() is not None]
        return summary


def soak(args: argparse.Namespace) -> dict[str, Any] | None:
    """
    Run the soak; its summary, or L{None} when it could not start.
    """
    tmp = Path(tempfile.mkdtemp(prefix="nfltr-soak-"))
    procs = Processes()
    run: Soak | None = None
    try:
        run = Soak(args, tmp, procs)
        return run.run()
    except BenchError as e:
        _log(f"soak failed: {e}")
        return None
    finally:
        if run is not None:
            run.visitors.halt()
            run.cluster.close()
        stop_together(procs)
        if args.keep:
            _log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def stop_together(procs: Processes, grace: float = 15.0) -> None:
    """
    SIGTERM every process group at once (thawed first), SIGKILL those still
    there after C{grace} seconds.
    """
    for sig in (signal.SIGCONT, signal.SIGTERM):
        for proc in procs.all:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
    deadline = time.monotonic() + grace
    for proc in procs.all:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(max(0.1, deadline - time.monotonic()))
    for proc in procs.all:
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    procs.stop_all()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if shutil.which("redis-server") is None:
        _log("redis-server is missing: apt-get install -y redis-server")
        return 1
    # SIGTERM and SIGHUP unwind like ^C: everything started is stopped.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _: sys.exit(128 + n))
    started = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        summary = soak(args)
    except KeyboardInterrupt:
        _log("interrupted: everything stopped")
        return 130
    if summary is None:
        return 1
    summary.update(command=shlex.join(["python", "-m", "bench.soak", *argv]), started=started)
    print(markdown(summary, summary["skipped"]))
    out = args.json or (None if args.quick else DEFAULT_JSON)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(summary, indent=1, default=str) + "\n")
        _log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
