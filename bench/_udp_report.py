# -*- test-case-name: tests.test_bench_udp -*-
"""
The figures of L{bench.udp}: one measured run's, the medians and
per-round ratios over the rounds, and the Markdown tables.  No I/O.

A run is a dict: C{path}, C{round}, C{sent}, C{answered}, C{lost},
C{seconds}, C{datagrams_per_s}, C{cpu_ms_per_1000} (each nfltr process of
the path: its CPU milliseconds per 1,000 datagrams answered, and their
C{total}) and C{others_cores} (what the rest of the machine used
meanwhile, in cores).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

#: The paths to the echo service, in their default order.
PATHS = ("direct", "tunnel", "public")
#: The nfltr processes each path crosses (whose CPU a run reports).
PATH_ROLES: dict[str, tuple[str, ...]] = {
    "direct": (),
    "tunnel": ("relay", "agent", "connector"),
    "public": ("relay", "agent"),
}
ROLES = ("relay", "agent", "connector")


def orders(paths: Sequence[str], rounds: int) -> list[list[str]]:
    """
    The paths' order in each round: rotated by one a round, so that no
    path always follows another (nor always runs first).
    """
    out = []
    for n in range(rounds):
        shift = n % len(paths)
        out.append([*paths[shift:], *paths[:shift]])
    return out


def figures(
    path: str, sent: int, answered: int, seconds: float, cpu_s: Mapping[str, float],
    others_cores: float,
) -> dict[str, Any]:
    """
    One run's record (see the module) from what was sent and answered in
    C{seconds} and the CPU seconds C{cpu_s} each role of C{path} used.
    """
    thousands = max(answered, 1) / 1000
    cpu = {role: cpu_s[role] * 1000 / thousands for role in PATH_ROLES[path]}
    if cpu:
        cpu["total"] = sum(cpu.values())
    return {
        "path": path, "sent": sent, "answered": answered, "lost": sent - answered,
        "seconds": seconds, "datagrams_per_s": answered / seconds if seconds > 0 else 0.0,
        "cpu_ms_per_1000": cpu, "others_cores": others_cores,
    }


def summarize(runs: Sequence[Mapping[str, Any]], paths: Sequence[str]) -> dict[str, Any]:
    """
    Per path: the runs, the medians of the rate, of each role's CPU per
    1,000 datagrams and of the others' cores, the datagrams lost and sent
    over all rounds, and (for the paths other than C{direct}, when it ran)
    C{vs_direct}: the median of the per-round ratios of its rate to
    C{direct}'s.
    """
    direct = {r["round"]: r["datagrams_per_s"] for r in runs if r["path"] == "direct"}
    summary: dict[str, Any] = {}
    for path in paths:
        mine = [r for r in runs if r["path"] == path]
        if not mine:
            continue
        entry: dict[str, Any] = {
            "runs": len(mine),
            "datagrams_per_s": statistics.median(r["datagrams_per_s"] for r in mine),
            "lost": sum(r["lost"] for r in mine),
            "sent": sum(r["sent"] for r in mine),
            "others_cores": statistics.median(r["others_cores"] for r in mine),
            "cpu_ms_per_1000": {
                role: statistics.median(r["cpu_ms_per_1000"][role] for r in mine)
                for role in mine[0]["cpu_ms_per_1000"]
            },
        }
        ratios = [r["datagrams_per_s"] / direct[r["round"]] for r in mine
                  if direct.get(r["round"])]
        if path == "direct":
            entry["vs_direct"] = 1.0
        elif ratios:
            entry["vs_direct"] = statistics.median(ratios)
        summary[path] = entry
    return summary


def _cpu_cells(cpu: Mapping[str, float]) -> str:
    return " | ".join(
        f"{cpu[role]:.1f}" if role in cpu else "-" for role in (*ROLES, "total")
    )


def _ratio(entry: Mapping[str, Any]) -> str:
    return f"{entry['vs_direct']:.2f}" if "vs_direct" in entry else "-"


def markdown(doc: Mapping[str, Any]) -> str:
    """
    The medians table and the runs table of a run's document (its
    C{settings}, C{runs} and C{summary}), as Markdown.
    """
    s = doc["settings"]
    head = ("| CPU ms / 1,000: relay | agent | connector | nfltr total |")
    lines = [
        f"UDP echo service, {s['size']}-byte datagrams, at most {s['window']} unanswered, "
        f"{s['rounds']} round(s) of {s['seconds']:g} s a path (order rotating)",
        "",
        "Medians over the rounds; ÷ direct: median of the per-round ratios of datagrams/s; "
        "lost: over all rounds.",
        "",
        f"| path | datagrams/s | ÷ direct | lost {head} others' cores |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for path, e in doc["summary"].items():
        lines.append(
            f"| {path} | {e['datagrams_per_s']:,.0f} | {_ratio(e)} | {e['lost']:,} of "
            f"{e['sent']:,} | {_cpu_cells(e['cpu_ms_per_1000'])} | {e['others_cores']:.2f} |"
        )
    lines += [
        "",
        f"| round | path | datagrams/s | lost {head}",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["runs"]:
        lines.append(
            f"| {r['round']} | {r['path']} | {r['datagrams_per_s']:,.0f} | {r['lost']:,} of "
            f"{r['sent']:,} | {_cpu_cells(r['cpu_ms_per_1000'])} |"
        )
    return "\n".join(lines)
