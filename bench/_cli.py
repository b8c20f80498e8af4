"""
The command-line options the benchmarks share (L{bench.tunnel},
L{bench.shares}, L{bench.peers}): rounds, the wait for a quiet machine and
the repeats of contaminated runs, py-spy profiles, where results go.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ._system import ROOT


def comma_list(text: str) -> list[str]:
    """
    The non-empty items of a comma-separated option.
    """
    return [item.strip() for item in text.split(",") if item.strip()]


def add_rounds(parser: argparse.ArgumentParser, rounds: int) -> None:
    parser.add_argument("--rounds", type=int, default=rounds, help="rounds of every case (>= 1)")


def add_quick(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--quick", action="store_true", help=f"smoke run: {what}")


def add_noise(
    parser: argparse.ArgumentParser, *, settle_help: str, max_other: float = 0.2,
    quiet_budget: float = 45.0, budget: float | None = 540.0,
) -> None:
    """
    How runs wait for a quiet machine and repeat when others were busy.
    """
    parser.add_argument("--settle", type=float, default=0.2,
                        help=f"seconds after each run still counted ({settle_help})")
    parser.add_argument("--max-other", type=float, default=max_other,
                        help="others' CPU (cores) above which a run is repeated")
    parser.add_argument("--retries", type=int, default=2, help="repeats of a contaminated run")
    parser.add_argument("--quiet-budget", type=float, default=quiet_budget,
                        help="seconds in all to wait for a quiet machine before runs")
    if budget is not None:
        parser.add_argument("--budget", type=float, default=budget,
                            help="seconds for the whole benchmark: runs are waited for or"
                            " repeated only while the cases left still fit (at the mean time a"
                            " case took)")


def add_profile(parser: argparse.ArgumentParser, *, workloads: str, seconds: int) -> None:
    """
    The py-spy sampling of one more run per workload (the C{--profile}
    switch itself differs between the benchmarks).
    """
    parser.add_argument("--profile-workloads", default=workloads)
    parser.add_argument("--profile-seconds", type=int, default=seconds)
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples a second")
    parser.add_argument("--top", type=int, default=12, help="hot spots listed per process")
    parser.add_argument("--profile-dir", help="keep py-spy's collapsed stacks here")


def add_output(parser: argparse.ArgumentParser, default_json: Path, *, quick: bool = True) -> None:
    """
    C{--report} (print a stored run) and C{--json} (where results go).
    """
    parser.add_argument("--report", type=Path, metavar="JSON",
                        help="print the tables of a stored run instead of running")
    parser.add_argument("--json", type=Path, default=None,
                        help=f"where the results go (default: {default_json.relative_to(ROOT)}"
                        + ("; none with --quick)" if quick else ")"))
