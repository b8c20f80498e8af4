"""
Audit the relay's SSH port with ssh-audit and check the results:

    python conformance/ssh-audit/audit.py [--standin] [--out DIR] [--modes default,pq-only]

from the repository root, with nfltr's Python (conformance/ssh-audit/run
does all of it, ssh-audit's venv included).  For each mode (C{default}; and
C{pq-only}, the relay's C{--ssh-pq-only}) it starts, in a temporary
directory on 127.0.0.1, a relay (C{twistd -n nfltr-relay ... --ssh
tcp:PORT:interface=127.0.0.1}) or, with C{--standin}, the stand-in server
(C{standin.py}: the same transport and host keys, no relay); then runs
ssh-audit three times: the plain audit (kept as text, C{MODE.txt}, and as
JSON, C{MODE.json}) and the policy check against C{policy.txt}
(C{MODE.policy.txt}); checks the L{RULES}; writes C{summary.md} to DIR
(default docs/conformance/ssh-audit) and stops the server.  Exit status 1
if a rule fails (each failure printed), 2 if the audit could not be made.

ssh-audit is C{$NFLTR_SSH_AUDIT}, else conformance/ssh-audit/.venv's, else
the one on the PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from nfltr.cli.processes import Child  # noqa: E402 -- after the repository is on the path

POLICY = HERE / "policy.txt"
STANDIN = HERE / "standin.py"
#: The ssh-audit release these checks were written against (its JSON layout).
SSH_AUDIT_VERSION = "3.9.0"
AUDIT_TIMEOUT = 120
READY_TIMEOUT = 60.0
MODES = ("default", "pq-only")

PQ_KEX = "mlkem768x25519-sha256"
STRICT_KEX = "kex-strict-s-v00@openssh.com"
PSEUDO = {"ext-info-s", STRICT_KEX}
#: The only warnings accepted, per mode: (category, algorithm, text).
EXPECTED_WARNINGS: dict[str, set[tuple[str, str, str]]] = {
    "default": {("kex", "curve25519-sha256",
                 "does not provide protection against post-quantum attacks")},
    "pq-only": set(),
}
CATEGORIES = ("kex", "key", "enc", "mac")
RSA_MIN_BITS = 3072


class AuditError(Exception):
    """
    The audit could not be made (no ssh-audit, no server).
    """


def find_ssh_audit() -> str | None:
    """
    The ssh-audit to run: C{$NFLTR_SSH_AUDIT}, the venv run makes, or one on
    the PATH; None if there is none.
    """
    for candidate in (os.environ.get("NFLTR_SSH_AUDIT"), str(HERE / ".venv/bin/ssh-audit"),
                      shutil.which("ssh-audit")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    """
    A TCP port free on 127.0.0.1 now (for a server that must be given one).
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_banner(port: int, child: Child, timeout: float = READY_TIMEOUT) -> str:
    """
    Wait until C{port} answers with an SSH version line; that line.
    """
    deadline = time.monotonic() + timeout
    while True:
        if child.popen.poll() is not None:
            raise AuditError(f"{child.name} ended:\n{child.output()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                line = s.makefile("rb").readline()
                if line.startswith(b"SSH-"):
                    return line.decode("ascii", "replace").strip()
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AuditError(f"{child.name}: no SSH server on port {port}:\n{child.output()}")
        time.sleep(0.2)


def relay_has_ssh() -> bool:
    """
    Whether this tree's relay has the C{--ssh} option.
    """
    done = subprocess.run([*twistd(), "nfltr-relay", "--help"], capture_output=True, text=True,
                          cwd=REPO, timeout=60, check=False)
    return "--ssh-pq-only" in done.stdout and "--ssh=" in done.stdout


def twistd() -> list[str]:
    """
    twistd, beside this Python.
    """
    return [str(Path(sys.executable).parent / "twistd")]


def start_server(mode: str, work: Path, standin: bool) -> tuple[Child, int, str]:
    """
    Start the relay (or the stand-in) for C{mode}; it, its SSH port and its
    version line.
    """
    work.mkdir(parents=True, exist_ok=True)
    pq = ["--ssh-pq-only"] if mode == "pq-only" else []
    if standin:
        port_file = work / "port"
        child = Child([sys.executable, str(STANDIN), "--key-dir", str(work / "keys"),
                       "--port-file", str(port_file), *(["--pq-only"] if pq else [])],
                      name=f"stand-in ({mode})", cwd=REPO)
        deadline = time.monotonic() + READY_TIMEOUT
        while not port_file.exists():
            if child.popen.poll() is not None or time.monotonic() > deadline:
                child.stop()
                raise AuditError(f"the stand-in did not start:\n{child.output()}")
            time.sleep(0.05)
        port = int(port_file.read_text())
    else:
        port = free_port()
        child = Child([*twistd(), "-n", "--pidfile=", "nfltr-relay", "--data-dir",
                       str(work / "relay"), "--tls", "tcp:0:interface=127.0.0.1",
                       "--admin", "tcp:0:interface=127.0.0.1", "--http", "none",
                       "--ssh", f"tcp:{port}:interface=127.0.0.1", *pq],
                      name=f"relay ({mode})", cwd=REPO)
    try:
        banner = wait_for_banner(port, child)
    except AuditError:
        child.stop()
        raise
    return child, port, banner


def ssh_audit(tool: str, port: int, *options: str) -> subprocess.CompletedProcess[str]:
    """
    Run ssh-audit against 127.0.0.1:C{port}.
    """
    return subprocess.run([tool, "-n", *options, "-p", str(port), "127.0.0.1"],
                          capture_output=True, text=True, timeout=AUDIT_TIMEOUT, check=False,
                          env={**os.environ, "NO_COLOR": "1"})


@dataclass
class ModeResult:
    """
    What ssh-audit said about one mode.
    """

    mode: str
    banner: str
    report: dict[str, Any]
    text: str
    policy_code: int
    policy_text: str


def audit(tool: str, mode: str, port: int, banner: str, rate_test: bool = True) -> ModeResult:
    """
    The plain audit (text and JSON) and the policy check of C{port}.
    """
    skip = [] if rate_test else ["--skip-rate-test"]
    text = ssh_audit(tool, port, *skip)
    report_run = ssh_audit(tool, port, "-jj", "--skip-rate-test")
    try:
        report = json.loads(report_run.stdout)
    except json.JSONDecodeError:
        raise AuditError(f"ssh-audit gave no JSON:\n{report_run.stdout}{report_run.stderr}"
                         ) from None
    policy = ssh_audit(tool, port, "-P", str(POLICY))
    return ModeResult(mode, banner, report, text.stdout + text.stderr, policy.returncode,
                      policy.stdout + policy.stderr)


def notes(report: dict[str, Any], level: str) -> set[tuple[str, str, str]]:
    """
    Every note of C{level} (C{fail}, C{warn}) as (category, algorithm, text).
    """
    found = set()
    for category in CATEGORIES:
        for entry in report.get(category, []):
            for text in entry.get("notes", {}).get(level, []):
                found.add((category, entry["algorithm"], text))
    return found


def names(report: dict[str, Any], category: str) -> list[str]:
    return [entry["algorithm"] for entry in report.get(category, [])]


Rule = Callable[[ModeResult], "tuple[bool, str]"]


def rule_no_failures(r: ModeResult) -> tuple[bool, str]:
    failures = notes(r.report, "fail")
    return not failures, "; ".join(f"{c} {a}: {t}" for c, a, t in sorted(failures)) or "none"


def rule_expected_warnings(r: ModeResult) -> tuple[bool, str]:
    warnings = notes(r.report, "warn")
    extra = warnings - EXPECTED_WARNINGS[r.mode]
    return not extra, "; ".join(f"{c} {a}: {t}" for c, a, t in sorted(warnings)) or "none"


def rule_no_cves(r: ModeResult) -> tuple[bool, str]:
    cves = r.report.get("cves", [])
    return not cves, ", ".join(str(c.get("name", c)) for c in cves) or "none"


def rule_no_recommendations(r: ModeResult) -> tuple[bool, str]:
    recommendations = r.report.get("recommendations", {})
    return not recommendations, json.dumps(recommendations) if recommendations else "none"


def rule_strict_kex(r: ModeResult) -> tuple[bool, str]:
    return STRICT_KEX in names(r.report, "kex"), STRICT_KEX


def rule_pq_kex_first(r: ModeResult) -> tuple[bool, str]:
    kex = [k for k in names(r.report, "kex") if k not in PSEUDO]
    if r.mode == "pq-only":
        return kex == [PQ_KEX], ", ".join(kex)
    return kex[:1] == [PQ_KEX], ", ".join(kex)


def rule_rsa_3072(r: ModeResult) -> tuple[bool, str]:
    sizes = {entry["algorithm"]: entry.get("keysize") for entry in r.report.get("key", [])
             if entry["algorithm"].startswith("rsa-")}
    if r.mode == "pq-only" and not any(sizes.values()):
        # ssh-audit fetches host keys with the key exchanges it implements,
        # which do not include mlkem768x25519-sha256: nothing to measure.
        return True, "not measured (ssh-audit cannot run the only key exchange offered)"
    ok = bool(sizes) and all(size is not None and size >= RSA_MIN_BITS for size in sizes.values())
    return ok, ", ".join(f"{name} {size}" for name, size in sorted(sizes.items()))


def rule_no_sha1(r: ModeResult) -> tuple[bool, str]:
    offered = [n for c in CATEGORIES for n in names(r.report, c)]
    weak = [n for n in offered if "sha1" in n or n in ("ssh-rsa", "ssh-dss")]
    return not weak, ", ".join(weak) or "none"


def rule_policy(r: ModeResult) -> tuple[bool, str]:
    passed = r.policy_code == 0 and "Passed" in r.policy_text
    return passed, f"exit status {r.policy_code}"


RULES: dict[str, Rule] = {
    "no-failures": rule_no_failures,
    "only-expected-warnings": rule_expected_warnings,
    "no-cves": rule_no_cves,
    "no-recommendations": rule_no_recommendations,
    "strict-kex-offered": rule_strict_kex,
    "post-quantum-kex-first": rule_pq_kex_first,
    "rsa-host-key-3072": rule_rsa_3072,
    "no-sha1": rule_no_sha1,
    "policy-check-passes": rule_policy,
}


def evaluate(result: ModeResult) -> dict[str, tuple[bool, str]]:
    """
    Every rule's verdict and detail for one mode.
    """
    return {name: rule(result) for name, rule in RULES.items()}


def ssh_audit_version(tool: str) -> str:
    done = subprocess.run([tool, "-h"], capture_output=True, text=True, timeout=60, check=False)
    for line in (done.stdout + done.stderr).splitlines():
        if "ssh-audit v" in line:
            return line.split("ssh-audit v", 1)[1].split(",")[0].strip()
    return "unknown"


def write(out: Path, results: list[ModeResult], verdicts: dict[str, dict[str, tuple[bool, str]]],
          version: str, standin: bool, elapsed: float) -> bool:
    """
    Write the reports and C{summary.md}; whether every rule passed.
    """
    out.mkdir(parents=True, exist_ok=True)
    for r in results:
        (out / f"{r.mode}.txt").write_text(r.text)
        (out / f"{r.mode}.json").write_text(json.dumps(r.report, indent=2) + "\n")
        (out / f"{r.mode}.policy.txt").write_text(r.policy_text)
    passed = all(ok for v in verdicts.values() for ok, _ in v.values())
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    server = ("the stand-in (conformance/ssh-audit/standin.py: nfltr's SSH transport and host"
              " keys without a relay)" if standin else
              "a relay (`twistd -n nfltr-relay ... --ssh tcp:PORT:interface=127.0.0.1`, and"
              " `--ssh-pq-only` for pq-only)")
    lines = [
        "# ssh-audit of the relay's SSH port", "",
        f"Written by `conformance/ssh-audit/run` on {when}: ssh-audit {version} against"
        f" {server}, banner `{results[0].banner if results else '?'}`; {len(results)} modes"
        f" in {elapsed:.1f} s. Next to this file, `MODE.txt` is ssh-audit's report,"
        " `MODE.json` the same as JSON (made with `--skip-rate-test`) and `MODE.policy.txt`"
        " the policy check against `conformance/ssh-audit/policy.txt`. docs/ssh-security.md"
        " explains the algorithms.", "",
        f"**{'PASS' if passed else 'FAIL'}**", "",
        "| rule | " + " | ".join(r.mode for r in results) + " |",
        "|---|" + "---|" * len(results),
    ]
    for name in RULES:
        cells = []
        for r in results:
            ok, detail = verdicts[r.mode][name]
            cells.append(f"{'PASS' if ok else 'FAIL'}: {detail}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    return passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--standin", action="store_true",
                        help="audit the stand-in server instead of a relay")
    parser.add_argument("--out", default=str(REPO / "docs/conformance/ssh-audit"))
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")

    tool = find_ssh_audit()
    if tool is None:
        print("ssh-audit not found: run conformance/ssh-audit/run, or set NFLTR_SSH_AUDIT",
              file=sys.stderr)
        return 2
    if not args.standin and not relay_has_ssh():
        print("this relay has no --ssh/--ssh-pq-only options yet: audit the stand-in with"
              " --standin (the same transport and host keys)", file=sys.stderr)
        return 2
    version = ssh_audit_version(tool)
    if version != SSH_AUDIT_VERSION:
        print(f"note: ssh-audit {version}; these checks were written for {SSH_AUDIT_VERSION}")

    started = time.monotonic()
    results, verdicts = [], {}
    with tempfile.TemporaryDirectory(prefix="nfltr-ssh-audit-") as tmp:
        for mode in modes:
            try:
                child, port, banner = start_server(mode, Path(tmp) / mode, args.standin)
            except AuditError as e:
                print(f"ssh-audit ({mode}): {e}", file=sys.stderr)
                return 2
            try:
                result = audit(tool, mode, port, banner)
            except (AuditError, subprocess.TimeoutExpired) as e:
                print(f"ssh-audit ({mode}): {e}", file=sys.stderr)
                return 2
            finally:
                child.stop()
            results.append(result)
            verdicts[mode] = evaluate(result)
            for name, (ok, detail) in verdicts[mode].items():
                print(f"{mode:8} {'PASS' if ok else 'FAIL'} {name}: {detail}")
    passed = write(Path(args.out), results, verdicts, version, args.standin,
                   time.monotonic() - started)
    print(f"{'PASS' if passed else 'FAIL'}: ssh-audit {version}, {len(results)} modes,"
          f" {time.monotonic() - started:.1f} s, reports in {args.out}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
