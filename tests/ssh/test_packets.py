"""
Tests for L{nfltr.ssh._packets}: the SSH packet framings, sealed and opened
without I/O.  Each framing is checked against the primitives of
C{cryptography} put together by hand (nonce, associated data, MAC input),
round trips are checked by hypothesis over payloads, sequence numbers and
the points where the stream is cut, and every change to a sealed packet
must be refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import struct

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from nfltr.ssh._packets import (
    CIPHERS,
    DISCONNECT_MAC_ERROR,
    DISCONNECT_PROTOCOL_ERROR,
    MACS,
    MAX_PACKET_LENGTH,
    Opener,
    PacketError,
    PlainOpener,
    PlainSealer,
    Sealer,
    new_opener,
    new_sealer,
)

SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

IV, KEY, MAC_KEY = os.urandom(64), os.urandom(64), os.urandom(64)

#: Every framing: the initial plain one, each AES-GCM, each CTR with each MAC.
MODES: list[tuple[bytes, bytes | None]] = [(b"none", None)] + [
    (cipher, None) for cipher, spec in CIPHERS.items() if spec.aead
] + [(cipher, mac) for cipher, spec in CIPHERS.items() if not spec.aead for mac in MACS]


def pair(cipher: bytes, mac: bytes | None) -> tuple[Sealer, Opener]:
    """
    A sealer and an opener of one direction under the same keys.
    """
    if cipher == b"none":
        return PlainSealer(), PlainOpener()
    return (new_sealer(cipher, mac, IV, KEY, MAC_KEY),
            new_opener(cipher, mac, IV, KEY, MAC_KEY))


def tag_size(cipher: bytes, mac: bytes | None) -> int:
    if cipher == b"none":
        return 0
    return 16 if mac is None else MACS[mac].size


def open_all(opener: Opener, data: bytes | bytearray, seq: int) -> list[bytes]:
    """
    Open every whole packet in C{data}; all of it must be used.
    """
    payloads, pos = [], 0
    while pos < len(data):
        got = opener.open(data, pos, seq)
        assert got is not None, "a whole packet was not opened"
        payload, pos = got
        payloads.append(payload)
        seq = (seq + 1) & 0xFFFFFFFF
    return payloads


modes_ = st.sampled_from(MODES)
payloads = st.lists(st.binary(min_size=1, max_size=600), min_size=1, max_size=8)
seqs = st.integers(min_value=0, max_value=0xFFFFFFFF)


class KnownConstructionTests(SynchronousTestCase):
    """
    Each framing against the primitives assembled by hand.
    """

    def test_gcm(self) -> None:
        """
        AES-GCM: the length is sent in the clear and is the associated data;
        the nonce is the IV's first 4 bytes and an 8-byte counter that starts
        at the IV's last 8 and grows by one per packet; the plaintext is
        C{padding_length || payload || padding}, a multiple of 16 with at
        least 4 bytes of padding; the tag is 16 bytes.
        """
        for name, size in ((b"aes128-gcm@openssh.com", 16), (b"aes256-gcm@openssh.com", 32)):
            sealer = new_sealer(name, b"ignored", IV, KEY, MAC_KEY)
            for n, payload in enumerate((b"\x5eone", b"\x5e" + b"x" * 27)):
                packet = sealer.seal(1000 + n, payload)
                (length,) = struct.unpack("!I", packet[:4])
                self.assertEqual(len(packet), 4 + length + 16)
                counter = int.from_bytes(IV[4:12], "big") + n
                nonce = IV[:4] + counter.to_bytes(8, "big")
                body = AESGCM(KEY[:size]).decrypt(nonce, packet[4:], packet[:4])
                self.assertEqual(len(body) % 16, 0)
                self.assertGreaterEqual(body[0], 4)
                self.assertEqual(body[1 : len(body) - body[0]], payload)

    def test_gcmCounterWraps(self) -> None:
        """
        The invocation counter wraps at 2**64 to 0, the fixed part unchanged.
        """
        iv = b"\1\2\3\4" + b"\xff" * 8
        sealer = new_sealer(b"aes128-gcm@openssh.com", None, iv, KEY, MAC_KEY)
        sealer.seal(0, b"\x5efirst")
        packet = sealer.seal(1, b"\x5esecond")
        body = AESGCM(KEY[:16]).decrypt(b"\1\2\3\4" + bytes(8), packet[4:], packet[:4])
        self.assertEqual(body[1 : len(body) - body[0]], b"\x5esecond")

    def test_encryptThenMAC(self) -> None:
        """
        AES-CTR with an -etm MAC: the length in the clear, the body encrypted
        as one CTR stream across packets, then
        C{HMAC(mac key, seqnr || length || ciphertext)}.
        """
        for cipher, key_size in ((b"aes128-ctr", 16), (b"aes256-ctr", 32)):
            for mac, spec in MACS.items():
                sealer = new_sealer(cipher, mac, IV, KEY, MAC_KEY)
                stream = Cipher(algorithms.AES(KEY[:key_size]), modes.CTR(IV[:16])).decryptor()
                for seq, payload in ((7, b"\x5eone"), (8, b"\x5e" + b"y" * 40)):
                    packet = sealer.seal(seq, payload)
                    (length,) = struct.unpack("!I", packet[:4])
                    body, tag = packet[4 : 4 + length], packet[4 + length :]
                    digest = getattr(hashlib, spec.digest)
                    expected = hmac.new(MAC_KEY[: spec.key_size],
                                        struct.pack("!I", seq) + packet[: 4 + length],
                                        digest).digest()
                    self.assertEqual(tag, expected)
                    plain = stream.update(body)
                    self.assertEqual(len(plain) % 16, 0)
                    self.assertEqual(plain[1 : length - plain[0]], payload)

    def test_plain(self) -> None:
        """
        The initial framing: length, padding length, payload, padding, the
        whole a multiple of 8 and at least 16 bytes, no MAC.
        """
        for payload in (b"\x14", b"\x14" + b"z" * 100):
            packet = PlainSealer().seal(0, payload)
            self.assertEqual(len(packet) % 8, 0)
            self.assertGreaterEqual(len(packet), 16)
            length, pad = struct.unpack("!IB", packet[:5])
            self.assertEqual(len(packet), 4 + length)
            self.assertGreaterEqual(pad, 4)
            self.assertEqual(packet[5 : 4 + length - pad], payload)

    def test_aeadIgnoresMAC(self) -> None:
        """
        An AEAD cipher takes no MAC: whatever MAC name is given, the packets
        are the same framing.
        """
        a = new_sealer(b"aes256-gcm@openssh.com", None, IV, KEY, MAC_KEY)
        b = new_opener(b"aes256-gcm@openssh.com", b"hmac-sha2-512-etm@openssh.com", IV, KEY,
                       MAC_KEY)
        self.assertEqual(open_all(b, a.seal(0, b"\x5ehi"), 0), [b"\x5ehi"])

    def test_ctrNeedsMAC(self) -> None:
        """
        A CTR cipher without a MAC is a caller's mistake.
        """
        self.assertRaises(ValueError, new_sealer, b"aes128-ctr", None, IV, KEY, MAC_KEY)


class RoundTripTests(SynchronousTestCase):
    """
    What is sealed opens to the same payloads, however the bytes arrive.
    """

    @SETTINGS
    @given(modes_, payloads, seqs, st.data())
    def test_roundTrip(self, mode: tuple[bytes, bytes | None], messages: list[bytes], seq: int,
                       data: st.DataObject) -> None:
        """
        Packets sealed one after another, cut at arbitrary points and
        delivered piecewise, open to the same payloads in order; the opener
        asks for more (L{None}) while a packet is incomplete.
        """
        sealer, opener = pair(*mode)
        wire = b"".join(sealer.seal((seq + i) & 0xFFFFFFFF, m) for i, m in enumerate(messages))
        cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=6)))
        buf, pos, got, next_seq = bytearray(), 0, [], seq
        for start, end in zip([0, *cuts], [*cuts, len(wire)], strict=True):
            buf += wire[start:end]
            while (result := opener.open(buf, pos, next_seq)) is not None:
                payload, pos = result
                got.append(payload)
                next_seq = (next_seq + 1) & 0xFFFFFFFF
        self.assertEqual(got, messages)
        self.assertEqual(pos, len(wire))

    @SETTINGS
    @given(modes_, st.binary(min_size=1, max_size=3000))
    def test_layout(self, mode: tuple[bytes, bytes | None], payload: bytes) -> None:
        """
        Every packet is aligned: the whole packet to 8 in the plain framing,
        the packet without its length field to 16 otherwise; the length field
        says how long the rest is.
        """
        cipher, mac = mode
        packet = pair(cipher, mac)[0].seal(3, payload)
        (length,) = struct.unpack("!I", packet[:4])
        self.assertEqual(len(packet), 4 + length + tag_size(cipher, mac))
        if cipher == b"none":
            self.assertEqual((4 + length) % 8, 0)
        else:
            self.assertEqual(length % 16, 0)

    def test_largest(self) -> None:
        """
        A packet of the largest length accepted opens.
        """
        for mode in MODES:
            sealer, opener = pair(*mode)
            payload = b"\x5e" + os.urandom(MAX_PACKET_LENGTH - 1 - 4 - 16)
            packet = sealer.seal(0, payload)
            self.assertLessEqual(struct.unpack("!I", packet[:4])[0], MAX_PACKET_LENGTH)
            self.assertEqual(open_all(opener, packet, 0), [payload])


class RefusalTests(SynchronousTestCase):
    """
    What an opener must refuse.
    """

    @SETTINGS
    @given(st.sampled_from(MODES[1:]), st.binary(min_size=1, max_size=300), st.data())
    def test_tampered(self, mode: tuple[bytes, bytes | None], payload: bytes,
                      data: st.DataObject) -> None:
        """
        A sealed packet with any one bit flipped never opens: it is refused,
        or (a longer length) waits for more bytes and is refused when they
        come.
        """
        sealer, opener = pair(*mode)
        packet = bytearray(sealer.seal(5, payload))
        bit = data.draw(st.integers(0, len(packet) * 8 - 1))
        packet[bit // 8] ^= 1 << (bit % 8)
        try:
            result = opener.open(packet, 0, 5)
            if result is None:
                packet += os.urandom(MAX_PACKET_LENGTH + 64)
                result = opener.open(packet, 0, 5)
        except PacketError:
            return
        self.fail(f"a tampered packet opened: {result!r}")

    def test_wrongSequenceNumber(self) -> None:
        """
        Encrypt-then-MAC covers the sequence number: a packet opened with
        another one is refused with a MAC error.
        """
        for cipher, mac in MODES:
            if mac is None:
                continue
            sealer, opener = pair(cipher, mac)
            packet = sealer.seal(10, b"\x5ehello")
            e = self.assertRaises(PacketError, opener.open, packet, 0, 11)
            self.assertEqual(e.code, DISCONNECT_MAC_ERROR)

    def test_replayedOrReordered(self) -> None:
        """
        AES-GCM's counter orders packets: the second packet opened first is
        refused.
        """
        sealer, opener = pair(b"aes128-gcm@openssh.com", None)
        sealer.seal(0, b"\x5efirst")
        second = sealer.seal(1, b"\x5esecond")
        e = self.assertRaises(PacketError, opener.open, second, 0, 0)
        self.assertEqual(e.code, DISCONNECT_MAC_ERROR)

    def test_lengthTooLargeFromHeader(self) -> None:
        """
        A length over the limit is refused from the four length bytes alone.
        """
        for mode in MODES:
            opener = pair(*mode)[1]
            header = struct.pack("!I", MAX_PACKET_LENGTH + 16)
            e = self.assertRaises(PacketError, opener.open, header, 0, 0)
            self.assertEqual(e.code, DISCONNECT_PROTOCOL_ERROR)
            self.assertIn("bad packet length", e.description)

    def test_lengthMisaligned(self) -> None:
        """
        A length that breaks the block alignment is refused from the header.
        """
        for mode, length in (((b"none", None), 13),
                             ((b"aes128-gcm@openssh.com", None), 24),
                             ((b"aes256-ctr", b"hmac-sha2-256-etm@openssh.com"), 20)):
            opener = pair(*mode)[1]
            self.assertRaises(PacketError, opener.open, struct.pack("!I", length), 0, 0)

    def test_shortPadding(self) -> None:
        """
        Fewer than 4 bytes of padding is refused, in the clear and sealed.
        """
        plain = struct.pack("!IB", 12, 3) + b"\x14" * 8 + b"\0" * 3
        self.assertRaises(PacketError, PlainOpener().open, plain, 0, 0)
        body = bytes([3]) + b"\x5e" * 12 + b"\0" * 3
        header = struct.pack("!I", len(body))
        nonce = IV[:12]
        packet = header + AESGCM(KEY[:16]).encrypt(nonce, body, header)
        opener = new_opener(b"aes128-gcm@openssh.com", None, IV, KEY, MAC_KEY)
        e = self.assertRaises(PacketError, opener.open, packet, 0, 0)
        self.assertIn("padding", e.description)

    def test_noPayload(self) -> None:
        """
        A packet with no payload byte (no message number) is refused.
        """
        plain = struct.pack("!IB", 12, 11) + b"\0" * 11
        self.assertRaises(PacketError, PlainOpener().open, plain, 0, 0)

    @SETTINGS
    @given(st.sampled_from(MODES), st.binary(max_size=600))
    def test_garbage(self, mode: tuple[bytes, bytes | None], garbage: bytes) -> None:
        """
        Random bytes make an opener ask for more or raise L{PacketError},
        nothing else.
        """
        opener = pair(*mode)[1]
        with contextlib.suppress(PacketError):
            opener.open(garbage, 0, 0)
