# -*- test-case-name: tests.ssh.test_transport -*-
"""
L{ClientTransport}: conch's SSH client held to the server's algorithms and
rules (L{nfltr.ssh.transport}), for tests and tools: conch's own client can
no longer agree with nfltr's server.
"""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.asymmetric import mlkem, x25519
from twisted.conch.ssh import _kex, keys
from twisted.conch.ssh.common import NS, getNS
from twisted.conch.ssh.transport import (
    DISCONNECT_HOST_KEY_NOT_VERIFIABLE,
    DISCONNECT_KEY_EXCHANGE_FAILED,
    MSG_KEX_DH_GEX_GROUP,
    MSG_KEX_DH_GEX_REQUEST_OLD,
    SSHClientTransport,
)

from ._kexinit import EXT_INFO_CLIENT, STRICT_KEX_CLIENT
from .transport import CLASSIC_KEX, PQ_KEX, SecureTransport


class ClientTransport(SecureTransport, SSHClientTransport):
    """
    Conch's SSH client transport with nfltr's algorithms and rules, and the
    client side of C{mlkem768x25519-sha256} that conch lacks.  As with
    conch's, subclasses give C{verifyHostKey} and C{connectionSecure}.

    @ivar kexAlgorithms: the key exchange methods to offer.
    @ivar strictKex: offer strict key exchange (off: act as a client older
        than OpenSSH 9.6).
    """

    kexAlgorithms: tuple[bytes, ...] = PQ_KEX + CLASSIC_KEX
    strictKex = True
    _kexMethodMessages = frozenset({MSG_KEX_DH_GEX_GROUP})

    def __init__(self) -> None:
        super().__init__()
        self._hybridKeys: tuple[mlkem.MLKEM768PrivateKey, x25519.X25519PrivateKey] | None = None
        self._clientInit = b""

    def _offeredKex(self) -> tuple[bytes, ...]:
        return self.kexAlgorithms

    def _signals(self) -> tuple[bytes, ...]:
        return (EXT_INFO_CLIENT, STRICT_KEX_CLIENT) if self.strictKex else (EXT_INFO_CLIENT,)

    def ssh_KEXINIT(self, packet: bytes) -> None:
        """
        The server's KEXINIT: start the agreed method.
        """
        if self._receiveKexInit(packet) is None:
            return
        if _kex.isPQHybrid(self.kexAlg):
            pq, classic = mlkem.MLKEM768PrivateKey.generate(), x25519.X25519PrivateKey.generate()
            self._hybridKeys = (pq, classic)
            self._clientInit = (pq.public_key().public_bytes_raw()
                                + classic.public_key().public_bytes_raw())
            self.sendPacket(MSG_KEX_DH_GEX_REQUEST_OLD, NS(self._clientInit))
        else:
            self.ecPriv = self._generateECPrivateKey()
            self.ecPub = self.ecPriv.public_key()
            self.sendPacket(MSG_KEX_DH_GEX_REQUEST_OLD, NS(self._encodeECPublicKey(self.ecPub)))

    def ssh_KEX_DH_GEX_GROUP(self, packet: bytes) -> Any:
        """
        Message 31: the server's ECDH or hybrid REPLY.
        """
        self._methodDone = True
        if _kex.isPQHybrid(self.kexAlg):
            return self._ssh_KEX_HYBRID_REPLY(packet)
        return self._ssh_KEX_ECDH_REPLY(packet)

    def _ssh_KEX_HYBRID_REPLY(self, packet: bytes) -> Any:
        """
        The hybrid REPLY (draft-ietf-sshm-mlkem-hybrid-kex): host key,
        C{S_REPLY = S_CT2 || S_PK1}, signature.
        """
        hostKey, reply, signature, _ = getNS(packet, 3)
        assert self._hybridKeys is not None
        pq, classic = self._hybridKeys
        split = len(reply) - 32
        shared = _kex.getPQHybridKex(self.kexAlg).hashProcessor(
            pq.decapsulate(reply[:split])
            + classic.exchange(x25519.X25519PublicKey.from_public_bytes(reply[split:]))
        ).digest()
        sharedSecret = NS(shared)
        h = _kex.getHashProcessor(self.kexAlg)()
        for part in (self.ourVersionString, self.otherVersionString, self.ourKexInitPayload,
                     self.otherKexInitPayload, hostKey, self._clientInit, reply):
            h.update(NS(part))
        h.update(sharedSecret)
        exchangeHash = h.digest()

        def verified(_: object) -> None:
            if not keys.Key.fromString(hostKey).verify(signature, exchangeHash):
                self.sendDisconnect(DISCONNECT_KEY_EXCHANGE_FAILED, b"bad signature")
                return
            self._keySetup(sharedSecret, exchangeHash)

        d = self.verifyHostKey(hostKey, keys.Key.fromString(hostKey).fingerprint().encode())
        d.addCallback(verified)
        d.addErrback(lambda _: self.sendDisconnect(DISCONNECT_HOST_KEY_NOT_VERIFIABLE,
                                                   b"bad host key"))
        return d

    def _keysChanged(self, first: bool) -> None:
        if first:
            self.connectionSecure()

