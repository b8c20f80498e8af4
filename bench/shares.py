"""
Share URLs (C{nfltr http}) on loopback, in each mode, against the same
nginx reached directly.  A benchmark, not a test.

    python -m bench.shares [--rounds R] [--duration S] [--quick] [--profile]

One relay and one agent per share mode (C{e2ee}, C{inspect},
C{passthrough}), started as a user would; one nginx (one worker) serving a
1 KiB and a 1 MiB file over plain HTTP (behind the e2ee and inspect shares)
and over TLS (behind the passthrough share, with a certificate for its name
from a CA made here).  The paths, each driven by wrk:

  - C{http}: nginx's plain port directly;
  - C{tls}: nginx's TLS port directly (the honest baseline: a share adds
    TLS; for passthrough the only baseline);
  - C{e2ee}, C{inspect}, C{passthrough}: C{https://NAME.localhost:PORT/}
    through the relay's TLS port, each agent with its request inspector
    on (C{nfltr http}'s default, on port 0 here);
  - C{e2ee-bare}, C{inspect-bare} (only when named in C{--paths}): the
    same modes with C{--inspect-ui none}, to measure the inspector's cost.

wrk connects to 127.0.0.1 but sends the URL's host as the TLS server name
and in C{Host} (its Lua script replaces C{wrk.resolve}: C{NAME.localhost}
does not resolve through getaddrinfo here, and no C{/etc/hosts} entry is
needed).  wrk verifies no certificate.  Workloads, C{SIZE-keep|close-N}:
C{1k-keep-1}, C{1k-close-1}, C{1k-keep-50}, C{1k-close-50} and C{1m-keep-50}:
N connections (C{wrk -t1} for one, C{-t2} otherwise) GETting the file, with
keep-alive or with C{Connection: close} (wrk then opens a new connection,
with a full TLS handshake: it offers the last session but neither nginx as
configured here nor nfltr resumes one; see C{tls} in the JSON).

Per run: requests/s (wrk), the CPU of the relay, the path's agent and nginx
(their process groups, C{/proc/PID/stat} utime + stime, children included)
from just before wrk starts to C{--settle} seconds after it ends, per 1,000
requests; the connections nginx accepted per request (the agents' pools);
the load average before and after; the machine's busy cores and the CPU the
rest of the machine used (C{/proc/stat} less our processes).  Runs wait
(within C{--quiet-budget}) for a quiet machine; a run where others used more
than C{--max-other} of a core is repeated (C{--retries}) and the cleanest
attempt counts, while the cases left fit in C{--budget}.  Rounds are
interleaved (every path of a workload, the order rotating each round, then
the next workload) and ratios to the direct paths are taken per round, then
the median.  Markdown to stdout, everything to C{docs/benchmarks/shares.json}
(C{--update-doc}: also the generated tables into C{docs/benchmarks.md},
between its C{shares:begin} and C{shares:end} markers).

The relay runs with C{--per-source-rate none}: all the load comes from
127.0.0.1, and the default (200 new connections a second per source after a
burst of 2,000) caps the close workloads, as designed (C{--relay-limits}
keeps it; wrk then counts the refused connections as connect errors).

C{--what-if NAME} (repeatable) starts the relay and agents with a patch of
nfltr from C{bench/whatif/} (a C{sitecustomize.py} put first on their
C{PYTHONPATH}) to measure a candidate fix; its results go to
C{docs/benchmarks/shares_NAME.json}, never over the main ones.

C{--quick}: one round of 1-second runs, no warm-up or repeats, no JSON
(unless C{--json}): a smoke run of about a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._cli import add_noise, add_output, add_profile, add_quick, add_rounds
from ._profile import Sampler, hot_spots, hot_spots_markdown
from ._shares_stack import (
    FILES,
    MODES,
    SHARE_DOMAIN,
    SHARE_PATHS,
    Nginx,
    Shares,
    fetch,
    tls_parameters,
)
from ._stack import Processes, children_cpu, group_cpu, run_bounded, tool_versions, tree_state
from ._system import ROOT, BenchError, environment, loadavg, process_cpu, self_cpu, system_cpu
from .tunnel import _COMPLAINT, WRK_DONE, _busy, _num, _spread

DEFAULT_JSON = ROOT / "docs" / "benchmarks" / "shares.json"
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- shares:begin (python -m bench.shares --update-doc) -->", "<!-- shares:end -->"
PATHS = ("http", "tls", *SHARE_PATHS)
BASELINES = ("http", "tls")
DIRECT_NAME = "direct"  # the host name wrk sends to nginx directly over plain HTTP
ROLES = ("relay", "agent")
WHAT_IF = {
    "relay-nodelay": ROOT / "bench" / "whatif" / "relay_nodelay",
    "pool-64": ROOT / "bench" / "whatif" / "pool_64",
    "full-path": ROOT / "bench" / "whatif" / "full_path",
}
DEFAULT_WORKLOADS = "1k-keep-1,1k-close-1,1k-keep-50,1k-close-50,1m-keep-50"
#: The kinds of workload: keep-alive and close (wrk), h2 (h2load).
KINDS = ("keep", "close", "h2")

# wrk connects to 127.0.0.1, whatever the URL's host (which it still sends
# as the TLS server name and in Host).
WRK_SCRIPT = """\
wrk.resolve = function(host, service)
  wrk.addrs = wrk.lookup("127.0.0.1", service)
