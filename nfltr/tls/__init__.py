# -*- test-case-name: tests.test_pki -*-
"""
Certificates, fingerprints and TLS settings.

  - L{ensure_relay_pki} and L{ensure_self_signed} make and keep the relay's
    CA, server certificate and share CA, and an agent's end-to-end key;
  - L{spki_fingerprint} and L{parse_fingerprint} define the one fingerprint
    format (C{sha256:<hex of SHA-256 of the SubjectPublicKeyInfo>});
  - L{server_context_factory} and L{client_creator} make the connection
    creators Twisted's TLS takes; L{peer_fingerprint} reads a finished
    handshake's peer key;
  - L{BatchingTLSProtocol} (made by L{tls_factory}, L{TLSClientEndpoint})
    is memory-BIO TLS that moves data in batches rather than records.
"""

from nfltr.tls._batching import (
    BatchingTLSFactory,
    BatchingTLSProtocol,
    TLSClientEndpoint,
    tls_factory,
)
from nfltr.tls._contexts import (
    CertificateRejected,
    ClientTLS,
    PinMismatch,
    ServerTLS,
    TLSConfigError,
    VerificationFailed,
    client_creator,
    server_context_factory,
)
from nfltr.tls._files import PKIError, locked_directory, write_atomically
from nfltr.tls._fingerprint import (
    InvalidFingerprint,
    parse_fingerprint,
    peer_fingerprint,
    public_key_fingerprint,
    spki_fingerprint,
)
from nfltr.tls._issue import (
    RelayPKI,
    SelfSignedIdentity,
    ensure_relay_pki,
    ensure_self_signed,
    subject_alt_names,
)
from nfltr.tls._shares import (
    SHARE_CERT_LIFETIME,
    ShareCA,
    ShareCertError,
    load_share_key,
    server_tls_from_pem,
    share_request,
)

__all__ = [
    "BatchingTLSFactory",
    "BatchingTLSProtocol",
    "TLSClientEndpoint",
    "tls_factory",
    "CertificateRejected",
    "ClientTLS",
    "InvalidFingerprint",
    "PKIError",
    "PinMismatch",
    "RelayPKI",
    "SHARE_CERT_LIFETIME",
    "SelfSignedIdentity",
    "ShareCA",
    "ShareCertError",
    "ServerTLS",
    "TLSConfigError",
    "VerificationFailed",
    "client_creator",
    "ensure_relay_pki",
    "ensure_self_signed",
    "load_share_key",
    "server_tls_from_pem",
    "share_request",
    "locked_directory",
    "subject_alt_names",
    "write_atomically",
    "parse_fingerprint",
    "peer_fingerprint",
    "public_key_fingerprint",
    "server_context_factory",
    "spki_fingerprint",
]
