"""
Run testssl.sh (Debian's package C{testssl.sh}, whose program is
C{testssl}) against TLS legs, several at once, and keep its JSON.

testssl.sh is a Bash script that makes its own ClientHellos for most tests
(protocols, cipher categories, each cipher per protocol, Heartbleed, ROBOT)
and runs C{openssl s_client} for the rest (certificate, session resumption
and tickets, renegotiation, the HTTP request).  Debian's package ships no
OpenSSL of its own (upstream's bundled 1.0.2 build is removed), so the
C{openssl} it runs is the system's, 3.0.19 here: it knows no ML-KEM group
(nor does testssl.sh 3.0.8's own group list), so the hybrid group is left
to L{conformance.tls.probes}.

Which checks are run, and which are skipped, is L{CHECKS}; see README.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The checks run, as testssl.sh's options.  Left out: C{-c} (client
#: simulation: which of ~40 old and new clients would connect, a
#: compatibility list, no finding; about 30 s a leg), C{-h} (HTTP headers:
#: HSTS, cookies, security headers, the HTTP layer of whatever serves the
#: URL, not TLS; the relay's own name answers 426), C{-g} (GREASE and
#: implementation bugs, not in testssl.sh's default run either) and C{-e}
#: (each cipher without the protocol: C{-E} tests the same ciphers per
#: protocol).
CHECKS = (
    "-p",  # protocols: SSLv2 to TLS 1.3, NPN, ALPN
    "-s",  # cipher categories: NULL, anonymous, export, LOW, 3DES/IDEA, CBC, AEAD
    "-f",  # forward secrecy: suites, ECDHE curves, finite-field groups
    "-P",  # the server's preferences: protocol, suite, order per protocol
    "-S",  # server defaults: certificate, extensions, tickets, resumption
    "-U",  # every vulnerability test
    "-E",  # every cipher testssl.sh knows (370), per protocol
)

#: Options for every run: no banner, no questions, no colour, no DNS (the
#: address is given; C{*.localhost} resolves nowhere), nothing fetched from
#: outside (CRL, OCSP: C{--phone-out} is off), bounded waits.
OPTIONS = (
    "--quiet", "--warnings", "off", "--color", "0", "--nodns", "none",
    "--connect-timeout", "10", "--openssl-timeout", "10",
)

#: testssl.sh's exit status is a sum of its tests' return codes, except
#: these, which mean it could not scan (bad option, no connection, ...).
FATAL_STATUS = 240

TIMEOUT = 600


@dataclass(frozen=True)
class Target:
    """
    One leg for testssl.sh: where, the server name (None: none) and the CA
    its clients trust.
    """

    name: str
    host: str
    port: int
    server_name: str | None
    ca: str


def find_testssl() -> str | None:
    """
    The testssl.sh program: C{$NFLTR_TESTSSL}, else C{testssl} (Debian's
    name) or C{testssl.sh} on the PATH; None if there is none.
    """
    explicit = os.environ.get("NFLTR_TESTSSL")
    if explicit:
        return explicit if Path(explicit).exists() else None
    return shutil.which("testssl") or shutil.which("testssl.sh")


def command(binary: str, target: Target, out: Path) -> list[str]:
    """
    The command line that scans C{target} into C{out} (testssl.sh's
    structured JSON, C{--jsonfile-pretty}).  With a server name, the URL
    names it (testssl.sh sends it as SNI) and C{--ip} gives the address;
    without, the URL is the address, and testssl.sh then sends no SNI.
    """
    args = [binary, *OPTIONS, "--add-ca", target.ca, "--jsonfile-pretty", str(out), *CHECKS]
    if target.server_name is None:
        return [*args, f"https://{target.host}:{target.port}"]
    return [*args, "--ip", target.host, f"https://{target.server_name}:{target.port}"]


def run_one(binary: str, target: Target, work: Path) -> dict[str, Any]:
    """
    Scan one target: the run (command, exit status, seconds, output's end)
    and testssl.sh's JSON document (None if it wrote none).
    """
    out = work / f"{target.name}.testssl.json"
    out.unlink(missing_ok=True)  # testssl.sh refuses to overwrite
    args = command(binary, target, out)
    started = time.monotonic()
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT,
                              stdin=subprocess.DEVNULL, check=False, cwd=work)
        status, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        status, stdout, stderr = None, str(e.stdout or ""), f"timed out after {TIMEOUT} s"
    seconds = round(time.monotonic() - started, 1)
    document = None
    if out.exists():
        try:
            document = json.loads(out.read_text(encoding="utf-8"))
        except ValueError as e:
            stderr += f"\nunreadable JSON: {e}"
    return {
        "run": {
            # The temporary paths replaced by what they stand for.
            "command": " ".join(args).replace(target.ca, "CA.pem").replace(str(out), "OUT.json"),
            "exit_status": status,
            "seconds": seconds,
            "stdout_tail": stdout[-1500:],
            "stderr_tail": stderr[-1500:],
        },
        "document": document,
    }


def run_all(binary: str, targets: list[Target], work: Path, jobs: int) -> dict[str, Any]:
    """
    Scan every target, C{jobs} at a time: each one's L{run_one} result.
    """
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {t.name: pool.submit(run_one, binary, t, work) for t in targets}
        return {name: future.result() for name, future in futures.items()}


def tool(document: dict[str, Any] | None) -> dict[str, str | None]:
    """
    The testssl.sh version and the OpenSSL it ran, as its JSON says.
    """
    document = document or {}
    return {
        "version": (document.get("version") or "").split()[0] or None,
        "openssl": document.get("openssl"),
        "openssl_path": (document.get("at") or ":").split(":", 1)[1] or None,
    }
