# -*- test-case-name: tests.test_pki -*-
"""
Certificates, fingerprints and TLS settings.

  - L{ensure_relay_pki} and L{ensure_self_signed} make and keep the relay's
    CA, server certificate and share CA, and an agent's end-to-end key;
  - L{spki_fingerprint} and L{parse_fingerprint} define the one fingerprint
    format (C{sha256:<hex of SHA-256 of the SubjectPublicKeyInfo>});
  - L{init_cluster_ca} and L{ClusterCA} make and load the CA that makes
    relays replicas of one cluster, L{ReplicaTLS} their replica link's
    mutual TLS;
  - L{server_context_factory} and L{client_creator} make the connection
    creators Twisted's TLS takes; L{peer_fingerprint} reads a finished
    handshake's peer key;
  - L{BatchingTLSProtocol} (made by L{tls_factory}, L{TLSClientEndpoint})
    is memory-BIO TLS that moves data in batches rather than records;
    L{E2EETLSProtocol} (made by L{E2EETLSFactory}) is that TLS over a
    tunnel's session, with half-close, for the end-to-end leg;
  - L{resuming_server} and L{resuming_client} make that leg's creators
    with TLS 1.3 resumption (L{nfltr.tls._resume}).

Importing this package first gives OpenSSL nfltr's configuration, if
nothing loaded OpenSSL before (L{OPENSSL_CONFIGURED} says whether it
applies; see L{nfltr.tls._openssl_config}): entry points import it before
anything else.
"""

from nfltr.tls._openssl_config import configure

#: Whether OpenSSL runs with nfltr's configuration: done here, before the
#: modules below load OpenSSL.
OPENSSL_CONFIGURED = configure()

from nfltr.tls._batching import (  # noqa: E402 - after OpenSSL's configuration
    BatchingTLSFactory,
    BatchingTLSProtocol,
    TLSClientEndpoint,
    TunedTLSFactory,
    tls_factory,
)
from nfltr.tls._cluster import (  # noqa: E402
    CLUSTER_CA_CERT,
    CLUSTER_CA_KEY,
    REPLICA_NAME,
    ClusterCA,
    ReplicaTLS,
    init_cluster_ca,
)
from nfltr.tls._contexts import (  # noqa: E402
    CertificateRejected,
    ClientTLS,
    PinMismatch,
    ServerTLS,
    TLSConfigError,
    VerificationFailed,
    client_creator,
    server_context_factory,
    ssl_words,
)
from nfltr.tls._e2ee import (  # noqa: E402
    E2EETLSFactory,
    E2EETLSProtocol,
    TunnelTLSBroken,
    half_close_other,
)
from nfltr.tls._files import PKIError, locked_directory, write_atomically  # noqa: E402
from nfltr.tls._fingerprint import (  # noqa: E402
    InvalidFingerprint,
    parse_fingerprint,
    peer_fingerprint,
    public_key_fingerprint,
    spki_fingerprint,
)
from nfltr.tls._issue import (  # noqa: E402
    RelayPKI,
    SelfSignedIdentity,
    ensure_relay_pki,
    ensure_self_signed,
    subject_alt_names,
)
from nfltr.tls._resume import (  # noqa: E402
    TICKET_LIFETIME,
    ResumingServerTLS,
    ResumptionError,
    resuming_client,
    resuming_server,
)
from nfltr.tls._sessions import SessionMemory, session_reused  # noqa: E402
from nfltr.tls._shares import (  # noqa: E402
    SHARE_CERT_LIFETIME,
    ShareCA,
    ShareCertError,
    load_share_key,
    server_tls_from_pem,
    share_request,
)

__all__ = [
    "OPENSSL_CONFIGURED",
    "TICKET_LIFETIME",
    "ResumingServerTLS",
    "ResumptionError",
    "SessionMemory",
    "resuming_client",
    "resuming_server",
    "session_reused",
    "CLUSTER_CA_CERT",
    "CLUSTER_CA_KEY",
    "REPLICA_NAME",
    "ClusterCA",
    "ReplicaTLS",
    "init_cluster_ca",
    "ssl_words",
    "BatchingTLSFactory",
    "TunedTLSFactory",
    "BatchingTLSProtocol",
    "TLSClientEndpoint",
    "tls_factory",
    "E2EETLSFactory",
    "E2EETLSProtocol",
    "TunnelTLSBroken",
    "half_close_other",
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
