"""
The Autobahn TestSuite's cases (run by kosoku) against nfltr's WebSocket
transport:

    python -m conformance.autobahn.suite [--legs server,relay,client]
        [--cases GLOB]... [--exclude GLOB]... [--out DIR]
    python -m conformance.autobahn.suite --check DIR

from the repository root, with nfltr's Python (conformance/autobahn/run does
all of it).  Three legs, each in a temporary directory on 127.0.0.1 with
free ports:

 - C{server} (fuzzingclient mode): kosoku against the relay's WebSocket
   factory (L{nfltr.ws.server.relay_websocket_factory}: its options, its
   protocol class) serving its echo on a plain TCP port (L{echo_server});
 - C{relay} (fuzzingclient mode): kosoku against a real relay, C{nfltr
   relay --ws-echo /echo}, on its own name behind TLS, through
   L{tls_bridge} (kosoku speaks no TLS);
 - C{client} (fuzzingserver mode): L{echo_client}, an autobahn client with
   nfltr's client options, against kosoku's fuzzing server.

kosoku writes its reports (Autobahn's JSON and HTML) to DIR/LEG/ (default
DIR: docs/conformance/autobahn); this module reads them back, judges every
case (L{judge}: OK, NON-STRICT and INFORMATIONAL pass; anything else only if
an L{ALLOWANCES} entry explains it), and writes DIR/index.json and
DIR/summary.md.  Exit status 0 if every case passed or is allowed, 1 if
not, 2 if a leg could not be run.  C{--check DIR} judges saved reports
again.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from subprocess import SubprocessError
from typing import Any

from nfltr.cli.processes import Child, wait_for_file
from tests.integration.harness import REPO, Stack

#: The kosoku release this was written against (its report layout).
KOSOKU_VERSION = "0.1.0"
#: Longest a leg may take (the whole suite takes about 20 s a leg).
LEG_TIMEOUT = 600.0
ECHO_PATH = "/echo"
DEFAULT_OUT = REPO / "docs" / "conformance" / "autobahn"

#: Verdicts that pass as they are (Autobahn: NON-STRICT is still conformant,
#: INFORMATIONAL is behaviour the RFC leaves open).
PASSING = ("OK", "NON-STRICT", "INFORMATIONAL")
PASSING_CLOSE = ("OK", "INFORMATIONAL")
BEHAVIOURS = ("OK", "NON-STRICT", "INFORMATIONAL", "UNIMPLEMENTED", "FAILED", "ERROR")

GROUP_NAMES = {
    "1": "Framing",
    "2": "Pings/Pongs",
    "3": "Reserved bits",
    "4": "Opcodes",
    "5": "Fragmentation",
    "6": "UTF-8 handling",
    "7": "Close handling",
    "9": "Limits/performance",
    "10": "Misc",
    "12": "permessage-deflate (payloads)",
    "13": "permessage-deflate (parameters)",
}


@dataclass(frozen=True)
class Allowance:
    """
    Cases that may end other than OK, and why.

    @ivar cases: case id globs.
    @ivar behaviour: the verdict they must have.
    @ivar close: the closing verdicts they may have.
    @ivar code: the close code nfltr must have sent (None: any).
    """

    name: str
    cases: tuple[str, ...]
    behaviour: str
    close: tuple[str, ...]
    code: int | None
    reason: str

    def covers(self, case: Case) -> bool:
        """
        Whether this explains C{case}'s verdicts.
        """
        return (
            any(fnmatch.fnmatchcase(case.id, pattern) for pattern in self.cases)
            and case.behaviour == self.behaviour
            and case.close in self.close
            and (self.code is None or case.code == self.code)
        )


ALLOWANCES = (
    Allowance(
        "message-limit",
        ("9.1.4", "9.1.5", "9.1.6", "9.2.4", "9.2.5", "9.2.6", "9.3.*", "9.4.*"),
        "FAILED", ("FAILED",), 1009,
        "A message of 4, 8 or 16 MiB (9.1.4-6 text, 9.2.4-6 binary; 9.3 and 9.4: 4 MiB in"
        " fragments of 64 B to 4 MiB) is over nfltr's limit: maxMessagePayloadSize ="
        " maxFramePayloadSize = MAX_MESSAGE = 1 MiB (nfltr/ws/options.py), while nfltr itself"
        " never sends a message over MESSAGE_SIZE = 256 KiB (nfltr/ws/transport.py splits link"
        " writes). nfltr fails the connection with close code 1009 (message too big), as RFC"
        " 6455 section 7.4.1 defines it; the suite wants the echo, hence FAILED. Autobahn counts"
        " 9.* as limits and performance cases: its report calls a failure non-conforming only"
        " when it is 'other than a performance/limits related one'. The cases at or under the"
        " limit must pass: 9.1.1-3 and 9.2.1-3 (up to exactly 1 MiB), 9.5 and 9.6 (1 MiB written"
        " in TCP chops of 64 B to 2 KiB), 9.7 and 9.8 (1000 messages of up to 4 KiB).",
    ),
    Allowance(
        "no-compression",
        ("12.*", "13.*"),
        "UNIMPLEMENTED", ("OK",), None,
        "permessage-deflate (RFC 7692) is off in nfltr/ws/options.py: the server accepts no"
        " offer (perMessageCompressionAccept returns None) and the client makes none"
        " (perMessageCompressionOffers = []). These cases run anyway, each in a few"
        " milliseconds: UNIMPLEMENTED is the suite's own check that no compression was"
        " negotiated, in either direction.",
    ),
)


@dataclass
class Case:
    """
    One case's verdicts, from a report.
    """

    id: str
    index: int
    behaviour: str
    close: str
    code: int | None
    duration: int
    result: str = ""
    result_close: str = ""
    reason: str | None = None
    description: str = ""
    verdict: str = ""  # "pass", an allowance's name, or "NOT ACCEPTED"

    @property
    def group(self) -> str:
        return self.id.split(".")[0]


@dataclass(frozen=True)
class LegSpec:
    """
    One leg: its name, kosoku's mode, what it checks.
    """

    name: str
    mode: str
    peer: str
    under_test: str


LEGS = {
    "server": LegSpec(
        "server", "fuzzingclient", "echo_server.py, ws://127.0.0.1:PORT/echo",
        "the relay's WebSocket factory (relay_websocket_factory, SERVER_OPTIONS, RelayWebSocket)"
        " serving its echo on a plain TCP port",
    ),
    "relay": LegSpec(
        "relay", "fuzzingclient", "nfltr relay --ws-echo /echo, through tls_bridge.py",
        "a real relay: its TLS port, own name (SNI localhost, the relay CA trusted), link sniffer,"
        " then the same WebSocket factory",
    ),
    "client": LegSpec(
        "client", "fuzzingserver", "echo_client.py (the fuzzing server is kosoku)",
        "nfltr's WebSocket client options (configure_client, CLIENT_OPTIONS) on an autobahn"
        " WebSocketClientProtocol with ClientWebSocket's logger",
    ),
}


@dataclass
class LegRun:
    """
    What running a leg gave: the time, and what its processes printed.
    """

    seconds: float
    logs: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None


# -- running -----------------------------------------------------------------


def kosoku_command() -> list[str]:
    """
    kosoku's command line, next to this Python's.

    @raise RuntimeError: kosoku is not installed.
    """
    beside = Path(sys.executable).parent / "kosoku"
    found = str(beside) if beside.exists() else shutil.which("kosoku")
    if found is None:
        raise RuntimeError(
            f"kosoku is not installed: pip install kosoku=={KOSOKU_VERSION}"
            " (conformance/autobahn/run does)"
        )
    return [found]


def selection_args(cases: list[str], exclude: list[str]) -> list[str]:
    """
    kosoku's arguments for the cases to run.
    """
    args: list[str] = []
    for pattern in cases:
        args += ["--include", pattern]
    for pattern in exclude:
        args += ["--exclude", pattern]
    return args


def selected_ids(cases: list[str], exclude: list[str]) -> list[str]:
    """
    The case ids kosoku has that the selection names, in order.
    """
    from kosoku.cases import CASES

    def named(case: str, patterns: list[str]) -> bool:
        return any(fnmatch.fnmatchcase(case, pattern) for pattern in patterns)

    return [
        case for case in CASES
        if (not cases or named(case, cases)) and not named(case, exclude)
    ]


def python_module(module: str, *args: str) -> list[str]:
    """
    C{python -m MODULE ARGS} with this interpreter.
    """
    return [sys.executable, "-m", module, *args]


def fuzz_server(url: str, out: Path, selection: list[str], logs: dict[str, list[str]]) -> None:
    """
    Run kosoku's fuzzing client against C{url}, reports to C{out}.
    """
    kosoku = Child([*kosoku_command(), "--mode", "fuzzingclient", url, "--outdir", str(out),
                    *selection], name="kosoku", cwd=REPO)
    try:
        kosoku.wait_exit(LEG_TIMEOUT)  # its status is 1 whenever a case is not OK
    finally:
        kosoku.stop()
        logs["kosoku"] = kosoku.lines


def run_server(work: Path, out: Path, selection: list[str]) -> LegRun:
    """
    The C{server} leg.
    """
    started = time.monotonic()
    logs: dict[str, list[str]] = {}
    port_file = work / "echo.port"
    server = Child(python_module("conformance.autobahn.echo_server", "--port-file",
                                 str(port_file)), name="echo server", cwd=REPO)
    try:
        port = int(wait_for_file(port_file))
        fuzz_server(f"ws://127.0.0.1:{port}{ECHO_PATH}", out, selection, logs)
    finally:
        server.stop()
        logs["echo server"] = server.lines
    return LegRun(time.monotonic() - started, logs)


def run_relay(work: Path, out: Path, selection: list[str]) -> LegRun:
    """
    The C{relay} leg.
    """
    started = time.monotonic()
    logs: dict[str, list[str]] = {}
    stack = Stack(work / "stack", relay_extra=("--ws-echo", ECHO_PATH))
    try:
        port_file = work / "bridge.port"
        stack.start(python_module(
            "conformance.autobahn.tls_bridge", "--to", stack.address, "--server-name",
            "localhost", "--ca", stack.ca, "--port-file", str(port_file),
        ), "tls bridge")
        port = int(wait_for_file(port_file))
        fuzz_server(f"ws://127.0.0.1:{port}{ECHO_PATH}", out, selection, logs)
    finally:
        stack.close()
        logs["relay"] = stack.relay.lines
        if len(stack.processes) > 1:
            logs["tls bridge"] = stack.processes[1].lines
    return LegRun(time.monotonic() - started, logs)


def run_client(work: Path, out: Path, selection: list[str]) -> LegRun:
    """
    The C{client} leg.
    """
    started = time.monotonic()
    logs: dict[str, list[str]] = {}
    kosoku = Child([*kosoku_command(), "--mode", "fuzzingserver", "127.0.0.1:0", "--outdir",
                    str(out), *selection], name="kosoku", cwd=REPO)
    client: Child | None = None
    try:
        port = kosoku.wait_for(r"listening on ws://127\.0\.0\.1:(\d+)").group(1)
        client = Child(python_module("conformance.autobahn.echo_client",
                                     f"ws://127.0.0.1:{port}"), name="echo client", cwd=REPO)
        status = client.wait_exit(LEG_TIMEOUT)
        kosoku.wait_exit(60)
        error = None if status == 0 else f"the echo client exited with status {status}"
    finally:
        for child in (client, kosoku):
            if child is not None:
                child.stop()
        logs["kosoku"] = kosoku.lines
        if client is not None:
            logs["echo client"] = client.lines
    return LegRun(time.monotonic() - started, logs, error)


RUNNERS = {"server": run_server, "relay": run_relay, "client": run_client}


# -- judging -----------------------------------------------------------------


def prune_case_reports(directory: Path, cases: list[Case], keep: str) -> None:
    """
    Remove the per-case report files C{keep} does not name (C{"all"},
    C{"not-ok"} or C{"none"}), and say so in C{directory}/index.json.
    """
    if keep == "all" or not (directory / "index.json").exists():
        return
    index = json.loads((directory / "index.json").read_text())
    (entries,) = index.values()
    verdicts = {case.id: case for case in cases}
    for case_id, entry in entries.items():
        case = verdicts.get(case_id)
        if keep == "not-ok" and case is not None and (case.behaviour != "OK"
                                                      or case.close != "OK"):
            continue
        report = directory / entry["reportfile"]
        report.unlink(missing_ok=True)
        report.with_suffix(".html").unlink(missing_ok=True)
        entry["reportfile"] = None
    (directory / "index.json").write_text(json.dumps(index, indent=3, sort_keys=True) + "\n")


def load_cases(directory: Path) -> list[Case]:
    """
    The cases of one leg's reports (kosoku's index.json and case files).

    @raise ValueError: there is no report, or more than one agent in it.
    """
    index_file = directory / "index.json"
    if not index_file.exists():
        raise ValueError(f"{index_file}: no report")
    index = json.loads(index_file.read_text())
    if len(index) != 1:
        raise ValueError(f"{index_file}: one agent expected, found {sorted(index)}")
    (entries,) = index.values()
    cases = []
    for case_id, entry in entries.items():
        name = entry["reportfile"]
        report = json.loads((directory / name).read_text()) if name else {}
        cases.append(Case(
            id=case_id, index=report.get("case", 0), behaviour=entry["behavior"],
            close=entry["behaviorClose"], code=entry["remoteCloseCode"],
            duration=entry["duration"], result=report.get("result", ""),
            result_close=report.get("resultClose", ""),
            reason=report.get("remoteCloseReason"), description=report.get("description", ""),
        ))
    return sorted(cases, key=lambda c: [int(p) for p in c.id.split(".")])


def judge(case: Case) -> str:
    """
    C{"pass"}, the name of the allowance that explains the case, or
    C{"NOT ACCEPTED"}.
    """
    if case.behaviour in PASSING and case.close in PASSING_CLOSE:
        return "pass"
    for allowance in ALLOWANCES:
        if allowance.covers(case):
            return allowance.name
    return "NOT ACCEPTED"


def log_problems(logs: dict[str, list[str]]) -> list[str]:
    """
    Lines of the processes under test that show an error nfltr did not
    handle (tracebacks, unhandled errors).
    """
    problems = []
    for name, lines in logs.items():
        if name == "kosoku":
            continue
        for line in lines:
            if "Traceback" in line or "Unhandled" in line or "CRITICAL" in line:
                problems.append(f"{name}: {line}")
    return problems


def after_close_notes(logs: dict[str, list[str]], cases: list[Case]) -> list[str]:
    """
    The echo client's notes of messages delivered once the closing handshake
    had begun, with case ids.
    """
    by_index = {case.index: case.id for case in cases}
    notes = []
    for line in logs.get("echo client", []):
        head, sep, rest = line.partition(": a message arrived after")
        if sep and head.startswith("case "):
            number = int(head.split()[1])
            notes.append(f"{by_index.get(number, head)}: a message arrived after{rest}")
    return notes


@dataclass
class LegResult:
    """
    A leg's judged cases and what else was seen.
    """

    spec: LegSpec
    cases: list[Case]
    seconds: float | None
    expected: int | None
    problems: list[str]
    notes: list[str]

    @property
    def rejected(self) -> list[Case]:
        return [case for case in self.cases if case.verdict == "NOT ACCEPTED"]

    @property
    def ok(self) -> bool:
        return not self.rejected and not self.problems


def judge_leg(spec: LegSpec, directory: Path, run: LegRun | None,
              expected: list[str] | None) -> LegResult:
    """
    Judge one leg's report; a missing report or missing cases is a problem.
    """
    problems: list[str] = []
    cases: list[Case] = []
    try:
        cases = load_cases(directory)
    except (ValueError, OSError) as e:
        problems.append(str(e))
    for case in cases:
        case.verdict = judge(case)
    if expected is not None:
        missing = sorted(set(expected) - {case.id for case in cases})
        if missing:
            problems.append(f"{len(missing)} cases have no result: {', '.join(missing[:10])}")
    notes: list[str] = []
    if run is not None:
        if run.error:
            problems.append(run.error)
        problems += log_problems(run.logs)
        notes = after_close_notes(run.logs, cases)
    return LegResult(spec, cases, None if run is None else run.seconds,
                     None if expected is None else len(expected), problems, notes)


# -- writing -----------------------------------------------------------------


def versions() -> dict[str, str]:
    """
    The versions that made the reports.
    """
    found = {}
    for name in ("kosoku", "autobahn", "Twisted", "txaio", "pyOpenSSL", "cryptography", "nfltr"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    found["Python"] = platform.python_version()
    found["platform"] = platform.platform()
    return found


def outcome(case: Case) -> tuple[Any, ...]:
    """
    How a case ended, as far as the summary tells.
    """
    return (case.behaviour, case.close, case.code, case.verdict, case.result, case.result_close)


def ranges(cases: list[Case]) -> list[list[Case]]:
    """
    Runs of consecutive cases (in case order) that ended the same way.
    """
    runs: list[list[Case]] = []
    for case in cases:
        if runs:
            last = runs[-1][-1]
            if outcome(last) == outcome(case) and case.index == last.index + 1:
                runs[-1].append(case)
                continue
        runs.append([case])
    return runs


def counts(cases: list[Case]) -> dict[str, int]:
    """
    How many cases have each verdict, and how many closes are not OK.
    """
    counter = Counter(case.behaviour for case in cases)
    result = {behaviour: counter.get(behaviour, 0) for behaviour in BEHAVIOURS}
    result["cases"] = len(cases)
    result["close not OK"] = sum(case.close not in PASSING_CLOSE for case in cases)
    result["not accepted"] = sum(case.verdict == "NOT ACCEPTED" for case in cases)
    return result


def leg_markdown(leg: LegResult) -> list[str]:
    """
    One leg's section of the summary.
    """
    spec = leg.spec
    took = "" if leg.seconds is None else f", {leg.seconds:.1f} s"
    lines = [
        f"## {spec.name}",
        "",
        f"kosoku in {spec.mode} mode, against {spec.peer}. Under test: {spec.under_test}."
        f" {len(leg.cases)} cases{took}.",
        "",
        "| group | cases | OK | NON-STRICT | INFORMATIONAL | UNIMPLEMENTED | FAILED | ERROR"
        " | close not OK | not accepted |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    groups: dict[str, list[Case]] = {}
    for case in leg.cases:
        groups.setdefault(case.group, []).append(case)
    columns = (*BEHAVIOURS, "close not OK", "not accepted")
    for group, members in groups.items():
        row = counts(members)
        name = f"{group} {GROUP_NAMES.get(group, '')}".strip()
        lines.append(f"| {name} | {row['cases']} | " + " | ".join(
            str(row[column]) for column in columns) + " |")
    total = counts(leg.cases)
    lines.append(f"| **all** | **{total['cases']}** | " + " | ".join(
        f"**{total[column]}**" for column in columns) + " |")
    lines += ["", "Cases that are not OK (consecutive cases that ended alike on one row):", ""]
    odd = [case for case in leg.cases if case.behaviour != "OK" or case.close != "OK"]
    if not odd:
        lines.append("None.")
    else:
        lines += [
            "| cases | behaviour | closing | nfltr's close code | verdict | the suite says |",
            "|---|---|---|--:|---|---|",
        ]
        for run in ranges(odd):
            first, last = run[0], run[-1]
            named = first.id if len(run) == 1 else f"{first.id} to {last.id} ({len(run)})"
            verdict = {"pass": "passes", "NOT ACCEPTED": "**NOT ACCEPTED**"}.get(
                first.verdict, f"allowed: `{first.verdict}`")
            said = f"{first.result} {first.result_close}".replace("|", "/")
            code = "-" if first.code is None else first.code
            lines.append(f"| {named} | {first.behaviour} | {first.close} | {code} |"
                         f" {verdict} | {said} |")
    if leg.notes:
        lines += ["", "The echo client saw (see the README, 'Findings'):", ""]
        lines += [f"- {note}" for note in leg.notes]
    if leg.problems:
        lines += ["", "**Problems:**", ""]
        lines += [f"- `{problem}`" for problem in leg.problems]
    return [*lines, ""]


def write_summary(out: Path, legs: list[LegResult], seconds: float | None) -> bool:
    """
    Write DIR/index.json and DIR/summary.md; whether every leg passed.
    """
    passed = all(leg.ok for leg in legs)
    found = versions()
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    took = "" if seconds is None else f" in {seconds:.0f} s"
    lines = [
        "# Autobahn TestSuite against nfltr's WebSocket transport",
        "",
        f"Made by `conformance/autobahn/run` on {date}{took}; verdict:"
        f" **{'PASS' if passed else 'FAIL'}**. Every case passes as OK, NON-STRICT or"
        " INFORMATIONAL, or fails in a way an allowance below explains; anything else is"
        " NOT ACCEPTED. How and why: [conformance/autobahn/README.md]"
        "(../../../conformance/autobahn/README.md).",
        "",
        "Versions: " + ", ".join(f"{name} {version}" for name, version in found.items()) + ".",
        "",
        "| leg | mode | against | cases | not accepted | time |",
        "|---|---|---|--:|--:|--:|",
    ]
    for leg in legs:
        spent = "-" if leg.seconds is None else f"{leg.seconds:.1f} s"
        lines.append(f"| [{leg.spec.name}](#{leg.spec.name}) |"
                     f" {leg.spec.mode} | {leg.spec.peer} | {len(leg.cases)} |"
                     f" {len(leg.rejected) + len(leg.problems)} | {spent} |")
    lines += ["", "The full reports (kosoku's, in Autobahn's format): "
              + ", ".join(f"[{leg.spec.name}/index.html]({leg.spec.name}/index.html)"
                          for leg in legs) + ".", ""]
    for leg in legs:
        lines += leg_markdown(leg)
    lines += ["## Allowances", ""]
    for allowance in ALLOWANCES:
        lines.append(f"- `{allowance.name}` ({', '.join(allowance.cases)}: {allowance.behaviour},"
                     f" closing {' or '.join(allowance.close)}"
                     + ("" if allowance.code is None else f", nfltr's close code {allowance.code}")
                     + f"): {allowance.reason}")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    index = {
        "date": date,
        "seconds": seconds,
        "passed": passed,
        "versions": found,
        "allowances": {a.name: a.reason for a in ALLOWANCES},
        "legs": {
            leg.spec.name: {
                "mode": leg.spec.mode,
                "against": leg.spec.peer,
                "seconds": leg.seconds,
                "counts": counts(leg.cases),
                "problems": leg.problems,
                "notes": leg.notes,
                "not_ok": [
                    {"id": c.id, "behavior": c.behaviour, "behaviorClose": c.close,
                     "remoteCloseCode": c.code, "verdict": c.verdict}
                    for c in leg.cases if c.behaviour != "OK" or c.close != "OK"
                ],
            }
            for leg in legs
        },
    }
    (out / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    return passed


def report_line(leg: LegResult) -> str:
    """
    One line on the console per leg.
    """
    total = counts(leg.cases)
    shown = ", ".join(f"{b} {total[b]}" for b in BEHAVIOURS if total[b])
    took = "" if leg.seconds is None else f" ({leg.seconds:.1f} s)"
    return (f"{leg.spec.name}: {total['cases']} cases: {shown}; not accepted:"
            f" {len(leg.rejected)}{took}")


def print_failures(leg: LegResult) -> None:
    """
    Print what did not pass.
    """
    for case in leg.rejected:
        print(f"NOT ACCEPTED {leg.spec.name} {case.id}: {case.behaviour}, closing {case.close},"
              f" close code {case.code}: {case.result} {case.result_close}")
    for problem in leg.problems:
        print(f"PROBLEM {leg.spec.name}: {problem}")


# -- main --------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """
    Run the legs (or judge saved reports); the exit status.
    """
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--legs", default=",".join(LEGS),
                        help=f"comma-separated, of {', '.join(LEGS)} (default: all)")
    parser.add_argument("--cases", action="append", default=[], metavar="GLOB",
                        help="case ids or globs to run, e.g. 1.* (repeatable; default: all)")
    parser.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="case ids or globs not to run (repeatable)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="where the reports and summary go (default: %(default)s)")
    parser.add_argument("--case-reports", choices=("all", "not-ok", "none"), default="all",
                        help="which per-case report files (JSON, HTML) to keep: all, those of"
                        " cases not OK, or none (kosoku's index.json and index.html are always"
                        " kept; default: %(default)s)")
    parser.add_argument("--check", type=Path, metavar="DIR",
                        help="judge the reports saved in DIR again; run nothing")
    args = parser.parse_args(argv)

    if args.check is not None:
        legs = [judge_leg(LEGS[name], args.check / name, None, None)
                for name in LEGS if (args.check / name).is_dir()]
        for leg in legs:
            print(report_line(leg))
            print_failures(leg)
        passed = bool(legs) and all(leg.ok for leg in legs)
        print("PASS" if passed else "FAIL")
        return 0 if passed else 1

    names = [name.strip() for name in args.legs.split(",") if name.strip()]
    unknown = [name for name in names if name not in LEGS]
    if unknown:
        parser.error(f"unknown legs: {', '.join(unknown)}")
    try:
        kosoku_command()
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 2
    expected = selected_ids(args.cases, args.exclude)
    selection = selection_args(args.cases, args.exclude)
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    started = time.monotonic()
    results = []
    with tempfile.TemporaryDirectory(prefix="nfltr-autobahn-") as tmp:
        for name in names:
            directory = out / name
            if directory.is_dir():
                shutil.rmtree(directory)
            work = Path(tmp) / name
            work.mkdir()
            print(f"{name}: kosoku in {LEGS[name].mode} mode, against {LEGS[name].peer} ...",
                  flush=True)
            try:
                run = RUNNERS[name](work, directory, selection)
            except (RuntimeError, AssertionError, OSError, ValueError, SubprocessError) as e:
                run = LegRun(0.0, error=f"the leg could not be run: {e}")
            leg = judge_leg(LEGS[name], directory, run, expected)
            prune_case_reports(directory, leg.cases, args.case_reports)
            results.append(leg)
            print(report_line(leg), flush=True)
            print_failures(leg)
    seconds = time.monotonic() - started
    passed = write_summary(out, results, seconds)
    print(f"reports and summary: {os.path.relpath(out)}/")
    print(f"{'PASS' if passed else 'FAIL'}: {len(results)} legs, {seconds:.0f} s")
    if any(leg.problems and not leg.cases for leg in results):
        return 2
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
