"""
Run sslyze against one TLS leg and write its JSON output (the document
C{sslyze --json_out} writes).  Run by L{conformance.tls.scan} with the
Python of the venv that holds sslyze, which need not be nfltr's (sslyze pins
an older cryptography than nfltr's pyOpenSSL accepts):

    python sslyze_worker.py HOST PORT SERVER_NAME|- OUT.json

SERVER_NAME C{-} scans with no server name at all.  sslyze itself always
sends one (the host), and for two scans (Heartbleed, CCS injection) never;
on a port that routes by server name both would scan another leg than the
one meant.  So this script makes every connection of the scan either send
the given name or, for C{-}, none (L{_pin_server_name}).
"""

from __future__ import annotations

import inspect
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sslyze import (
    ScanCommand,
    Scanner,
    ServerNetworkConfiguration,
    ServerNetworkLocation,
    ServerScanRequest,
    ServerScanResultAsJson,
    SslyzeOutputAsJson,
)
from sslyze.connection_helpers import tls_connection

#: Every scan that bears on the policy, and a few more for the record
#: (fallback SCSV, extended master secret, 0-RTT).  Not certificate_info:
#: the probes check the certificate against the CA each leg must chain to.
SCAN_COMMANDS = {
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


def main(argv: list[str]) -> int:
    """
    Scan the leg named by C{argv}; 0 once the JSON is written.
    """
    host, port, server_name, out = argv
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
    )])
    results = list(scanner.get_results())
    document = SslyzeOutputAsJson(
        server_scan_results=[ServerScanResultAsJson.model_validate(r) for r in results],
        invalid_server_strings=[],
        date_scans_started=started,
        date_scans_completed=datetime.now(UTC),
    )
    Path(out).write_text(document.model_dump_json(indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
