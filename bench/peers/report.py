"""
What L{bench.peers} makes of its runs: medians over the rounds
(L{summarize}), ratios between tools taken per round and then the median
(L{RATIOS}), the issue's targets (L{check_targets}), Markdown tables
(L{markdown}) and matplotlib plots (L{plots}).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from .._system import speed_words
from .loads import ALL, Load

#: (numerator, denominator) of the rate ratios reported for every row.
RATIOS = (
    ("nfltr-plain", "direct"), ("nfltr-e2ee", "direct"),
    ("nfltr-plain", "ssh"), ("nfltr-e2ee", "ssh"),
    ("nfltr-plain", "pagekite"), ("nfltr-e2ee", "pagekite"),
    ("nfltr-e2ee", "nfltr-plain"), ("nfltr-e2ee-full", "nfltr-plain"),
    ("nfltr-e2ee", "nfltr-e2ee-full"), ("nfltr-e2ee", "nfltr-e2ee-noresume"),
    ("share-e2ee", "direct-tls"), ("share-inspect", "direct-tls"),
    ("share-passthrough", "direct-tls"), ("share-e2ee", "pagekite"),
    ("nfltr-ssh", "ssh"),
)
#: What a table shows where a tool has no such row.
NONE = "-"
KEEP_ALIVE = ("http-1", "http-50", "mib-50", "http-100", "http-1000")
#: The issue's floors for nfltr plain ÷ direct.
PLAIN_VS_DIRECT = {
    "http-1": 0.25, "http-50": 0.40, "close-50": 0.20, "mib-50": 0.20, "bulk-1": 0.20,
    "bulk-8": 0.20,
}
VS_SSH = 1.5
E2EE_VS_PLAIN = 0.85
SHARE_VS_TLS = 0.30
MEMORY_PER_AGENT_KIB = 150
RESTART_S = 1.0


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4),
            "max": round(max(values), 4), "n": len(values)}


def counted(runs: list[dict[str, Any]], row: str, tool: str) -> list[dict[str, Any]]:
    return [
        r for r in runs
        if r.get("counted") and r["row"] == row and r["tool"] == tool and "error" not in r
    ]


def round_ratios(
    runs: list[dict[str, Any]], row: str, a: str, b: str, key: str = "rate"
) -> list[float]:
    """
    C{a}'s C{key} over C{b}'s in each round where both have a counted run
    (and C{b}'s is not 0).
    """
    mine = {r["round"]: r[key] for r in counted(runs, row, a)}
    theirs = {r["round"]: r[key] for r in counted(runs, row, b)}
    return [mine[n] / theirs[n] for n in sorted(mine) if theirs.get(n)]


def summarize(runs: list[dict[str, Any]], tools: list[str], loads: list[str]) -> dict[str, Any]:
    """
    Medians over the rounds of every row and tool, and the ratios.
    """
    out: dict[str, Any] = {"loads": {}, "ratios": {}, "cpu_ratios": {}}
    for load in loads:
        row: dict[str, Any] = {}
        for tool in tools:
            mine = counted(runs, load, tool)
            everything = [r for r in runs if r["row"] == load and r["tool"] == tool]
            if not everything:
                continue
            entry: dict[str, Any] = {
                "runs": len(mine), "failed": sum(1 for r in everything if "error" in r),
                "repeats": sum(1 for r in everything if r.get("attempt", 1) > 1),
                "contaminated": sum(1 for r in mine if r.get("contaminated")),
            }
            if mine:
                entry.update(
                    rate=_median([r["rate"] for r in mine]), rates=[r["rate"] for r in mine],
                    errors=max(r.get("errors", 0) for r in mine),
                    p50_ms=_median([r["p50_ms"] for r in mine if "p50_ms" in r]),
                    p99_ms=_median([r["p99_ms"] for r in mine if "p99_ms" in r]),
                    other_cores_max=max(r["other_cores"] for r in mine),
                    load_1m=_spread([r["load_before"][0] for r in mine]),
                    cpu_per_unit={
                        role: _median([
                            r["cpu_per_unit"][role] for r in mine
                            if r["cpu_per_unit"].get(role) is not None
                        ])
                        for role in ("relay", "exposer", "connector", "sum")
                        if any(r["cpu_per_unit"].get(role) is not None for r in mine)
                    },
                    service_per_unit=_median([
                        r["service_per_unit"] for r in mine
                        if r.get("service_per_unit") is not None
                    ]),
                )
            row[tool] = entry
        out["loads"][load] = row
        out["ratios"][load] = {
            f"{a}/{b}": _spread(round_ratios(runs, load, a, b))
            for a, b in RATIOS if a in tools and b in tools and round_ratios(runs, load, a, b)
        }
        out["cpu_ratios"][load] = {
            f"{a}/{b}": _spread(cpu_ratios)
            for a, b in RATIOS
            if (cpu_ratios := _cpu_round_ratios(runs, load, a, b))
        }
    out["setup_s"] = {
        t: _median([r["setup_s"] for r in counted(runs, "setup", t)]) for t in tools
        if counted(runs, "setup", t)
    }
    out["idle"] = {}
    for tool in tools:
        mine = counted(runs, "idle", tool)
        if mine:
            roles = sorted({role for r in mine for role in r["cpu_ms_per_s"]})
            out["idle"][tool] = {
                "cpu_ms_per_s": {
                    role: _median([r["cpu_ms_per_s"].get(role, 0.0) for r in mine])
                    for role in roles
                },
                "cpu_ms_per_s_sum": _median([sum(r["cpu_ms_per_s"].values()) for r in mine]),
                "pss_kib": {
                    role: _median([r["memory_kib"][role]["pss_kib"] for r in mine
                                   if role in r["memory_kib"]])
                    for role in roles
                },
                "pss_kib_sum": _median([r["pss_kib"] for r in mine]),
            }
    out["memory_after"] = {
        t: _median([sum(m["pss_kib"] for m in r["memory_kib"].values())
                    for r in counted(runs, "memory-after", t)])
        for t in tools if counted(runs, "memory-after", t)
    }
    out["restart"] = {
        t: {k: _spread([r[k] for r in counted(runs, "restart", t)])
            for k in ("start_to_listening", "start_to_request")}
        for t in tools if counted(runs, "restart", t)
    }
    out["agents"] = {}
    for tool in {r["tool"] for r in runs if r["row"] == "agents"}:
        mine = counted(runs, "agents", tool)
        if mine:
            keys = [k for k in mine[0] if k not in ("round", "tool", "row", "counted")]
            out["agents"][tool] = {k: _median([r[k] for r in mine]) for k in keys}
    return out


def _cpu_round_ratios(runs: list[dict[str, Any]], row: str, a: str, b: str) -> list[float]:
    mine = {r["round"]: r["cpu_per_unit"].get("sum") for r in counted(runs, row, a)}
    theirs = {r["round"]: r["cpu_per_unit"].get("sum") for r in counted(runs, row, b)}
    return [
        mine[n] / theirs[n] for n in sorted(mine)
        if mine[n] is not None and theirs.get(n)
    ]


# -- targets ---------------------------------------------------------------------


def check_targets(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """
    The issue's targets for this round, each with the measured value (a
    median of per-round ratios, or a median) and whether it is met (None:
    not measured in this run).
    """
    ratios = summary["ratios"]

    def ratio(row: str, key: str) -> float | None:
        s = ratios.get(row, {}).get(key)
        return None if s is None else s["median"]

    checks: list[dict[str, Any]] = []

    def add(target: str, value: float | None, op: str, threshold: float) -> None:
        met = None if value is None else (value >= threshold if op == ">=" else value < threshold)
        checks.append({"target": target, "value": value, "op": op, "threshold": threshold,
                       "met": met})

    for row, floor in PLAIN_VS_DIRECT.items():
        add(f"nfltr-plain ÷ direct, {row}", ratio(row, "nfltr-plain/direct"), ">=", floor)
    for row in ALL:
        if row in ratios:
            add(f"nfltr-plain ÷ ssh, {row}", ratio(row, "nfltr-plain/ssh"), ">=", VS_SSH)
    for row in KEEP_ALIVE:
        if row in ratios:
            add(f"nfltr-e2ee ÷ nfltr-plain, {row}", ratio(row, "nfltr-e2ee/nfltr-plain"), ">=",
                E2EE_VS_PLAIN)
    for row in KEEP_ALIVE:
        if row in ratios:
            add(f"share-e2ee ÷ direct-tls, {row}", ratio(row, "share-e2ee/direct-tls"), ">=",
                SHARE_VS_TLS)
    agents = summary.get("agents", {}).get("nfltr-plain", {})
    add("relay memory per idle agent (KiB, Pss)", agents.get("relay_kib_per_tunnel"), "<",
        MEMORY_PER_AGENT_KIB)
    for tool in ("nfltr-plain", "nfltr-e2ee"):
        restart = summary.get("restart", {}).get(tool, {}).get("start_to_request")
        add(f"restart to a working tunnel (s), {tool}",
            None if restart is None else restart["median"], "<", RESTART_S)
    return checks


# -- Markdown ---------------------------------------------------------------------


def num(v: float | None, digits: int = 3) -> str:
    """
    A rate or cost in a few characters.
    """
    if v is None:
        return "n/a"
    if v >= 10_000:  # noqa: PLR2004
        return f"{v / 1000:.1f}k"
    if v >= 100:  # noqa: PLR2004
        return f"{v:.0f}"
    if v == 0:
        return "0"
    return f"{v:.{digits}g}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _unit(load: str) -> str:
    return "Gbit/s" if load.startswith("bulk") else "req/s"


def _per(load: str) -> str:
    return "CPU-s/GB" if Load.parse(load).per_gb else "CPU-s/1k req"


def rate_table(summary: dict[str, Any], tools: list[str]) -> list[str]:
    rows = []
    for load, row in summary["loads"].items():
        cells = [load, _unit(load)]
        for t in tools:
            e = row.get(t)
            if e is None:
                cells.append(NONE)
                continue
            text = num(e.get("rate"))
            if e.get("errors"):
                text += f" ({e['errors']} err)"
            if e.get("failed") and not e.get("runs"):
                text = "failed"
            cells.append(text)
        rows.append(cells)
    return _table(["load", "unit", *tools], rows)


def ratio_table(summary: dict[str, Any]) -> list[str]:
    keys = [f"{a}/{b}" for a, b in RATIOS]
    present = [k for k in keys if any(k in r for r in summary["ratios"].values())]
    if not present:
        return ["(no pair of tools measured)"]
    rows = [
        [load, *(num(r[k]["median"], 2) if k in r else NONE for k in present)]
        for load, r in summary["ratios"].items()
    ]
    return _table(["load", *(k.replace("/", " ÷ ") for k in present)], rows)


def cpu_sum_table(summary: dict[str, Any], tools: list[str]) -> list[str]:
    shown = [t for t in tools if t not in ("direct", "direct-tls")]
    rows = []
    for load, row in summary["loads"].items():
        cells = [load, _per(load)]
        for t in shown:
            per = row.get(t, {}).get("cpu_per_unit", {})
            cells.append(num(per.get("sum")) if per else NONE)
        ssh = summary["cpu_ratios"].get(load, {}).get("nfltr-plain/ssh")
        cells.append(num(ssh["median"], 2) if ssh else NONE)
        rows.append(cells)
    return _table(["load", "unit", *shown, "nfltr-plain ÷ ssh"], rows)


def cpu_role_table(summary: dict[str, Any], tools: list[str]) -> list[str]:
    rows = []
    for load, row in summary["loads"].items():
        for t in tools:
            e = row.get(t)
            if not e or not e.get("cpu_per_unit"):
                continue
            per = e["cpu_per_unit"]
            rows.append([
                load, t, _per(load), *(num(per.get(role)) for role in
                                       ("relay", "exposer", "connector", "sum")),
                num(e.get("service_per_unit")),
            ])
    return _table(
        ["load", "tool", "unit", "relay", "exposer", "connector", "sum", "service (nginx/iperf3)"],
        rows,
    )


def noise_table(summary: dict[str, Any], tools: list[str]) -> list[str]:
    rows = []
    for load, row in summary["loads"].items():
        for t in tools:
            e = row.get(t)
            if not e or not e.get("runs"):
                continue
            rates = e.get("rates", [])
            rows.append([
                load, t, str(e["runs"]),
                f"{num(min(rates))} to {num(max(rates))}" if rates else "n/a",
                f"{e['other_cores_max']:.2f}",
                f"{e['load_1m']['min']:.2f} to {e['load_1m']['max']:.2f}",
                str(e["repeats"]), str(e["contaminated"]), str(e["failed"]),
                str(e.get("errors", 0)),
            ])
    return _table(
        ["load", "tool", "runs", "rate min to max", "others' cores (max)", "load avg 1 min",
         "repeats", "still contaminated", "failed", "errors (max)"],
        rows,
    )


def special_tables(summary: dict[str, Any], tools: list[str]) -> list[str]:
    lines = ["Idle (after start-up, before any load): CPU of each role in ms per second, and"
             " memory (Pss summed over the role's processes), medians:", ""]
    rows = []
    for t in tools:
        e = summary["idle"].get(t)
        if not e:
            continue
        roles = sorted(e["cpu_ms_per_s"])
        rows.append([
            t, num(e["cpu_ms_per_s_sum"], 2),
            ", ".join(f"{r} {e['cpu_ms_per_s'][r]:.2f}" for r in roles) or NONE,
            f"{e['pss_kib_sum'] / 1024:.1f}",
            ", ".join(f"{r} {e['pss_kib'][r] / 1024:.1f}" for r in roles
                      if e["pss_kib"].get(r) is not None) or NONE,
            f"{summary['memory_after'][t] / 1024:.1f}" if t in summary["memory_after"] else NONE,
            num(summary["setup_s"].get(t), 2),
        ])
    lines += _table(["tool", "CPU ms/s", "by role", "Pss MiB", "by role",
                     "Pss MiB after the loads", "set-up s"], rows)
    lines += ["", "Relay restart (SIGKILL, start on the same ports; requests polled every 10 ms),"
              " medians (min to max):", ""]
    rows = []
    for t, e in summary["restart"].items():
        s, r = e["start_to_listening"], e["start_to_request"]
        rows.append([t, f"{s['median']:.3f} ({s['min']:.3f} to {s['max']:.3f})",
                     f"{r['median']:.3f} ({r['min']:.3f} to {r['max']:.3f})", str(r["n"])])
    lines += _table(["tool", "start to listening, s", "start to a working tunnel, s", "restarts"],
                    rows)
    lines += ["", "Many agents registering at once, medians:", ""]
    rows = []
    for t, e in sorted(summary["agents"].items()):
        rows.append([
            t, str(int(e["agents"])), num(e["registered_s"]), num(e["answered_s"]),
            num(e["relay_kib_per_tunnel"]),
            num(e.get("relay_rss_kib_per_tunnel")) if "relay_rss_kib_per_tunnel" in e else NONE,
            num(e.get("relay_processes_per_tunnel")) if "relay_processes_per_tunnel" in e else "0",
            num(e.get("exposer_pss_kib_each")) if "exposer_pss_kib_each" in e else NONE,
        ])
    lines += _table(["tool", "agents", "all registered, s", "all answered, s",
                     "relay KiB per idle tunnel (Pss)", "(VmRSS)", "relay processes per tunnel",
                     "exposer Pss KiB each"], rows)
    return lines


def targets_table(checks: list[dict[str, Any]]) -> list[str]:
    rows = [
        [c["target"], num(c["value"], 3), f"{c['op']} {c['threshold']:g}",
         {True: "met", False: "**missed**", None: "not measured"}[c["met"]]]
        for c in checks
    ]
    return _table(["target", "measured", "wanted", ""], rows)


def markdown(doc: dict[str, Any]) -> str:
    """
    The whole report of a run (L{bench.peers.__main__}'s JSON document).
    """
    meta, summary = doc["meta"], doc["summary"]
    tools = [t for t in meta["tools_run"] if t in doc["summary"]["setup_s"]] or meta["tools_run"]
    env, ver, tree = meta["environment"], meta["versions"], meta["tree"]
    modified = tree.get("nfltr_status", tree.get("nfltr_diff_files")) or []
    lines = [
        f"`{meta['command']}`, started {meta['started']}, {meta['elapsed_s']:.0f} s;"
        f" {meta['rounds']} interleaved rounds of {meta['seconds']} s per load, medians.",
        "",
        f"Machine: {env['cpu_model']}, {env['nproc']} CPUs, Linux {env['kernel']}"
        f"{speed_words(env)}. nfltr"
        f" {meta['tools']['nfltr']} at commit {tree['commit']}"
        + (f", with uncommitted changes in nfltr/ (`git status --short nfltr`:"
           f" {', '.join(m.strip() for m in modified)})" if modified
           else ", nfltr/ as committed")
        + f"; Python {env['python']}, Twisted {env['twisted']}, pyOpenSSL {env['pyopenssl']},"
        f" {env['openssl']}. Peers: {ver['openssh']}; {ver['pagekite']}; {ver['haproxy']};"
        f" {ver['socat']}. Services and load: nginx {meta['tools']['nginx']}, iperf3"
        f" {meta['tools']['iperf3']}, wrk {meta['tools']['wrk']}.",
        "",
    ]
    if meta.get("skipped"):
        lines += ["Not run: " + "; ".join(f"`{t}`: {why}" for t, why in meta["skipped"].items())
                  + ".", ""]
    lines += ["Rates (Gbit/s for bulk, good requests/s for the rest), medians:", ""]
    lines += rate_table(summary, tools)
    lines += ["", "Ratios of rates, per round then the median:", ""]
    lines += ratio_table(summary)
    lines += ["", "Targets of issue 9 for this round:", ""]
    lines += targets_table(doc["targets"])
    lines += ["", "CPU seconds of all the tool's processes (relay + exposer + connector) per GB"
              " (bulk, 1 MiB) or per 1,000 requests, medians:", ""]
    lines += cpu_sum_table(summary, tools)
    lines += ["", "The same by role, and the service's own CPU for comparison:", ""]
    lines += cpu_role_table(summary, tools)
    lines += ["", *special_tables(summary, tools)]
    lines += ["", "Noise: the spread of the counted runs, the most others (other users of the"
              " machine) took during one, and the load average before the runs:", ""]
    lines += noise_table(summary, tools)
    return "\n".join(lines) + "\n"


# -- plots -------------------------------------------------------------------------

COLOURS = {
    "direct": "#555555", "direct-tls": "#999999", "nfltr-plain": "#1f77b4",
    "nfltr-e2ee": "#4a9fe0", "nfltr-e2ee-full": "#9ecae1",
    "nfltr-e2ee-noresume": "#c6dbef", "share-e2ee": "#2ca02c",
    "share-inspect": "#7fcf7f",
    "share-passthrough": "#a6e3a6", "ssh": "#d62728", "nfltr-ssh": "#9467bd",
    "pagekite": "#ff7f0e", "socat": "#8c564b", "haproxy": "#e377c2",
}


def plots(doc: dict[str, Any], directory: Path, prefix: str = "peers") -> list[Path]:
    """
    PNGs of a run: rates per load and tool; each tool's rate over the
    baseline's (direct, or direct-tls for the shares) with the targets; CPU
    per unit by role.  The paths written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = doc["summary"]
    tools = [t for t in doc["meta"]["tools_run"] if t in summary["setup_s"]]
    written = []
    for name, draw, title in (
        ("rates", _plot_rates, "Rate per load and tool (medians, log scale; more is better)"),
        ("vs_direct", _plot_vs_direct,
         "Rate over the direct connection (ratio of medians; dashed: nfltr-plain's target)"),
        ("cpu", _plot_cpu,
         "CPU seconds of the tool's processes per unit, by role (medians; less is better)"),
    ):
        loads = list(summary["loads"])
        cols = min(4, len(loads))
        rows = -(-len(loads) // cols)
        fig, grid = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), squeeze=False)
        axes = [ax for row in grid for ax in row]
        for ax in axes[len(loads):]:
            ax.axis("off")
        for ax, load in zip(axes, loads, strict=False):
            draw(ax, summary, tools, load)
            ax.tick_params(labelsize=8)
            ax.invert_yaxis()
        fig.suptitle(title)
        fig.tight_layout()
        written.append(directory / f"{prefix}_{name}.png")
        fig.savefig(written[-1], dpi=90)
        plt.close(fig)
    return written


