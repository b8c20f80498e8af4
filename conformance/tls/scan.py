"""
Scan every TLS leg of a real relay and check the policy:

    python -m conformance.tls.scan [--out DIR] [--legs relay,e2ee,...]
                                   [--no-testssl] [--testssl-jobs N]

from the repository root, with nfltr's Python (conformance/tls/run does all
of it).  It starts, in a temporary directory on 127.0.0.1 with free ports,
a relay (C{tests.integration.harness.Stack}), the test web service and two
C{nfltr http} agents (C{blog} in e2ee, C{shop} in inspect); scans each leg
with sslyze and its Mozilla "intermediate" checker
(L{conformance.tls.sslyze_worker}, run by the Python that has sslyze:
C{NFLTR_SSLYZE_PYTHON}, else conformance/tls/.venv, else this one) and with
L{conformance.tls.probes}, one leg after the other; then every leg with
testssl.sh (L{conformance.tls.testssl}), several at once; evaluates
L{conformance.tls.policy}; writes the results and a summary to DIR (default
docs/conformance/tls); stops everything.  Exit status 1 if a rule fails
(each failure printed), 2 if the scan could not be made.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.serialization import load_pem_private_key

from conformance.tls import policy, probes, summary, testssl
from nfltr.relay.config import DEFAULT_ADMISSION
from nfltr.tls import public_key_fingerprint
from tests.integration.harness import REPO, Stack

HERE = Path(__file__).resolve().parent
WORKER = HERE / "sslyze_worker.py"
#: The sslyze release these checks were written against (its JSON layout).
SSLYZE_VERSION = "6.3.1"
SSLYZE_TIMEOUT = 600


@dataclass(frozen=True)
class LegSpec:
    """
    One TLS leg: the server name a client sends (None: none) and who ends
    the TLS.
    """

    name: str
    server_name: str | None
    ends_tls: str
    ca: str  # "relay" or "share": which CA the leg's clients trust


LEGS = {
    "relay": LegSpec("relay", "localhost", "the relay, with its certificate", "relay"),
    "relay-no-sni": LegSpec("relay-no-sni", None, "the relay, with its certificate", "relay"),
    "e2ee": LegSpec("e2ee", "blog.localhost",
                    "the agent of the e2ee share (the relay forwards ciphertext)", "share"),
    "inspect": LegSpec("inspect", "shop.localhost",
                       "the relay, with a certificate for the share from its share CA", "share"),
}


def find_sslyze_python() -> str | None:
    """
    A Python that can import sslyze: C{$NFLTR_SSLYZE_PYTHON}, the venv
    conformance/tls/run makes, or this one; None if there is none.
    """
    candidates = [os.environ.get("NFLTR_SSLYZE_PYTHON"), str(HERE / ".venv" / "bin" / "python")]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            done = subprocess.run([candidate, "-c", "import sslyze"], capture_output=True,
                                  check=False, timeout=60)
            if done.returncode == 0:
                return candidate
    if importlib.util.find_spec("sslyze") is not None:
        return sys.executable
    return None


def sslyze_version(python: str) -> str:
    """
    The version of sslyze that C{python} has.
    """
    done = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('sslyze'))"],
        capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.strip()


class Relay:
    """
    A running relay with the agents the legs need; L{close} stops it all.
    """

    def __init__(self, tmp: Path, legs: list[LegSpec]) -> None:
        self.stack = Stack(tmp)
        try:
            self.expect = self._start([leg.name for leg in legs])
        except BaseException:
            self.stack.close()
            raise
        host, port = self.stack.address.rsplit(":", 1)
        self.address = (host, int(port))

    def _start(self, names: list[str]) -> dict[str, dict[str, Any]]:
        info = self.stack.info
        relay_key = info["fingerprint"]
        expect: dict[str, dict[str, Any]] = {
            "relay": {"spki_sha256": relay_key},
            "relay-no-sni": {"spki_sha256": relay_key},
        }
        if not {"e2ee", "inspect"} & set(names):
            return expect
        key = self.stack.key("alice")
        port = self.stack.web_service()
        others = [relay_key]
        if "e2ee" in names:
            self.stack.http_agent(key, "blog", port, "--mode", "e2ee")
            pem = (self.stack.tmp / "agent-blog" / "share.key").read_bytes()
            agent_key = public_key_fingerprint(load_pem_private_key(pem, None).public_key())
            expect["e2ee"] = {"spki_sha256": agent_key, "names": ["blog.localhost"]}
            others.append(agent_key)
        if "inspect" in names:
            self.stack.http_agent(key, "shop", port, "--mode", "inspect")
            expect["inspect"] = {"names": ["shop.localhost"], "not_spki": others}
        return expect

    def ca(self, leg: LegSpec) -> tuple[str, str]:
        """
        The name and file of the CA the leg's clients trust.
        """
        if leg.ca == "relay":
            return "relay CA (DATA_DIR/tls/ca.crt)", self.stack.ca
        return "share CA (DATA_DIR/tls/share-ca.crt)", self.stack.info["share_ca"]

    def counters(self) -> dict[str, dict[str, float]]:
        """
        The relay's refusal counters, and the TLS port's connections routed
        (C{routed}, by route), from its admin /metrics.
        """
        url = f"http://{self.stack.info['admin']}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        found: dict[str, dict[str, float]] = {"admission": {}, "tls_port": {}, "routed": {}}
        for match in re.finditer(
            r'^nfltr_tls_port_connections_total\{route="(\w+)"\} (\S+)', text, re.MULTILINE,
        ):
            found["routed"][match.group(1)] = float(match.group(2))
        for match in re.finditer(
            r'^nfltr_(admission|tls_port)_refused_total\{(?:port="(\w+)",)?reason="(\w+)"\} (\S+)',
            text, re.MULTILINE,
        ):
            kind, port, reason, value = match.groups()
            if kind == "admission" and port != "tls":
                continue
            found[kind][reason] = float(value)
        return found

    def close(self) -> None:
        """
        Stop the agents, the web service and the relay.
        """
        self.stack.close()


def run_sslyze(python: str, address: tuple[str, int], server_name: str | None, ca: str,
               out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """
    sslyze's JSON output for one leg (also left in C{out}), and its Mozilla
    intermediate checker's verdict (L{sslyze_worker.mozilla}); C{ca} is the
    CA the leg's clients trust.
    """
    mozilla = out.with_suffix(".mozilla.json")
    done = subprocess.run(
        [python, str(WORKER), address[0], str(address[1]), server_name or "-", ca, str(out),
         str(mozilla)],
        capture_output=True, text=True, timeout=SSLYZE_TIMEOUT, check=False,
        # The Mozilla checker writes sets into its messages: in a fixed order.
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    if done.returncode != 0:
        raise RuntimeError(f"sslyze failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    verdict: dict[str, Any] = json.loads(mozilla.read_text(encoding="utf-8"))
    return result, verdict


def scan_leg(relay: Relay, leg: LegSpec, sslyze_python: str, work: Path) -> dict[str, Any]:
    """
    One leg's results, as L{policy} reads them.
    """
    started = time.monotonic()
    before = relay.counters()
    scanned, mozilla = run_sslyze(sslyze_python, relay.address, leg.server_name,
                                  relay.ca(leg)[1], work / f"{leg.name}.sslyze.json")
    sslyze_seconds = time.monotonic() - started
    probed = probes.probe_leg(relay.address, leg.server_name, relay.ca(leg))
    after = relay.counters()
    print(f"{leg.name}: scanned in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return {
        "leg": {
            "name": leg.name,
            "server_name": leg.server_name,
            "ends_tls": leg.ends_tls,
            "expect": relay.expect[leg.name],
        },
        "sslyze": scanned,
        "mozilla": mozilla,
        "probes": probed,
        "counters": {"before": before, "after": after},
        "seconds": {"sslyze": round(sslyze_seconds, 2),
                    "total": round(time.monotonic() - started, 2)},
    }


def pace(leg: dict[str, Any]) -> float:
    """
    Wait until the relay's per-source token bucket has won back what the
    leg just scanned took (each connection it admitted, routed or refused by
    the SNI router, at the relay's default C{--per-source-rate}), so that
    legs scanned back to back are not refused for rate (a refusal would look
    like a refused suite: C{scan-not-throttled}); the seconds waited.
    """
    before, after = leg["counters"]["before"], leg["counters"]["after"]
    admitted = sum(after[kind][key] - before[kind].get(key, 0)
                   for kind in ("routed", "tls_port") for key in after[kind])
    rate = DEFAULT_ADMISSION.per_source_rate
    wait = admitted / rate - leg["seconds"]["total"] if rate else 0.0
    if wait > 0:
        time.sleep(wait)
    return max(wait, 0.0)


def scan_testssl(relay: Relay, legs: list[LegSpec], binary: str, work: Path,
                 jobs: int) -> dict[str, dict[str, Any]]:
    """
    testssl.sh on C{legs}, C{jobs} at a time: each leg's L{testssl.run_one}
    result, with the relay's refusal counters before and after (all legs'
    runs together).
    """
    targets = [testssl.Target(leg.name, *relay.address, leg.server_name, relay.ca(leg)[1])
               for leg in legs]
    started = time.monotonic()
    before = relay.counters()
    results = testssl.run_all(binary, targets, work, jobs)
    after = relay.counters()
    print(f"testssl.sh: {len(legs)} legs in {time.monotonic() - started:.1f} s"
          f" ({min(jobs, len(legs))} at a time)", file=sys.stderr)
    for result in results.values():
        result["counters"] = {"before": before, "after": after}
        result["run"]["parallel"] = min(jobs, len(legs))
    return results


def scan(names: list[str], sslyze_python: str, work: Path, testssl_binary: str | None,
         testssl_jobs: int) -> dict[str, dict[str, Any]]:
    """
    Start a relay in C{work}, scan the legs C{names} (sslyze and the probes
    one after the other, then testssl.sh unless C{testssl_binary} is None),
    stop it: each leg's results.
    """
    legs = [LEGS[name] for name in names]
    relay = Relay(work / "stack", legs)
    try:
        results = {}
        for index, leg in enumerate(legs):
            results[leg.name] = scan_leg(relay, leg, sslyze_python, work)
            if index + 1 < len(legs) or testssl_binary:
                results[leg.name]["seconds"]["paced"] = round(pace(results[leg.name]), 2)
        found = (scan_testssl(relay, legs, testssl_binary, work, testssl_jobs)
                 if testssl_binary else {})
        for name, leg_results in results.items():
            leg_results["testssl"] = found.get(name)
        return results
    finally:
        relay.close()


def write(out: Path, results: dict[str, dict[str, Any]], meta: dict[str, Any]) -> None:
    """
    Write each leg's sslyze output (LEG.sslyze.json), testssl.sh's
    (LEG.testssl.json), the rest of its results (LEG.json), an index and the
    summary (summary.md) to C{out}.
    """
    out.mkdir(parents=True, exist_ok=True)
    for name, leg in results.items():
        rest = {k: v for k, v in leg.items() if k != "sslyze"}
        tested = leg.get("testssl")
        if tested is not None:
            rest["testssl"] = {k: v for k, v in tested.items() if k != "document"}
        (out / f"{name}.json").write_text(json.dumps(rest, indent=2) + "\n", encoding="utf-8")
        (out / f"{name}.sslyze.json").write_text(
            json.dumps(leg["sslyze"], indent=2) + "\n", encoding="utf-8")
        testssl_json = out / f"{name}.testssl.json"
        if tested is not None and tested["document"] is not None:
            testssl_json.write_text(json.dumps(tested["document"], indent=2) + "\n",
                                    encoding="utf-8")
        else:
            testssl_json.unlink(missing_ok=True)
    (out / "index.json").write_text(
        json.dumps({**meta, "legs": list(results)}, indent=2) + "\n", encoding="utf-8")
    verdicts = {name: policy.evaluate(leg) for name, leg in results.items()}
    (out / "summary.md").write_text(summary.render(results, verdicts, meta), encoding="utf-8")


def main(argv: list[str]) -> int:
    """
    Scan, check, write; 0 if every rule passed, 1 if not, 2 on errors.
    """
    parser = argparse.ArgumentParser(prog="python -m conformance.tls.scan",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "conformance" / "tls",
                        help="where to write the results (default: %(default)s)")
    parser.add_argument("--legs", default=",".join(LEGS),
                        help="comma-separated legs to scan (default: %(default)s)")
    parser.add_argument("--no-testssl", action="store_true",
                        help="skip testssl.sh (its rules then fail: not run)")
    parser.add_argument("--testssl-jobs", type=int, default=len(LEGS),
                        help="legs testssl.sh scans at once (default: %(default)s)")
    args = parser.parse_args(argv)
    names = [n for n in args.legs.split(",") if n]
    unknown = set(names) - set(LEGS)
    if unknown:
        parser.error(f"unknown legs {sorted(unknown)}; known: {', '.join(LEGS)}")
    python = find_sslyze_python()
    if python is None:
        print("sslyze is not importable: run conformance/tls/run, or set NFLTR_SSLYZE_PYTHON"
              f" to a Python with sslyze=={SSLYZE_VERSION}", file=sys.stderr)
        return 2
    binary = None if args.no_testssl else testssl.find_testssl()
    if binary is None and not args.no_testssl:
        print("testssl.sh is not installed: apt-get install testssl.sh (Debian's program is"
              " `testssl`), or set NFLTR_TESTSSL to it, or pass --no-testssl", file=sys.stderr)
        return 2
    started = time.monotonic()
    meta: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "sslyze": sslyze_version(python),
        "python": platform.python_version(),
    }
    work = Path(tempfile.mkdtemp(prefix="nfltr-tls-scan-"))
    try:
        results = scan(names, python, work, binary, args.testssl_jobs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta["seconds"] = round(time.monotonic() - started, 1)
    first = next(iter(results.values()))
    meta["mozilla_guidelines"] = first["mozilla"].get("guidelines")
    meta["testssl"] = testssl.tool(first["testssl"]["document"]) if first["testssl"] else None
    meta["nfltr_openssl"] = next(iter(results.values()))["probes"]["handshake"].get("openssl")
    meta["probe_client_openssl"] = next(iter(results.values()))["probes"]["tickets_tls1_3"][
        "client_openssl"]
    write(args.out, results, meta)
    verdicts = {name: policy.evaluate(leg) for name, leg in results.items()}
    ok = policy.report(verdicts)
    for name, outcomes in verdicts.items():
        for outcome in outcomes:
            if not outcome.passed:
                print(f"VIOLATION {name}: {outcome.rule}: {outcome.detail}")
    tools = f"sslyze {meta['sslyze']}"
    if meta["testssl"]:
        tools += f", testssl.sh {meta['testssl']['version']} ({meta['testssl']['openssl']})"
    print(f"{'PASS' if ok else 'FAIL'}: {len(results)} legs scanned in {meta['seconds']} s"
          f" ({tools}); results in {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
