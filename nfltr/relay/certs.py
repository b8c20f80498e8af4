# -*- test-case-name: tests.relay.test_certs -*-
"""
The certificate the relay serves for its own names: the one it made in its
data directory, or the operator's (C{--cert FILE --key FILE}: say a
publicly trusted wildcard for a real domain).

Certificates are read at start and on an explicit reload (SIGHUP), never
inside a TLS callback: L{RelayCertificate.reload} reads the files into a new
context and swaps it into the same L{ServerTLS} the listeners hold, so new
connections get the new certificate and those in progress keep theirs.  A
reload that fails (a missing file, a key that does not match) keeps the
certificate in use and says why.

The operator's certificate also serves C{inspect} shares whose host names it
covers (a wildcard C{*.SHARE_DOMAIN}), so visitors need not trust the
relay's share CA for them.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography import x509
from twisted.logger import Logger

from nfltr.tls import PKIError, ServerTLS, server_context_factory, spki_fingerprint


class RelayCertificate:
    """
    The relay's own certificate, reloadable.

    @ivar tls: the connection creator the listeners use (kept across
        reloads).
    @ivar fingerprint: the SPKI fingerprint of the certificate in use.
    @ivar names: the DNS names it covers (wildcards as C{*.domain}).
    """

    log = Logger()

    def __init__(self, cert: str | os.PathLike[str], key: str | os.PathLike[str]) -> None:
        """
        Read the files.

        @raise PKIError: they cannot be read or do not match.
        """
        self.cert, self.key = Path(cert), Path(key)
        self.tls: ServerTLS = server_context_factory(self.cert, self.key)
        self.fingerprint, self.names = _describe(self.cert)

    def reload(self) -> bool:
        """
        Read the files again and serve them to new connections.

        @return: whether the new certificate is in use.
        """
        try:
            fresh = server_context_factory(self.cert, self.key)
            fingerprint, names = _describe(self.cert)
        except PKIError as e:
            self.log.error("certificate reload failed, keeping the one in use: {error}", error=e)
            return False
        self.tls.context = fresh.context
        self.fingerprint, self.names = fingerprint, names
        self.log.info(
            "reloaded the certificate {cert}: fingerprint {fingerprint}",
            cert=str(self.cert), fingerprint=fingerprint,
        )
        return True

    def covers(self, host: str) -> bool:
        """
        Whether the certificate names C{host} (one wildcard label allowed).
        """
        host = host.lower()
        parent = host.partition(".")[2]
        return host in self.names or (bool(parent) and f"*.{parent}" in self.names)


def _describe(path: Path) -> tuple[str, frozenset[str]]:
    try:
        cert = x509.load_pem_x509_certificates(path.read_bytes())[0]
    except (OSError, ValueError, IndexError) as e:
        raise PKIError(f"cannot read the certificate {path}: {e}") from e
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = frozenset(n.lower() for n in names.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        dns = frozenset()
    return spki_fingerprint(cert), dns
