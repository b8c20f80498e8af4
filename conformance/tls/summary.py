"""
The Markdown summary of a scan: the policy's verdicts on every leg, then one
table per leg with what was found.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from conformance.tls.policy import (
    TESTSSL_FAILING,
    VERSIONS,
    WEAK_CIPHER_LISTS,
    Outcome,
    mozilla_kind,
)

#: testssl.sh severities worth a line in the summary.
NOTABLE = TESTSSL_FAILING | {"LOW"}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _suites(sslyze: dict[str, Any], command: str) -> str:
    result = sslyze["scan_result"][command]["result"]
    if not result["is_tls_version_supported"]:
        reasons = Counter(s["error_message"].strip() for s in result["rejected_cipher_suites"])
        why = ", ".join(f"{reason} ({count})" for reason, count in reasons.items())
        return f"refused: {len(result['rejected_cipher_suites'])} suites tried; {why}"
    names = []
    for suite in result["accepted_cipher_suites"]:
        key = suite.get("ephemeral_key") or {}
        names.append(f"`{suite['cipher_suite']['name']}` ({key.get('curve_name', '?')})")
    return (f"**accepted** {len(names)} of"
            f" {len(names) + len(result['rejected_cipher_suites'])}: {', '.join(names)}")


def _counters(counters: dict[str, Any]) -> str:
    parts = []
    for kind in ("routed", "tls_port", "admission"):
        before = counters["before"].get(kind, {})
        after = counters["after"].get(kind, {})
        parts += [f"{kind} {reason} +{after[reason] - before.get(reason, 0):g}"
                  for reason in after if after[reason] != before.get(reason, 0)]
    return ", ".join(parts) or "none"


def _issues(issues: dict[str, str] | None) -> str:
    if issues is None:
        return "not checked"
    if not issues:
        return "compliant"
    return "; ".join(f"[{mozilla_kind(k)}] `{k}`: {v}" for k, v in issues.items())


def _mozilla(leg: dict[str, Any]) -> tuple[str, str]:
    verdict = leg["mozilla"]
    if verdict.get("error"):
        return f"not checked: {verdict['error']}", ""
    return _issues(verdict["issues"]), _issues(verdict.get("issues_public_trust_stores_only"))


def _testssl_sections(leg: dict[str, Any]) -> dict[str, list[dict[str, Any]]] | None:
    tested = leg.get("testssl")
    if not tested or not tested.get("document"):
        return None
    sections: dict[str, list[dict[str, Any]]] = {
        k: v for k, v in tested["document"]["scanResult"][0].items() if isinstance(v, list)}
    return sections


def _notable(findings: list[dict[str, Any]]) -> str:
    rated = [f"`{f['id']}` **{f['severity']}**: {f['finding']}"
             for f in findings if f["severity"] in NOTABLE]
    return "; ".join(rated) or "none"


def _testssl_row(leg: dict[str, Any]) -> tuple[str, str, str, str]:
    """
    Vulnerabilities, weak ciphers, other notable findings, time.
    """
    sections = _testssl_sections(leg)
    if sections is None:
        return "not run", "not run", "not run", ""
    lists = {f["id"]: f["finding"] for f in sections.get("ciphers", [])}
    weak = [f"{label}: {lists.get(key, 'not tested')}" for key, label in WEAK_CIPHER_LISTS.items()
            if not lists.get(key, "").startswith("not offered")]
    weak_rated = _notable(sections.get("ciphers", []) + sections.get("pfs", [])
                          + sections.get("cipherTests", []))
    other = [f for name, found in sections.items()
             if name not in {"vulnerabilities", "ciphers", "pfs", "cipherTests"} for f in found]
    vulnerabilities = sections.get("vulnerabilities", [])
    return (
        f"{_notable(vulnerabilities)} ({len(vulnerabilities)} tests)",
        ("; ".join(weak) or "no weak category offered")
        + ("" if weak_rated == "none" else f"; {weak_rated}"),
        _notable(other),
        f"{leg['testssl']['run']['seconds']} s",
    )


def _leg_table(leg: dict[str, Any]) -> list[str]:
    server = leg["sslyze"]["server_scan_results"][0]
    result = {k: v["result"] for k, v in server["scan_result"].items() if v["result"]}
    probes = leg["probes"]
    hello = probes["handshake"]
    hello12 = probes["handshake_tls1_2"]
    leaf = hello.get("leaf") or {}
    groups = probes["groups"]
    reneg = result["session_renegotiation"]
    resumption = result["session_resumption"]
    tickets12 = probes["tickets_tls1_2"]
    tickets13 = probes["tickets_tls1_3"]
    rows = [
        ("TLS ended by", leg["leg"]["ends_tls"]),
        ("certificate", f"{leaf.get('subject')} ({', '.join(leaf.get('names', []))}), issued by"
                        f" {leaf.get('issuer')}, {leaf.get('key')} `{leaf.get('spki_sha256')}`;"
                        f" verified by the {hello.get('verified_by')}"),
    ]
    rows += [(f"{version}", _suites(server, command)) for command, version in VERSIONS.items()]
    rows += [
        ("TLS 1.3 groups accepted (probe: each offered alone)",
         ", ".join(groups["tls1_3_accepted"])),
        ("TLS 1.3 groups refused (probe)",
         f"{len(groups['tls1_3_rejected'])} others: "
         + ", ".join(f"{reason} ({count})" for reason, count
                     in Counter(groups["tls1_3_rejected"].values()).items())),
        ("server's choice (probe)", "; ".join(
            f"offered {offer}: {a['answer']} {a.get('group') or a.get('alert')}"
            for offer, a in groups["preference"].items())),
        (f"handshake, default client ({hello.get('openssl')})",
         f"{hello.get('version')}, {hello.get('cipher')}, group **{hello.get('group')}**"),
        ("handshake, same client capped at TLS 1.2",
         f"{hello12.get('version')}, {hello12.get('cipher')}, group {hello12.get('group')}"),
        ("sslyze curve scan (nassl's OpenSSL 1.1.1 groups, at TLS 1.3)",
         ", ".join(c["name"] for c in result["elliptic_curves"]["supported_curves"] or [])),
        ("compression", "supported" if result["tls_compression"]["supports_compression"]
         else "refused"),
        ("renegotiation",
         f"secure renegotiation (RFC 5746) signalled: {reneg['supports_secure_renegotiation']};"
         f" client-initiated: {reneg['client_renegotiations_success_count']} succeeded"
         f" (vulnerable to DoS: {reneg['is_vulnerable_to_client_renegotiation_dos']})"),
        ("session tickets",
         f"TLS 1.2: {tickets12['first']['new_session_tickets']} NewSessionTicket per connection,"
         f" sslyze ticket resumption {resumption['tls_ticket_resumption_result']};"
         f" TLS 1.3: **{tickets13['first']['new_session_tickets']}** NewSessionTicket per"
         f" connection"),
        ("resumption",
         f"TLS 1.2 session id: {resumption['session_id_resumption_result']}"
         f" ({resumption['session_id_successful_resumptions_count']} of"
         f" {resumption['session_id_attempted_resumptions_count']});"
         f" resumed with the first connection's session: TLS 1.2"
         f" {tickets12['second']['resumed']}, TLS 1.3 {tickets13['second']['resumed']}"),
        ("0-RTT early data", "accepted" if result["tls_1_3_early_data"]["supports_early_data"]
         else "refused"),
        ("Heartbleed", "VULNERABLE" if result["heartbleed"]["is_vulnerable_to_heartbleed"]
         else "not vulnerable"),
        ("ROBOT", result["robot"]["robot_result"]),
        ("CCS injection", "VULNERABLE"
         if result["openssl_ccs_injection"]["is_vulnerable_to_ccs_injection"]
         else "not vulnerable"),
        ("TLS_FALLBACK_SCSV", "supported" if result["tls_fallback_scsv"]["supports_fallback_scsv"]
         else "not supported"),
        ("extended master secret", "supported"
         if result["tls_extended_master_secret"]["supports_ems_extension"] else "not supported"),
        ("Mozilla intermediate (sslyze's checker, the leg's CA trusted)", _mozilla(leg)[0]),
        ("the same, sslyze's public trust stores only", _mozilla(leg)[1]),
        ("relay's counters during sslyze and the probes", _counters(leg["counters"])),
    ]
    tested = leg.get("testssl")
    if tested:
        vulnerabilities, weak, other, seconds = _testssl_row(leg)
        rows += [
            ("testssl.sh", f"`{tested['run']['command']}`: exit status"
                           f" {tested['run']['exit_status']}, {seconds}"),
            ("testssl.sh vulnerabilities rated LOW or worse, or not testable", vulnerabilities),
            ("testssl.sh weak ciphers", weak),
            ("testssl.sh other findings rated LOW or worse, or WARN", other),
            ("relay's counters during testssl.sh (every leg's run at once)",
             _counters(tested["counters"])),
        ]
    else:
        rows.append(("testssl.sh", "not run"))
    rows += [
        ("time", f"sslyze {leg['seconds']['sslyze']} s,"
                 f" with the probes {leg['seconds']['total']} s"
                 + (f", then {leg['seconds']['paced']} s for the relay's per-source rate"
                    if leg["seconds"].get("paced") else "")),
    ]
    return ["| | |", "|---|---|", *(f"| {_cell(k)} | {_cell(v)} |" for k, v in rows)]


def render(results: dict[str, dict[str, Any]], verdicts: dict[str, list[Outcome]],
           meta: dict[str, Any]) -> str:
    """
    The summary, in Markdown.
    """
    legs = list(results)
    failed = [(leg, o) for leg in legs for o in verdicts[leg] if not o.passed]
    lines = [
        "# TLS scan of the relay's legs",
        "",
        f"Written by `conformance/tls/run` on {meta['date']}: sslyze {meta['sslyze']},"
        f" testssl.sh {(meta.get('testssl') or {}).get('version', '(not run)')},"
        f" nfltr's OpenSSL {meta['nfltr_openssl']}, probe client {meta['probe_client_openssl']},"
        f" Python {meta['python']}; {len(legs)} legs in {meta['seconds']} s."
        " `conformance/tls/README.md` says what is scanned and how; next to this file,"
        " `LEG.sslyze.json` is sslyze's output for a leg, `LEG.testssl.json` testssl.sh's and"
        " `LEG.json` the rest (the Mozilla checker's verdict, the probes, the relay's counters,"
        " the testssl.sh command). Check them again with"
        " `python -m conformance.tls.policy docs/conformance/tls`.",
        "",
        f"**{'PASS' if not failed else 'FAIL'}**"
        + (": " + "; ".join(f"{leg} {o.rule}" for leg, o in failed) if failed else ""),
        "",
        "## Policy",
        "",
        "| rule | " + " | ".join(legs) + " |",
        "|---|" + "---|" * len(legs),
    ]
    for index, outcome in enumerate(verdicts[legs[0]]):
        marks = ["PASS" if verdicts[leg][index].passed else "**FAIL**" for leg in legs]
        lines.append(f"| {outcome.rule} | " + " | ".join(marks) + " |")
    if failed:
        lines += ["", "Failures:", ""]
        lines += [f"- {leg}, {o.rule}: {_cell(o.detail)}" for leg, o in failed]
    lines += [
        "",
        "## Mozilla intermediate",
        "",
        f"sslyze's checker against {meta.get('mozilla_guidelines')} (`--mozilla_config"
        "=intermediate`), with the certificate validated against the CA the leg's clients trust"
        " (`--certinfo_ca_file`), and what it says with sslyze's public trust stores only.",
        "",
        "| leg | the leg's CA trusted | public trust stores only |",
        "|---|---|---|",
    ]
    lines += [f"| {leg} | {_cell(_mozilla(results[leg])[0])} | {_cell(_mozilla(results[leg])[1])} |"
              for leg in legs]
    testssl = meta.get("testssl")
    lines += ["", "## testssl.sh", ""]
    if testssl:
        lines += [
            f"testssl.sh {testssl['version']}, running {testssl['openssl']}"
            f" (`{testssl['openssl_path']}`); findings rated LOW or worse, or WARN (a test that"
            " could not be made). `LEG.testssl.json` is its output for a leg.",
            "",
            "| leg | vulnerabilities | weak ciphers | other findings | time |",
            "|---|---|---|---|---|",
        ]
        lines += [f"| {leg} | " + " | ".join(_cell(c) for c in _testssl_row(results[leg])) + " |"
                  for leg in legs]
    else:
        lines.append("Not run (`--no-testssl`).")
    for leg in legs:
        info = results[leg]["leg"]
        name = info["server_name"]
        lines += ["", f"## {leg}: {f'server name `{name}`' if name else 'no server name'}", ""]
        lines += _leg_table(results[leg])
        lines += ["", "<details><summary>rules</summary>", "", "| rule | | detail |",
                  "|---|---|---|"]
        lines += [f"| {o.rule} | {'PASS' if o.passed else '**FAIL**'} | {_cell(o.detail)} |"
                  for o in verdicts[leg]]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
