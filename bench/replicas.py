# -*- test-case-name: tests.bench.test_replicas -*-
"""
Two relays as one cluster: a TCP tunnel through replica A to an agent held
by replica B (C{cross}: the session is carried over the replica link)
against the same tunnel through B alone (C{same}), in the same interleaved
rounds.  A benchmark, not a test.

    python -m bench.replicas [--rounds R] [--seconds S] [--idle N] [--idle-only] [--quick]

A C{redis-server} on a unix socket is the directory; replicas A and B
(C{nfltr relay --directory redis+unix://... --replica-listen ...
--cluster-ca ...}), one agent on B (C{nfltr tcp}, e2ee, sharing the
iperf3, nginx and idle-holder ports) and, for each service, a connector
(C{nfltr tcp-connect}) through A and one through B (L{bench._replica_stack}).
Workloads and accounting are L{bench.tunnel}'s: C{bulk-1} and C{bulk-8}
(iperf3 C{-P 1 / 8}), C{http-1} and C{http-50} (wrk, 1 KiB keep-alive),
each against the service itself (C{direct}), C{cross} and C{same}, rotated
each round; the CPU of relay A, relay B, the agent and the connector per GB
or per 1,000 requests; medians, spread and per-round ratios C{cross ÷
same} (the target: at least 0.9 for bulk-1 and bulk-8).

Then the idle sessions: C{--idle} connections (default 1,000) through the
connector on A to a holder service behind the agent on B, each a tunnel
session over the replica link, held open; the RSS of both relays, the
agent and that connector before and after (each the median of a few
samples once settled), in KiB per session (the target: at most 2.5 on each
replica); then the same through the connector on B alone, beside it (what
the replica hop adds).  Nothing can make the processes collect garbage from
outside: the figures are settled, not collected.  C{--idle-only} skips the
throughput rounds.

Markdown goes to stdout, JSON to C{docs/benchmarks/replicas.json}
(C{--json}).  C{--quick}: one round of 1-second runs, 20 idle sessions, no
JSON unless C{--json}: a smoke run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._cli import add_noise, add_output, add_quick, add_rounds
from ._replica_stack import (
    CASES,
    Cluster,
    Holder,
    close_all,
    open_idle,
    raise_nofile,
    rss_kib,
)
from ._stack import Services, tool_versions, tree_state
from ._system import ROOT, BenchError, environment, speed_words
from .tunnel import Bench, Workload, run_rounds, summarize, warm_up

DEFAULT_JSON = ROOT / "docs" / "benchmarks" / "replicas.json"
ROLES = ("relay-a", "relay-b", "agent", "connector")
#: Targets of issue 17: cross ÷ same for bulk-1 and bulk-8, and KiB per
#: forwarded idle session on each replica.
RATIO_TARGET = 0.9
IDLE_KIB_TARGET = 2.5
#: How the idle sessions' memory is read: seconds to settle (C{--idle-settle}),
#: then samples this far apart (their median counts).
IDLE_SETTLE = 2.0
IDLE_SAMPLES = 3
IDLE_SAMPLE_GAP = 0.5
HOLD = "hold"
#: Fewer idle sessions than this give no per-session figure to judge (RSS
#: moves in pages).
FEW_SESSIONS = 200


class ReplicaBench(Bench):
    """
    L{Bench} on a L{Cluster}: cases C{direct}, C{cross} and C{same}.
    """

    ROLES = ROLES

    def start(self) -> None:
        self.services = Services(self.tmp, self.procs, self.args.nginx_workers)
        self.holder = Holder()
        ports = {**self.services.ports, HOLD: self.holder.port}
        self.cluster = Cluster(self.tmp, self.procs, ports)
        self.cluster.wait_routed()

    def stop(self) -> None:
        super().stop()
        holder = getattr(self, "holder", None)
        if holder is not None:
            holder.close()

    def port(self, workload: Workload, case: str) -> int:
        if case == "direct":
            return self.services.ports[workload.service]
        return self.cluster.local_port(case, workload.service)

    def groups(self, workload: Workload, case: str) -> dict[str, int]:
        """
        Role to process group: both relays, the agent and the case's
        connector, the service, and every other process of ours as
        C{idle-N}.
        """
        roles: dict[str, int] = {"service": self.services.groups[workload.service].pid}
        if case != "direct":
            cluster = self.cluster
            roles["relay-a"] = cluster.relays["a"].pid
            roles["relay-b"] = cluster.relays["b"].pid
            roles["agent"] = cluster.agent.pid
            roles["connector"] = cluster.connectors[case, workload.service][0].pid
        taken = set(roles.values())
        rest = [p.pid for p in self.procs.all if p.pid not in taken]
        roles.update({f"idle-{i}": pid for i, pid in enumerate(rest)})
        return roles

    def idle_pids(self, case: str) -> dict[str, int]:
        """
        Role to pid of the processes whose memory the idle sessions of
        C{case} are measured in.
        """
        cluster = self.cluster
        return {
            "relay-a": cluster.relays["a"].pid, "relay-b": cluster.relays["b"].pid,
            "agent": cluster.agent.pid, "connector": cluster.connectors[case, HOLD][0].pid,
        }


def settled_rss(pids: dict[str, int], settle: float) -> dict[str, int]:
    """
    After C{settle} seconds, the median of L{IDLE_SAMPLES} readings of each
    process's RSS (KiB).
    """
    time.sleep(settle)
    samples: dict[str, list[int]] = {role: [] for role in pids}
    for i in range(IDLE_SAMPLES):
        if i:
            time.sleep(IDLE_SAMPLE_GAP)
        for role, pid in pids.items():
            samples[role].append(rss_kib(pid))
    return {role: int(statistics.median(values)) for role, values in samples.items()}


def idle_sessions(bench: ReplicaBench, count: int, case: str = "cross") -> dict[str, Any]:
    """
    Hold C{count} idle sessions through C{case}'s replica (C{cross}: A,
    C{same}: B) to the holder behind B; the RSS before and after and the
    KiB per session of each process.
    """
    bench.procs.check()
    pids = bench.idle_pids(case)
    settle = bench.args.idle_settle
    before = settled_rss(pids, settle)
    port = bench.cluster.local_port(case, HOLD)
    started = time.monotonic()
    clients = open_idle(port, count, bench.holder, timeout=max(30.0, count / 10))
    opened = time.monotonic() - started
    try:
        after = settled_rss(pids, settle)
        bench.procs.check()
    finally:
        close_all(clients)
        bench.holder.release()
    per = {role: round((after[role] - before[role]) / count, 3) for role in pids}
    return {
        "case": case, "sessions": count, "open_s": round(opened, 2), "rss_kib_before": before,
        "rss_kib_after": after, "kib_per_session": per,
        "within_target": all(per[r] <= IDLE_KIB_TARGET for r in ("relay-a", "relay-b")),
    }


def cross_vs_same(runs: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """
    Add to each C{cross} entry of C{summary} the per-round ratios of its
    rate to C{same}'s (C{vs_same}), and whether their median meets the
    target for bulk loads.
    """
    counted = [r for r in runs if r.get("counted")]
    for entry in summary.values():
        if entry["mode"] != "cross":
            continue
        rate = entry["rate"]
        same = {
            r["round"]: r[rate] for r in counted
            if r["workload"] == entry["workload"] and r["mode"] == "same"
        }
        ratios = [
            r[rate] / same[r["round"]] for r in counted
            if r["workload"] == entry["workload"] and r["mode"] == "cross"
            and same.get(r["round"])
        ]
        if ratios:
            entry["vs_same"] = {
                "median": round(statistics.median(ratios), 4),
                "min": round(min(ratios), 4), "max": round(max(ratios), 4),
            }
            if entry["workload"].startswith("bulk-"):
                entry["meets_target"] = entry["vs_same"]["median"] >= RATIO_TARGET


def _med(entry: dict[str, Any], key: str, digits: int = 2) -> str:
    spread = entry.get(key)
    if spread is None:
        return "n/a"
    value = spread["median"]
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.{digits}f}"  # noqa: PLR2004


def markdown(doc: dict[str, Any]) -> str:
    """
    The medians, the ratios and the idle sessions, as Markdown.
    """
    env, tools, tree = doc["environment"], doc["tools"], doc["tree"]
    lines = [
        f"`{doc['command']}`, {doc['started']}, {doc.get('elapsed_s', '?')} s",
        "",
        f"{env['cpu_model']}, {env['nproc']} CPUs, Linux {env['kernel']}{speed_words(env)};"
        f" Python {env['python']},"
        f" Twisted {env['twisted']}; nfltr {tools['nfltr']} (commit {tree['commit']}"
        f"{', modified: ' + ', '.join(tree['modified']) if tree['modified'] else ''});"
        f" redis-server {doc.get('redis', '?')}, iperf3 {tools['iperf3']}, nginx {tools['nginx']},"
        f" wrk {tools['wrk']}",
    ]
    if doc.get("summary"):
        lines += ["", *_rates(doc["summary"])]
    if doc.get("idle"):
        lines += ["", *_idle(doc["idle"], doc.get("idle_same"))]
    if doc.get("complaints"):
        lines += ["", "nfltr processes complained (see the JSON's `complaints`)."]
    return "\n".join(lines)


def _rates(summary: dict[str, Any]) -> list[str]:
    lines = [
        "cross: connector → replica A → replica link → replica B → agent; same: connector →"
        " replica B → agent.  CPU per GB (bulk) or per 1,000 requests (http), medians.",
        "",
        "| load | path | rate | cross ÷ same (min to max) | relay A | relay B | agent |"
        " connector | all four | runs | failed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in summary.values():
        bulk = e["rate"] == "gbit_s"
        per = "cpu_s_per_gb" if bulk else "cpu_s_per_1k"
        digits = 2 if bulk else 3
        unit = "Gbit/s" if bulk else "req/s"
        ratio = e.get("vs_same")
        versus = "" if ratio is None else (
            f"{ratio['median']:.2f} ({ratio['min']:.2f} to {ratio['max']:.2f})"
            + ("" if "meets_target" not in e else (" ✓" if e["meets_target"] else " ✗"))
        )
        costs = " | ".join(_med(e, f"{role}_{per}", digits) for role in (*ROLES, "tunnel"))
        if e["mode"] == "direct":
            costs = " | ".join("" for _ in range(len(ROLES) + 1))
        lines.append(
            f"| {e['workload']} | {e['mode']} | {_med(e, e['rate'], 2 if bulk else 0)} {unit} |"
            f" {versus} | {costs} | {e['runs']} | {e['failed']} |"
        )
    return [*lines, "", f"Target: cross ÷ same ≥ {RATIO_TARGET} for bulk-1 and bulk-8"
            " (✓ met, ✗ not)."]


def _idle(cross: dict[str, Any], same: dict[str, Any] | None) -> list[str]:
    lines = [
        f"{cross['sessions']} idle sessions through A to the agent on B (opened in"
        f" {cross['open_s']} s), RSS settled; beside it the same through B alone:",
        "",
        "| process | before KiB | after KiB | KiB per session | through B alone |",
        "|---|---|---|---|---|",
    ]
    for role, per in cross["kib_per_session"].items():
        alone = "n/a" if same is None else f"{same['kib_per_session'][role]:.2f}"
        lines.append(
            f"| {role} | {cross['rss_kib_before'][role]} | {cross['rss_kib_after'][role]} |"
            f" {per:.2f} | {alone} |"
        )
    verdict = "met" if cross["within_target"] else "not met"
    if cross["sessions"] < FEW_SESSIONS:
        verdict += " (too few sessions to tell: a smoke run)"
    return [
        *lines, "",
        f"Target: at most {IDLE_KIB_TARGET} KiB per session on each replica (through A):"
        f" {verdict}.",
    ]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.replicas",
                                description=__doc__.split("\n")[1])
    add_rounds(p, 5)
    p.add_argument("--seconds", type=int, default=4, help="duration of each iperf3/wrk run")
    add_quick(p, "1 round of 1 s runs, 20 idle sessions; no warm-up, repeats or JSON")
    p.add_argument("--workloads", default="bulk-1,bulk-8,http-1,http-50",
                   help="bulk-N (iperf3 -P N) and http-N (wrk -cN, keep-alive), comma-separated")
    p.add_argument("--warmup", type=int, default=1,
                   help="seconds of the uncounted warm-up run of each tunnel case (0: none)")
    p.add_argument("--idle", type=int, default=1000,
                   help="idle sessions held through A to the agent on B (0: none)")
    p.add_argument("--idle-only", action="store_true",
                   help="only the idle sessions' memory: no throughput rounds")
    p.add_argument("--idle-settle", type=float, default=IDLE_SETTLE,
                   help="seconds before the idle sessions' memory is read, and before the"
                   " baseline")
    p.add_argument("--nginx-workers", type=int, default=1, help="nginx worker_processes")
    add_noise(p, settle_help="the tunnel's teardown")
    add_output(p, DEFAULT_JSON)
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds, args.warmup, args.retries = 1, 1, 0, 0
        args.quiet_budget = 0.0  # a smoke run does not wait for a quiet machine
        args.idle, args.idle_settle = min(args.idle, 20), min(args.idle_settle, 0.5)
    try:
        args.workload_list = [Workload(w.strip()) for w in args.workloads.split(",") if w.strip()]
    except ValueError as e:
        p.error(f"not a workload: {e}")
    if any(w.kind not in ("bulk", "http") for w in args.workload_list):
        p.error("--workloads: bulk-N and http-N only")
    if args.rounds < 1 or args.seconds < 1 or not args.workload_list or args.idle < 0:
        p.error("--rounds, --seconds and --workloads need at least 1, --idle at least 0")
    if args.idle_only and not args.idle:
        p.error("--idle-only needs --idle above 0")
    # What Bench and run_rounds read.
    args.cases = ("direct", *CASES)
    args.profile = False
    return args


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _missing_tool() -> str | None:
    for tool in ("redis-server", "iperf3", "nginx", "wrk", "setpriv"):
        if not any((Path(d) / tool).exists() for d in os.environ["PATH"].split(os.pathsep)):
            return tool
    return None


def _redis_version() -> str:
    from ._stack import run_bounded

    done = run_bounded(["redis-server", "--version"], 10)
    words = [w for w in done.stdout.split() if w.startswith("v=")]
    return words[0][2:] if words else "unknown"


def benchmark(args: argparse.Namespace, doc: dict[str, Any]) -> int:
    """
    Start everything, run the rounds and the idle sessions into C{doc},
    stop everything; the exit status.
    """
    with tempfile.TemporaryDirectory(prefix="nfltr-bench-replicas-") as tmp:
        bench = ReplicaBench(args, Path(tmp), _log)
        try:
            bench.start()
            doc["start_s"] = round(time.monotonic() - args.t0, 1)
            _log(f"services {bench.services.ports}, replicas A {bench.cluster.infos['a']['tls']}"
                 f" and B {bench.cluster.infos['b']['tls']}")
            if not args.idle_only:
                if args.warmup:
                    doc["warmups"] = warm_up(bench, args.workload_list)
                runs = run_rounds(bench, args.workload_list)
                summary = summarize(args.workload_list, runs, args.cases, ROLES)
                cross_vs_same(runs, summary)
                doc.update(runs=runs, summary=summary, waited_for_quiet_s=round(bench.waited, 1))
            if args.idle:
                doc["idle"] = idle_sessions(bench, args.idle)
                # The same through B alone: what the replica hop adds.
                doc["idle_same"] = idle_sessions(bench, args.idle, "same")
                _log(f"idle sessions: {json.dumps(doc['idle']['kib_per_session'])} KiB each")
            doc["complaints"] = bench.complaints()
            if doc["complaints"]:
                _log(f"nfltr processes complained: {json.dumps(doc['complaints'], indent=1)}")
        except BenchError as e:
            _log(f"benchmark failed: {e}")
            return 1
        except KeyboardInterrupt:
            _log("interrupted: stopping everything")
            return 130
        finally:
            bench.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.report is not None:
        print(markdown(json.loads(args.report.read_text())))
        return 0
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _: sys.exit(128 + n))
    missing = _missing_tool()
    if missing is not None:
        _log(f"{missing} is missing: apt-get install -y redis-server iperf3 nginx wrk")
        return 1
    nofile = raise_nofile()
    meta: dict[str, Any] = {
        "command": shlex.join(["python", "-m", "bench.replicas", *argv]),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": environment(), "tools": tool_versions(), "tree": tree_state(),
        "redis": _redis_version(), "rlimit_nofile": list(nofile),
    }
    _log(json.dumps(meta))
    t0 = args.t0 = time.monotonic()
    doc: dict[str, Any] = {**meta, "config": {
        k: v for k, v in vars(args).items() if k not in ("json", "report", "t0", "workload_list")
    }}
    status = benchmark(args, doc)
    if status != 0:
        return status
    doc["elapsed_s"] = round(time.monotonic() - t0, 1)
    print(markdown(doc))
    out = args.json or (None if args.quick else DEFAULT_JSON)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        _log(f"wrote {out}")
    _log(f"done in {doc['elapsed_s']}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
