# -*- test-case-name: tests.bench.test_soak -*-
"""
The soak's report (L{bench.soak}), from its records alone: availability
per path outside fault windows, failed visits per fault and per fault kind,
recovery times, and the growth of memory (RSS), open descriptors and Redis
keys between a snapshot after the start and one at the end.  L{summarize}
gives the JSON; L{markdown} the tables.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ._soak_faults import Fault
from ._soak_visits import Visit

#: Distinct failure messages listed per path outside fault windows, and per fault.
MAX_ERRORS = 5
#: Failed visits listed one by one per fault (in the JSON).
MAX_LISTED = 20


def windows(faults: Sequence[Fault], end: float) -> list[tuple[float, float]]:
    """
    Each fault's window: from its start to its recovery, or to the next
    fault's start (or C{end}) when it did not recover before.
    """
    spans = []
    for n, fault in enumerate(faults):
        limit = faults[n + 1].start if n + 1 < len(faults) else end
        stop = fault.recovered if fault.recovered is not None else limit
        spans.append((fault.start, min(stop, limit)))
    return spans


def fault_of(visit: Visit, spans: Sequence[tuple[float, float]]) -> int | None:
    """
    The index of the first window C{visit} overlaps, or L{None}.
    """
    for n, (start, stop) in enumerate(spans):
        if visit.start < stop and visit.end > start:
            return n
    return None


def replicas_of(path: str) -> set[int]:
    """
    The replicas C{path} goes through: a path named C{... rN} replica N;
    the OpenSSH paths the first replica too (it has the SSH port).
    """
    through = {int(path.rsplit(" r", 1)[1])} if " r" in path else set()
    return through | ({0} if path.startswith("ssh") else set())


def depends(visit: Visit, fault: Fault) -> bool:
    """
    Whether C{visit} went through the replica C{fault} hit: its target, or
    for a rolling restart the replica that was restarting then (from its
    SIGTERM to the next replica's); never for Redis, which every path needs.
    """
    if fault.target is None:
        return False
    if not fault.steps:
        return fault.target in replicas_of(visit.path)
    for n, (replica, start) in enumerate(fault.steps):
        stop = fault.steps[n + 1][1] if n + 1 < len(fault.steps) else float("inf")
        if visit.start < stop and visit.end > start and replica in replicas_of(visit.path):
            return True
    return False


def _errors(visits: Sequence[Visit]) -> list[str]:
    return [f"{count} x {text}" for text, count in
            Counter(v.error for v in visits if not v.ok).most_common(MAX_ERRORS)]


def _path_rows(visits: Sequence[Visit], owner: Sequence[int | None]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for path in sorted({v.path for v in visits}):
        mine = [(v, f) for v, f in zip(visits, owner, strict=True) if v.path == path]
        outside = [v for v, f in mine if f is None]
        ok = sum(v.ok for v in outside)
        rows[path] = {
            "ok": ok, "failed": len(outside) - ok,
            "availability": ok / len(outside) if outside else None,
            "in_fault_windows": len(mine) - len(outside),
            "failed_in_fault_windows": sum(not v.ok for v, f in mine if f is not None),
            "errors": _errors(outside),
        }
    return rows


def _fault_rows(faults: Sequence[Fault], visits: Sequence[Visit],
                owner: Sequence[int | None]) -> list[dict[str, Any]]:
    rows = []
    for n, fault in enumerate(faults):
        failed = [v for v, f in zip(visits, owner, strict=True) if f == n and not v.ok]
        elsewhere = [v for v in failed if not depends(v, fault)]
        rows.append({
            "fault": fault.label, "kind": fault.kind, "target": fault.target,
            "start": round(fault.start, 2), "undone_after": round(fault.undone - fault.start, 2),
            "recovery": (round(fault.recovered - fault.start, 2)
                         if fault.recovered is not None else None),
            "recovery_after_undone": (round(fault.recovered - fault.undone, 2)
                                      if fault.recovered is not None else None),
            "failed_visits": len(failed),
            # Not through the faulted replica (every path for Redis and a rolling restart).
            "failed_elsewhere": len(elsewhere),
            "failed_by_path": dict(Counter(v.path for v in failed).most_common()),
            "errors": _errors(failed), "notes": list(fault.notes),
            "elsewhere_by_path": dict(Counter(v.path for v in elsewhere).most_common()),
            "errors_elsewhere": _errors(elsewhere),
            # The first of them, each as path, start (s) and error; a rolling restart's steps.
            "elsewhere": [[v.path, round(v.start, 2), v.error] for v in elsewhere[:MAX_LISTED]],
            "steps": [[replica, round(start, 2)] for replica, start in fault.steps],
        })
    return rows


def _kind_rows(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    kinds: dict[str, Any] = {}
    for kind in dict.fromkeys(row["kind"] for row in rows):
        mine = [row for row in rows if row["kind"] == kind]
        times = [row["recovery"] for row in mine if row["recovery"] is not None]
        kinds[kind] = {
            "faults": len(mine), "failed_visits": sum(row["failed_visits"] for row in mine),
            "not_recovered": len(mine) - len(times),
            "recovery_median": statistics.median(times) if times else None,
            "recovery_max": max(times) if times else None,
        }
    return kinds


def growth(start: dict[str, Any], end: dict[str, Any]) -> dict[str, Any]:
    """
    Per process present in both snapshots (name to C{rss_kib}, C{fds},
    C{pid}), and for Redis's key count: the value at the start and at the
    end; C{restarted} when the pid changed (the end then counts from its
    restart).
    """
    processes = {}
    for name in sorted(set(start["processes"]) & set(end["processes"])):
        a, b = start["processes"][name], end["processes"][name]
        processes[name] = {
            "rss_kib": [a["rss_kib"], b["rss_kib"]], "fds": [a["fds"], b["fds"]],
            "restarted": a["pid"] != b["pid"],
        }
    return {"processes": processes, "redis_keys": [start["redis_keys"], end["redis_keys"]],
            "start": start["time"], "end": end["time"]}


def summarize(
    visits: Sequence[Visit], faults: Sequence[Fault], end: float,
    resources: dict[str, Any], config: dict[str, Any],
) -> dict[str, Any]:
    """
    The soak's results (JSON-ready): C{config}, C{paths}, C{faults},
    C{kinds}, C{resources} (L{growth}).
    """
    spans = windows(faults, end)
    owner = [fault_of(v, spans) for v in visits]
    rows = _fault_rows(faults, visits, owner)
    return {"config": config, "duration": round(end, 1), "paths": _path_rows(visits, owner),
            "faults": rows, "kinds": _kind_rows(rows), "resources": resources}


def _number(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:.1f}{unit}"


def _table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return [*lines, ""]


def _availability(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.2f} %"


def _resource_lines(resources: dict[str, Any]) -> list[str]:
    if not resources.get("processes"):
        return ["No resource snapshots.", ""]
    rows: list[list[object]] = []
    for name, row in resources["processes"].items():
        if name.startswith(("agent ", "connector ")):
            continue
        rows.append([name, *row["rss_kib"], *row["fds"], "yes" if row["restarted"] else "no"])
    rest = {name: row for name, row in resources["processes"].items()
            if name.startswith(("agent ", "connector "))}
    notes: list[str] = []
    for group in ("agent ", "connector "):
        mine = [row for name, row in rest.items() if name.startswith(group)]
        if mine:
            rows.append([f"{len(mine)} {group.strip()}s (sum)",
                         sum(r["rss_kib"][0] for r in mine), sum(r["rss_kib"][1] for r in mine),
                         sum(r["fds"][0] for r in mine), sum(r["fds"][1] for r in mine),
                         sum(r["restarted"] for r in mine)])
    for group in ("agent ", "connector "):
        mine = {name: row for name, row in rest.items() if name.startswith(group)}
        if mine:
            name = max(mine, key=lambda n: (mine[n]["fds"][1] - mine[n]["fds"][0],
                                            mine[n]["rss_kib"][1] - mine[n]["rss_kib"][0]))
            row = mine[name]
            notes.append(f"The {group.strip()} that grew most: {name}, "
                         f"{row['fds'][1] - row['fds'][0]:+d} descriptors, "
                         f"{row['rss_kib'][1] - row['rss_kib'][0]:+d} KiB.")
    keys = resources["redis_keys"]
    lines = _table(["process", "RSS start (KiB)", "RSS end (KiB)", "fds start", "fds end",
                    "restarted since"], rows)
    return [*lines, *notes, f"Redis keys: {keys[0]} at the start, {keys[1]} at the end "
            f"(snapshots at {resources['start']:.0f} s and {resources['end']:.0f} s).", ""]


def markdown(summary: dict[str, Any], skipped: dict[str, str] | None = None) -> str:
    """
    The report's tables: paths, faults by kind, each fault, resources.
    """
    config = summary["config"]
    lines = [f"Soak: {summary['duration']:.0f} s, {config['replicas']} replicas, "
             f"{config['agents']} agents, a fault every {config['interval']:g} s "
             f"(hold {config['hold']:g} s).", ""]
    lines += ["Visits outside fault windows, per path:", ""]
    lines += _table(["path", "ok", "failed", "availability", "visits in fault windows",
                     "of them failed"],
                    [[path, row["ok"], row["failed"], _availability(row["availability"]),
                      row["in_fault_windows"], row["failed_in_fault_windows"]]
                     for path, row in summary["paths"].items()])
    for path, why in (skipped or {}).items():
        lines.append(f"- {path}: skipped ({why})")
    errors = [(path, e) for path, row in summary["paths"].items() for e in row["errors"]]
    if errors:
        lines += ["Failures outside fault windows:", ""]
        lines += [f"- {path}: {e}" for path, e in errors] + [""]
    lines += ["Faults by kind (recovery: from the fault's start until every path answered):", ""]
    lines += _table(["fault", "count", "failed visits", "recovery median (s)",
                     "recovery max (s)", "not recovered"],
                    [[kind, row["faults"], row["failed_visits"], _number(row["recovery_median"]),
                      _number(row["recovery_max"]), row["not_recovered"]]
                     for kind, row in summary["kinds"].items()])
    lines += ["Each fault (failed elsewhere: on paths not through the replica it hit; for a "
              "rolling restart, the one restarting then):", ""]
    lines += _table(["at (s)", "fault", "undone after (s)", "recovered after (s)",
                     "failed visits", "failed elsewhere", "notes"],
                    [[f"{row['start']:.0f}", row["fault"], _number(row["undone_after"]),
                      _number(row["recovery"]), row["failed_visits"], row["failed_elsewhere"],
                      "; ".join(row["notes"])] for row in summary["faults"]])
    elsewhere = [f"- {row['fault']} at {row['start']:.0f} s: {e}"
                 for row in summary["faults"] for e in row["errors_elsewhere"]]
    if elsewhere:
        lines += ["Failures elsewhere:", "", *elsewhere, ""]
    lines += ["Growth (the snapshot before the first fault against the last):", ""]
    lines += _resource_lines(summary["resources"])
    exited = summary.get("exited") or []
    lines += [f"Processes that exited on their own: {', '.join(exited) or 'none'}.", ""]
    complaints = summary.get("complaints") or []
    lines += ["What the processes logged as warnings or errors (most frequent first):", ""]
    lines += [f"- {line}" for line in complaints] or ["- nothing"]
    return "\n".join(lines)
