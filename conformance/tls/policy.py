"""
The TLS policy, as named rules over one leg's results: sslyze's JSON output,
its Mozilla checker's verdict, testssl.sh's JSON output and the probes'
(L{conformance.tls.probes}).  Plain Python over JSON, no sslyze or
testssl.sh needed, so saved results can be checked again:

    python -m conformance.tls.policy docs/conformance/tls

prints each leg's rules and exits 1 if any rule fails.

A leg's results (what L{conformance.tls.scan} writes as LEG.json) are a
mapping with:

  - C{leg}: C{name}, C{server_name} (or null), and C{expect}: what the
    certificate served must be (C{spki_sha256}, or C{names} it must carry
    and C{not_spki} keys it must not have);
  - C{sslyze}: sslyze's JSON output for that leg (one server);
  - C{mozilla}: sslyze's Mozilla "intermediate" checker's verdict
    (L{conformance.tls.sslyze_worker.mozilla});
  - C{probes}: the probes' output;
  - C{counters}: the relay's refusal counters before and after the leg
    was scanned (C{admission} and C{tls_port}, each reason to a count);
  - C{testssl}: null if testssl.sh was not run, else C{run} (its command,
    exit status, time), C{document} (its C{--jsonfile-pretty} output) and
    C{counters} (as above, around the testssl.sh runs of all legs).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HYBRID = "X25519MLKEM768"

#: TLS 1.3 groups that are elliptic curve Diffie-Hellman, alone or in a
#: hybrid with ML-KEM: what "forward secrecy by ECDHE only" allows.
EC_GROUPS = {
    "x25519", "x448", "secp256r1", "secp384r1", "secp521r1",
    "brainpoolP256r1tls13", "brainpoolP384r1tls13", "brainpoolP512r1tls13",
    "X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024",
}

VERSIONS = {
    "ssl_2_0_cipher_suites": "SSL 2.0",
    "ssl_3_0_cipher_suites": "SSL 3.0",
    "tls_1_0_cipher_suites": "TLS 1.0",
    "tls_1_1_cipher_suites": "TLS 1.1",
    "tls_1_2_cipher_suites": "TLS 1.2",
    "tls_1_3_cipher_suites": "TLS 1.3",
}


@dataclass(frozen=True)
class Outcome:
    """
    One rule's verdict on one leg.
    """

    rule: str
    passed: bool
    detail: str


class Leg:
    """
    Read access to one leg's results.
    """

    def __init__(self, results: dict[str, Any]) -> None:
        self.results = results
        self.info = results["leg"]
        self.probes = results["probes"]

    @property
    def server(self) -> dict[str, Any]:
        """
        sslyze's results for the leg.
        """
        server: dict[str, Any] = self.results["sslyze"]["server_scan_results"][0]
        return server

    def scan(self, command: str) -> dict[str, Any]:
        """
        The result of one sslyze scan command; L{KeyError} if it did not
        complete (L{scan_complete} says so).
        """
        attempt = self.server["scan_result"][command]
        if attempt["status"] != "COMPLETED":
            raise KeyError(f"sslyze {command}: {attempt['status']}")
        result: dict[str, Any] = attempt["result"]
        return result

    def accepted(self, command: str) -> list[dict[str, Any]]:
        """
        The cipher suites sslyze saw accepted by one version's scan.
        """
        suites: list[dict[str, Any]] = self.scan(command)["accepted_cipher_suites"]
        return suites

    def all_accepted(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """
        Every accepted suite, with its version's name.
        """
        for command, version in VERSIONS.items():
            for suite in self.accepted(command):
                yield version, suite

    def testssl(self, section: str) -> list[dict[str, Any]]:
        """
        The findings of one section of testssl.sh's output (C{protocols},
        C{ciphers}, C{pfs}, C{serverPreferences}, C{serverDefaults},
        C{vulnerabilities}, C{cipherTests}); L{KeyError} if testssl.sh was not
        run or did not get that far.
        """
        tested = self.results.get("testssl")
        if not tested or not tested.get("document"):
            raise KeyError("testssl.sh was not run" if not tested else "testssl.sh wrote no JSON")
        found: list[dict[str, Any]] = tested["document"]["scanResult"][0].get(section) or []
        if not found:
            raise KeyError(f"testssl.sh: no {section} findings")
        return found


Rule = Callable[[Leg], tuple[bool, str]]
RULES: dict[str, Rule] = {}


def rule(name: str) -> Callable[[Rule], Rule]:
    """
    Register a rule under C{name}; it returns (passed, detail).
    """
    def register(function: Rule) -> Rule:
        RULES[name] = function
        return function
    return register


@rule("scan-complete")
def scan_complete(leg: Leg) -> tuple[bool, str]:
    """
    sslyze reached the leg and finished every scan it was given, and every
    probe finished.
    """
    problems = []
    if leg.server["connectivity_status"] != "COMPLETED":
        problems.append(f"connectivity {leg.server['connectivity_status']}")
    for command, attempt in (leg.server["scan_result"] or {}).items():
        if attempt["status"] not in {"COMPLETED", "NOT_SCHEDULED"}:
            problems.append(f"{command} {attempt['status']} ({attempt['error_reason']})")
    for name in ("handshake", "handshake_tls1_2", "tickets_tls1_2", "tickets_tls1_3"):
        if "error" in leg.probes[name]:
            problems.append(f"probe {name}: {leg.probes[name]['error']}")
    if leg.results["mozilla"].get("error"):
        problems.append(f"Mozilla checker: {leg.results['mozilla']['error']}")
    tested = leg.results.get("testssl")
    if tested:
        status = tested["run"]["exit_status"]
        if status is None or status >= FATAL_STATUS:
            problems.append(f"testssl.sh exit status {status}: {tested['run']['stderr_tail']}")
        if not tested.get("document"):
            problems.append("testssl.sh wrote no JSON")
        else:
            problems += [f"testssl.sh {section}: no findings" for section in TESTSSL_SECTIONS
                         if not tested["document"]["scanResult"][0].get(section)]
    return not problems, "; ".join(problems) or "all scans and probes completed"


@rule("scan-not-throttled")
def scan_not_throttled(leg: Leg) -> tuple[bool, str]:
    """
    The relay refused none of the scan's connections for load (a refusal
    would look like a rejected suite).
    """
    phases = {"sslyze and probes": leg.results["counters"]}
    if leg.results.get("testssl"):
        phases["testssl.sh"] = leg.results["testssl"]["counters"]
    grown = {}
    for phase, counters in phases.items():
        before = counters["before"]["admission"]
        after = counters["after"]["admission"]
        grown.update({f"{phase}: {k}": after[k] - before.get(k, 0)
                      for k in after if after[k] != before.get(k, 0)})
    return not grown, (f"admission refusals during {' and '.join(phases)}:"
                       f" {grown or 'none'}")


@rule("leg-identity")
def leg_identity(leg: Leg) -> tuple[bool, str]:
    """
    The certificate served is the one this leg's TLS must end with, and it
    chains to the CA the leg's visitors trust.
    """
    expect = leg.info["expect"]
    served = leg.probes["handshake"].get("leaf")
    if served is None:
        return False, "no certificate (handshake failed)"
    problems = []
    if "spki_sha256" in expect and served["spki_sha256"] != expect["spki_sha256"]:
        problems.append(f"key {served['spki_sha256']}, expected {expect['spki_sha256']}")
    if served["spki_sha256"] in expect.get("not_spki", []):
        problems.append(f"key {served['spki_sha256']} belongs to another leg")
    missing = set(expect.get("names", [])) - set(served["names"])
    if missing:
        problems.append(f"names {served['names']} lack {sorted(missing)}")
    detail = (f"{served['subject']} issued by {served['issuer']}, key {served['spki_sha256']},"
              f" verified by the {leg.probes['handshake']['verified_by']}")
    return not problems, "; ".join(problems) or detail


def _refused(command: str) -> Rule:
    def check(leg: Leg) -> tuple[bool, str]:
        result = leg.scan(command)
        reasons = sorted({s["error_message"].strip() for s in result["rejected_cipher_suites"]})
        if result["is_tls_version_supported"]:
            names = [s["cipher_suite"]["name"] for s in result["accepted_cipher_suites"]]
            return False, f"accepted: {', '.join(names)}"
        return True, f"refused ({'; '.join(reasons)})"
    return check


def _accepted(command: str) -> Rule:
    def check(leg: Leg) -> tuple[bool, str]:
        result = leg.scan(command)
        count = len(result["accepted_cipher_suites"])
        return bool(result["is_tls_version_supported"]), f"{count} suites accepted"
    return check


rule("protocol-sslv2-refused")(_refused("ssl_2_0_cipher_suites"))
rule("protocol-sslv3-refused")(_refused("ssl_3_0_cipher_suites"))
rule("protocol-tls1.0-refused")(_refused("tls_1_0_cipher_suites"))
rule("protocol-tls1.1-refused")(_refused("tls_1_1_cipher_suites"))
rule("protocol-tls1.2-accepted")(_accepted("tls_1_2_cipher_suites"))
rule("protocol-tls1.3-accepted")(_accepted("tls_1_3_cipher_suites"))


def _suites_where(leg: Leg, bad: Callable[[str, dict[str, Any]], bool]) -> tuple[bool, str]:
    found = [f"{version} {suite['cipher_suite']['name']}"
             for version, suite in leg.all_accepted() if bad(version, suite)]
    total = sum(1 for _ in leg.all_accepted())
    return not found, ", ".join(found) or f"none of the {total} accepted suites"


def _aead(name: str) -> bool:
    return ("_GCM_" in name or name.endswith("CHACHA20_POLY1305_SHA256")
            or ("_CCM" in name and "_CCM_8" not in name))


@rule("cipher-aead-only")
def cipher_aead_only(leg: Leg) -> tuple[bool, str]:
    """
    Every accepted suite is AEAD (AES-GCM, ChaCha20-Poly1305, AES-CCM).
    """
    return _suites_where(leg, lambda _v, s: not _aead(s["cipher_suite"]["name"]))


@rule("cipher-no-cbc")
def cipher_no_cbc(leg: Leg) -> tuple[bool, str]:
    """
    No CBC suite is accepted.
    """
    return _suites_where(leg, lambda _v, s: "_CBC_" in s["cipher_suite"]["name"])


@rule("cipher-no-rc4-3des")
def cipher_no_rc4_3des(leg: Leg) -> tuple[bool, str]:
    """
    No RC4, 3DES, DES, RC2 or IDEA suite is accepted.
    """
    weak = ("RC4", "3DES", "_DES_", "DES40", "RC2", "IDEA")
    return _suites_where(leg, lambda _v, s: any(w in s["cipher_suite"]["name"] for w in weak))


@rule("cipher-no-null-anon")
def cipher_no_null_anon(leg: Leg) -> tuple[bool, str]:
    """
    No suite without encryption or without authentication is accepted.
    """
    return _suites_where(leg, lambda _v, s: s["cipher_suite"]["is_anonymous"]
                         or "NULL" in s["cipher_suite"]["name"]
                         or "_anon_" in s["cipher_suite"]["name"])


@rule("cipher-no-export")
def cipher_no_export(leg: Leg) -> tuple[bool, str]:
    """
    No export-grade suite (or any suite under 128-bit keys) is accepted.
    """
    return _suites_where(leg, lambda _v, s: "EXPORT" in s["cipher_suite"]["name"]
                         or s["cipher_suite"]["key_size"] < 128)  # noqa: PLR2004


@rule("kx-forward-secrecy")
def kx_forward_secrecy(leg: Leg) -> tuple[bool, str]:
    """
    Every accepted suite has an ephemeral elliptic-curve key exchange: TLS
    1.2 suites are TLS_ECDHE_*, and every handshake sslyze made used an
    ephemeral ECDH key.
    """
    def bad(version: str, suite: dict[str, Any]) -> bool:
        key = suite.get("ephemeral_key") or {}
        if key.get("type_name") != "ECDH":
            return True
        return version != "TLS 1.3" and not suite["cipher_suite"]["name"].startswith("TLS_ECDHE_")
    return _suites_where(leg, bad)


@rule("kx-tls1.3-groups-ecdhe-only")
def kx_groups_ecdhe_only(leg: Leg) -> tuple[bool, str]:
    """
    In TLS 1.3, where the group is not part of the suite, every group the
    leg accepts (each offered alone) is elliptic curve, alone or in a hybrid.
    """
    accepted = leg.probes["groups"]["tls1_3_accepted"]
    other = [g for g in accepted if g not in EC_GROUPS]
    if other:
        return False, f"also accepts {', '.join(other)} (of {', '.join(accepted)})"
    return True, f"accepts {', '.join(accepted)}"


@rule("kx-hybrid-offered")
def kx_hybrid_offered(leg: Leg) -> tuple[bool, str]:
    """
    X25519MLKEM768 is accepted: offered alone with no key share, the server
    asks for it (HelloRetryRequest).
    """
    accepted = leg.probes["groups"]["tls1_3_accepted"]
    answer = "accepted" if HYBRID in accepted else "refused"
    return HYBRID in accepted, f"{HYBRID} offered alone: {answer}"


@rule("kx-hybrid-preferred")
def kx_hybrid_preferred(leg: Leg) -> tuple[bool, str]:
    """
    The server prefers X25519MLKEM768 over the client's order: a client
    that lists it (even last) but sends only an X25519 key share is asked
    for X25519MLKEM768 with a HelloRetryRequest.
    """
    answers = leg.probes["groups"]["preference"]
    wrong = {offer: f"{a['answer']} {a.get('group') or a.get('alert')}"
             for offer, a in answers.items()
             if (a["answer"], a.get("group")) != ("hello_retry_request", HYBRID)}
    if wrong:
        return False, "; ".join(f"[{offer}] -> {got}" for offer, got in wrong.items())
    return True, f"HelloRetryRequest for {HYBRID} to each of: {'; '.join(answers)}"


@rule("kx-hybrid-negotiated")
def kx_hybrid_negotiated(leg: Leg) -> tuple[bool, str]:
    """
    A full handshake with a client that offers X25519MLKEM768 first (the
    defaults of OpenSSL 3.5 and later) agrees on it, in TLS 1.3.
    """
    done = leg.probes["handshake"]
    got = (done.get("version"), done.get("group"))
    detail = f"{done.get('openssl')}: {got[0]}, {done.get('cipher')}, group {got[1]}"
    return got == ("TLSv1.3", HYBRID), detail


@rule("no-compression")
def no_compression(leg: Leg) -> tuple[bool, str]:
    """
    TLS compression (CRIME) is refused.
    """
    supported = leg.scan("tls_compression")["supports_compression"]
    return not supported, "compression accepted" if supported else "DEFLATE refused"


@rule("renegotiation-no-insecure")
def renegotiation_no_insecure(leg: Leg) -> tuple[bool, str]:
    """
    The server sends the RFC 5746 renegotiation_info extension, so legacy
    (insecure) renegotiation cannot happen.
    """
    secure = leg.scan("session_renegotiation")["supports_secure_renegotiation"]
    return secure, "RFC 5746 signalled" if secure else "no renegotiation_info: insecure"


@rule("renegotiation-no-client-initiated")
def renegotiation_no_client(leg: Leg) -> tuple[bool, str]:
    """
    A client's renegotiation (TLS 1.2) is refused.
    """
    result = leg.scan("session_renegotiation")
    count = result["client_renegotiations_success_count"]
    vulnerable = result["is_vulnerable_to_client_renegotiation_dos"]
    return not vulnerable and count == 0, f"{count} client renegotiations succeeded"


def _tickets(probe: dict[str, Any]) -> list[int]:
    return [probe[k]["new_session_tickets"] for k in ("first", "second")]


@rule("no-session-tickets-tls1.2")
def no_tickets_tls12(leg: Leg) -> tuple[bool, str]:
    """
    TLS 1.2: no NewSessionTicket is sent, and no ticket resumes.
    """
    result = leg.scan("session_resumption")
    counts = _tickets(leg.probes["tickets_tls1_2"])
    ok = result["tls_ticket_resumption_result"] == "NOT_SUPPORTED" and not any(counts)
    return ok, (f"sslyze ticket resumption {result['tls_ticket_resumption_result']}"
                f" ({result['tls_ticket_successful_resumptions_count']} of"
                f" {result['tls_ticket_attempted_resumptions_count']});"
                f" NewSessionTicket messages per connection: {counts}")


@rule("no-session-tickets-tls1.3")
def no_tickets_tls13(leg: Leg) -> tuple[bool, str]:
    """
    TLS 1.3: no NewSessionTicket is sent after the handshake.
    """
    probe = leg.probes["tickets_tls1_3"]
    counts = _tickets(probe)
    return not any(counts), (f"NewSessionTicket messages per connection: {counts}"
                             f" ({probe['client_openssl']} client)")


@rule("no-resumption")
def no_resumption(leg: Leg) -> tuple[bool, str]:
    """
    No session resumes: TLS 1.2 by session id or ticket (sslyze), TLS 1.2
    and 1.3 with the session a first connection got (probe).

    It holds on every leg this scan reaches (the relay's TLS port with and
    without a server name, the e2ee and inspect shares).  The one leg that
    resumes, a C{tcp-connect} to an agent's end-to-end tunnel, is TLS inside
    a link session, which no scanner reaches: its rules (TLS 1.3 only with
    C{psk_dhe_ke}, one ticket, keys rotated every C{--tls-ticket-lifetime})
    are tested in C{tests/test_tls_resume.py}, and the reason it may resume
    is in docs/security.md ("TLS resumption on the end-to-end tunnel").
    """
    result = leg.scan("session_resumption")
    resumed = {version: leg.probes[f"tickets_{version}"]["second"]["resumed"]
               for version in ("tls1_2", "tls1_3")}
    ok = (result["session_id_resumption_result"] == "NOT_SUPPORTED"
          and result["tls_ticket_resumption_result"] == "NOT_SUPPORTED"
          and not any(resumed.values()))
    return ok, (f"sslyze: session id {result['session_id_resumption_result']}, ticket"
                f" {result['tls_ticket_resumption_result']}; probe resumed: {resumed}")


@rule("no-early-data")
def no_early_data(leg: Leg) -> tuple[bool, str]:
    """
    TLS 1.3 0-RTT data is refused.
    """
    supported = leg.scan("tls_1_3_early_data")["supports_early_data"]
    return not supported, "0-RTT accepted" if supported else "0-RTT refused"


@rule("not-vulnerable-heartbleed")
def not_heartbleed(leg: Leg) -> tuple[bool, str]:
    """
    Heartbleed (CVE-2014-0160).
    """
    vulnerable = leg.scan("heartbleed")["is_vulnerable_to_heartbleed"]
    return not vulnerable, "vulnerable" if vulnerable else "not vulnerable"


@rule("not-vulnerable-robot")
def not_robot(leg: Leg) -> tuple[bool, str]:
    """
    ROBOT (RSA key exchange oracles).
    """
    result = leg.scan("robot")["robot_result"]
    return result.startswith("NOT_VULNERABLE"), result


@rule("not-vulnerable-ccs-injection")
def not_ccs(leg: Leg) -> tuple[bool, str]:
    """
    OpenSSL CCS injection (CVE-2014-0224).
    """
    vulnerable = leg.scan("openssl_ccs_injection")["is_vulnerable_to_ccs_injection"]
    return not vulnerable, "vulnerable" if vulnerable else "not vulnerable"


#: What each key of the Mozilla checker's issues is about.
MOZILLA_KINDS = {
    "tls_versions": "protocol", "ciphersuites": "cipher", "ciphers": "cipher",
    "ecdh_param_size": "key exchange", "dh_param_size": "key exchange",
    "tls_curves": "key exchange",
    "certificate_path_validation": "certificate trust",
    "maximum_certificate_lifespan": "certificate lifetime",
    "certificate_curves": "certificate key", "rsa_key_size": "certificate key",
    "certificate_types": "certificate key", "certificate_signatures": "certificate signature",
}


def mozilla_kind(issue: str) -> str:
    """
    What one of the Mozilla checker's issue keys is about.
    """
    if issue.startswith("tls_vulnerability_"):
        return "vulnerability"
    return MOZILLA_KINDS.get(issue, "other")


@rule("mozilla-intermediate")
def mozilla_intermediate(leg: Leg) -> tuple[bool, str]:
    """
    sslyze's checker finds nothing against Mozilla's "intermediate"
    configuration, with the leg's CA trusted as the leg's clients trust it
    (C{sslyze --mozilla_config=intermediate --certinfo_ca_file CA}).
    Checked: versions, suites, curves, key sizes, the certificate's key,
    signature, lifetime and chain, and the vulnerabilities sslyze tests.
    """
    verdict = leg.results["mozilla"]
    if verdict.get("error"):
        return False, f"not checked: {verdict['error']}"
    issues = verdict["issues"]
    found = "; ".join(f"[{mozilla_kind(k)}] {k}: {v}" for k, v in issues.items())
    extra = {k: v for k, v in (verdict.get("issues_public_trust_stores_only") or {}).items()
             if k not in issues}
    note = ("; with sslyze's public trust stores only, also "
            + "; ".join(f"[{mozilla_kind(k)}] {k}" for k in extra)
            + " (the leg's CA is private by design)") if extra else ""
    return not issues, (found or f"compliant with {verdict['guidelines']}") + note


#: The sections of testssl.sh's JSON that the scan asks for (L{testssl.CHECKS}).
TESTSSL_SECTIONS = ("protocols", "ciphers", "pfs", "serverPreferences", "serverDefaults",
                    "vulnerabilities", "cipherTests")
#: testssl.sh's exit status at or above which it could not scan.
FATAL_STATUS = 240
#: Severities that fail a testssl.sh rule; WARN means a test could not be made.
TESTSSL_FAILING = {"MEDIUM", "HIGH", "CRITICAL", "WARN", "FATAL"}
#: testssl.sh's weak cipher categories (C{-s}); each must be "not offered".
WEAK_CIPHER_LISTS = {
    "cipherlist_NULL": "NULL (no encryption)",
    "cipherlist_aNULL": "anonymous (no authentication)",
    "cipherlist_EXPORT": "export",
    "cipherlist_LOW": "LOW (64 bit, DES, RC2, RC4)",
    "cipherlist_3DES_IDEA": "3DES and IDEA",
    "cipherlist_AVERAGE": "obsolete CBC",
}


def _finding(item: dict[str, Any]) -> str:
    return f"{item['id']} {item['severity']}: {item['finding']}"


@rule("testssl-no-vulnerabilities")
def testssl_no_vulnerabilities(leg: Leg) -> tuple[bool, str]:
    """
    testssl.sh's vulnerability tests (C{-U}: Heartbleed, CCS, Ticketbleed,
    ROBOT, renegotiation, CRIME, BREACH, POODLE, fallback SCSV, SWEET32,
    FREAK, DROWN, LOGJAM, BEAST, LUCKY13, RC4) find nothing rated MEDIUM,
    HIGH or CRITICAL, and none could not be made (WARN).
    """
    found = leg.testssl("vulnerabilities")
    bad = [_finding(f) for f in found if f["severity"] in TESTSSL_FAILING]
    low = [_finding(f) for f in found if f["severity"] == "LOW"]
    if bad:
        return False, "; ".join(bad + low)
    counts = Counter(f["severity"] for f in found)
    return True, (f"{len(found)} findings: {', '.join(f'{n} {s}' for s, n in counts.items())}"
                  + (f"; LOW: {'; '.join(low)}" if low else ""))


@rule("testssl-no-weak-ciphers")
def testssl_no_weak_ciphers(leg: Leg) -> tuple[bool, str]:
    """
    testssl.sh offers none of its weak cipher categories (C{-s}: NULL,
    anonymous, export, LOW, 3DES/IDEA, obsolete CBC), and rates nothing in
    its cipher, forward secrecy and per-protocol cipher findings (C{-s},
    C{-f}, C{-E}) LOW or worse.
    """
    lists = {f["id"]: f for f in leg.testssl("ciphers")}
    problems = [f"{label}: {lists[key]['finding'] if key in lists else 'not tested'}"
                for key, label in WEAK_CIPHER_LISTS.items()
                if key not in lists or not lists[key]["finding"].startswith("not offered")]
    rated = [f for section in ("ciphers", "pfs", "cipherTests") for f in leg.testssl(section)
             if f["severity"] in TESTSSL_FAILING | {"LOW"}]
    problems += [_finding(f) for f in rated]
    accepted = [" ".join(f["finding"].split()[:2] + f["finding"].split()[-1:])
                for f in leg.testssl("cipherTests") if f["id"].startswith("cipher-")]
    return not problems, "; ".join(problems) or (
        f"no weak category offered; {len(accepted)} suites accepted: {', '.join(accepted)}")


def evaluate(results: dict[str, Any], only: Collection[str] | None = None) -> list[Outcome]:
    """
    Every rule's verdict on one leg (or the rules named in C{only}); a rule
    that cannot read what it needs fails, saying why.
    """
    leg = Leg(results)
    outcomes = []
    for name, check in RULES.items():
        if only is not None and name not in only:
            continue
        try:
            passed, detail = check(leg)
        except (KeyError, TypeError, IndexError) as e:
            passed, detail = False, f"cannot evaluate: {e!r}"
        outcomes.append(Outcome(name, passed, detail))
    return outcomes


def load(directory: Path) -> dict[str, dict[str, Any]]:
    """
    The legs' results saved in C{directory} (C{index.json} names them).
    """
    index = json.loads((directory / "index.json").read_text(encoding="utf-8"))
    legs = {}
    for name in index["legs"]:
        results = json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))
        results["sslyze"] = json.loads(
            (directory / f"{name}.sslyze.json").read_text(encoding="utf-8"))
        testssl_json = directory / f"{name}.testssl.json"
        if results.get("testssl") is not None:
            results["testssl"]["document"] = (
                json.loads(testssl_json.read_text(encoding="utf-8"))
                if testssl_json.exists() else None)
        legs[name] = results
    return legs


def report(verdicts: dict[str, list[Outcome]], out: Any = sys.stdout) -> bool:
    """
    Print each leg's verdicts; whether all passed.
    """
    ok = True
    for leg, outcomes in verdicts.items():
        failed = [o for o in outcomes if not o.passed]
        ok = ok and not failed
        print(f"{leg}: {len(outcomes) - len(failed)} of {len(outcomes)} rules pass", file=out)
        for outcome in outcomes:
            mark = "PASS" if outcome.passed else "FAIL"
            print(f"  {mark} {outcome.rule}: {outcome.detail}", file=out)
    return ok


def main(argv: list[str]) -> int:
    """
    Check the results saved in a directory; 1 if a rule fails.
    """
    if len(argv) != 1:
        print("usage: python -m conformance.tls.policy DIRECTORY", file=sys.stderr)
        return 2
    legs = load(Path(argv[0]))
    ok = report({name: evaluate(results) for name, results in legs.items()})
    violations = [(leg, o.rule) for leg, results in legs.items()
                  for o in evaluate(results) if not o.passed]
    for leg, name in violations:
        print(f"VIOLATION {leg}: {name}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
