"""
Run sslyze against one TLS leg and write its JSON output (the document
C{sslyze --json_out} writes), and check the result against Mozilla's
"intermediate" TLS configuration with sslyze's own checker (what
C{sslyze --mozilla_config=intermediate --certinfo_ca_file CA} prints).  Run
by L{conformance.tls.scan} with the Python of the venv that holds sslyze,
which need not be nfltr's (sslyze pins an older cryptography than nfltr's
pyOpenSSL accepts):

    python sslyze_worker.py HOST PORT SERVER_NAME|- CA.pem OUT.json MOZILLA.json

CA.pem is the CA the leg's clients trust (the relay's or the share CA), added
to sslyze's trust stores for the certificate scan as C{--certinfo_ca_file}
does.  SERVER_NAME C{-} scans with no server name at all.  sslyze itself always
sends one (the host), and for two scans (Heartbleed, CCS injection) never;
on a port that routes by server name both would scan another leg than the
one meant.  So this script makes every connection of the scan either send
the given name or, for C{-}, none (L{_pin_server_name}).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sslyze import (
    CertificateInfoExtraArgument,
    ScanCommand,
    ScanCommandsExtraArguments,
    Scanner,
    ServerNetworkConfiguration,
    ServerNetworkLocation,
    ServerScanRequest,
    ServerScanResult,
    ServerScanResultAsJson,
    SslyzeOutputAsJson,
)
from sslyze.connection_helpers import tls_connection
from sslyze.mozilla_tls_profile.tls_config_checker import (
    SCAN_COMMANDS_NEEDED_BY_MOZILLA_CHECKER,
    MozillaTlsConfiguration,
    ServerNotCompliantWithTlsConfiguration,
    ServerScanResultIncomplete,
    TlsConfigurationEnum,
    check_server_against_tls_configuration,
)

#: The Mozilla configuration checked, as C{--mozilla_config} names it.
MOZILLA_CONFIG = TlsConfigurationEnum.MOZILLA_INTERMEDIATE
#: The name sslyze gives the trust store made of a C{--certinfo_ca_file}.
SUPPLIED_CA = "Supplied CA file"

#: Every scan that bears on the policy, a few more for the record (fallback
#: SCSV, extended master secret, 0-RTT), and whatever else the Mozilla
#: checker needs (certificate_info: the certificate, validated with the
#: leg's CA added to sslyze's trust stores; the probes check the
#: certificate against that CA too).
SCAN_COMMANDS = SCAN_COMMANDS_NEEDED_BY_MOZILLA_CHECKER | {
    ScanCommand.SSL_2_0_CIPHER_SUITES,
    ScanCommand.SSL_3_0_CIPHER_SUITES,
    ScanCommand.TLS_1_0_CIPHER_SUITES,
    ScanCommand.TLS_1_1_CIPHER_SUITES,
    ScanCommand.TLS_1_2_CIPHER_SUITES,
    ScanCommand.TLS_1_3_CIPHER_SUITES,
    ScanCommand.TLS_COMPRESSION,
    ScanCommand.SESSION_RENEGOTIATION,
    ScanCommand.SESSION_RESUMPTION,
    ScanCommand.HEARTBLEED,
    ScanCommand.ROBOT,
    ScanCommand.OPENSSL_CCS_INJECTION,
    ScanCommand.ELLIPTIC_CURVES,
    ScanCommand.TLS_FALLBACK_SCSV,
    ScanCommand.TLS_EXTENDED_MASTER_SECRET,
    ScanCommand.TLS_1_3_EARLY_DATA,
}


def _pin_server_name(send: bool) -> None:
    """
    Make every sslyze connection send the configured server name (C{send})
    or none, whatever the scan asked for.
    """
    original = tls_connection.SslConnection.__init__
    signature = inspect.signature(original)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        bound.arguments["should_enable_server_name_indication"] = send
        original(*bound.args, **bound.kwargs)

    tls_connection.SslConnection.__init__ = __init__  # type: ignore[method-assign]


def _mozilla_issues(result: ServerScanResult) -> tuple[dict[str, str] | None, str | None]:
    """
    The Mozilla checker's issues with C{result} (empty: compliant), or None
    and why it could not check.
    """
    configuration = MozillaTlsConfiguration.get(MOZILLA_CONFIG)
    try:
        check_server_against_tls_configuration(result, configuration)
    except ServerNotCompliantWithTlsConfiguration as e:
        return dict(e.issues), None
    except ServerScanResultIncomplete as e:
        return None, str(e)
    return {}, None


def _without_supplied_ca(result: ServerScanResult) -> ServerScanResult:
    """
    C{result} as if the leg's CA had not been supplied: what sslyze alone,
    with only its public trust stores, would have validated.
    """
    assert result.scan_result is not None
    attempt = result.scan_result.certificate_info
    assert attempt.result is not None
    deployments = [
        dataclasses.replace(d, path_validation_results=[
            v for v in d.path_validation_results if v.trust_store.name != SUPPLIED_CA])
        for d in attempt.result.certificate_deployments
    ]
    info = dataclasses.replace(attempt.result, certificate_deployments=deployments)
    scan_result = dataclasses.replace(
        result.scan_result, certificate_info=dataclasses.replace(attempt, result=info))
    return dataclasses.replace(result, scan_result=scan_result)


def mozilla(result: ServerScanResult) -> dict[str, Any]:
    """
    The Mozilla checker's verdict on one leg: with the leg's CA trusted (as
    the leg's clients do), and with sslyze's public trust stores only.
    """
    configuration = MozillaTlsConfiguration.get(MOZILLA_CONFIG)
    issues, error = _mozilla_issues(result)
    verdict: dict[str, Any] = {
        "configuration": MOZILLA_CONFIG.value,
        "guidelines": json.loads(MozillaTlsConfiguration._JSON_PROFILE_PATH.read_text())["href"],
        "compliant": issues == {},
        "issues": issues,
        "error": error,
        "tls_curves_allowed": sorted(configuration.tls_curves),
        "maximum_certificate_lifespan": configuration.maximum_certificate_lifespan,
    }
    if error is None:
        public, _ = _mozilla_issues(_without_supplied_ca(result))
        verdict["issues_public_trust_stores_only"] = public
        assert result.scan_result is not None and result.scan_result.certificate_info.result
        verdict["path_validation"] = {
            v.trust_store.name: "OK" if v.was_validation_successful else v.validation_error
            for d in result.scan_result.certificate_info.result.certificate_deployments
            for v in d.path_validation_results
        }
    return verdict


def main(argv: list[str]) -> int:
    """
    Scan the leg named by C{argv}; 0 once the JSON is written.
    """
    host, port, server_name, ca, out, mozilla_out = argv
    _pin_server_name(server_name != "-")
    # With no name, the host is the IP address: sslyze wants some name in its
    # configuration, and that one is never sent.
    location = ServerNetworkLocation(
        hostname=host if server_name == "-" else server_name, port=int(port), ip_address=host
    )
    configuration = ServerNetworkConfiguration(
        tls_server_name_indication=location.hostname, network_timeout=10
    )
    started = datetime.now(UTC)
    scanner = Scanner()
    scanner.queue_scans([ServerScanRequest(
        server_location=location, network_configuration=configuration,
        scan_commands=SCAN_COMMANDS,
        scan_commands_extra_arguments=ScanCommandsExtraArguments(
            certificate_info=CertificateInfoExtraArgument(custom_ca_file=Path(ca))),
    )])
    results = list(scanner.get_results())
    document = SslyzeOutputAsJson(
        server_scan_results=[ServerScanResultAsJson.model_validate(r) for r in results],
        invalid_server_strings=[],
        date_scans_started=started,
        date_scans_completed=datetime.now(UTC),
    )
    Path(out).write_text(document.model_dump_json(indent=2), encoding="utf-8")
    Path(mozilla_out).write_text(json.dumps(mozilla(results[0]), indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
