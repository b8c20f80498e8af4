"""
The rounds of L{bench.peers}: each tool set up in turn, every load run
through it, measured, torn down; tool A, B, C, ... then again, the order
rotated each round (L{schedule}).

For one tool in one round: start it (its set-up time), measure it idle
(C{idle}: CPU and memory of its processes over C{--idle-seconds}), one
uncounted warm-up run, every load (each run's accounting from
L{bench.peers.accounting}, repeated up to C{--retries} times when others
used more than C{--max-other} of a core, the cleanest attempt counted),
C{--restarts} relay restarts (C{restart}), its memory after the loads, and
stop it.  After the tools of a round, the many-agents rows
(L{bench.peers.fleet}).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._stack import Services
from .._system import BenchError
from . import fleet
from .accounting import Window, tree_memory_kib
from .adapters import ROLES, TOOLS, Tool, get, wait_until
from .loads import Endpoint, Load

GB = 1e9


@dataclass
class Config:
    rounds: int = 3
    seconds: int = 3
    tools: list[str] = field(default_factory=list)
    loads: list[Load] = field(default_factory=list)
    idle_seconds: float = 10.0
    warmup: int = 1
    restarts: int = 2
    agents: int = 200
    fleet: list[str] = field(default_factory=lambda: list(fleet.FLEET_TOOLS))
    max_other: float = 0.25
    retries: int = 2
    settle: float = 0.2
    quiet_wait: float = 5.0
    quiet_budget: float = 120.0
    retry_budget: float = 600.0


def schedule(tools: list[str], rounds: int) -> list[tuple[int, str]]:
    """
    The interleaved order: every tool once per round, each round's order
    rotated by one so that no tool always runs after the same other one
    (or first, on a cold machine).
    """
    order = []
    for n in range(1, rounds + 1):
        shift = (n - 1) % len(tools) if tools else 0
        order += [(n, tool) for tool in tools[shift:] + tools[:shift]]
    return order


def per_unit(load: Load, cpu: float, result: dict[str, Any]) -> float | None:
    """
    CPU seconds per GB received (bulk, 1 MiB) or per 1,000 good requests;
    None when nothing good came through.
    """
    if load.kind != "bulk" and not result.get("requests"):
        return None
    if load.per_gb:
        return round(cpu / (result["bytes"] / GB), 4) if result.get("bytes") else None
    return round(cpu / result["requests"] * 1000, 4) if result.get("requests") else None


class Runner:
    """
    The rounds; every record goes to C{runs}.
    """

    def __init__(
        self, config: Config, tmp: Path, services: Services, script: Path,
        log: Callable[[str], None],
    ) -> None:
        self.config = config
        self.tmp = tmp
        self.services = services
        self.script = script
        self.log = log
        self.runs: list[dict[str, Any]] = []
        self.quiet_left = config.quiet_budget
        self.retry_left = config.retry_budget

    def run(self) -> list[dict[str, Any]]:
        last = 0
        for n, name in schedule(self.config.tools, self.config.rounds):
            if n != last and last:
                self.fleet(last)
            last = n
            self.tool_round(name, n)
        if last:
            self.fleet(last)
        return self.runs

    # -- one tool ---------------------------------------------------------------

    def tool_round(self, name: str, n: int) -> None:
        tool = TOOLS[name](self.tmp / f"{name}-{n}", self.services)
        base = {"round": n, "tool": name}
        try:
            started = time.monotonic()
            try:
                endpoints = tool.start()
            except BenchError as e:
                self.log(f"round {n} {name}: FAILED to start: {e}")
                self.runs.append({**base, "row": "setup", "error": str(e)})
                return
            setup = time.monotonic() - started
            self.runs.append({**base, "row": "setup", "setup_s": round(setup, 2), "counted": True})
            self.log(f"round {n} {name}: up in {setup:.1f}s {dict(endpoints)}")
            self.idle(tool, base)
            loads = [load for load in self.config.loads if load.kind in tool.kinds]
            if self.config.warmup and loads:
                warm = next((x for x in loads if x.name == "http-50"), loads[0])
                try:
                    warm.run(endpoints[warm.service], self.config.warmup, self.script)
                except BenchError as e:
                    self.log(f"round {n} {name}: warm-up failed: {e}")
            for load in loads:
                if not self.measure(tool, load, endpoints[load.service], base):
                    break
            self.runs.append({
                **base, "row": "memory-after", "counted": True, "memory_kib": {
                    role: tree_memory_kib(roots) for role, roots in tool.roles().items()
                },
            })
            self.restart(tool, base)
        finally:
            tool.stop()

    def idle(self, tool: Tool, base: dict[str, Any]) -> None:
        if self.config.idle_seconds <= 0:
            return
        time.sleep(1.0)
        window = Window(tool.roles(), [])
        time.sleep(self.config.idle_seconds)
        acct = window.close()
        memory = {role: tree_memory_kib(roots) for role, roots in tool.roles().items()}
        record = {
            **base, "row": "idle", "counted": True, **acct,
            "cpu_ms_per_s": {
                role: round(v / acct["window_s"] * 1000, 2) for role, v in acct["cpu_s"].items()
            },
            "memory_kib": memory,
            "pss_kib": sum(m["pss_kib"] for m in memory.values()),
        }
        self.runs.append(record)
        self.log(
            f"round {base['round']} {base['tool']}: idle"
            f" {sum(record['cpu_ms_per_s'].values()):.2f} ms CPU/s, PSS {record['pss_kib']} KiB"
        )

    def restart(self, tool: Tool, base: dict[str, Any]) -> None:
        if tool.restart_note is not None:
            return
        if tool.restart_rounds is not None and base["round"] > tool.restart_rounds:
            return
        count = self.config.restarts
        if tool.max_restarts is not None:
            count = min(count, tool.max_restarts)
        for _ in range(count):
            try:
                times = tool.restart_relay()
            except BenchError as e:
                self.log(f"round {base['round']} {base['tool']}: restart FAILED: {e}")
                self.runs.append({**base, "row": "restart", "error": str(e)})
                return
            self.runs.append({**base, "row": "restart", "counted": True, **times})
            self.log(f"round {base['round']} {base['tool']}: restart {times}")

    # -- one load ---------------------------------------------------------------

    def wait_quiet(self, tool: Tool) -> float:
        """
        Wait (within C{--quiet-wait}, and C{--quiet-budget} in all) until
        others use at most C{--max-other} of a core; what they last used.
        """
        deadline = time.monotonic() + min(self.config.quiet_wait, self.quiet_left)
        while True:
            t0 = time.monotonic()
            window = Window(tool.roles(), self.services_pids())
            time.sleep(0.5)
            other = window.close()["other_cores"]
            if other <= self.config.max_other or time.monotonic() >= deadline:
                return other
            self.quiet_left -= time.monotonic() - t0

    def wait_working(self, tool: Tool) -> float:
        """
        Wait until a request through the tool works: a run starts on an
        idle, working tunnel (pagekite still drains the tail of a bulk run
        through its one tunnel for seconds after iperf3 ended).  The
        seconds it took.

        @raise BenchError: it did not work within a minute.
        """
        started = time.monotonic()
        wait_until("the tunnel before a run", lambda: get(tool.endpoints["nginx"], timeout=10),
                   tool.procs.all, timeout=60, poll=0.1)
        return round(time.monotonic() - started, 3)

    def services_pids(self) -> list[int]:
        return [proc.pid for proc in self.services.groups.values()]

    def run_once(self, tool: Tool, load: Load, endpoint: Endpoint) -> dict[str, Any]:
        roles = tool.roles()
        window = Window(roles, self.services_pids())
        result = load.run(endpoint, self.config.seconds, self.script)
        time.sleep(self.config.settle)  # the teardown of the run's connections
        acct = window.close()
        record: dict[str, Any] = {**result, **acct, "unit": load.unit}
        cpu = dict(acct["cpu_s"])
        record["cpu_per_unit"] = {
            role: per_unit(load, cpu.get(role, 0.0), result) for role in (*ROLES, "sum")
            if role in cpu or role == "sum"
        }
        record["cpu_per_unit"]["sum"] = per_unit(load, sum(cpu.values()), result)
        record["cpu_cores"] = {role: round(v / acct["window_s"], 3) for role, v in cpu.items()}
        record["service_per_unit"] = per_unit(load, acct["service_cpu_s"], result)
        return record

    def measure(self, tool: Tool, load: Load, endpoint: Endpoint, base: dict[str, Any]) -> bool:
        """
        Run C{load} until a clean run or out of retries; every attempt is
        recorded, the cleanest marked C{counted}.  False if the tool died.
        """
        attempts = []
        for attempt in range(1, self.config.retries + 2):
            entry: dict[str, Any] = {**base, "row": load.name, "attempt": attempt,
                                     "counted": False}
            try:
                entry["ready_s"] = self.wait_working(tool)
                entry["others_before"] = self.wait_quiet(tool)
                tool.check()
                record = {**entry, **self.run_once(tool, load, endpoint)}
                tool.check()
            except BenchError as e:
                self.runs.append({**entry, "error": str(e)[-2000:]})
                self.log(f"round {base['round']} {base['tool']} {load.name}: FAILED: {e}")
                try:
                    tool.check()
                except BenchError:
                    return False
                if load.kind == "bulk":
                    self.services.start_iperf()  # a run cut short can leave it busy
                continue
            record["contaminated"] = record["other_cores"] > self.config.max_other
            attempts.append(record)
            self.runs.append(record)
            self.log(f"round {base['round']} {describe(record)}")
            if not record["contaminated"] or self.retry_left <= 0:
                break
            self.retry_left -= record["window_s"]
        if attempts:
            min(attempts, key=lambda r: r["other_cores"])["counted"] = True
        return True

    # -- many agents -------------------------------------------------------------

    def fleet(self, n: int) -> None:
        for name in self.config.fleet:
            if self.config.agents <= 0:
                return
            base = {"round": n, "tool": "nfltr-plain" if name == "nfltr" else name,
                    "row": "agents"}
            try:
                if name == "nfltr":
                    result = fleet.nfltr_fleet(self.tmp / f"fleet-nfltr-{n}", self.config.agents)
                else:
                    result = fleet.ssh_fleet(
                        self.tmp / f"fleet-ssh-{n}", self.config.agents,
                        self.services.ports["nginx"],
                    )
            except (BenchError, RuntimeError) as e:
                self.log(f"round {n} agents {name}: FAILED: {e}")
                self.runs.append({**base, "error": str(e)[-2000:]})
                continue
            self.runs.append({**base, "counted": True, **result})
            self.log(f"round {n} agents {name}: {result}")


def describe(r: dict[str, Any]) -> str:
    """
    One line about a load run.
    """
    unit = "CPU-s/GB" if r["unit"] == "Gbit/s" or r["row"].startswith("mib") else "CPU-s/1k"
    costs = " ".join(
        f"{role} {v:.3f}" for role, v in r["cpu_per_unit"].items() if v is not None
    )
    return (
        f"{r['tool']:17} {r['row']:9} {r['rate']:>9} {r['unit']}  {costs} {unit}"
        f"  others {r['other_cores']:.2f}  load {r['load_before'][0]}"
        + (f"  errors {r['errors']}" if r.get("errors") else "")
        + ("  CONTAMINATED" if r.get("contaminated") else "")
    )
