"""
nfltr against peers and a direct connection, on loopback:

    python -m bench.peers [--rounds 3] [--seconds 3] [--tools T1,T2,...]
                          [--loads L1,L2,...] [--quick] [--report JSON]

(also C{python -m bench}).  The services (C{iperf3 -s}; nginx serving 1 KiB
and 1 MiB files with keep-alive over HTTP and HTTPS) run throughout.  Each
round sets up each tool in turn (L{bench.peers.adapters}), measures it idle,
runs every load it carries (L{bench.peers.loads}), restarts its relay, and
tears it down (L{bench.peers.run}); after each round 200 agents register
with nfltr and with sshd (L{bench.peers.fleet}).  Medians, per-round ratios
and the issue's targets (L{bench.peers.report}) go to stdout and
C{docs/benchmarks/peers.md} as Markdown, to C{docs/benchmarks/peers.json},
and as plots to C{docs/benchmarks/peers_*.png}.  A tool whose programs are
not installed is skipped, with the reason in the report.

Needs C{apt-get install iperf3 nginx wrk openssh-server openssh-client
socat haproxy pagekite} and matplotlib (C{pip install -e '.[bench]'}).
C{--quick}: one round of 1-second runs, 2 s idle, 20 agents, no JSON or
plots unless asked (a smoke run of a few minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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

from .._cli import add_noise, add_output, add_quick, add_rounds, comma_list
from .._stack import Processes, Services, tool_versions, tree_state
from .._system import ROOT, BenchError, environment
from .adapters import DEFAULT_TOOLS, TLS_HOST, TOOLS, versions
from .fleet import FLEET_TOOLS
from .loads import ALL, WRK_SCRIPT, Load
from .report import check_targets, markdown, plots, summarize
from .run import Config, Runner

OUT = ROOT / "docs" / "benchmarks"
DEFAULT_JSON = OUT / "peers.json"
#: Open files wanted: 1,000 visitor connections pass through several
#: processes of ours, each holding two sockets per connection.
NOFILE = 16384


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n")[1])
    add_rounds(p, 3)
    p.add_argument("--seconds", type=int, default=3, help="duration of each iperf3/wrk run")
    add_quick(p, "1 round of 1 s runs, 2 s idle, 20 agents; no JSON or plots unless asked")
    p.add_argument("--tools", default=",".join(DEFAULT_TOOLS),
                   help=f"comma-separated, in the order of a round ({', '.join(TOOLS)})")
    p.add_argument("--resumption-ab", action="store_true",
                   help="also run nfltr-e2ee-full (the e2ee tunnel without TLS resumption) right"
                   " after nfltr-e2ee, for the new-connection rows (close-N) with and without it")
    p.add_argument("--loads", "--workloads", default=",".join(ALL),
                   help="bulk-N (iperf3 -P N), http-N (wrk -cN, 1 KiB, keep-alive), close-N"
                   " (a new connection each request), mib-N (1 MiB, keep-alive); comma-separated")
    p.add_argument("--idle-seconds", type=float, default=10.0,
                   help="seconds each tool is measured idle after it starts (0: not)")
    p.add_argument("--warmup", type=int, default=1,
                   help="seconds of an uncounted run after each start (0: none)")
    p.add_argument("--restarts", type=int, default=2, help="relay restarts per tool and round")
    p.add_argument("--agents", type=int, default=200,
                   help="agents registering at once after each round (0: not measured)")
    p.add_argument("--fleet", default=",".join(FLEET_TOOLS),
                   help="the tools of the agents row (nfltr, ssh)")
    add_noise(p, settle_help="the teardown of the run's connections", max_other=0.25,
              quiet_budget=120.0, budget=None)
    p.add_argument("--quiet-wait", type=float, default=5.0,
                   help="seconds at most to wait for a quiet machine before one run")
    p.add_argument("--retry-budget", type=float, default=600.0,
                   help="seconds of repeated (contaminated) runs in all, at most")
    p.add_argument("--nginx-workers", type=int, default=1, help="nginx worker_processes")
    add_output(p, DEFAULT_JSON)
    p.add_argument("--plots", action=argparse.BooleanOptionalAction, default=None,
                   help="write the PNG plots next to the JSON (default: on, off with --quick)")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds, args.retries = 1, 1, 0
        args.idle_seconds, args.restarts = min(args.idle_seconds, 2.0), min(args.restarts, 1)
        args.agents = min(args.agents, 20)
        args.quiet_budget = min(args.quiet_budget, 10.0)
    args.tool_list = comma_list(args.tools)
    if args.resumption_ab and "nfltr-e2ee-full" not in args.tool_list:
        at = args.tool_list.index("nfltr-e2ee") + 1 if "nfltr-e2ee" in args.tool_list else 0
        args.tool_list.insert(at, "nfltr-e2ee-full")
    unknown = set(args.tool_list) - set(TOOLS)
    if unknown:
        p.error(f"unknown tools: {', '.join(sorted(unknown))} (known: {', '.join(TOOLS)})")
    try:
        args.load_list = [Load.parse(name) for name in comma_list(args.loads)]
    except ValueError as e:
        p.error(f"not a load: {e} (bulk-N, http-N, close-N or mib-N)")
    args.fleet_list = comma_list(args.fleet)
    if not set(args.fleet_list) <= set(FLEET_TOOLS):
        p.error(f"--fleet: some of {', '.join(FLEET_TOOLS)}")
    if args.rounds < 1 or args.seconds < 1:
        p.error("--rounds and --seconds need at least 1")
    return args


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def missing_services() -> list[str]:
    return [p for p in ("iperf3", "nginx", "wrk", "setpriv") if shutil.which(p) is None]


def nfltr_status() -> list[str]:
    """
    C{git status --short nfltr}: what of the library differs from the
    commit (others may be changing the data path meanwhile).
    """
    try:
        done = subprocess.run(
            ["git", "status", "--short", "nfltr"], capture_output=True, text=True, cwd=ROOT,
            timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ["(git status failed)"]
    return done.stdout.splitlines()


def raise_nofile(want: int = NOFILE) -> tuple[int, int]:
    """
    Raise this process's open-file limit (which every child inherits) to
    C{want}, or as far as the hard limit allows; the limit now.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.report is not None:
        doc = json.loads(args.report.read_text())
        print(markdown(doc))
        return 0
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _: sys.exit(128 + n))
    absent = missing_services()
    if absent:
        _log(f"missing: {', '.join(absent)} (apt-get install -y iperf3 nginx wrk util-linux)")
        return 1
    nofile = raise_nofile()
    skipped = {name: why for name in args.tool_list if (why := TOOLS[name].missing())}
    for name, why in skipped.items():
        _log(f"skipping {name}: {why}")
    tools = [t for t in args.tool_list if t not in skipped]
    fleet = [f for f in args.fleet_list if not (f == "ssh" and "ssh" in skipped)]
    config = Config(
        rounds=args.rounds, seconds=args.seconds, tools=tools, loads=args.load_list,
        idle_seconds=args.idle_seconds, warmup=args.warmup, restarts=args.restarts,
        agents=args.agents, fleet=fleet, max_other=args.max_other, retries=args.retries,
        settle=args.settle, quiet_wait=args.quiet_wait, quiet_budget=args.quiet_budget,
        retry_budget=args.retry_budget,
    )
    meta: dict[str, Any] = {
        "command": shlex.join(["python", "-m", "bench.peers", *argv]),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": environment(), "tools": tool_versions(), "versions": versions(),
        "tree": {**tree_state(), "nfltr_status": nfltr_status()},
        "rounds": args.rounds, "seconds": args.seconds,
        "tools_run": tools, "skipped": skipped, "loads": [x.name for x in args.load_list],
        "nofile": list(nofile), "notes": {t: TOOLS[t].note for t in tools},
        "restart_notes": {t: TOOLS[t].restart_note for t in tools if TOOLS[t].restart_note},
        "config": {k: v for k, v in vars(config).items() if k != "loads"},
    }
    _log(f"tools {tools}; tree {meta['tree']['commit']}, git status --short nfltr:"
         f" {meta['tree']['nfltr_status'] or 'clean'}")
    started = time.monotonic()
    procs = Processes()
    try:
        with tempfile.TemporaryDirectory(prefix="nfltr-peers-") as name:
            tmp = Path(name)
            script = tmp / "wrk.lua"
            script.write_text(WRK_SCRIPT)
            services = Services(tmp, procs, args.nginx_workers, [TLS_HOST, "localhost"])
            runner = Runner(config, tmp, services, script, _log)
            try:
                runner.run()
            except KeyboardInterrupt:
                _log("interrupted: stopping everything; reporting what was measured")
            runs = runner.runs
    except BenchError as e:
        _log(f"bench.peers: {e}")
        return 1
    finally:
        procs.stop_all()
    meta["elapsed_s"] = round(time.monotonic() - started, 1)
    write(args, meta, runs)
    _log(f"done in {meta['elapsed_s']} s")
    return 0


def write(args: argparse.Namespace, meta: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    """
    Summarize the runs; print the report, and write it (Markdown, JSON,
    plots) where asked.
    """
    summary = summarize(runs, meta["tools_run"], meta["loads"])
    doc = {"meta": meta, "summary": summary, "targets": check_targets(summary), "runs": runs}
    text = markdown(doc)
    print(text)
    out = args.json or (None if args.quick else DEFAULT_JSON)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        out.with_suffix(".md").write_text(f"# bench.peers\n\n{text}")
        _log(f"wrote {out} and {out.with_suffix('.md')}")
    if args.plots or (args.plots is None and out is not None):
        for path in plots(doc, out.parent if out else OUT, out.stem if out else "peers"):
            _log(f"wrote {path}")


if __name__ == "__main__":
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    sys.exit(main())
