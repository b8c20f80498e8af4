"""
nfltr against peers on loopback:

    python -m bench.peers [--rounds R] [--seconds S] [--tools direct,nfltr,ssh,socat]
                          [--workloads bulk-1,http-1,http-50] [--json PATH]

The services (C{iperf3 -s}, nginx serving 1 KiB with keep-alive:
L{bench._stack.Services}) run throughout.  Each round sets up each tool in
turn (L{bench.peers.adapters}), runs every workload through it
(C{bulk-1}: C{iperf3 -P 1}; C{http-1}, C{http-50}: C{wrk} with 1 and 50
keep-alive connections, as in L{bench.tunnel}), and tears it down again:
direct, nfltr, ssh, socat, direct, nfltr, ...  Per run: the rate and the
CPU seconds of the tool's process trees (from C{/proc}) per GB received or
per 1,000 requests.  Medians over the rounds go to stdout as Markdown and
to C{docs/benchmarks/peers.json}.  Not in this slice: pagekite, haproxy.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._stack import Processes, Services, tool_versions, tree_state
from .._system import ROOT, BenchError, environment, loadavg
from ..tunnel import WRK_DONE, Workload
from .adapters import TOOLS, TreeCpu, versions

GB = 1e9
THOUSAND = 1000
DEFAULT_JSON = ROOT / "docs" / "benchmarks" / "peers.json"


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_tool(
    name: str, tmp: Path, ports: dict[str, int], workloads: list[Workload], seconds: int,
    script: Path, round_: int,
) -> list[dict[str, Any]]:
    tool = TOOLS[name](tmp / f"{name}-{round_}", ports)
    runs = []
    try:
        started = time.monotonic()
        visitor = tool.start()
        setup = time.monotonic() - started
        for workload in workloads:
            tool.check()
            roots = tool.roots()
            meter = TreeCpu(roots)
            meter.start()
            try:
                result = workload.run(visitor[workload.service], seconds, script)
            finally:
                cpu = meter.stop()
            tool.check()
            if workload.kind == "bulk":
                per = cpu / (result["bytes"] / GB)
                rate = result["gbit_s"]
            else:
                per = cpu / (result["requests"] / 1000)
                rate = result["req_s"]
            run = {
                "round": round_, "tool": name, "workload": workload.name, "rate": rate,
                "cpu_s": round(cpu, 3), "cpu_per_unit": round(per, 4) if roots else None,
                "setup_s": round(setup, 2), "loadavg": loadavg()[0], **result,
            }
            _log(f"round {round_} {name:6} {workload.name:8} {rate:>10} cpu {cpu:.2f}s")
            runs.append(run)
    finally:
        tool.stop()
    return runs


def summarize(
    tools: list[str], workloads: list[Workload], runs: list[dict[str, Any]]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for w in workloads:
        row: dict[str, Any] = {}
        for t in tools:
            mine = [r for r in runs if r["tool"] == t and r["workload"] == w.name]
            if not mine:
                continue
            pers = [r["cpu_per_unit"] for r in mine if r["cpu_per_unit"] is not None]
            row[t] = {
                "rate": statistics.median(r["rate"] for r in mine),
                "rates": [r["rate"] for r in mine],
                "cpu_per_unit": statistics.median(pers) if pers else None,
                "cpu_per_units": pers,
                "setup_s": statistics.median(r["setup_s"] for r in mine),
            }
        out[w.name] = row
    return out


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def _num(v: float | None) -> str:
    if v is None:
        return "n/a"
    if v >= 10 * THOUSAND:
        return f"{v / THOUSAND:.1f}k"
    return f"{v:.0f}" if v >= THOUSAND / 10 else f"{v:.3g}"


def markdown(summary: dict[str, Any], tools: list[str], meta: dict[str, Any]) -> str:
    env, ver = meta["environment"], meta["versions"]
    lines = [
        f"`{meta['command']}`, {meta['started']}, {meta['elapsed_s']:.0f} s",
        "",
        f"{env['cpu_model']}, {env['nproc']} CPUs, Linux {env['kernel']}; Python {env['python']},"
        f" Twisted {env['twisted']}, {env['openssl']}; nfltr {meta['tools']['nfltr']}"
        f" (commit {meta['tree']['commit']}); {ver['openssh']}; {ver['socat']};"
        f" iperf3 {meta['tools']['iperf3']}, nginx {meta['tools']['nginx']},"
        f" wrk {meta['tools']['wrk']}",
        "",
        "Rate (Gbit/s for bulk, requests/s for http), medians over the rounds:",
        "",
        "| load | " + " | ".join(tools) + " | nfltr ÷ ssh | nfltr ÷ direct |",
        "|---|" + "---|" * (len(tools) + 2),
    ]
    for load, row in summary.items():
        rate = {t: row[t]["rate"] if t in row else None for t in tools}
        lines.append(
            f"| {load} | " + " | ".join(_num(rate[t]) for t in tools)
            + f" | {_ratio(rate.get('nfltr'), rate.get('ssh'))}"
            + f" | {_ratio(rate.get('nfltr'), rate.get('direct'))} |"
        )
    tunnels = [t for t in tools if t != "direct"]
    lines += [
        "",
        "CPU seconds of the tool's processes (all of them: relay, exposer and visitor side)"
        " per GB (bulk) or per 1,000 requests (http), medians:",
        "",
        "| load | " + " | ".join(tunnels) + " | nfltr ÷ ssh |",
        "|---|" + "---|" * (len(tunnels) + 1),
    ]
    for load, row in summary.items():
        per = {t: row[t]["cpu_per_unit"] if t in row else None for t in tunnels}
        lines.append(
            f"| {load} | " + " | ".join(
                "n/a" if per[t] is None else f"{per[t]:.3f}" for t in tunnels
            ) + f" | {_ratio(per.get('nfltr'), per.get('ssh'))} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n")[1])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=3)
    p.add_argument("--tools", default=",".join(TOOLS))
    p.add_argument("--workloads", default="bulk-1,http-1,http-50")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    p.add_argument("--no-json", action="store_true")
    args = p.parse_args(argv)
    args.tools = args.tools.split(",")
    unknown = set(args.tools) - set(TOOLS)
    if unknown:
        p.error(f"unknown tools: {sorted(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    workloads = [Workload(w) for w in args.workloads.split(",")]
    started = time.monotonic()
    meta: dict[str, Any] = {
        "command": shlex.join(["python", "-m", "bench.peers", *argv]),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": environment(), "tools": tool_versions(), "versions": versions(),
        "tree": tree_state(), "rounds": args.rounds, "seconds": args.seconds,
        "not_in_this_slice": ["pagekite", "haproxy"],
    }
    procs = Processes()
    runs: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="nfltr-peers-") as name:
            tmp = Path(name)
            script = tmp / "done.lua"
            script.write_text(WRK_DONE)
            services = Services(tmp, procs, nginx_workers=1)
            for round_ in range(1, args.rounds + 1):
                for tool in args.tools:
                    runs += run_tool(
                        tool, tmp, services.ports, workloads, args.seconds, script, round_
                    )
    except BenchError as e:
        print(f"bench.peers: {e}", file=sys.stderr)
        return 1
    finally:
        procs.stop_all()
    meta["elapsed_s"] = round(time.monotonic() - started, 1)
    summary = summarize(args.tools, workloads, runs)
    print(markdown(summary, args.tools, meta))
    if not args.no_json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"meta": meta, "summary": summary, "runs": runs}, indent=1) + "\n"
        )
        _log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
