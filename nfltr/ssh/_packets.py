# -*- test-case-name: tests.ssh.test_packets -*-
"""
The SSH binary packet protocol (RFC 4253 section 6) for the ciphers nfltr
offers, without I/O: a L{Sealer} turns a payload into the bytes of one
packet, an L{Opener} takes one packet back out of received bytes.

Every mode here sends the packet length in the clear and authenticates it,
so a packet is never decrypted before it is authenticated and its length is
checked from its first four bytes, before the body is waited for:

  - C{none} (L{PlainSealer}, L{PlainOpener}): the initial key exchange.
    Padding makes the whole packet, length included, a multiple of 8.
  - C{aes128-gcm@openssh.com}, C{aes256-gcm@openssh.com} (L{GCMSealer},
    L{GCMOpener}): RFC 5647 as amended by OpenSSH's PROTOCOL (1.6): the
    length is the associated data, the 12-byte nonce is a fixed 4-byte part
    and an 8-byte invocation counter (both from the derived IV) that grows
    by one per packet, the tag is 16 bytes, the negotiated MAC is ignored.
  - C{aes128-ctr}, C{aes256-ctr} with an C{-etm@openssh.com} MAC
    (L{EtMSealer}, L{EtMOpener}): OpenSSH's PROTOCOL (1.5): the length in the
    clear, the rest encrypted, then C{MAC(seqnr || length || ciphertext)}.

In the last two, padding makes the packet without its length field a
multiple of 16, at least 4 bytes of it (OpenSSH's rule).  A packet longer
than L{MAX_PACKET_LENGTH} is refused from its length field.  An opener
raises nothing but L{PacketError}, which names the disconnect reason.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from dataclasses import dataclass
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "CIPHERS", "MACS", "MAX_PACKET_LENGTH", "SEQUENCE_MASK", "CipherSpec", "EtMOpener",
    "EtMSealer", "GCMOpener", "GCMSealer", "MACSpec", "Opener", "PacketError", "PlainOpener",
    "PlainSealer", "Sealer", "new_opener", "new_sealer",
]

#: The largest C{packet_length} accepted (OpenSSH's C{PACKET_MAX_SIZE}):
#: RFC 4253 asks for 35000 at least.
MAX_PACKET_LENGTH = 256 * 1024

#: Sequence numbers are 32-bit and wrap (RFC 4253 section 6.4).
SEQUENCE_MASK = 0xFFFFFFFF

#: RFC 4253 disconnect reasons an opener's errors carry.
DISCONNECT_PROTOCOL_ERROR = 2
DISCONNECT_MAC_ERROR = 5

MIN_PADDING = 4
_PLAIN_BLOCK = 8
_AES_BLOCK = 16
_GCM_TAG = 16

_U32 = struct.Struct("!I")
_PLAIN_HEADER = struct.Struct("!IB")
_NONCE = struct.Struct("!4sQ")
_COUNTER_MASK = (1 << 64) - 1


class PacketError(Exception):
    """
    The peer sent a packet that cannot be accepted.

    @ivar code: the RFC 4253 disconnect reason to send.
    @ivar description: what was wrong, for the peer and the log (never
        packet contents).
    """

    def __init__(self, code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.description = description


@dataclass(frozen=True)
class CipherSpec:
    """
    A cipher's name and sizes.  C{aead} ciphers authenticate by themselves and
    take no MAC.
    """

    name: bytes
    key_size: int
    iv_size: int
    aead: bool


@dataclass(frozen=True)
class MACSpec:
    """
    An encrypt-then-MAC algorithm: its name, its hashlib digest, its key and
    tag sizes.
    """

    name: bytes
    digest: str
    key_size: int
    size: int


CIPHERS: dict[bytes, CipherSpec] = {
    spec.name: spec
    for spec in (
        CipherSpec(b"aes256-gcm@openssh.com", 32, 12, aead=True),
        CipherSpec(b"aes128-gcm@openssh.com", 16, 12, aead=True),
        CipherSpec(b"aes256-ctr", 32, 16, aead=False),
        CipherSpec(b"aes128-ctr", 16, 16, aead=False),
    )
}

MACS: dict[bytes, MACSpec] = {
    spec.name: spec
    for spec in (
        MACSpec(b"hmac-sha2-512-etm@openssh.com", "sha512", 64, 64),
        MACSpec(b"hmac-sha2-256-etm@openssh.com", "sha256", 32, 32),
    )
}


class Sealer(Protocol):
    """
    Makes the packets of one direction under one set of keys.
    """

    def seal(self, seq: int, *payload: bytes) -> bytes:
        """
        The bytes of the packet carrying the concatenation of C{payload}
        (message number first), sent with sequence number C{seq}.
        """


class Opener(Protocol):
    """
    Reads the packets of one direction under one set of keys.
    """

    def open(self, data: bytes | bytearray, pos: int, seq: int) -> tuple[bytes, int] | None:
        """
        Read the packet that starts at C{data[pos]}, received with sequence
        number C{seq}: its payload and the offset just past it, or L{None}
        when it is not wholly in C{data} yet (call again with more).  Raises
        L{PacketError} for a packet that cannot be accepted.
        """


def _padding(unpadded: int, block: int) -> int:
    """
    How much random padding brings C{unpadded} bytes to a multiple of
    C{block}, at least L{MIN_PADDING}.
    """
    pad = block - unpadded % block
    return pad + block if pad < MIN_PADDING else pad


def _check_length(length: int, block: int, aligned: int) -> None:
    """
    Refuse a C{packet_length} that is too long, or that with C{aligned - 4}
    more bytes is not a multiple of C{block}.
    """
    if length > MAX_PACKET_LENGTH:
        raise PacketError(DISCONNECT_PROTOCOL_ERROR, f"bad packet length {length}")
    if length < block or (length + aligned) % block:
        raise PacketError(
            DISCONNECT_PROTOCOL_ERROR, f"bad packet length {length}: not a multiple of {block}"
        )


def _payload(body: bytes, length: int) -> bytes:
    """
    The payload of a decrypted packet body (C{padding_length || payload ||
    padding}), checking the padding length.
    """
    pad = body[0]
    if pad < MIN_PADDING or pad > length - 2:
        raise PacketError(DISCONNECT_PROTOCOL_ERROR, f"bad padding length {pad}")
    return body[1 : length - pad]


class PlainSealer:
    """
    The unencrypted packets of the initial key exchange.
    """

    def seal(self, seq: int, *payload: bytes) -> bytes:
        size = sum(map(len, payload))
        pad = _padding(5 + size, _PLAIN_BLOCK)
        return b"".join((_PLAIN_HEADER.pack(1 + size + pad, pad), *payload, os.urandom(pad)))


class PlainOpener:
    """
    Reads unencrypted packets.
    """

    def open(self, data: bytes | bytearray, pos: int, seq: int) -> tuple[bytes, int] | None:
        if len(data) - pos < _U32.size:
            return None
        (length,) = _U32.unpack_from(data, pos)
        _check_length(length, _PLAIN_BLOCK, 4)
        end = pos + 4 + length
        if len(data) < end:
            return None
        return _payload(bytes(data[pos + 4 : end]), length), end


class GCMSealer:
    """
    AES-GCM packets (C{aes128-gcm@openssh.com}, C{aes256-gcm@openssh.com}).
    """

    def __init__(self, key: bytes, iv: bytes) -> None:
        self._aead = AESGCM(key)
        self._fixed = iv[:4]
        self._counter = int.from_bytes(iv[4:12], "big")

    def seal(self, seq: int, *payload: bytes) -> bytes:
        size = sum(map(len, payload))
        pad = _padding(1 + size, _AES_BLOCK)
        header = _U32.pack(1 + size + pad)
        body = b"".join((bytes((pad,)), *payload, os.urandom(pad)))
        nonce = _NONCE.pack(self._fixed, self._counter)
        self._counter = (self._counter + 1) & _COUNTER_MASK
        return header + self._aead.encrypt(nonce, body, header)


class GCMOpener:
    """
    Reads AES-GCM packets.
    """

    def __init__(self, key: bytes, iv: bytes) -> None:
        self._aead = AESGCM(key)
        self._fixed = iv[:4]
        self._counter = int.from_bytes(iv[4:12], "big")

    def open(self, data: bytes | bytearray, pos: int, seq: int) -> tuple[bytes, int] | None:
        if len(data) - pos < _U32.size:
            return None
        (length,) = _U32.unpack_from(data, pos)
        _check_length(length, _AES_BLOCK, 0)
        end = pos + 4 + length + _GCM_TAG
        if len(data) < end:
            return None
        nonce = _NONCE.pack(self._fixed, self._counter)
        with memoryview(data) as view:
            try:
                body = self._aead.decrypt(nonce, view[pos + 4 : end], view[pos : pos + 4])
            except InvalidTag:
                raise PacketError(DISCONNECT_MAC_ERROR, "bad MAC") from None
        self._counter = (self._counter + 1) & _COUNTER_MASK
        return _payload(body, length), end


def _ctr(key: bytes, iv: bytes) -> Cipher[modes.CTR]:
    return Cipher(algorithms.AES(key), modes.CTR(iv))


class EtMSealer:
    """
    AES-CTR packets with an encrypt-then-MAC tag.
    """

    def __init__(self, key: bytes, iv: bytes, mac: MACSpec, mac_key: bytes) -> None:
        self._encryptor = _ctr(key, iv).encryptor()
        self._hmac = hmac.new(mac_key, digestmod=getattr(hashlib, mac.digest))

    def seal(self, seq: int, *payload: bytes) -> bytes:
        size = sum(map(len, payload))
        pad = _padding(1 + size, _AES_BLOCK)
        header = _U32.pack(1 + size + pad)
        body = self._encryptor.update(b"".join((bytes((pad,)), *payload, os.urandom(pad))))
        tag = self._hmac.copy()
        tag.update(_U32.pack(seq) + header)
        tag.update(body)
        return b"".join((header, body, tag.digest()))


class EtMOpener:
    """
    Reads AES-CTR packets with an encrypt-then-MAC tag: the tag is checked
    before anything is decrypted.
    """

    def __init__(self, key: bytes, iv: bytes, mac: MACSpec, mac_key: bytes) -> None:
        self._decryptor = _ctr(key, iv).decryptor()
        self._hmac = hmac.new(mac_key, digestmod=getattr(hashlib, mac.digest))
        self._size = mac.size

    def open(self, data: bytes | bytearray, pos: int, seq: int) -> tuple[bytes, int] | None:
        if len(data) - pos < _U32.size:
            return None
        (length,) = _U32.unpack_from(data, pos)
        _check_length(length, _AES_BLOCK, 0)
        body_end = pos + 4 + length
        end = body_end + self._size
        if len(data) < end:
            return None
        with memoryview(data) as view:
            tag = self._hmac.copy()
            tag.update(_U32.pack(seq))
            tag.update(view[pos:body_end])
            if not hmac.compare_digest(tag.digest(), view[body_end:end]):
                raise PacketError(DISCONNECT_MAC_ERROR, "bad MAC")
            body = self._decryptor.update(view[pos + 4 : body_end])
        return _payload(body, length), end


def _spec(cipher: bytes, mac: bytes | None) -> tuple[CipherSpec, MACSpec | None]:
    spec = CIPHERS[cipher]
    if spec.aead:
        return spec, None
    if mac is None:
        raise ValueError(f"{cipher!r} needs a MAC")
    return spec, MACS[mac]


def new_sealer(cipher: bytes, mac: bytes | None, iv: bytes, key: bytes, mac_key: bytes) -> Sealer:
    """
    The sealer of C{cipher} (a name in L{CIPHERS}) with C{mac} (a name in
    L{MACS}; ignored for an AEAD cipher), cutting the keys it needs from the
    derived C{iv}, C{key} and C{mac_key}.
    """
    spec, mac_spec = _spec(cipher, mac)
    iv, key = iv[: spec.iv_size], key[: spec.key_size]
    if mac_spec is None:
        return GCMSealer(key, iv)
    return EtMSealer(key, iv, mac_spec, mac_key[: mac_spec.key_size])


def new_opener(cipher: bytes, mac: bytes | None, iv: bytes, key: bytes, mac_key: bytes) -> Opener:
    """
    The opener matching L{new_sealer} with the same arguments.
    """
    spec, mac_spec = _spec(cipher, mac)
    iv, key = iv[: spec.iv_size], key[: spec.key_size]
    if mac_spec is None:
        return GCMOpener(key, iv)
    return EtMOpener(key, iv, mac_spec, mac_key[: mac_spec.key_size])