def _plot_rates(ax: Any, summary: dict[str, Any], tools: list[str], load: str) -> None:
    row = summary["loads"][load]
    names = [t for t in tools if row.get(t, {}).get("rate") is not None]
    values = [row[t]["rate"] for t in names]
    ax.barh(names, [max(v, 1e-3) for v in values], color=[COLOURS.get(t, "#333") for t in names])
    ax.set_xscale("log")
    ax.set_title(f"{load} ({_unit(load)})", fontsize=10)
    for y, v in enumerate(values):
        ax.text(max(v, 1e-3), y, f" {num(v)}", va="center", fontsize=7)


def _plot_vs_direct(ax: Any, summary: dict[str, Any], tools: list[str], load: str) -> None:
    row = summary["loads"][load]
    names, values = [], []
    for t in tools:
        base = "direct-tls" if t.startswith("share-") else "direct"
        if t in ("direct", "direct-tls") or row.get(t, {}).get("rate") is None:
            continue
        if row.get(base, {}).get("rate"):
            names.append(t)
            values.append(row[t]["rate"] / row[base]["rate"])
    ax.barh(names, [max(v, 1e-4) for v in values], color=[COLOURS.get(t, "#333") for t in names])
    ax.set_xscale("log")
    ax.axvline(1.0, color="#555555", linewidth=0.8)
    if load in PLAIN_VS_DIRECT:
        ax.axvline(PLAIN_VS_DIRECT[load], color="#1f77b4", linestyle="--", linewidth=0.8)
    ax.set_title(f"{load}: ÷ direct (shares ÷ direct-tls)", fontsize=10)
    for y, v in enumerate(values):
        ax.text(max(v, 1e-4), y, f" {v:.2f}", va="center", fontsize=7)


ROLE_COLOURS = {"relay": "#1f77b4", "exposer": "#ff7f0e", "connector": "#2ca02c"}


def _plot_cpu(ax: Any, summary: dict[str, Any], tools: list[str], load: str) -> None:
    row = summary["loads"][load]
    names = [t for t in tools if row.get(t, {}).get("cpu_per_unit", {}).get("sum")]
    left = [0.0] * len(names)
    for role, colour in ROLE_COLOURS.items():
        values = [row[t]["cpu_per_unit"].get(role) or 0.0 for t in names]
        ax.barh(names, values, left=left, color=colour, label=role)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_title(f"{load} ({_per(load)})", fontsize=10)
    for y, v in enumerate(left):
        ax.text(v, y, f" {num(v)}", va="center", fontsize=7)
    if load == next(iter(summary["loads"])):
        ax.legend(fontsize=7)
