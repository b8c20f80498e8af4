# -*- test-case-name: tests.test_bench_link -*-
"""
Throughput of a link pair over loopback TLS, against plain TLS.

    python -m bench.link_pair [--seconds N] [--rounds R] [--sessions 1,8] [--size-mb M]
    python -m bench.link_pair --profile [--native]

Each run starts two processes (see L{bench._child}): a listener running TLS
and a LinkProtocol (LISTENER) that sinks every session, and a dialer that
connects with TLS (pinned), opens the sessions and streams.  Cases, run in
interleaved rounds: C{plain} (one TLS stream, no link: the baseline) and
C{link-N} for each N in C{--sessions}.  Per run: MB/s (10^6 bytes a second)
from the dialer's C{go} to the last sink's answer, the CPU seconds of each
end in that window per GB (10^9 bytes), the load average, and the CPU the
rest of the machine used meanwhile (C{/proc/stat} less our processes).
Each run first waits (within C{--quiet-budget}) for a quiet machine; a run
where others used more than C{--max-other} of a core is repeated (up to
C{--retries} times) and the cleanest attempt counts; after C{--patience}
seconds, runs are neither delayed nor repeated, so that the defaults finish
within about three minutes even on a busy machine.
Medians, spread and per-round ratios to plain TLS go to stdout as Markdown
and to C{docs/benchmarks/link_pair.json}.

Without C{--size-mb}, a warm-up run of each case sets its byte count so that
a run takes about C{--seconds}.  C{--profile} instead runs the C{link-1}
case once under py-spy (both ends) and reports the hot spots.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._profile import LibcSymbols, Sampler, hot_spots
from ._system import (
    ROOT,
    BenchError,
    Child,
    environment,
    loadavg,
    self_cpu,
    system_cpu,
)

MiB = 1 << 20
WARMUP_BYTES = 128 * MiB
GB = 1e9
DEFAULT_JSON = ROOT / "docs" / "benchmarks" / "link_pair.json"
DEFAULT_PROFILE_JSON = ROOT / "docs" / "benchmarks" / "link_pair_profile.json"


class Identity:
    """
    The listener's self-signed certificate, made in a temporary directory.
    """

    def __init__(self, directory: str) -> None:
        from nfltr.tls import ensure_self_signed

        made = ensure_self_signed(directory, "bench")
        self.cert = str(made.cert)
        self.key = str(made.key)
        self.pin = made.fingerprint


class Case:
    """
    One benchmark case: C{plain} TLS, or the link with C{sessions} sessions.
    """

    def __init__(self, mode: str, sessions: int) -> None:
        self.mode = mode
        self.sessions = sessions
        self.name = "plain" if mode == "plain" else f"link-{sessions}"


def _start(
    case: Case, total: int, identity: Identity, block: int, timeout: float, window: int | None,
    children: list[Child],
) -> None:
    """
    Start the listener on a fresh loopback socket (handed down, so that the
    dialer can start at once and no port number can be taken meanwhile)
    and the dialer; append them to C{children} as they start.
    """
    common = {
        "mode": case.mode, "sessions": case.sessions, "block": block, "window": window,
        "per_session": max(block, total // case.sessions), "timeout": timeout + 30,
    }
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)  # Twisted's adopted ports must not block
        port = sock.getsockname()[1]
        children.append(Child("listener", {
            **common, "end": "listener", "fd": sock.fileno(), "cert": identity.cert,
            "key": identity.key,
        }, pass_fds=(sock.fileno(),)))
    children.append(
        Child("dialer", {**common, "end": "dialer", "port": port, "pin": identity.pin})
    )


def run_once(
    case: Case, total: int, identity: Identity, block: int, timeout: float,
    samplers: tuple[Path, int, bool] | None = None, window: int | None = None,
) -> dict[str, Any]:
    """
    One run of C{case} moving about C{total} bytes; returns its record.
    Both ends are reaped (killed if need be) whatever happens.

    @param samplers: (directory, rate, native) to run py-spy on both ends.
    @param window: the links' session window, if not the library's default.
    """
    children: list[Child] = []
    spies: list[Sampler] = []
    libc: dict[str, LibcSymbols] = {}
    try:
        _start(case, total, identity, block, timeout, window, children)
        listener, dialer = children
        listener.expect("listening", 30)
        ready = dialer.expect("ready", 30)
        if samplers is not None:
            directory, rate, native = samplers
            for child in children:
                libc[child.name] = LibcSymbols(child.pid)
                spies.append(Sampler(child.pid, directory / f"{child.name}.txt", rate, native))
                spies[-1].wait_attached()
        before = _snapshot(children)
        listener.send("go")
        dialer.send("go")
        sent = dialer.expect("done", timeout)
        received = listener.expect("done", 10)
        after = _snapshot(children)
        for child in children:
            if child.close() != 0:
                raise BenchError(f"{child.name} exited with {child.proc.returncode}")
        for spy in spies:
            spy.finish()
    finally:
        for child in children:
            child.kill()
        for spy in spies:
            spy.stop()
    if received["bytes"] != sent["bytes"]:
        raise BenchError(f"sent {sent['bytes']} bytes, the sinks counted {received['bytes']}")
    record = _record(case, sent, received, before, after, ready["tls"])
    record["pids"] = [child.pid for child in children]
    record["reactors"] = sorted({sent["reactor"], received["reactor"]})
    if libc:
        record["libc"] = libc
    return record


def _snapshot(children: list[Child]) -> dict[str, Any]:
    return {
        "t": time.monotonic(), "system": system_cpu(),
        "ours": sum(c.cpu_seconds() for c in children) + self_cpu(), "load": loadavg(),
    }


def _busy(before: dict[str, float], after: dict[str, float]) -> float:
    """
    CPU seconds the machine was busy between two L{system_cpu} readings.
    Interrupt time counts: the kernel books part of our own loopback
    traffic's softirq work there and part in our processes' system time.
    """
    keys = ("user", "nice", "system", "irq", "softirq")
    return sum(after[k] - before[k] for k in keys)


def _cpu(report: dict[str, Any]) -> float:
    start, end = report["start"], report["end"]
    return float(end["user"] - start["user"] + end["sys"] - start["sys"])


def _faults(report: dict[str, Any]) -> int:
    return int(report["end"]["minflt"] - report["start"]["minflt"])


def _record(
    case: Case, sent: dict[str, Any], received: dict[str, Any], before: dict[str, Any],
    after: dict[str, Any], tls: dict[str, Any],
) -> dict[str, Any]:
    nbytes = sent["bytes"]
    wall = sent["end"]["t"] - sent["start"]["t"]
    window = after["t"] - before["t"]
    delta = {k: after["system"][k] - before["system"][k] for k in before["system"]}
    other = _busy(before["system"], after["system"]) - (after["ours"] - before["ours"])
    dialer, listener = _cpu(sent), _cpu(received)
    return {
        "case": case.name, "mode": case.mode, "sessions": case.sessions, "bytes": nbytes,
        "wall_s": round(wall, 4), "mb_s": round(nbytes / wall / 1e6, 1),
        "dialer_cpu_s": round(dialer, 4), "listener_cpu_s": round(listener, 4),
        "dialer_cores": round(dialer / wall, 3), "listener_cores": round(listener / wall, 3),
        "dialer_cpu_s_per_gb": round(dialer / (nbytes / GB), 3),
        "listener_cpu_s_per_gb": round(listener / (nbytes / GB), 3),
        "dialer_faults_per_gb": round(_faults(sent) / (nbytes / GB)),
        "listener_faults_per_gb": round(_faults(received) / (nbytes / GB)),
        "load_before": before["load"], "load_after": after["load"],
        "other_cpu_s": round(other, 3), "other_cores": round(other / window, 3),
        "softirq_s": round(delta["softirq"] + delta["irq"], 3),
        "steal_s": round(delta["steal"], 3), "window_s": round(window, 3), "tls": tls,
    }


# -- the benchmark ------------------------------------------------------------


class Quiet:
    """
    Keeps runs away from other load.  Before a run it waits, within a budget
    of C{--quiet-budget} seconds for the whole benchmark, until the
    machine's busy CPU is under C{--max-other} cores (all of it others': no
    run of ours goes on while it looks); a run during which others used more
    is repeated up to C{--retries} times and the cleanest attempt counts.
    After C{--patience} seconds from the start it does neither.

    @ivar waited: seconds spent waiting in all.
    """

    def __init__(self, args: argparse.Namespace, identity: Identity, log: Any) -> None:
        self.args = args
        self.identity = identity
        self.log = log
        self.left = args.quiet_budget
        self.deadline = args.t0 + args.patience
        self.waited = 0.0

    def patient(self) -> bool:
        """
        Whether there is still time to wait or repeat runs.
        """
        return time.monotonic() < self.deadline

    def wait(self) -> float:
        """
        Wait for quiet; return the busy cores last seen.
        """
        while True:
            before, t0 = system_cpu(), time.monotonic()
            time.sleep(0.5)
            after, t1 = system_cpu(), time.monotonic()
            busy = _busy(before, after) / (t1 - t0)
            if busy <= self.args.max_other or self.left <= 0 or not self.patient():
                return busy
            self.left -= t1 - t0
            self.waited += t1 - t0

    def measure(self, case: Case, total: int, label: str, **extra: Any) -> list[dict[str, Any]]:
        """
        Run C{case} until a clean run or out of retries; every attempt's
        record, the cleanest marked C{counted}.
        """
        timeout = 30 + total / 50e6  # no slower than 50 MB/s, or fail
        attempts: list[dict[str, Any]] = []
        for attempt in range(1, self.args.retries + 2):
            busy = self.wait()
            record = run_once(
                case, total, self.identity, self.args.block, timeout, window=self.args.window,
                **extra,
            )
            record.update(attempt=attempt, busy_before=round(busy, 3), counted=False)
            record["contaminated"] = record["other_cores"] > self.args.max_other
            attempts.append(record)
            self.log(
                f"{label} {case.name:8} {record['mb_s']:8.1f} MB/s  "
                f"dialer {record['dialer_cpu_s_per_gb']:.3f}  "
                f"listener {record['listener_cpu_s_per_gb']:.3f} CPU-s/GB  "
                f"others {record['other_cores']:.2f} cores  load {record['load_before'][0]}"
                + ("  CONTAMINATED" if record["contaminated"] else "")
            )
            if not record["contaminated"] or not self.patient():
                break
        min(attempts, key=lambda r: r["other_cores"])["counted"] = True
        return attempts


def calibrate(cases: list[Case], quiet: Quiet) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """
    Bytes per run for each case: C{--size-mb}, or what the (cleanest)
    warm-up run moves in C{--seconds}.
    """
    args = quiet.args
    sizes: dict[str, int] = {}
    warmups: list[dict[str, Any]] = []
    for case in cases:
        if args.size_mb is not None:
            sizes[case.name] = int(args.size_mb * MiB)
            continue
        attempts = quiet.measure(case, WARMUP_BYTES, "warm-up")
        warmups += attempts
        [record] = [r for r in attempts if r["counted"]]
        want = record["mb_s"] * 1e6 * args.seconds
        unit = MiB * case.sessions
        sizes[case.name] = max(unit, round(want / unit) * unit)
        quiet.log(f"{case.name}: {sizes[case.name] / MiB:.0f} MiB a run")
    return sizes, warmups


def run_rounds(cases: list[Case], sizes: dict[str, int], quiet: Quiet) -> list[dict[str, Any]]:
    """
    C{--rounds} rounds of every case in turn (see L{Quiet.measure}).
    """
    runs: list[dict[str, Any]] = []
    for n in range(1, quiet.args.rounds + 1):
        for case in cases:
            for record in quiet.measure(case, sizes[case.name], f"round {n}"):
                record["round"] = n
                runs.append(record)
    return runs


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 4), "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def summarize(cases: list[Case], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """
    Medians and spread per case, and per-round ratios to plain TLS.
    """
    counted = [r for r in runs if r.get("counted")]
    plain = {r["round"]: r for r in counted if r["case"] == "plain"}
    summary: dict[str, Any] = {}
    for case in cases:
        mine = [r for r in counted if r["case"] == case.name]
        entry: dict[str, Any] = {
            "runs": len(mine), "bytes": mine[0]["bytes"],
            "contaminated": sum(1 for r in mine if r["contaminated"]),
            "repeats": sum(1 for r in runs if r["case"] == case.name and r["attempt"] > 1),
        }
        for key in (
            "mb_s", "dialer_cpu_s_per_gb", "listener_cpu_s_per_gb", "other_cores",
            "dialer_cores", "listener_cores", "dialer_faults_per_gb", "listener_faults_per_gb",
        ):
            entry[key] = _spread([r[key] for r in mine])
        entry["load_1m"] = _spread([r["load_before"][0] for r in mine])
        if case.mode != "plain":
            for key in ("mb_s", "dialer_cpu_s_per_gb", "listener_cpu_s_per_gb"):
                ratios = [r[key] / plain[r["round"]][key] for r in mine if r["round"] in plain]
                entry[f"{key}_vs_plain"] = _spread(ratios)
        summary[case.name] = entry
    return summary


def markdown(summary: dict[str, Any], env: dict[str, Any], command: str) -> str:
    """
    The medians table and the spread, as Markdown.
    """
    lines = [
        f"`{command}`",
        "",
        f"{env['cpu_model']}, {env['nproc']} CPUs, Linux {env['kernel']}; Python {env['python']},"
        f" Twisted {env['twisted']}, pyOpenSSL {env['pyopenssl']}, {env['openssl']}",
        "",
        "| case | MB/s | Gbit/s | dialer CPU-s/GB | listener CPU-s/GB | MB/s vs plain |"
        " dialer CPU/GB vs plain | listener CPU/GB vs plain | busy cores (dialer, listener) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in summary.items():

        def ratio(key: str, e: dict[str, Any] = e) -> str:
            r = e.get(f"{key}_vs_plain")
            return "1" if r is None else f"{r['median']:.2f}"

        lines.append(
            f"| {name} | {e['mb_s']['median']:.0f} | {e['mb_s']['median'] * 8 / 1000:.2f} |"
            f" {e['dialer_cpu_s_per_gb']['median']:.2f} |"
            f" {e['listener_cpu_s_per_gb']['median']:.2f} | {ratio('mb_s')} |"
            f" {ratio('dialer_cpu_s_per_gb')} | {ratio('listener_cpu_s_per_gb')} |"
            f" {e['dialer_cores']['median']:.2f}, {e['listener_cores']['median']:.2f} |"
        )
    lines += [
        "",
        "Spread (min to max over the counted runs; page faults: medians) and noise:",
        "",
        "| case | runs x MiB | MB/s | dialer CPU-s/GB | listener CPU-s/GB | MB/s vs plain |"
        " page faults/GB (dialer, listener) | others' CPU (cores) | load avg 1 min | repeats |"
        " still contaminated |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in summary.items():

        def span(s: dict[str, float], digits: int) -> str:
            return f"{s['min']:.{digits}f} to {s['max']:.{digits}f}"

        vs = e.get("mb_s_vs_plain")
        lines.append(
            f"| {name} | {e['runs']} x {e['bytes'] / MiB:.0f} | {span(e['mb_s'], 0)} |"
            f" {span(e['dialer_cpu_s_per_gb'], 2)} | {span(e['listener_cpu_s_per_gb'], 2)} |"
            f" {'n/a' if vs is None else span(vs, 2)} |"
            f" {e['dialer_faults_per_gb']['median']:.0f},"
            f" {e['listener_faults_per_gb']['median']:.0f} |"
            f" {span(e['other_cores'], 2)} |"
            f" {span(e['load_1m'], 2)} | {e['repeats']} | {e['contaminated']} |"
        )
    return "\n".join(lines)


def profile(quiet: Quiet) -> dict[str, Any]:
    """
    One C{link-1} run under py-spy; the hot spots of both ends.
    """
    args = quiet.args
    case = Case("link", 1)
    sizes, _ = calibrate([case], quiet)
    with tempfile.TemporaryDirectory(prefix="nfltr-profile-") as tmp:
        directory = Path(args.profile_dir or tmp)
        directory.mkdir(parents=True, exist_ok=True)
        quiet.wait()
        record = run_once(
            case, sizes[case.name], quiet.identity, args.block, 120,
            samplers=(directory, args.rate, args.native), window=args.window,
        )
        libc = record.pop("libc")
        spots = {
            end: hot_spots(directory / f"{end}.txt", 10, libc[end])
            for end in ("dialer", "listener")
        }
    return {"run": record, "native": args.native, "rate": args.rate, "hot_spots": spots}


def profile_markdown(result: dict[str, Any]) -> str:
    """
    The hot spots as Markdown tables.
    """
    run = result["run"]
    lines = [f"profiled run: {run['mb_s']} MB/s (sampling slows it)", ""]
    for end, spots in result["hot_spots"].items():
        lines += [
            f"{end}: {spots['samples']} samples",
            "",
            "| # | self | function | | total | function |",
            "|---|---|---|---|---|---|",
        ]
        for i, (own, total) in enumerate(zip(spots["self"], spots["total"], strict=False)):
            lines.append(
                f"| {i + 1} | {own['share']:.1%} | `{own['function']}` | |"
                f" {total['share']:.1%} | `{total['function']}` |"
            )
        lines.append("")
        if spots["copies"]:
            lines.append(f"{end}: samples in memmove/memcpy, by the Python function copying")
            lines += ["", "| share of all samples | function |", "|---|---|"]
            lines += [f"| {c['share']:.1%} | `{c['function']}` |" for c in spots["copies"]]
            lines.append("")
    return "\n".join(lines)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.link_pair", description=__doc__.split("\n")[1]
    )
    p.add_argument("--seconds", type=float, default=3.0, help="target duration of one run")
    p.add_argument("--rounds", type=int, default=5, help="rounds of every case (>= 1)")
    p.add_argument("--sessions", default="1,8", help="link cases: sessions, comma-separated")
    p.add_argument("--size-mb", type=float, help="MiB a run (all sessions), not calibrated")
    p.add_argument("--block", type=int, default=64 * 1024, help="bytes a producer write")
    p.add_argument("--window-kib", type=int,
                   help="the links' session window (default: LinkConfig's)")
    p.add_argument("--max-other", type=float, default=0.15,
                   help="others' CPU (cores) above which a run is repeated")
    p.add_argument("--retries", type=int, default=2, help="repeats of a contaminated run")
    p.add_argument("--quiet-budget", type=float, default=30.0,
                   help="seconds in all to wait for a quiet machine before runs")
    p.add_argument("--patience", type=float, default=120.0,
                   help="seconds from the start after which nothing is waited for or repeated")
    p.add_argument("--json", type=Path, default=None, help="where the results go")
    p.add_argument("--profile", action="store_true", help="profile one link-1 run instead")
    p.add_argument("--native", action="store_true", help="py-spy --native (C frames too)")
    p.add_argument("--rate", type=int, default=250, help="py-spy samples a second")
    p.add_argument("--profile-dir", help="keep py-spy's collapsed stacks here")
    args = p.parse_args(argv)
    args.window = None if args.window_kib is None else args.window_kib * 1024
    try:
        args.session_counts = [int(s) for s in args.sessions.split(",") if s.strip()]
    except ValueError:
        p.error("--sessions takes numbers separated by commas")
    if args.rounds < 1 or not args.session_counts or min(args.session_counts) < 1:
        p.error("--rounds and --sessions must be at least 1")
    if args.seconds <= 0 or (args.size_mb is not None and args.size_mb <= 0):
        p.error("--seconds and --size-mb must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    # SIGTERM unwinds like ^C, so every run's finally reaps its children.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tunables = os.environ.get("GLIBC_TUNABLES")
    command = shlex.join(
        ([f"GLIBC_TUNABLES={tunables}"] if tunables else [])
        + ["python", "-m", "bench.link_pair", *argv]
    )

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    env = environment()
    log(json.dumps(env))
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = args.t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nfltr-bench-") as tmp:
        identity = Identity(tmp)
        try:
            quiet = Quiet(args, identity, log)
            if args.profile:
                result = profile(quiet)
                print(profile_markdown(result))
                out = args.json or DEFAULT_PROFILE_JSON
                doc = {"command": command, "started": started, "environment": env, **result}
            else:
                cases = [Case("plain", 1)] + [Case("link", n) for n in args.session_counts]
                sizes, warmups = calibrate(cases, quiet)
                runs = run_rounds(cases, sizes, quiet)
                summary = summarize(cases, runs)
                print(markdown(summary, env, command))
                out = args.json or DEFAULT_JSON
                doc = {
                    "command": command, "started": started, "environment": env,
                    "config": {k: v for k, v in vars(args).items() if k not in ("json", "t0")},
                    "sizes": sizes, "warmups": warmups, "runs": runs, "summary": summary,
                    "waited_for_quiet_s": round(quiet.waited, 1),
                }
        except BenchError as e:
            log(f"benchmark failed: {e}")
            return 1
    doc["elapsed_s"] = round(time.monotonic() - t0, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    log(f"wrote {out} ({doc['elapsed_s']}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