end
""" + WRK_DONE


@dataclass(frozen=True)
class Workload:
    """
    C{SIZE-keep-N} / C{SIZE-close-N}: N connections GETting the C{SIZE}
    file (see L{FILES}), with keep-alive or a new connection each request
    (wrk); C{SIZE-h2-N}: one HTTP/2 connection with N streams at once
    (h2load), on the TLS paths only (nginx's plain port speaks HTTP/1.1).
    """

    name: str
    size: str
    keep: bool
    connections: int
    #: Streams at once on one HTTP/2 connection (h2load); 0: HTTP/1.1 (wrk).
    streams: int = 0

    @classmethod
    def parse(cls, name: str) -> Workload:
        size, kind, n = [*name.split("-"), "", ""][:3]
        if size not in FILES or kind not in KINDS or not n.isdigit() or int(n) < 1:
            raise ValueError(name)
        if kind == "h2":
            return cls(name, size, True, 1, int(n))
        return cls(name, size, kind == "keep", int(n))

    def runs_on(self, path: str) -> bool:
        """
        Whether this workload runs on C{path}.
        """
        return not (self.streams and path == "http")

    @property
    def path(self) -> str:
        return FILES[self.size][0]

    @property
    def body_size(self) -> int:
        return FILES[self.size][1]


_H2LOAD_DONE = re.compile(r"finished in ([\d.]+)s, ([\d.]+) req/s")
_H2LOAD_REQUESTS = re.compile(
    r"requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, "
    r"(\d+) errored, (\d+) timeout")
_H2LOAD_TRAFFIC = re.compile(r"traffic: .*?\((\d+)\) total")
_H2LOAD_LATENCY = re.compile(r"time for request:\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+"
                             r"([\d.]+)(us|ms|s)")
_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def run_h2load(url: str, workload: Workload, seconds: int) -> dict[str, Any]:
    """
    h2load against C{url} over HTTP/2 (connecting to 127.0.0.1, the URL's
    host sent as the TLS server name and C{:authority}) for C{seconds}:
    one connection, C{workload.streams} streams at once.

    @raise BenchError: it failed, or negotiated no HTTP/2.
    """
    port = url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
    done = run_bounded([
        "h2load", "-c1", f"-m{workload.streams}", f"-D{seconds}", "--connect-to",
        f"127.0.0.1:{port}", url,
    ], seconds + 30)
    if done.returncode != 0:
        raise BenchError(f"h2load ({done.returncode}): {done.stdout[-500:]}{done.stderr}")
    return parse_h2load(done.stdout)


def parse_h2load(out: str) -> dict[str, Any]:
    """
    What h2load printed: the requests that succeeded (2xx) and their rate
    over its own duration, the bytes, the mean time for a request, and
    the others (4xx/5xx, errored, timed out) as errors.

    @raise BenchError: no summary, no HTTP/2, or no request succeeded.
    """
    finished, counts = _H2LOAD_DONE.search(out), _H2LOAD_REQUESTS.search(out)
    if finished is None or counts is None or "Application protocol: h2" not in out:
        raise BenchError(f"h2load: no HTTP/2 summary in {out[-500:]}")
    seconds_run = float(finished.group(1))
    succeeded = int(counts.group(3))
    if succeeded == 0:
        raise BenchError(f"h2load made no request: {out[-500:]}")
    traffic = _H2LOAD_TRAFFIC.search(out)
    total = int(traffic.group(1)) if traffic else 0
    latency = _H2LOAD_LATENCY.search(out)
    mean = float(latency.group(5)) * _UNITS_MS[latency.group(6)] if latency else None
    errors = sum(int(counts.group(i)) for i in (4, 5, 6))
    return {
        "requests": succeeded, "seconds": round(seconds_run, 3),
        "req_s": round(succeeded / seconds_run, 1), "bytes": total,
        "mb_s": round(total / seconds_run / 1e6, 1),
        "bytes_per_request": round(total / succeeded),
        "errors": errors, "error_kinds": {"failed": int(counts.group(4)),
                                          "errored": int(counts.group(5)),
                                          "timeout": int(counts.group(6))},
        "mean_ms": mean,
    }


def run_wrk(url: str, workload: Workload, seconds: int, script: Path) -> dict[str, Any]:
    """
    wrk against C{url} (connecting to 127.0.0.1) for C{seconds}; what it
    measured.

    @raise BenchError: it failed.
    """
    threads = min(2, workload.connections)
    done = run_bounded([
        "wrk", f"-t{threads}", f"-c{workload.connections}", f"-d{seconds}s", "--timeout", "5s",
        *([] if workload.keep else ["-H", "Connection: close"]), "-s", str(script), url,
    ], seconds + 30)
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"requests"')]
    if done.returncode != 0 or not lines:
        raise BenchError(f"wrk ({done.returncode}): {done.stdout[-500:]}{done.stderr}")
    report = json.loads(lines[-1])
    if report["requests"] == 0:
        raise BenchError(f"wrk made no request: {report}")
    seconds_run = report["duration_us"] / 1e6
    latency = report["latency_us"]
    return {
        "requests": report["requests"], "seconds": round(seconds_run, 3),
        "req_s": round(report["requests"] / seconds_run, 1),
        "bytes": report["bytes"], "mb_s": round(report["bytes"] / seconds_run / 1e6, 1),
        "bytes_per_request": round(report["bytes"] / report["requests"]),
        "errors": sum(report["errors"].values()), "error_kinds": report["errors"],
        "p50_ms": latency["p50"] / 1000, "p90_ms": latency["p90"] / 1000,
        "p99_ms": latency["p99"] / 1000, "max_ms": latency["max"] / 1000,
    }


class Bench:
    """
    The processes, and runs of a workload on a path with their accounting
    and the wait for a quiet machine.
    """

    def __init__(self, args: argparse.Namespace, tmp: Path, log: Callable[[str], None]) -> None:
        self.args = args
        self.log = log
        self.tmp = tmp
        self.script = tmp / "wrk.lua"
        self.script.write_text(WRK_SCRIPT)
        self.procs = Processes()
        self.quiet_left = args.quiet_budget
        self.waited = 0.0
        self.cases_left = 0
        self.case_seconds: list[float] = []

    def start(self) -> dict[str, Any]:
        """
        Start nginx, the relay and the agents; check every path serves both
        files (verifying TLS: nginx's by the CA made here, the shares' by
        the share CA) and what TLS wrk gets on each.  What was found.
        """
        self.nginx = Nginx(
            self.tmp, self.procs, self.args.nginx_workers, [share_host("passthrough")]
        )
        wanted = tuple(p for p in SHARE_PATHS if p in MODES or p in self.args.path_list)
        self.shares = Shares(self.tmp, self.procs, self.nginx, relay_args(self.args), wanted)
        found: dict[str, Any] = {"urls": self.shares.urls, "tls": {}}
        for path in ("http", "tls", *wanted):
            port, host, ca = self.endpoint(path)
            for size in FILES:
                status, body = fetch(port, FILES[size][0], host, ca)
                if status != 200 or body != self.nginx.body(size):  # noqa: PLR2004
                    raise BenchError(f"{path}: GET {FILES[size][0]} gave {status}, {len(body)} B")
            if path != "http":
                found["tls"][path] = tls_parameters(port, host, self.tmp)
        return found

    def endpoint(self, path: str) -> tuple[int, str, str | None]:
        """
        The port, host name and CA (None: plain HTTP) of a path.
        """
        if path == "http":
            return self.nginx.http_port, f"{DIRECT_NAME}.{SHARE_DOMAIN}", None
        if path == "tls":
            return self.nginx.tls_port, share_host("passthrough"), str(self.nginx.ca)
        ca = str(self.nginx.ca) if path == "passthrough" else self.shares.share_ca
        return self.shares.port, share_host(path), ca

    def url(self, path: str, workload: Workload) -> str:
        port, host, ca = self.endpoint(path)
        return f"{'http' if ca is None else 'https'}://{host}:{port}{workload.path}"

    def stop(self) -> None:
        self.procs.stop_all()

    def complaints(self) -> dict[str, list[str]]:
        """
        The warnings, errors and tracebacks the relay and agents printed
        (at most 20 lines each), and nginx's error log.
        """
        found = {}
        for proc in self.procs.all:
            if proc.name.startswith(("relay", "agent")):
                lines = [line for line in proc.lines if _COMPLAINT.search(line)]
                if lines:
                    found[proc.name] = lines[:20]
        log = self.nginx.dir / "error.log"
        if log.exists() and log.read_text().strip():
            found["nginx"] = log.read_text().splitlines()[-20:]
        return found

    def memory(self) -> dict[str, int]:
        """
        The resident memory (KiB) of the relay and each agent.
        """
        rss = {}
        for proc in self.procs.all:
            if proc.name.startswith(("relay", "agent")):
                with open(f"/proc/{proc.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            rss[proc.name] = int(line.split()[1])
        return rss

    def groups(self, path: str) -> dict[str, int]:
        """
        Role to process group: nginx, the relay and the path's agent, and
        every other process of ours as C{idle-N}.
        """
        roles: dict[str, int] = {"nginx": self.nginx.proc.pid}
        if path in SHARE_PATHS:
            roles["relay"] = self.shares.relay.pid
            roles["agent"] = self.shares.agents[path].pid
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
        Whether waiting or repeating still leaves time, within C{--budget},
        for the cases left (at the mean time a case took).
        """
        args = self.args
        each = statistics.mean(self.case_seconds) if self.case_seconds else args.duration + 2
        return time.monotonic() - args.t0 + each * (self.cases_left + 1) < args.budget

    def wait_quiet(self) -> float:
        """
        Wait, within the budget, until the machine is quiet; the busy cores
        last seen.
        """
        while True:
            before, t0 = system_cpu(), time.monotonic()
            time.sleep(0.4)
            busy = _busy(before, system_cpu()) / (time.monotonic() - t0)
            if busy <= self.args.max_other or self.quiet_left <= 0 or not self.patient():
                return busy
            spent = time.monotonic() - t0
            self.quiet_left -= spent
            self.waited += spent

    def run_once(
        self, workload: Workload, path: str, seconds: int,
        during: Callable[[], tuple[int, ...]] | None = None,
    ) -> dict[str, Any]:
        """
        One run; its record.  C{during} is called just before it and returns
        the pids of helpers (py-spy) whose CPU is ours too.
        """
        self.procs.check()
        roles = self.groups(path)
        pids = during() if during is not None else ()
        status_before = self.nginx.status()
        before = self._snapshot(roles, pids)
        url = self.url(path, workload)
        result = (run_h2load(url, workload, seconds) if workload.streams
                  else run_wrk(url, workload, seconds, self.script))
        time.sleep(self.args.settle)  # the teardown of the run's connections
        after = self._snapshot(roles, pids)
        status_after = self.nginx.status()
        window = after["t"] - before["t"]
        cpu = {role: after["roles"][role] - before["roles"][role] for role in roles}
        loadgen = after["children"] - before["children"]
        ours = (
            sum(cpu.values()) + loadgen + after["self"] - before["self"]
            + after["pids"] - before["pids"]
        )
        busy = _busy(before["system"], after["system"])
        other = busy - ours
        requests = result["requests"]
        # The second status request is one connection and one request of its own.
        accepted = status_after["accepted"] - status_before["accepted"] - 1
        served = status_after["requests"] - status_before["requests"] - 1
        record: dict[str, Any] = {
            "workload": workload.name, "path": path, **result, "window_s": round(window, 3),
            "cpu_s": {role: round(v, 3) for role, v in cpu.items() if not role.startswith("idle")},
            "idle_processes_cpu_s": round(
                sum(v for role, v in cpu.items() if role.startswith("idle")), 3
            ),
            "wrk_cpu_s": round(loadgen, 3),
            "other_cpu_s": round(other, 3), "other_cores": round(other / window, 3),
            "busy_cores": round(busy / window, 3),
            "load_before": before["load"], "load_after": after["load"],
            "nginx_conns_per_request": round(accepted / requests, 4),
            "nginx_requests_per_request": round(served / requests, 4),
            "short_bodies": result["bytes_per_request"] < workload.body_size,
        }
        per_role = {role: cpu.get(role) for role in (*ROLES, "nginx")}
        per_role["wrk"] = loadgen
        if path in SHARE_PATHS:
            per_role["nfltr"] = sum(cpu[role] for role in ROLES)
        for role, value in per_role.items():
            if value is None:
                continue
            record[f"{role}_cores"] = round(value / window, 3)
            record[f"{role}_cpu_s_per_1k"] = round(value / requests * 1000, 4)
            record[f"{role}_cpu_s_per_gb"] = round(value / (result["bytes"] / 1e9), 3)
        return record

    def measure(self, workload: Workload, path: str, label: str) -> list[dict[str, Any]]:
        """
        Run until a clean run or out of retries; every attempt's record,
        the cleanest marked C{counted}.
        """
        attempts: list[dict[str, Any]] = []
        started = time.monotonic()
        for attempt in range(1, self.args.retries + 2):
            busy = self.wait_quiet()
            try:
                record = self.run_once(workload, path, self.args.duration)
            except BenchError as e:
                self.procs.check()  # a dead relay or agent ends it all
                self.log(f"{label} {workload.name:11} {path:11} FAILED: {e}")
                attempts.append({
                    "workload": workload.name, "path": path, "attempt": attempt,
                    "error": str(e), "counted": False,
                })
                continue
            record.update(attempt=attempt, busy_before=round(busy, 3), counted=False)
            record["contaminated"] = record["other_cores"] > self.args.max_other
            attempts.append(record)
            self.log(f"{label} {describe(record)}")
            if not record["contaminated"] or not self.patient():
                break
        self.cases_left = max(0, self.cases_left - 1)
        self.case_seconds.append((time.monotonic() - started) / len(attempts))
        good = [r for r in attempts if "error" not in r]
        if good:
            min(good, key=lambda r: r["other_cores"])["counted"] = True
        return attempts


# All the load comes from 127.0.0.1: the relay's per-source connection rate
# (200/s after a burst of 2,000 by default) would cap the close workloads.
NO_SOURCE_RATE = ("--per-source-rate", "none")


def relay_args(args: argparse.Namespace) -> tuple[str, ...]:
    """
    What the benchmark adds to the relay's command line.
    """
    return () if args.relay_limits else NO_SOURCE_RATE


def share_host(mode: str) -> str:
    return f"bench-{mode}.{SHARE_DOMAIN}"


def describe(r: dict[str, Any]) -> str:
    """
    One line about a run.
    """
    costs = "  ".join(
        f"{role} {r[f'{role}_cpu_s_per_1k']:.3f}"
        for role in (*ROLES, "nginx") if f"{role}_cpu_s_per_1k" in r
    )
    return (
        f"{r['workload']:11} {r['path']:11} {r['req_s']:8.0f} req/s  {costs} CPU-s/1k req"
        f"  nginx conns/req {r['nginx_conns_per_request']:.2f}"
        f"  others {r['other_cores']:.2f} cores  load {r['load_before'][0]}->{r['load_after'][0]}"
        + (f"  errors {r['errors']} {r['error_kinds']}" if r.get("errors") else "")
        + ("  SHORT BODIES" if r.get("short_bodies") else "")
        + ("  CONTAMINATED" if r.get("contaminated") else "")
    )


# -- the benchmark ----------------------------------------------------------------


def warm_up(bench: Bench, workloads: list[Workload], paths: list[str]) -> list[dict[str, Any]]:
    """
    One short, uncounted run of every workload through each share.
    """
    runs = []
    for workload in workloads:
        for path in paths:
            if path in SHARE_PATHS and workload.runs_on(path):
                record = bench.run_once(workload, path, bench.args.warmup)
                bench.log(f"warm-up {describe(record)}")
                runs.append(record)
    return runs


def run_rounds(bench: Bench, workloads: list[Workload], paths: list[str]) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    bench.cases_left = bench.args.rounds * sum(
        1 for workload in workloads for path in paths if workload.runs_on(path))
    for n in range(1, bench.args.rounds + 1):
        for workload in workloads:
            shift = (n - 1) % len(paths)
            for path in paths[shift:] + paths[:shift]:
                if not workload.runs_on(path):
                    continue
                for record in bench.measure(workload, path, f"round {n}"):
                    record["round"] = n
                    runs.append(record)
    return runs


KEYS = [
    "req_s", "mb_s", "p50_ms", "p99_ms", "errors", "other_cores", "busy_cores",
    "nginx_conns_per_request", "nginx_requests_per_request",
    *(f"{role}_{unit}" for role in (*ROLES, "nfltr", "nginx", "wrk")
      for unit in ("cpu_s_per_1k", "cpu_s_per_gb", "cores")),
]


def summarize(
    workloads: list[Workload], paths: list[str], runs: list[dict[str, Any]]
) -> dict[str, Any]:
    """
    Per workload and path: medians and spread over the counted runs, and
    the per-round ratios of requests/s to each direct path.  A counted run
    still contaminated (others kept the machine busy through every attempt)
    is left out when the case has clean runs, and so are the ratios of its
    round.
    """
    used: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for workload in workloads:
        for path in paths:
            counted = [
                r for r in runs
                if r["workload"] == workload.name and r["path"] == path and r.get("counted")
            ]
            clean = [r for r in counted if not r["contaminated"]]
            used[workload.name, path] = clean or counted
    summary: dict[str, Any] = {}
    for workload in workloads:
        base = {
            b: {r["round"]: r for r in used.get((workload.name, b), [])} for b in BASELINES
        }
        for path in paths:
            if not workload.runs_on(path):
                continue
            everything = [r for r in runs if r["workload"] == workload.name and r["path"] == path]
            counted = [r for r in everything if r.get("counted")]
            mine = used[workload.name, path]
            entry: dict[str, Any] = {
                "workload": workload.name, "path": path, "runs": len(mine),
                "failed": sum(1 for r in everything if "error" in r),
                "repeats": sum(1 for r in everything if r["attempt"] > 1),
                "contaminated": sum(1 for r in mine if r["contaminated"]),
                "dropped": len(counted) - len(mine),
                "short_bodies": sum(1 for r in mine if r["short_bodies"]),
            }
            for key in KEYS:
                values = [r[key] for r in mine if key in r]
                if values:
                    entry[key] = _spread(values)
            entry["load_1m_before"] = _spread([r["load_before"][0] for r in mine])
            entry["load_1m_after"] = _spread([r["load_after"][0] for r in mine])
            for b in BASELINES:
                if path == b or (path == "passthrough" and b == "http"):
                    continue  # passthrough's service speaks TLS: only tls compares
                ratios = [
                    r["req_s"] / base[b][r["round"]]["req_s"] for r in mine if r["round"] in base[b]
                ]
                entry[f"vs_{b}"] = _spread(ratios)
                entry[f"vs_{b}_rounds"] = len(ratios)
            summary[f"{workload.name} {path}"] = entry
    return summary


LABELS = {
    "http": "direct HTTP", "tls": "direct TLS", "e2ee": "e2ee share", "inspect": "inspect share",
    "passthrough": "passthrough share", "e2ee-bare": "e2ee share, no inspector",
    "inspect-bare": "inspect share, no inspector",
}


def markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    """
    The medians table and the spread, as Markdown.
    """
    env, tools, tree = meta["environment"], meta["tools"], meta["tree"]
    modified = ", modified: " + ", ".join(tree["modified"]) if tree["modified"] else ""
    lines = [
        f"`{meta['command']}`, {meta['started']}, {meta.get('elapsed_s', '?')} s",
        "",
        f"{env['cpu_model']}, nproc {env['nproc']}, Linux {env['kernel']}; Python"
        f" {env['python']}, Twisted {env['twisted']}, pyOpenSSL {env['pyopenssl']}"
        f" ({env['openssl']}); nfltr {tools['nfltr']} (commit {tree['commit']}{modified});"
        f" nginx {tools['nginx']}, wrk {tools['wrk']}, both on {tools.get('system_openssl')}",
        "",
        f"Relay started with: `{' '.join(meta.get('relay_args') or ['(its defaults)'])}`."
        + (f" What-if patches: {', '.join(meta['config']['what_if'])}."
           if meta.get("config", {}).get("what_if") else ""),
        "",
        "| workload | path | req/s | vs direct TLS | vs direct HTTP | relay CPU-s/1k req |"
        " agent | relay + agent | nginx | busy cores (relay, agent, nginx) | p50 / p99 ms |"
        " nginx conns/req |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def med(e: dict[str, Any], key: str, digits: int = 2) -> str:
        s = e.get(key)
        return "n/a" if s is None else _num(s["median"], digits)

    for e in summary.values():
        cores = ", ".join(
            "n/a" if e.get(f"{r}_cores") is None else f"{e[f'{r}_cores']['median']:.2f}"
            for r in (*ROLES, "nginx")
        )
        rate = med(e, "req_s", 0)
        if e["workload"].startswith("1m") and "mb_s" in e:
            rate += f" ({e['mb_s']['median']:.0f} MB/s)"
        lines.append(
            f"| {e['workload']} | {LABELS[e['path']]} | {rate} | {med(e, 'vs_tls')} |"
            f" {med(e, 'vs_http')} | {med(e, 'relay_cpu_s_per_1k', 3)} |"
            f" {med(e, 'agent_cpu_s_per_1k', 3)} | {med(e, 'nfltr_cpu_s_per_1k', 3)} |"
            f" {med(e, 'nginx_cpu_s_per_1k', 3)} | {cores} |"
            f" {med(e, 'p50_ms')} / {med(e, 'p99_ms')} | {med(e, 'nginx_conns_per_request')} |"
        )
    lines += [
        "",
        "Spread (min to max over the runs used: the cleanest attempt of each round, rounds"
        " still contaminated after the repeats left out when the case has clean ones) and noise:",
        "",
        "| workload | path | runs | req/s | vs direct TLS | relay + agent CPU-s/1k req |"
        " machine busy (cores) | others' CPU (cores) | load 1 min before | after | repeats |"
        " dropped (contaminated) | failed | wrk errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in summary.values():

        def span(key: str, digits: int = 2, e: dict[str, Any] = e) -> str:
            s = e.get(key)
            if s is None:
                return "n/a"
            return f"{_num(s['min'], digits)} to {_num(s['max'], digits)}"

        errors = e.get("errors")
        lines.append(
            f"| {e['workload']} | {LABELS[e['path']]} | {e['runs']} | {span('req_s', 0)} |"
            f" {span('vs_tls')} | {span('nfltr_cpu_s_per_1k', 3)} | {span('busy_cores')} |"
            f" {span('other_cores')} | {span('load_1m_before')} | {span('load_1m_after')} |"
            f" {e['repeats']} | {e['dropped'] + e['contaminated']} | {e['failed']} |"
            f" {'n/a' if errors is None else int(errors['max'])} |"
        )
    return "\n".join(lines)


def tls_markdown(found: dict[str, Any]) -> str:
    """
    What TLS each path negotiated with the system's OpenSSL client.
    """
    lines = []
    for path, info in found.get("tls", {}).items():
        lines.append(
            f"{LABELS[path]}: {info['protocol']} {info['cipher']}, {info['group']},"
            f" {info['handshake_bytes_read']} B of handshake read,"
            f" resumed: {'yes' if info['resumed'] else 'no'}"
        )
    return "; ".join(lines)


# -- profile ----------------------------------------------------------------------

_SPINE = re.compile(
    r"\((nfltr/cli/\w+|nfltr/\w+_tap|threading)\.py\)$|^react \(twisted/internet/task\.py\)"
)


def profile(bench: Bench, workloads: list[Workload], tmp: Path) -> dict[str, Any]:
    """
    For each workload and share mode, one more run with py-spy sampling the
    relay and the agent (C{--nonblocking}); their hot spots.
    """
    args = bench.args
    directory = Path(args.profile_dir) if args.profile_dir else tmp / "profile"
    directory.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for workload in workloads:
        for mode in MODES:
            targets = {"relay": bench.shares.relay.pid, "agent": bench.shares.agents[mode].pid}
            outputs = {r: directory / f"{workload.name}-{mode}-{r}.txt" for r in targets}
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
                    spy.stop()
            bench.log(f"profiled {describe(record)}")
            results[f"{workload.name} {mode}"] = {
                "run": record, "rate": args.rate,
                "possible": round(args.rate * record["window_s"]),
                "hot_spots": {
                    role: hot_spots(path, args.top, spine=_SPINE)
                    for role, path in outputs.items() if path.exists()
                },
            }
    return results




# -- command line ------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.shares", description=__doc__.split("\n")[1])
    add_rounds(p, 5)
    p.add_argument("--duration", type=int, default=2, help="seconds of each wrk run")
    add_quick(p, "1 round of 1 s runs; no warm-up, repeats or JSON")
    p.add_argument("--workloads", default=DEFAULT_WORKLOADS,
                   help="SIZE-keep-N or SIZE-close-N (SIZE: 1k or 1m), comma-separated")
    p.add_argument("--paths", default=",".join(PATHS),
                   help=f"some of {', '.join(PATHS)}, comma-separated")
    p.add_argument("--warmup", type=int, default=1,
                   help="seconds of the uncounted warm-up run of each share case (0: none)")
    p.add_argument("--nginx-workers", type=int, default=1, help="nginx worker_processes")
    p.add_argument("--what-if", choices=sorted(WHAT_IF), action="append", default=[],
                   help="start the relay and agents with this experimental patch of nfltr"
                   " (bench/whatif/README.md); repeatable")
    p.add_argument("--relay-limits", action="store_true",
                   help="keep the relay's default per-source connection rate (200/s after a"
                   " burst of 2,000), which the close workloads from one address exceed;"
                   " by default the benchmark turns it off (--per-source-rate none)")
    add_noise(p, settle_help="the teardown")
    p.add_argument("--profile", action="store_true",
                   help="after the rounds, sample relay and agent with py-spy during one more"
                   " run of each --profile-workloads in each mode")
    add_profile(p, workloads="1k-keep-50,1k-close-50", seconds=4)
    p.add_argument("--update-doc", action="store_true",
                   help=f"also put the tables into {DOC.relative_to(ROOT)} between its markers")
    add_output(p, DEFAULT_JSON)
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.warmup, args.retries = 1, 1, 0, 0
        args.quiet_budget = min(args.quiet_budget, 5.0)
    try:
        args.workload_list = [Workload.parse(w.strip()) for w in args.workloads.split(",")
                              if w.strip()]
        args.profile_list = [Workload.parse(w.strip()) for w in args.profile_workloads.split(",")
                             if w.strip()]
    except ValueError as e:
        p.error(f"not a workload: {e} (SIZE-keep-N or SIZE-close-N, SIZE 1k or 1m)")
    args.path_list = [x.strip() for x in args.paths.split(",") if x.strip()]
    if not set(args.path_list) <= set(PATHS):
        p.error(f"--paths: some of {', '.join(PATHS)}")
    if args.rounds < 1 or args.duration < 1 or not args.workload_list or not args.path_list:
        p.error("--rounds, --duration, --workloads and --paths need at least 1")
    return args


def report(doc: dict[str, Any]) -> str:
    """
    The tables of a run.
    """
    summary = doc["summary"]
    if "runs" in doc and "config" in doc:  # summarized again, as this version does
        config = doc["config"]
        workloads = [Workload.parse(w) for w in config["workloads"].split(",") if w]
        paths = [p for p in config["paths"].split(",") if p]
        summary = summarize(workloads, paths, doc["runs"])
    parts = [markdown(summary, doc)]
    if doc.get("found", {}).get("tls"):
        parts.append(
            "TLS as wrk's OpenSSL gets it (`openssl s_client`): " + tls_markdown(doc["found"])
        )
    if "profile" in doc:
        parts.append(hot_spots_markdown(doc["profile"]))
    return "\n\n".join(parts)


def update_doc(text: str, doc: Path = DOC) -> bool:
    """
    Replace what stands between the markers in C{doc} with C{text}; False
    if the markers are missing.
    """
    content = doc.read_text()
    start, end = content.find(BEGIN), content.find(END)
    if start < 0 or end < start:
        return False
    doc.write_text(content[:start + len(BEGIN)] + "\n\n" + text + "\n\n" + content[end:])
    return True


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _missing_tool(args: argparse.Namespace) -> str | None:
    for tool in ("nginx", "wrk", "openssl", "setpriv", *(["py-spy"] if args.profile else [])):
        if not any((Path(d) / tool).exists() for d in os.environ["PATH"].split(os.pathsep)):
            return tool
    return None


def _system_openssl() -> str:
    try:
        return subprocess.run(
            ["openssl", "version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "missing"


def benchmark(args: argparse.Namespace, doc: dict[str, Any]) -> int:
    """
    Start everything, run the rounds (and the profile) into C{doc}, stop
    everything; the exit status.
    """
    with tempfile.TemporaryDirectory(prefix="nfltr-bench-shares-") as tmp:
        bench = Bench(args, Path(tmp), _log)
        try:
            doc["relay_args"] = list(relay_args(args))
            doc["found"] = bench.start()
            _log(f"nginx http {bench.nginx.http_port} tls {bench.nginx.tls_port},"
                 f" shares {bench.shares.urls}; TLS: {tls_markdown(doc['found'])}")
            if args.warmup:
                doc["warmups"] = warm_up(bench, args.workload_list, args.path_list)
            runs = run_rounds(bench, args.workload_list, args.path_list)
            doc["rss_kib_after_rounds"] = bench.memory()
            doc.update(
                runs=runs, summary=summarize(args.workload_list, args.path_list, runs),
                waited_for_quiet_s=round(bench.waited, 1),
            )
            if args.profile:
                doc["profile"] = profile(bench, args.profile_list, Path(tmp))
            doc["complaints"] = bench.complaints()
            if doc["complaints"]:
                _log(f"complaints: {json.dumps(doc['complaints'], indent=1)}")
        except BenchError as e:
            _log(f"benchmark failed: {e}")
            return 1
        except KeyboardInterrupt:
            _log("interrupted: stopping everything")
            return 130
        finally:
            doc["pids"] = [proc.pid for proc in bench.procs.all]
            bench.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.report is not None:
        print(report(json.loads(args.report.read_text())))
        return 0
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _: sys.exit(128 + n))
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    if args.what_if:  # the nfltr processes inherit it; nginx and wrk ignore it
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [*(str(WHAT_IF[name]) for name in args.what_if), os.environ.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
    missing = _missing_tool(args)
    if missing is not None:
        _log(f"{missing} is missing: apt-get install -y nginx wrk openssl; pip install py-spy")
        return 1
    meta: dict[str, Any] = {
        "command": shlex.join(["python", "-m", "bench.shares", *argv]),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": environment(),
        "tools": {**tool_versions(), "system_openssl": _system_openssl()},
        "tree": tree_state(),
    }
    _log(json.dumps(meta))
    t0 = args.t0 = time.monotonic()
    doc: dict[str, Any] = {**meta, "config": {
        k: v for k, v in vars(args).items()
        if k not in ("json", "report", "t0", "workload_list", "profile_list", "path_list")
    }}
    status = benchmark(args, doc)
    if status != 0:
        return status
    doc["elapsed_s"] = round(time.monotonic() - t0, 1)
    text = report(doc)
    print(text)
    default = DEFAULT_JSON
    if args.what_if:  # never over the main results
        default = DEFAULT_JSON.with_name(f"shares_{'_'.join(sorted(args.what_if))}.json")
    out = args.json or (None if args.quick else default)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        _log(f"wrote {out}")
    if args.update_doc and not args.what_if:
        _log(f"updated {DOC}" if update_doc(text) else f"no markers in {DOC}: not updated")
    _log(f"done in {doc['elapsed_s']}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
