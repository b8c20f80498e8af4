# -*- test-case-name: tests.relay.cluster.test_tls -*-
"""
The cluster CA: what makes a relay a member of a cluster of replicas.

An operator makes it once (C{nfltr cluster-ca init DIR}: C{cluster-ca.key}
and C{cluster-ca.crt}, ECDSA P-256, the key 0600) and gives the same
directory to every replica (C{--cluster-ca DIR}), on every host (copy it as
a secret: whoever holds the key can join the cluster).  At each start a
replica makes a fresh key in memory and has the CA sign a certificate for
it (L{ClusterCA.replica}: both client and server use, the name
L{REPLICA_NAME}), so nothing per replica is written.

The replica link is mutual TLS with that certificate: the listener demands
a client certificate and checks that the cluster CA signed it
(L{ReplicaTLS.server}); the dialler checks that the cluster CA signed the
listener's and that it names L{REPLICA_NAME} (L{ReplicaTLS.client}).  A
peer without a certificate, or with one another CA signed, fails the
handshake: nothing of the link reaches it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from OpenSSL import SSL, crypto

from nfltr.tls._contexts import ClientTLS, ServerTLS, _base_context
from nfltr.tls._files import PKIError, load_certificate, locked_directory
from nfltr.tls._issue import _ensure_ca, _issue, _key_usage, _Request

#: The files of a cluster CA directory.
CLUSTER_CA_CERT = "cluster-ca.crt"
CLUSTER_CA_KEY = "cluster-ca.key"
#: The name every replica's certificate carries, which diallers check.
REPLICA_NAME = "nfltr-replica"
#: How long a replica's certificate (made at each start) is valid.
REPLICA_CERT_LIFETIME = timedelta(days=365)

_VERIFY = SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT


def init_cluster_ca(directory: str | os.PathLike[str], now: datetime | None = None
                    ) -> ClusterCA:
    """
    Make the cluster CA in C{directory} (created 0700), or reuse the one
    there.

    @raise PKIError: its files cannot be read or written.
    """
    path = Path(directory)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    with locked_directory(path):
        _ensure_ca(path, "cluster-ca", "nfltr cluster CA", now or datetime.now(UTC))
    return ClusterCA.load(path)


@dataclass(frozen=True)
class ClusterCA:
    """
    A cluster CA, loaded.

    @ivar cert_path: its certificate's file (what peers are checked against).
    """

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    cert_path: Path

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> ClusterCA:
        """
        Load the cluster CA of C{directory}.

        @raise PKIError: saying which file is missing or unusable.
        """
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        path = Path(directory)
        cert_path, key_path = path / CLUSTER_CA_CERT, path / CLUSTER_CA_KEY
        try:
            cert = load_certificate(cert_path)
            key = load_pem_private_key(key_path.read_bytes(), None)
        except (OSError, ValueError) as e:
            raise PKIError(f"the cluster CA in {path} cannot be read ({e}): make one with "
                           f"nfltr cluster-ca init {path}") from None
        if cert is None or not isinstance(key, ec.EllipticCurvePrivateKey):
            raise PKIError(f"the cluster CA in {path} is incomplete: make one with "
                           f"nfltr cluster-ca init {path}")
        return cls(cert, key, cert_path)

    def replica(self, replica: str, now: datetime | None = None) -> ReplicaTLS:
        """
        A fresh key and a certificate this CA signs for replica C{replica}.
        """
        key = ec.generate_private_key(ec.SECP256R1())
        extensions = [
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (_key_usage(digital_signature=True), True),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                    ExtendedKeyUsageOID.CLIENT_AUTH]), False),
        ]
        request = _Request(f"nfltr replica {replica}"[:64], extensions,
                           [x509.DNSName(REPLICA_NAME)], REPLICA_CERT_LIFETIME)
        cert = _issue(key, request, self.key, self.cert.subject, now or datetime.now(UTC))
        return ReplicaTLS(self, key, cert)


@dataclass(frozen=True)
class ReplicaTLS:
    """
    One replica's key and certificate, and the TLS of its replica link.
    """

    ca: ClusterCA
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def _context(self) -> SSL.Context:
        context = _base_context()
        context.use_certificate(crypto.X509.from_cryptography(self.cert))
        context.use_privatekey(crypto.PKey.from_cryptography_key(self.key))
        context.check_privatekey()
        context.load_verify_locations(os.fspath(self.ca.cert_path))
        return context

    def server(self) -> ServerTLS:
        """
        The listener's connection creator: a client certificate the cluster
        CA signed is required.
        """
        context = self._context()
        context.set_verify(_VERIFY, None)
        return ServerTLS(context)

    def client(self) -> ClientTLS:
        """
        The dialler's connection creator: presents this replica's
        certificate, checks the listener's against the cluster CA and
        L{REPLICA_NAME}.
        """
        return ClientTLS(self._context(), REPLICA_NAME, ca_path=os.fspath(self.ca.cert_path),
                         pin=None, role="replica")
