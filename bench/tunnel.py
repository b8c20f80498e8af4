"""
A TCP tunnel through nfltr (connector -> relay -> agent -> service) on
loopback, against the same service reached directly.  A benchmark, not a
test: nothing in C{tests/} runs it.

    python -m bench.tunnel [--rounds R] [--seconds S] [--quick] [--no-profile]

One relay, and for each path mode an agent (C{nfltr tcp}) and a connector
(C{nfltr tcp-connect}) per service: C{e2ee} (the default: TLS from the
connector to the agent inside the link's TLS), C{plain} (C{--e2ee false})
and C{ws} (e2ee, with the link carried over the WebSocket transport), all
started as a user would; and C{public}: an agent publishing each service on
a public port of the relay (C{--public-port 0}, the relay started with
C{--public-ports}), reached straight with no connector.  The services: C{iperf3 -s} and nginx
serving a 1 KiB file with keep-alive.  Workloads: C{bulk-1} and C{bulk-8}
(C{iperf3 -c -P 1 / 8 -t S}), C{http-1} and C{http-50} (C{wrk -t1 -c1} and
C{-t2 -c50}, C{-d S}) and C{close-50} (the same with C{Connection: close}: a
new connection, so a new tunnel session, for each request), each against
the service's port (C{direct}) and the connectors' (C{e2ee}, C{plain}), in
interleaved rounds (bulk-1 direct, e2ee, plain, bulk-8 direct, ...).

Per run: the rate (Gbit/s from iperf3's receiver, requests/s from wrk) and
the CPU seconds of the relay, the agent and the connector in use (their
process groups in C{/proc}, children included) from just before the load
generator starts to just after it ends, per GB (10^9 bytes received) or per
1,000 requests; the load average; the machine's busy cores; and the CPU the
rest of the machine used meanwhile (C{/proc/stat} less all our processes).
Runs wait (within C{--quiet-budget}) for a quiet machine; a run where others
used more than C{--max-other} of a core is repeated (C{--retries}) and the
cleanest attempt counts, as long as the cases left still fit in
C{--budget} (9 minutes).  Medians over the rounds, the spread, and
per-round ratios to C{direct} go to stdout as Markdown and to
C{docs/benchmarks/tunnel.json}.  After the rounds, the relay, agent and
connector are sampled with py-spy (C{--nonblocking}) during one more e2ee
C{http-50} and C{bulk-1} run, and their hot spots listed.

Everything runs in its own process group and is stopped at the end, on an
error, ^C or SIGTERM; the long-lived processes also die with this one if it
is killed outright (C{setpriv --pdeathsig}).  Load generators run under a
deadline.

C{--quick}: one round of 1-second runs, no warm-up, repeats, profile or JSON
(unless C{--json} is given): a smoke run of about half a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._cli import add_noise, add_output, add_profile, add_quick, add_rounds
from ._profile import Sampler, hot_spots, hot_spots_markdown
from ._stack import (
    BIG_PAGE,
    PAGE,
    Processes,
    Services,
    Tunnel,
    children_cpu,
    fetch,
    group_cpu,
    run_bounded,
    tool_versions,
    tree_state,
)
from ._system import (
    ROOT,
    BenchError,
    environment,
    loadavg,
    process_cpu,
    self_cpu,
    speed_words,
    system_cpu,
)

GB = 1e9
# A line of an nfltr process's log that is worth reading.
_COMPLAINT = re.compile(r"#(warn|error|critical)\]|\[(warn|error|critical)\]|Traceback")
DEFAULT_JSON = ROOT / "docs" / "benchmarks" / "tunnel.json"
MODES = ("direct", "e2ee", "plain", "ws", "public")
ROLES = ("relay", "agent", "connector")
# From /work/shared/PERFORMANCE.md, measured earlier on this machine kind.
YARDSTICKS = (
    "Yardsticks from PERFORMANCE.md (same machine kind, not re-measured here), direct / OpenSSH"
    " `ssh -R`: bulk 1 and 8 streams 24 / 4.0 and 24 / 3.6 Gbit/s; 1 KiB keep-alive 12.6k / 1.3k"
    " req/s at 1 connection, 68k / 4.3k at 50; a new connection each request at 50: 26.6k / 5.1k."
)

WRK_DONE = """\
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "bytes": %d, "errors": {"connect": %d, "read": %d,'
    .. ' "write": %d, "status": %d, "timeout": %d}, "latency_us": {"p50": %d, "p90": %d,'
    .. ' "p99": %d, "max": %d, "mean": %.1f}}\\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
"""


class Workload:
    """
    C{bulk-N}: iperf3 with N parallel streams; C{http-N}: wrk with N
    keep-alive connections; C{close-N}: wrk with N connections and a new
    connection for each request (C{Connection: close}); C{mib-N}: wrk with
    N keep-alive connections getting a 1 MiB file.
    """

    def __init__(self, name: str) -> None:
        kind, _, n = name.partition("-")
        if kind not in ("bulk", "http", "close", "mib") or not n.isdigit() or int(n) < 1:
            raise ValueError(name)
        self.name = name
        self.kind = kind
        self.parallel = int(n)
        self.service = "iperf3" if kind == "bulk" else "nginx"

    def run(self, port: int, seconds: int, script: Path) -> dict[str, Any]:
        """
        Run the load generator against 127.0.0.1:C{port} for C{seconds};
        what it measured.

        @raise BenchError: it failed or reported errors.
        """
        if self.kind == "bulk":
            return _iperf(port, self.parallel, seconds)
        page = BIG_PAGE if self.kind == "mib" else PAGE
        return _wrk(port, self.parallel, seconds, script, self.kind == "close", page)


def _iperf(port: int, streams: int, seconds: int) -> dict[str, Any]:
    done = run_bounded([
        "iperf3", "-c", "127.0.0.1", "-p", str(port), "-P", str(streams), "-t", str(seconds),
        "-i", "0", "-J", "--connect-timeout", "10000",
    ], seconds + 30)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        raise BenchError(f"iperf3 ({done.returncode}): {done.stdout[-500:]}{done.stderr}") from None
    if done.returncode != 0 or "error" in report:
        raise BenchError(f"iperf3 ({done.returncode}): {report.get('error')}")
    received, sent = report["end"]["sum_received"], report["end"]["sum_sent"]
    return {
        "bytes": received["bytes"], "seconds": round(received["seconds"], 3),
        "gbit_s": round(received["bits_per_second"] / 1e9, 3),
        "sent_bytes": sent["bytes"], "retransmits": sent.get("retransmits"),
        "iperf_cpu_percent": report["end"].get("cpu_utilization_percent"),
    }


def _wrk(
    port: int, connections: int, seconds: int, script: Path, close: bool, page: str = PAGE,
) -> dict[str, Any]:
    threads = min(2, connections)
    done = run_bounded([
        "wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--timeout", "5s",
        *(["-H", "Connection: close"] if close else []),
        "-s", str(script), f"http://127.0.0.1:{port}{page}",
    ], seconds + 30)
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"requests"')]
    if done.returncode != 0 or not lines:
        raise BenchError(f"wrk ({done.returncode}): {done.stdout[-500:]}{done.stderr}")
    report = json.loads(lines[-1])
    errors = sum(report["errors"].values())
    if report["requests"] == 0:
        raise BenchError(f"wrk made no request: {report}")
    latency = report["latency_us"]
    return {
        "requests": report["requests"], "seconds": round(report["duration_us"] / 1e6, 3),
        "req_s": round(report["requests"] / (report["duration_us"] / 1e6), 1),
        "bytes": report["bytes"], "errors": errors, "error_kinds": report["errors"],
        "p50_ms": latency["p50"] / 1000, "p90_ms": latency["p90"] / 1000,
        "p99_ms": latency["p99"] / 1000, "max_ms": latency["max"] / 1000,
    }


# -- accounting -----------------------------------------------------------------


def _busy(before: dict[str, float], after: dict[str, float]) -> float:
    """
    CPU seconds the machine was busy between two L{system_cpu} readings,
    interrupts included (loopback traffic's softirq work is booked there
    and, in part, in our processes' system time).
    """
    return sum(after[k] - before[k] for k in ("user", "nice", "system", "irq", "softirq"))


class Bench:
    """
    The processes of the benchmark, and runs of a workload on a path with
    their accounting and the wait for a quiet machine.

    Another stack (L{bench.replicas}) subclasses it: L{start}, L{port} and
    L{groups} say what runs and where, L{ROLES} which of L{groups}' roles
    are the tunnel's (their CPU per GB or per 1,000 requests is recorded).
    """

    ROLES: tuple[str, ...] = ROLES

    def __init__(self, args: argparse.Namespace, tmp: Path, log: Callable[[str], None]) -> None:
        self.args = args
        self.log = log
        self.tmp = tmp
        self.script = tmp / "done.lua"
        self.script.write_text(WRK_DONE)
        self.procs = Processes()
        self.quiet_left = args.quiet_budget
        self.waited = 0.0
        # For the time budget: cases still to measure, and how long one took.
        self.cases_left = 0
        self.case_seconds: list[float] = []

    def start(self) -> None:
        self.services = Services(self.tmp, self.procs, self.args.nginx_workers)
        self.tunnels: dict[str, Tunnel] = {}
        for name, tree, env in [("", None, {}), *self.args.variant_list]:
            self.tunnels[name] = Tunnel(
                self.tmp / f"stack{'-' + name if name else ''}", self.procs,
                self.services.ports, modes=self.args.path_list, tree=tree, env=env, label=name,
            )
        self.tunnel = self.tunnels[""]
        for case in self.args.cases[1:]:
            tunnel, mode = self.path(case)
            fetch(tunnel.local_port(mode, "nginx"))  # the path works

    def path(self, case: str) -> tuple[Tunnel, str]:
        """
        The stack and mode of a tunnel case (C{MODE} or C{MODE@VARIANT}).
        """
        mode, _, variant = case.partition("@")
        return self.tunnels[variant], mode

    def stop(self) -> None:
        self.procs.stop_all()

    def complaints(self) -> dict[str, list[str]]:
        """
        The warnings, errors and tracebacks each relay, agent and connector
        printed so far (at most 20 lines each).
        """
        found = {}
        for proc in self.procs.all:
            if proc.name.startswith(("relay", "agent", "connector")):
                lines = [line for line in proc.lines if _COMPLAINT.search(line)]
                if lines:
                    found[proc.name] = lines[:20]
        return found

    def memory(self) -> dict[str, int]:
        """
        The resident memory (KiB) of each relay, agent and connector.
        """
        rss = {}
        for proc in self.procs.all:
            if proc.name.startswith(("relay", "agent", "connector")):
                with open(f"/proc/{proc.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            rss[proc.name] = int(line.split()[1])
        return rss

    def port(self, workload: Workload, case: str) -> int:
        if case == "direct":
            return self.services.ports[workload.service]
        tunnel, mode = self.path(case)
        return tunnel.local_port(mode, workload.service)

    def groups(self, workload: Workload, case: str) -> dict[str, int]:
        """
        Role to process group: the relay, the path's agent and connector,
        the service, and every other process of ours as C{idle-N}.
        """
        roles: dict[str, int] = {"service": self.services.groups[workload.service].pid}
        if case != "direct":
            tunnel, mode = self.path(case)
            roles["relay"] = tunnel.relay.pid
            roles["agent"] = tunnel.agents[mode].pid
            connector = tunnel.connector_pid(mode, workload.service)
            if connector is not None:
                roles["connector"] = connector
        taken = set(roles.values())
        rest = [p.pid for p in self.procs.all if p.pid not in taken]
        roles.update({f"idle-{i}": pid for i, pid in enumerate(rest)})
        return roles

    def _snapshot(self, roles: dict[str, int], pids: tuple[int, ...]) -> dict[str, Any]:
        cpu = group_cpu(set(roles.values()))
        return {
            "t": time.monotonic(), "system": system_cpu(), "load": loadavg(),
            "roles": {role: cpu[pgid] for role, pgid in roles.items()},
            "pids": sum(process_cpu(pid) for pid in pids),
            "self": self_cpu(), "children": children_cpu(),
        }

    def patient(self) -> bool:
        """
        Whether waiting or repeating a run still leaves time, within
        C{--budget}, for the cases left (at the mean time a case took).
        """
        args = self.args
        each = statistics.mean(self.case_seconds) if self.case_seconds else args.seconds + 2
        left = time.monotonic() - args.t0 + each * (self.cases_left + 1)
        return left < args.budget

    def wait_quiet(self) -> float:
        """
        Wait, within the budget, until the machine is quiet; the busy cores
        last seen.
        """
        while True:
            before, t0 = system_cpu(), time.monotonic()
            time.sleep(0.5)
            busy = _busy(before, system_cpu()) / (time.monotonic() - t0)
            if busy <= self.args.max_other or self.quiet_left <= 0 or not self.patient():
                return busy
            spent = time.monotonic() - t0
            self.quiet_left -= spent
            self.waited += spent

    def run_once(
        self, workload: Workload, mode: str, seconds: int,
        during: Callable[[], tuple[int, ...]] | None = None,
    ) -> dict[str, Any]:
        """
        One run; its record.  C{during} is called once the stack is up and
        before the run, and returns the pids of helpers (py-spy) whose CPU
        is ours too.
        """
        self.procs.check()
        roles = self.groups(workload, mode)
        pids = during() if during is not None else ()
        before = self._snapshot(roles, pids)
        result = workload.run(self.port(workload, mode), seconds, self.script)
        time.sleep(self.args.settle)  # the tunnel's teardown of the run's sessions
        after = self._snapshot(roles, pids)
        window = after["t"] - before["t"]
        cpu = {role: after["roles"][role] - before["roles"][role] for role in roles}
        loadgen = after["children"] - before["children"]
        ours = (
            sum(cpu.values()) + loadgen + after["self"] - before["self"]
            + after["pids"] - before["pids"]
        )
        delta = {k: after["system"][k] - before["system"][k] for k in before["system"]}
        busy = _busy(before["system"], after["system"])
        other = busy - ours
        record: dict[str, Any] = {
            "workload": workload.name, "mode": mode, **result, "window_s": round(window, 3),
            "cpu_s": {role: round(v, 3) for role, v in cpu.items() if not role.startswith("idle")},
            "idle_processes_cpu_s": round(
                sum(v for role, v in cpu.items() if role.startswith("idle")), 3
            ),
            "loadgen_cpu_s": round(loadgen, 3),
            "other_cpu_s": round(other, 3), "other_cores": round(other / window, 3),
            "busy_cores": round(busy / window, 3),
            "softirq_s": round(delta["softirq"] + delta["irq"], 3),
            "steal_s": round(delta["steal"], 3),
            "load_before": before["load"], "load_after": after["load"],
        }
        tunnel = sum(cpu.get(role, 0.0) for role in self.ROLES)
        for role, value in [*((r, cpu.get(r)) for r in self.ROLES), ("tunnel", tunnel)]:
            if value is None or mode == "direct":
                continue
            record[f"{role}_cores"] = round(value / window, 3)
            if workload.kind == "bulk":
                record[f"{role}_cpu_s_per_gb"] = round(value / (result["bytes"] / GB), 3)
            else:
                record[f"{role}_cpu_s_per_1k"] = round(value / result["requests"] * 1000, 4)
        return record

    def measure(self, workload: Workload, mode: str, label: str) -> list[dict[str, Any]]:
        """
        Run until a clean run or out of retries; every attempt's record,
        the cleanest marked C{counted}.  A failed attempt is recorded with
        its C{error} (and the iperf3 server restarted).
        """
        attempts: list[dict[str, Any]] = []
        started = time.monotonic()
        for attempt in range(1, self.args.retries + 2):
            busy = self.wait_quiet()
            try:
                record = self.run_once(workload, mode, self.args.seconds)
            except BenchError as e:
                self.procs.check()  # a dead relay, agent or connector ends it all
                self.log(f"{label} {workload.name:8} {mode:6} FAILED: {e}")
                attempts.append({
                    "workload": workload.name, "mode": mode, "attempt": attempt,
                    "error": str(e), "counted": False,
                })
                if workload.kind == "bulk":
                    self.services.start_iperf()
                continue
            record.update(attempt=attempt, busy_before=round(busy, 3), counted=False)
            record["contaminated"] = record["other_cores"] > self.args.max_other
            attempts.append(record)
            self.log(f"{label} {describe(record, self.ROLES)}")
            if not record["contaminated"] or not self.patient():
                break
        self.cases_left = max(0, self.cases_left - 1)
        self.case_seconds.append((time.monotonic() - started) / len(attempts))
        good = [r for r in attempts if "error" not in r]
        if good:
            min(good, key=lambda r: r["other_cores"])["counted"] = True
        return attempts


def describe(r: dict[str, Any], roles: tuple[str, ...] = ROLES) -> str:
    """
    One line about a run, with the CPU of C{roles}.
    """
    if "gbit_s" in r:
        rate, unit, per = f"{r['gbit_s']:6.2f} Gbit/s", "CPU-s/GB", "cpu_s_per_gb"
    else:
        rate, unit, per = f"{r['req_s']:8.0f} req/s", "CPU-s/1k req", "cpu_s_per_1k"
    costs = "  ".join(
        f"{role} {r[f'{role}_{per}']:.3f}" for role in roles if f"{role}_{per}" in r
    )
    return (
        f"{r['workload']:8} {r['mode']:6} {rate}  {costs}{' ' + unit if costs else ''}"
        f"  others {r['other_cores']:.2f} cores  load {r['load_before'][0]}"
        + (f"  errors {r['errors']}" if r.get("errors") else "")
        + ("  CONTAMINATED" if r.get("contaminated") else "")
    )


# -- the benchmark ----------------------------------------------------------------


def warm_up(bench: Bench, workloads: list[Workload]) -> list[dict[str, Any]]:
    """
    One short, uncounted run of every workload through each tunnel path.
    """
    runs = []
    for workload in workloads:
        for mode in bench.args.cases[1:]:
            record = bench.run_once(workload, mode, bench.args.warmup)
            bench.log(f"warm-up {describe(record, bench.ROLES)}")
            runs.append(record)
    return runs


def run_rounds(bench: Bench, workloads: list[Workload]) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    cases = bench.args.cases
    bench.cases_left = bench.args.rounds * len(workloads) * len(cases)
    if bench.args.profile:
        bench.cases_left += len(bench.args.profile_list) * 2  # runs, and py-spy's start
    for n in range(1, bench.args.rounds + 1):
        for workload in workloads:
            # Rotate the order each round, so no case always follows another.
            shift = (n - 1) % len(cases)
            for mode in cases[shift:] + cases[:shift]:
                for record in bench.measure(workload, mode, f"round {n}"):
                    record["round"] = n
                    runs.append(record)
    return runs


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "median": round(statistics.median(values), 4), "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def summarize(
    workloads: list[Workload], runs: list[dict[str, Any]], cases: tuple[str, ...] = MODES,
    roles: tuple[str, ...] = ROLES,
) -> dict[str, Any]:
    """
    Per workload and case: medians and spread over the counted runs, the
    per-round ratios of the rate to C{direct}, and for a variant's case
    (C{MODE@VARIANT}) the per-round ratios of this tree's C{MODE} to it
    (C{current_vs_variant}: above 1, the current tree is faster) and of its
    CPU per GB or per 1,000 requests to the variant's.  C{roles}: the
    tunnel's roles, whose CPU per unit is summarised.
    """
    counted = [r for r in runs if r.get("counted")]
    summary: dict[str, Any] = {}
    for workload in workloads:
        rate = "gbit_s" if workload.kind == "bulk" else "req_s"
        per = "cpu_s_per_gb" if workload.kind == "bulk" else "cpu_s_per_1k"
        direct = {
            r["round"]: r for r in counted
            if r["workload"] == workload.name and r["mode"] == "direct"
        }
        for mode in cases:
            everything = [r for r in runs if r["workload"] == workload.name and r["mode"] == mode]
            mine = [r for r in everything if r.get("counted")]
            entry: dict[str, Any] = {
                "workload": workload.name, "mode": mode, "runs": len(mine),
                "failed": sum(1 for r in everything if "error" in r),
                "repeats": sum(1 for r in everything if r["attempt"] > 1),
                "contaminated": sum(1 for r in mine if r["contaminated"]),
                "rate": rate,
            }
            keys = [rate, "other_cores", "busy_cores", "loadgen_cpu_s"]
            keys += [f"{role}_{per}" for role in (*roles, "tunnel")]
            keys += [f"{role}_cores" for role in (*roles, "tunnel")]
            if workload.kind != "bulk":
                keys += ["p50_ms", "p99_ms", "errors"]
            for key in keys:
                values = [r[key] for r in mine if key in r]
                if values:
                    entry[key] = _spread(values)
            entry["load_1m"] = _spread([r["load_before"][0] for r in mine])
            if mode != "direct":
                ratios = [
                    r[rate] / direct[r["round"]][rate] for r in mine if r["round"] in direct
                ]
                entry["vs_direct"] = _spread(ratios)
            if "@" in mode:
                _versus(entry, mode.partition("@")[0], mine, counted, rate, per)
            summary[f"{workload.name} {mode}"] = entry
    return summary


def _versus(
    entry: dict[str, Any], current: str, variant_runs: list[dict[str, Any]],
    counted: list[dict[str, Any]], rate: str, per: str,
) -> None:
    """
    Add the per-round ratios of the current tree's case C{current} to a
    variant's runs: rate (current / variant) and CPU (current / variant).
    """
    mine = {
        r["round"]: r for r in counted
        if r["workload"] == entry["workload"] and r["mode"] == current
    }
    pairs = [(mine[r["round"]], r) for r in variant_runs if r["round"] in mine]
    entry["current_vs_variant"] = _spread([a[rate] / b[rate] for a, b in pairs])
    key = f"tunnel_{per}"
    entry["current_vs_variant_cpu"] = _spread(
        [a[key] / b[key] for a, b in pairs if a.get(key) and b.get(key)]
    )


def _num(value: float, digits: int = 2) -> str:
    if value >= 1000:  # noqa: PLR2004
        return f"{value / 1000:.1f}k"
    return f"{value:.{digits}f}"


def markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    """
    The medians tables and the spread, as Markdown.
    """
    env, tools = meta["environment"], meta["tools"]
    tree = meta["tree"]
    lines = [
        f"`{meta['command']}`, {meta['started']}, {meta.get('elapsed_s', '?')} s",
        "",
        f"{env['cpu_model']}, {env['nproc']} CPUs, Linux {env['kernel']}{speed_words(env)};"
        f" Python {env['python']},"
        f" Twisted {env['twisted']}, pyOpenSSL {env['pyopenssl']}, {env['openssl']};"
        f" nfltr {tools['nfltr']} (commit {tree['commit']}"
        f"{', modified: ' + ', '.join(tree['modified']) if tree['modified'] else ''});"
        f" iperf3 {tools['iperf3']}, nginx {tools['nginx']}, wrk {tools['wrk']}",
        "",
    ]

    def med(e: dict[str, Any], key: str, digits: int = 2) -> str:
        s = e.get(key)
        return "n/a" if s is None else _num(s["median"], digits)

    bulk = [e for e in summary.values() if e["rate"] == "gbit_s"]
    http = [e for e in summary.values() if e["rate"] == "req_s"]
    if bulk:
        lines += [
            "| load | path | Gbit/s | vs direct | relay CPU-s/GB | agent | connector |"
            " all three | busy cores (relay, agent, connector) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for e in bulk:
            lines.append(
                f"| {e['workload']} | {e['mode']} | {med(e, 'gbit_s')} | {med(e, 'vs_direct')} |"
                f" {med(e, 'relay_cpu_s_per_gb')} | {med(e, 'agent_cpu_s_per_gb')} |"
                f" {med(e, 'connector_cpu_s_per_gb')} | {med(e, 'tunnel_cpu_s_per_gb')} |"
                f" {_cores(e)} |"
            )
        lines.append("")
    if http:
        lines += [
            "| load | path | req/s | vs direct | relay CPU-s/1k req | agent | connector |"
            " all three | busy cores (relay, agent, connector) | p50 / p99 ms |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for e in http:
            lines.append(
                f"| {e['workload']} | {e['mode']} | {med(e, 'req_s', 0)} | {med(e, 'vs_direct')} |"
                f" {med(e, 'relay_cpu_s_per_1k', 3)} | {med(e, 'agent_cpu_s_per_1k', 3)} |"
                f" {med(e, 'connector_cpu_s_per_1k', 3)} | {med(e, 'tunnel_cpu_s_per_1k', 3)} |"
                f" {_cores(e)} | {med(e, 'p50_ms')} / {med(e, 'p99_ms')} |"
            )
        lines.append("")
    versus = [e for e in summary.values() if "current_vs_variant" in e]
    if versus:
        lines += [
            "This tree against each variant (per-round ratios, medians; rate above 1 and CPU"
            " below 1: this tree is better):",
            "",
            "| load | path | variant | rate: this tree ÷ variant | CPU per unit: this tree ÷"
            " variant | variant's rate |",
            "|---|---|---|---|---|---|",
        ]
        for e in versus:
            mode, _, variant = e["mode"].partition("@")
            lines.append(
                f"| {e['workload']} | {mode} | {variant} | {med(e, 'current_vs_variant')} |"
                f" {med(e, 'current_vs_variant_cpu')} |"
                f" {med(e, e['rate'], 2 if e['rate'] == 'gbit_s' else 0)} |"
            )
        lines.append("")
    lines += [
        YARDSTICKS,
        "",
        "Spread (min to max over the counted runs) and noise:",
        "",
        "| load | path | runs | rate | vs direct | relay+agent+connector CPU | machine busy (cores)"
        " | others' CPU (cores) | load avg 1 min | repeats | failed | still contaminated |"
        " HTTP errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in summary.values():
        per = "tunnel_cpu_s_per_gb" if e["rate"] == "gbit_s" else "tunnel_cpu_s_per_1k"

        def span(key: str, digits: int = 2, e: dict[str, Any] = e) -> str:
            s = e.get(key)
            if s is None:
                return "n/a"
            return f"{_num(s['min'], digits)} to {_num(s['max'], digits)}"

        errors = e.get("errors")
        digits = 2 if e["rate"] == "gbit_s" else 0
        lines.append(
            f"| {e['workload']} | {e['mode']} | {e['runs']} | {span(e['rate'], digits)} |"
            f" {span('vs_direct')} | {span(per, 3)} | {span('busy_cores')} |"
            f" {span('other_cores')} | {span('load_1m')} |"
            f" {e['repeats']} | {e['failed']} | {e['contaminated']} |"
            f" {'n/a' if errors is None else int(errors['max'])} |"
        )
    return "\n".join(lines)


def _cores(e: dict[str, Any]) -> str:
    values = [e.get(f"{role}_cores") for role in ROLES]
    if values[0] is None:
        return "n/a"
    return ", ".join("-" if v is None else f"{v['median']:.2f}" for v in values)


# -- profile ----------------------------------------------------------------------

# The command's main and the reactor's start sit under every sample: left out
# of the "total" table, which is meant to show where time goes.
_SPINE = re.compile(
    r"\((nfltr/cli/\w+|nfltr/\w+_tap|threading)\.py\)$|^react \(twisted/internet/task\.py\)"
)


def profile(bench: Bench, workloads: list[Workload], tmp: Path) -> dict[str, Any]:
    """
    For each workload, one more e2ee run with py-spy sampling the relay,
    the agent and the connector; their hot spots.
    """
    args = bench.args
    directory = Path(args.profile_dir) if args.profile_dir else tmp / "profile"
    directory.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for workload in workloads:
        mode = args.profile_mode
        targets = {"relay": bench.tunnel.relay.pid, "agent": bench.tunnel.agents[mode].pid}
        connector = bench.tunnel.connector_pid(mode, workload.service)
        if connector is not None:
            targets["connector"] = connector
        outputs = {role: directory / f"{workload.name}-{mode}-{role}.txt" for role in targets}
        spies: list[Sampler] = []

        def attach(
            targets: dict[str, int] = targets, outputs: dict[str, Path] = outputs,
            spies: list[Sampler] = spies,
        ) -> tuple[int, ...]:
            for role, pid in targets.items():
                spies.append(Sampler(pid, outputs[role], args.rate, False, ("--nonblocking",)))
                spies[-1].wait_attached()
            return tuple(s.proc.pid for s in spies)

        bench.wait_quiet()
        try:
            record = bench.run_once(workload, mode, args.profile_seconds, during=attach)
        finally:
            for spy in spies:
                spy.stop()  # SIGINT: py-spy writes what it sampled
        bench.log(f"profiled {describe(record)}")
        results[f"{workload.name} {mode}"] = {
            "run": record, "rate": args.rate, "possible": round(args.rate * record["window_s"]),
            "hot_spots": {
                role: hot_spots(path, args.top, spine=_SPINE)
                for role, path in outputs.items() if path.exists()
            },
        }
    return results




# -- command line ------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.tunnel", description=__doc__.split("\n")[1])
    add_rounds(p, 5)
    p.add_argument("--seconds", type=int, default=4, help="duration of each iperf3/wrk run")
    add_quick(p, "1 round of 1 s runs; no warm-up, repeats, profile or JSON")
    p.add_argument("--workloads", default="bulk-1,bulk-8,http-1,http-50,close-50",
                   help="bulk-N (iperf3 -P N), http-N (wrk -cN, keep-alive), close-N (wrk -cN,"
                   " a new connection each request) and mib-N (wrk -cN, keep-alive, 1 MiB),"
                   " comma-separated")
    p.add_argument("--warmup", type=int, default=1,
                   help="seconds of the uncounted warm-up run of each tunnel case (0: none)")
    p.add_argument("--paths", default=",".join(Tunnel.MODES),
                   help=f"tunnel modes measured, comma-separated ({', '.join(Tunnel.MODES)})")
    p.add_argument("--variant", action="append", default=[], metavar="NAME:SETTINGS",
                   help="also run a second stack, NAME, in the same interleaved rounds:"
                   " SETTINGS are comma-separated tree=DIR (the nfltr of another source tree,"
                   " e.g. a git worktree of HEAD) and VAR=VALUE environment variables;"
                   " repeatable. Its cases are MODE@NAME")
    p.add_argument("--nginx-workers", type=int, default=1, help="nginx worker_processes")
    add_noise(p, settle_help="the tunnel's teardown")
    p.add_argument("--profile", action=argparse.BooleanOptionalAction, default=None,
                   help="sample one more run of each --profile-workloads (default: on, but"
                   " off with --quick)")
    p.add_argument("--profile-mode", choices=Tunnel.MODES, default="e2ee")
    add_profile(p, workloads="http-50,bulk-1", seconds=5)
    add_output(p, DEFAULT_JSON)
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds, args.warmup, args.retries = 1, 1, 0, 0
        args.quiet_budget = min(args.quiet_budget, 5.0)
        args.profile = bool(args.profile)
        args.profile_seconds = min(args.profile_seconds, 2)
    elif args.profile is None:
        args.profile = True
    try:
        args.workload_list = [Workload(w.strip()) for w in args.workloads.split(",") if w.strip()]
        args.profile_list = [
            Workload(w.strip()) for w in args.profile_workloads.split(",") if w.strip()
        ]
    except ValueError as e:
        p.error(f"not a workload: {e} (bulk-N, http-N, close-N or mib-N)")
    if args.rounds < 1 or args.seconds < 1 or not args.workload_list:
        p.error("--rounds, --seconds and --workloads need at least 1")
    args.path_list = tuple(m.strip() for m in args.paths.split(",") if m.strip())
    if not args.path_list or not set(args.path_list) <= set(Tunnel.MODES):
        p.error(f"--paths: give some of {', '.join(Tunnel.MODES)}")
    try:
        args.variant_list = [parse_variant(v) for v in args.variant]
    except ValueError as e:
        p.error(f"--variant: {e}")
    args.cases = ("direct", *args.path_list, *(
        f"{mode}@{name}" for name, _, _ in args.variant_list for mode in args.path_list
    ))
    return args


def parse_variant(spec: str) -> tuple[str, Path | None, dict[str, str]]:
    """
    C{NAME:tree=DIR,VAR=VALUE,...}: the variant's name, tree and environment.

    @raise ValueError: saying what is wrong.
    """
    name, _, settings = spec.partition(":")
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
        raise ValueError(f"{spec!r}: the name must be lowercase letters, digits, - or _")
    tree, env = None, {}
    for item in filter(None, settings.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r} is not KEY=VALUE")
        if key == "tree":
            tree = Path(value).resolve()
            if not (tree / "nfltr" / "__init__.py").exists():
                raise ValueError(f"{tree} holds no nfltr package")
        else:
            env[key] = value
    return name, tree, env


def report(doc: dict[str, Any]) -> None:
    """
    Print the tables of a run.
    """
    print(markdown(doc["summary"], doc))
    if "profile" in doc:
        print()
        print(hot_spots_markdown(doc["profile"]))


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _missing_tool(args: argparse.Namespace) -> str | None:
    for tool in ("iperf3", "nginx", "wrk", "setpriv", *(["py-spy"] if args.profile else [])):
        if not any((Path(d) / tool).exists() for d in os.environ["PATH"].split(os.pathsep)):
            return tool
    return None


def benchmark(args: argparse.Namespace, doc: dict[str, Any]) -> int:
    """
    Start everything, run the rounds (and the profile) into C{doc}, stop
    everything; the exit status.
    """
    with tempfile.TemporaryDirectory(prefix="nfltr-bench-tunnel-") as tmp:
        bench = Bench(args, Path(tmp), _log)
        try:
            bench.start()
            _log(f"services {bench.services.ports}, relay {bench.tunnel.info['tls']}")
            if args.warmup:
                doc["warmups"] = warm_up(bench, args.workload_list)
            runs = run_rounds(bench, args.workload_list)
            summary = summarize(args.workload_list, runs, args.cases)
            doc["rss_kib_after_rounds"] = bench.memory()
            doc["complaints"] = bench.complaints()
            if doc["complaints"]:
                _log(f"nfltr processes complained: {json.dumps(doc['complaints'], indent=1)}")
            doc.update(runs=runs, summary=summary, waited_for_quiet_s=round(bench.waited, 1))
            if args.profile:
                doc["profile"] = profile(bench, args.profile_list, Path(tmp))
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
        report(json.loads(args.report.read_text()))
        return 0
    # SIGTERM and SIGHUP unwind like ^C: everything started is stopped.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _: sys.exit(128 + n))
    # py-spy is installed next to this Python (the venv), maybe not on PATH.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    missing = _missing_tool(args)
    if missing is not None:
        _log(f"{missing} is missing: apt-get install -y iperf3 nginx wrk; pip install py-spy")
        return 1
    # The environment that changes what the nfltr processes do.
    settings = [
        f"{k}={v}" for k, v in sorted(os.environ.items())
        if k == "GLIBC_TUNABLES" or (k.startswith("NFLTR_") and k != "NFLTR_KEY")
    ]
    command = shlex.join([*settings, "python", "-m", "bench.tunnel", *argv])
    meta: dict[str, Any] = {
        "command": command, "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": environment(), "tools": tool_versions(), "tree": tree_state(),
    }
    _log(json.dumps(meta))
    t0 = args.t0 = time.monotonic()
    doc: dict[str, Any] = {**meta, "config": {
        k: v for k, v in vars(args).items()
        if k not in ("json", "report", "t0", "workload_list", "profile_list")
    }}
    status = benchmark(args, doc)
    if status != 0:
        return status
    doc["elapsed_s"] = round(time.monotonic() - t0, 1)
    report(doc)
    out = args.json or (None if args.quick else DEFAULT_JSON)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        _log(f"wrote {out}")
    _log(f"done in {doc['elapsed_s']}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
