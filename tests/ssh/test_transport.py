"""
Tests for L{nfltr.ssh.transport}: nfltr's SSH transport.

  - In memory (C{twisted.test.iosim}), L{ClientTransport} against
    L{ServerTransport} with a test service that echoes transport messages:
    every key exchange, cipher and MAC combination carries data both ways
    and through rekeying; the offer holds only what ssh-audit accepts;
    strict key exchange refuses what it must and resets the sequence
    numbers; broken and out-of-turn input ends the connection with a
    DISCONNECT the peer can read.
  - Against the real OpenSSH client (Debian's C{openssh-client}), over
    loopback: a test server with public-key login and a session that echoes
    what C{ssh HOST cmd} sends, for each cipher and MAC, host key algorithm
    and with rekeying forced, with the algorithms and strict key exchange
    read from C{ssh -vvv}; and OpenSSH's own messages when it is offered
    nothing it may use.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from twisted.conch.avatar import ConchUser
from twisted.conch.checkers import InMemorySSHKeyDB, SSHPublicKeyChecker
from twisted.conch.interfaces import IConchUser
from twisted.conch.ssh import channel, factory, keys, service
from twisted.conch.ssh.common import NS
from twisted.conch.ssh.transport import (
    DISCONNECT_KEY_EXCHANGE_FAILED,
    DISCONNECT_MAC_ERROR,
    DISCONNECT_PROTOCOL_ERROR,
    DISCONNECT_PROTOCOL_VERSION_NOT_SUPPORTED,
    SSHClientTransport,
)
from twisted.cred.portal import IRealm, Portal
from twisted.internet import defer, protocol
from twisted.internet.interfaces import IReactorProcess, IReactorTCP
from twisted.test import iosim
from twisted.trial.unittest import SkipTest, SynchronousTestCase, TestCase
from zope.interface import implementer

from nfltr.ssh._kexinit import KexInit
from nfltr.ssh._packets import PlainSealer
from nfltr.ssh.client import ClientTransport
from nfltr.ssh.transport import (
    CIPHERS,
    CLASSIC_KEX,
    HOST_KEY_ALGORITHMS,
    MACS,
    PQ_KEX,
    ServerTransport,
)

ECHO = 200  # a message number of the test service; the echo comes back as ECHO + 1
AEAD = (b"aes256-gcm@openssh.com", b"aes128-gcm@openssh.com")

_hostKeys: dict[bytes, keys.Key] = {}


def hostKeys() -> dict[bytes, keys.Key]:
    """
    An Ed25519 and a 3072-bit RSA host key, made once for the module.
    """
    if not _hostKeys:
        _hostKeys[b"ssh-ed25519"] = keys.Key(ed25519.Ed25519PrivateKey.generate())
        _hostKeys[b"ssh-rsa"] = keys.Key(rsa.generate_private_key(65537, 3072))
    return _hostKeys


class EchoService(service.SSHService):
    """
    The server's test service: sends every message back, numbered one more.
    """

    name = b"nfltr-test-echo"

    def packetReceived(self, messageNum: int, packet: bytes) -> None:
        assert self.transport is not None
        self.transport.sendPacket(messageNum + 1, packet)


class EchoClientService(service.SSHService):
    """
    The client's side of the test service: records what comes back.
    """

    name = b"nfltr-test-echo"

    def __init__(self) -> None:
        self.received: list[tuple[int, bytes]] = []

    def packetReceived(self, messageNum: int, packet: bytes) -> None:
        self.received.append((messageNum, packet))


class RecordingServer(ServerTransport):
    """
    The server transport, noting each DISCONNECT it sends.
    """

    def __init__(self, pqOnly: bool) -> None:
        super().__init__(pqOnly)
        self.sent: list[tuple[int, bytes]] = []

    def sendDisconnect(self, reason: int, desc: bytes | str) -> None:
        if not self.transport.disconnecting:
            self.sent.append((reason, desc.encode() if isinstance(desc, str) else desc))
        super().sendDisconnect(reason, desc)


class EchoFactory(factory.SSHFactory):
    """
    Conch's server factory with nfltr's transport, test host keys, and the
    echo service offered to anyone (no login).
    """

    def __init__(self, kinds: tuple[bytes, ...] = (b"ssh-ed25519", b"ssh-rsa"),
                 pqOnly: bool = False) -> None:
        self.privateKeys = {kind: hostKeys()[kind] for kind in kinds}
        self.publicKeys = {kind: key.public() for kind, key in self.privateKeys.items()}
        self.primes = None
        self.protocol = lambda: RecordingServer(pqOnly)

    def getService(self, transport: Any, name: bytes) -> Any:
        return EchoService if name == EchoService.name else None


class TestClient(ClientTransport):
    """
    A client that accepts the test host keys, starts the echo service once
    secure, and records how the connection ended.
    """

    def __init__(self) -> None:
        super().__init__()
        self.echo = EchoClientService()
        self.errors: list[tuple[int, bytes]] = []
        self.unimplemented: list[int] = []
        self.secured = 0

    def verifyHostKey(self, hostKey: bytes, fingerprint: bytes) -> defer.Deferred[Any]:
        if any(key.public().blob() == hostKey for key in hostKeys().values()):
            return defer.succeed(True)
        return defer.fail(ValueError("unknown host key"))

    def connectionSecure(self) -> None:
        self.secured += 1
        self.requestService(self.echo)

    def receiveError(self, reasonCode: int, description: bytes) -> None:
        self.errors.append((reasonCode, description))

    def receiveUnimplemented(self, seqnum: int) -> None:
        self.unimplemented.append(seqnum)


Pair = tuple[Any, RecordingServer, iosim.IOPump]


def connect(client: ClientTransport | SSHClientTransport | None = None,
            server: EchoFactory | None = None) -> Pair:
    """
    A client and a server transport over an in-memory connection, pumped
    until quiet.
    """
    serverFactory = server or EchoFactory()
    serverFactory.startFactory()
    c, s, pump = iosim.connectedServerAndClient(
        lambda: serverFactory.buildProtocol(None), lambda: client or TestClient())
    pump.flush()
    return c, s, pump


def client(**attributes: Any) -> TestClient:
    """
    A L{TestClient} with some attributes set (the algorithms it offers).
    """
    c = TestClient()
    for name, value in attributes.items():
        setattr(c, name, value)
    return c


def echo(test: SynchronousTestCase, pair: Pair, payloads: list[bytes]) -> None:
    """
    Send C{payloads} through the echo service and check they come back.
    """
    c, _, pump = pair
    before = len(c.echo.received)
    for payload in payloads:
        c.sendPacket(ECHO, payload)
    pump.flush()
    test.assertEqual(c.echo.received[before:], [(ECHO + 1, p) for p in payloads])


def disconnectedWith(test: SynchronousTestCase, pair: Pair, code: int, words: bytes) -> None:
    """
    The server sent one DISCONNECT, with C{code} and a text containing
    C{words}, and closed; the client read it unless it had given up first.
    """
    c, s, _ = pair
    test.assertEqual(len(s.sent), 1, s.sent)
    test.assertEqual(s.sent[0][0], code)
    test.assertIn(words, s.sent[0][1])
    test.assertTrue(s.transport.disconnecting)
    test.assertIn(c.errors, ([], s.sent))


def serverKexInit(c: ClientTransport | SSHClientTransport) -> KexInit:
    """
    The server's KEXINIT as the client received it.
    """
    return KexInit.decode(c.otherKexInitPayload[1:])


class OfferTests(SynchronousTestCase):
    """
    What the server offers.
    """

    def test_default(self) -> None:
        """
        The hybrid post-quantum key exchange, then curve25519-sha256, then the
        extension and strict-KEX signals; Ed25519 and RSA with SHA-2 host
        keys; AES-GCM, then AES-CTR with encrypt-then-MAC MACs only; no
        compression.
        """
        c, _, _ = connect()
        offer = serverKexInit(c)
        self.assertEqual(offer.kex, (b"mlkem768x25519-sha256", b"curve25519-sha256",
                                     b"ext-info-s", b"kex-strict-s-v00@openssh.com"))
        self.assertEqual(offer.host_key, (b"ssh-ed25519", b"rsa-sha2-512", b"rsa-sha2-256"))
        for ciphers in (offer.ciphers_client_to_server, offer.ciphers_server_to_client):
            self.assertEqual(ciphers, (b"aes256-gcm@openssh.com", b"aes128-gcm@openssh.com",
                                       b"aes256-ctr", b"aes128-ctr"))
        for macs in (offer.macs_client_to_server, offer.macs_server_to_client):
            self.assertEqual(macs, (b"hmac-sha2-512-etm@openssh.com",
                                    b"hmac-sha2-256-etm@openssh.com"))
        self.assertEqual(offer.compression_client_to_server, (b"none",))
        self.assertEqual(offer.compression_server_to_client, (b"none",))

    def test_nothingWeak(self) -> None:
        """
        No SHA-1 (C{ssh-rsa} signatures, C{hmac-sha1}, C{group14-sha1}), no
        CBC or 3DES, no NIST curve, no MAC computed over plaintext.
        """
        c, _, _ = connect()
        offered = b",".join(b",".join(names) for names in serverKexInit(c).lists())
        for weak in (b"sha1", b"ssh-rsa", b"cbc", b"3des", b"nistp", b"md5", b"ssh-dss",
                     b"diffie-hellman", b"zlib"):
            self.assertNotIn(weak, offered)
        for mac in serverKexInit(c).macs_server_to_client:
            self.assertTrue(mac.endswith(b"-etm@openssh.com"))

    def test_pqOnly(self) -> None:
        """
        With C{pqOnly}, the hybrid post-quantum key exchange alone.
        """
        c, _, _ = connect(server=EchoFactory(pqOnly=True))
        self.assertEqual(serverKexInit(c).kex, (b"mlkem768x25519-sha256", b"ext-info-s",
                                                b"kex-strict-s-v00@openssh.com"))
        self.assertEqual(c.kexAlg, b"mlkem768x25519-sha256")

    def test_hostKeysFromFactory(self) -> None:
        """
        Host key algorithms are those of the factory's keys: with an Ed25519
        key alone, C{ssh-ed25519} alone (conch's factory would also set
        C{ssh-rsa} for an RSA key: never offered).
        """
        c, _, _ = connect(server=EchoFactory(kinds=(b"ssh-ed25519",)))
        self.assertEqual(serverKexInit(c).host_key, (b"ssh-ed25519",))
        c, _, _ = connect(server=EchoFactory(kinds=(b"ssh-rsa",)))
        self.assertEqual(serverKexInit(c).host_key, (b"rsa-sha2-512", b"rsa-sha2-256"))

    def test_version(self) -> None:
        """
        The version line names nfltr.
        """
        _, s, _ = connect()
        self.assertTrue(s.ourVersionString.startswith(b"SSH-2.0-nfltr_"))

    def test_serverSigAlgs(self) -> None:
        """
        After the first key exchange the server announces the SHA-2
        signature algorithms that user authentication takes (RFC 8308).
        """
        c, _, _ = connect()
        algs = c.peerExtensions[b"server-sig-algs"].split(b",")
        self.assertIn(b"ssh-ed25519", algs)
        self.assertIn(b"rsa-sha2-256", algs)
        self.assertNotIn(b"ssh-rsa", algs)


class ConnectionTests(SynchronousTestCase):
    """
    Every combination of key exchange, host key, cipher and MAC carries data
    both ways (test methods made below), and through rekeying.
    """

    def check(self, kex: bytes, hostKey: bytes, cipher: bytes, mac: bytes) -> None:
        pair = connect(client(kexAlgorithms=(kex,), supportedPublicKeys=[hostKey],
                              supportedCiphers=[cipher], supportedMACs=[mac]))
        c, s, _ = pair
        self.assertEqual(c.secured, 1)
        for side in (c, s):
            self.assertEqual((side.kexAlg, side.keyAlg), (kex, hostKey))
            self.assertTrue(side.isEncrypted("both"))
            self.assertTrue(side.isVerified("both"))
            self.assertEqual(side.currentEncryptions.outCipType, cipher)
            self.assertEqual(side.currentEncryptions.inCipType, cipher)
        if cipher not in AEAD:
            self.assertEqual(s.currentEncryptions.inMACType, mac)
        echo(self, pair, [b"", b"x", b"y" * 15, b"z" * 16, os.urandom(32768), os.urandom(100000)])

    def test_rekey(self) -> None:
        """
        A key exchange started by the client mid-stream: what it sends
        meanwhile waits and arrives after, in order; data flows on under the
        new keys, and again after a second rekey.
        """
        for cipher, mac in ((b"aes128-gcm@openssh.com", MACS[0]), (b"aes256-ctr", MACS[1])):
            pair = connect(client(supportedCiphers=[cipher], supportedMACs=[mac]))
            c, _, pump = pair
            first = c.sessionID
            c.sendPacket(ECHO, b"before")
            c.sendKexInit()
            c.sendPacket(ECHO, b"during")
            pump.flush()
            self.assertEqual(c.echo.received[-2:], [(ECHO + 1, b"before"), (ECHO + 1, b"during")])
            self.assertEqual(c.sessionID, first)
            echo(self, pair, [b"after", os.urandom(5000)])
            c.sendKexInit()
            pump.flush()
            echo(self, pair, [b"again"])
            self.assertEqual(c.secured, 1)

    def test_serverAnswersEchoDuringRekey(self) -> None:
        """
        Messages the server must send while a key exchange is in progress
        wait for it to end.
        """
        pair = connect()
        c, s, pump = pair
        s.sendKexInit()
        c.sendPacket(ECHO, b"crossing")
        pump.flush()
        self.assertEqual(c.echo.received, [(ECHO + 1, b"crossing")])
        echo(self, pair, [b"after"])

    def test_slowHostKeyCheck(self) -> None:
        """
        A client still checking the host key when the server's NEWKEYS and
        EXT_INFO (under the new keys) arrive reads nothing more until its own
        keys are ready, then reads on.
        """
        checks: list[defer.Deferred[Any]] = []

        class Slow(TestClient):
            def verifyHostKey(self, hostKey: bytes, fingerprint: bytes) -> defer.Deferred[Any]:
                checks.append(defer.Deferred())
                return checks[-1]

        for kex in (PQ_KEX, CLASSIC_KEX):
            slow = Slow()
            slow.kexAlgorithms = kex
            pair = connect(slow)
            c, _, pump = pair
            self.assertEqual((c.secured, c.peerExtensions), (0, {}))
            checks[-1].callback(True)
            pump.flush()
            self.assertEqual(c.secured, 1)
            self.assertIn(b"server-sig-algs", c.peerExtensions)
            echo(self, pair, [b"fine"])

    def test_oneByteAtATime(self) -> None:
        """
        Packets delivered one byte at a time, or with the start of the next
        packet, are read the same.
        """
        c, s, pump = connect()
        for payload in (b"first", os.urandom(3000), b"last"):
            c.sendPacket(ECHO, payload)
        data = c.transport.getOutBuffer()
        for i in range(len(data)):
            s.dataReceived(data[i : i + 1])
        c.sendPacket(ECHO, b"split")
        c.sendPacket(ECHO, b"pair")
        data = c.transport.getOutBuffer()
        s.dataReceived(data[:-7])
        s.dataReceived(data[-7:])
        pump.flush()
        self.assertEqual([p for _, p in c.echo.received[-5:]][0::4], [b"first", b"pair"])
        self.assertEqual(len(c.echo.received), 5)


def _combination(kex: bytes, hostKey: bytes, cipher: bytes, mac: bytes) -> Callable[..., None]:
    def test(self: ConnectionTests) -> None:
        """
        One combination carries data both ways (replaced below by its name).
        """
        self.check(kex, hostKey, cipher, mac)

    test.__doc__ = (f"{kex.decode()}, host key {hostKey.decode()}, {cipher.decode()}"
                    f"{'' if cipher in AEAD else ' with ' + mac.decode()}: data both ways.")
    return test


for _kex in PQ_KEX + CLASSIC_KEX:
    for _cipher in CIPHERS:
        for _mac in MACS[:1] if _cipher in AEAD else MACS:
            for _hostKey in HOST_KEY_ALGORITHMS:
                _name = re.sub(r"[^A-Za-z0-9]+", "_",
                               f"test_{_kex.decode()}_{_hostKey.decode()}_{_cipher.decode()}"
                               f"{'' if _cipher in AEAD else '_' + _mac.decode()}")
                setattr(ConnectionTests, _name, _combination(_kex, _hostKey, _cipher, _mac))


class StrictKexTests(SynchronousTestCase):
    """
    Strict key exchange (the Terrapin countermeasure), and the message order
    enforced without it.
    """

    def test_sequenceNumbersReset(self) -> None:
        """
        With strict key exchange each side's sequence numbers restart at 0
        after each NEWKEYS: after the first exchange the server has read the
        client's SERVICE_REQUEST (0) and N echoes, and sent EXT_INFO (0),
        SERVICE_ACCEPT (1) and N echoes; after a rekey, only what followed.
        """
        pair = connect()
        c, s, pump = pair
        echo(self, pair, [b"a", b"b", b"c"])
        self.assertEqual((s.incomingPacketSequence, s.outgoingPacketSequence), (4, 5))
        self.assertEqual((c.incomingPacketSequence, c.outgoingPacketSequence), (5, 4))
        c.sendKexInit()
        pump.flush()
        echo(self, pair, [b"d"])
        self.assertEqual((s.incomingPacketSequence, s.outgoingPacketSequence), (1, 1))

    def test_sequenceNumbersRunOnWithoutStrict(self) -> None:
        """
        With a client that does not offer strict key exchange, sequence
        numbers count every packet since the start (KEXINIT, INIT, NEWKEYS
        come first).
        """
        pair = connect(client(strictKex=False))
        s = pair[1]
        echo(self, pair, [b"a", b"b", b"c"])
        self.assertEqual((s.incomingPacketSequence, s.outgoingPacketSequence), (7, 8))

    def ignoreFirst(self, strict: bool) -> Pair:
        class IgnoreFirst(TestClient):
            def sendKexInit(self) -> None:
                if self.sessionID is None:
                    self.sendIgnore(b"before KEXINIT")
                super().sendKexInit()

        c = IgnoreFirst()
        c.strictKex = strict
        return connect(c)

    def test_kexInitNotFirst(self) -> None:
        """
        A strict client whose first packet is not KEXINIT (an IGNORE) is
        disconnected: the sequence number of its KEXINIT gives it away.
        """
        disconnectedWith(self, self.ignoreFirst(True), DISCONNECT_PROTOCOL_ERROR,
                         b"strict KEX violation: KEXINIT was not the first packet")

    def test_ignoreFirstWithoutStrict(self) -> None:
        """
        A client that does not offer strict key exchange may send IGNORE
        before its KEXINIT (RFC 4253).
        """
        pair = self.ignoreFirst(False)
        self.assertEqual(pair[0].errors, [])
        echo(self, pair, [b"fine"])

    def duringKex(self, strict: bool, send: Callable[[TestClient], None]) -> Pair:
        class DuringKex(TestClient):
            def ssh_KEXINIT(self, packet: bytes) -> None:
                super().ssh_KEXINIT(packet)
                if self.sessionID is None:
                    send(self)

        c = DuringKex()
        c.strictKex = strict
        return connect(c)

    def test_transportMessagesDuringStrictKex(self) -> None:
        """
        During a strict initial key exchange, IGNORE, DEBUG and UNIMPLEMENTED
        (valid at any other time) each end the connection.
        """
        for number, send in ((2, lambda c: c.sendIgnore(b"x")),
                             (4, lambda c: c.sendDebug(b"x")),
                             (3, lambda c: c.sendPacket(3, struct.pack("!I", 0)))):
            disconnectedWith(self, self.duringKex(True, send), DISCONNECT_PROTOCOL_ERROR,
                             b"strict KEX violation: unexpected message %d" % number)

    def test_transportMessagesDuringKexWithoutStrict(self) -> None:
        """
        Without strict key exchange, IGNORE and DEBUG during the key exchange
        are allowed.
        """
        pair = self.duringKex(False, lambda c: (c.sendIgnore(b"x"), c.sendDebug(b"y")))
        self.assertEqual(pair[0].errors, [])
        echo(self, pair, [b"fine"])

    def test_ignoreAfterStrictKex(self) -> None:
        """
        Strictness ends with the initial key exchange: IGNORE afterwards, and
        during a later key exchange, is fine.
        """
        pair = connect()
        c, _, pump = pair
        c.sendIgnore(b"later")
        c.sendKexInit()
        c.sendIgnore(b"during a rekey")
        pump.flush()
        self.assertEqual(c.errors, [])
        echo(self, pair, [b"fine"])

    def test_serviceRequestBeforeKexEnds(self) -> None:
        """
        A service request before the first key exchange ends is refused,
        strict or not (it would run in the clear).
        """
        for strict in (True, False):
            pair = self.duringKex(strict, lambda c: c.transport.write(
                PlainSealer().seal(0, b"\x05" + NS(b"ssh-userauth"))))
            words = (b"strict KEX violation: unexpected message 5" if strict
                     else b"message 5 before the key exchange ended")
            disconnectedWith(self, pair, DISCONNECT_PROTOCOL_ERROR, words)

    def test_kexMessageOutOfTurn(self) -> None:
        """
        A second key exchange INIT, or one after the exchange, is refused.
        """
        pair = self.duringKex(False, lambda c: c.sendPacket(30, NS(b"\0" * 32)))
        disconnectedWith(self, pair, DISCONNECT_PROTOCOL_ERROR,
                         b"unexpected key exchange message 30")
        pair = connect()
        pair[0].transport.write(b"\0" * 64)  # not even a packet under the new keys
        pair[2].flush()
        self.assertTrue(pair[1].transport.disconnecting)

    def test_kexInitDuringKex(self) -> None:
        """
        A second KEXINIT during a key exchange is refused.
        """
        pair = self.duringKex(False, lambda c: c.transport.write(
            PlainSealer().seal(0, c.ourKexInitPayload)))
        disconnectedWith(self, pair, DISCONNECT_PROTOCOL_ERROR, b"unexpected KEXINIT")


class RefusalTests(SynchronousTestCase):
    """
    Input the server refuses, each time with a DISCONNECT saying why.
    """

    def test_conchClient(self) -> None:
        """
        Conch's own client agrees on nothing secure enough (its MACs are all
        encrypt-and-MAC): refused, with what the server offers.
        """

        class Conch(SSHClientTransport):
            errors: list[tuple[int, bytes]] = []

            def receiveError(self, reasonCode: int, description: bytes) -> None:
                self.errors.append((reasonCode, description))

        pair = connect(Conch())
        disconnectedWith(self, pair, DISCONNECT_KEY_EXCHANGE_FAILED,
                         b"no matching MAC algorithm; the server offers "
                         b"hmac-sha2-512-etm@openssh.com,hmac-sha2-256-etm@openssh.com")

    def test_noCommonCipher(self) -> None:
        """
        A client offering no cipher of ours is told which the server has.
        """
        pair = connect(client(supportedCiphers=[b"aes128-cbc"]))
        disconnectedWith(self, pair, DISCONNECT_KEY_EXCHANGE_FAILED,
                         b"no matching cipher algorithm; the server offers aes256-gcm")

    def test_pqOnlyRefusesClassicClient(self) -> None:
        """
        A post-quantum-only server refuses a client without the hybrid key
        exchange.
        """
        pair = connect(client(kexAlgorithms=CLASSIC_KEX), EchoFactory(pqOnly=True))
        disconnectedWith(self, pair, DISCONNECT_KEY_EXCHANGE_FAILED,
                         b"no matching key exchange algorithm; the server offers "
                         b"mlkem768x25519-sha256")

    def test_tampered(self) -> None:
        """
        A packet changed on the way is refused with a MAC error, for each
        kind of cipher.
        """
        for cipher in (b"aes256-gcm@openssh.com", b"aes128-ctr"):
            pair = connect(client(supportedCiphers=[cipher]))
            c, _, pump = pair
            c.sendPacket(ECHO, b"precious")
            chunk = bytearray(c.transport.stream[-1])
            chunk[10] ^= 0x01
            c.transport.stream[-1] = bytes(chunk)
            pump.flush()
            disconnectedWith(self, pair, DISCONNECT_MAC_ERROR, b"bad MAC")

    def test_hugeLength(self) -> None:
        """
        A packet length over the limit is refused from its four bytes.
        """
        pair = connect()
        pair[0].transport.write(struct.pack("!I", 1 << 30))
        pair[2].flush()
        disconnectedWith(self, pair, DISCONNECT_PROTOCOL_ERROR, b"bad packet length")

    def test_badKexInit(self) -> None:
        """
        An unreadable KEXINIT is refused.
        """

        class Bad(TestClient):
            def sendKexInit(self) -> None:
                self.transport.write(PlainSealer().seal(0, b"\x14" + b"C" * 16 + b"\0\0\1"))

            def ssh_KEXINIT(self, packet: bytes) -> None:
                pass

        disconnectedWith(self, connect(Bad()), DISCONNECT_PROTOCOL_ERROR, b"KEXINIT")

    def test_badKexInitMessages(self) -> None:
        """
        Key exchange INITs with a public key of the wrong length (hybrid and
        curve25519) are refused without an exception escaping.
        """
        for kex in (PQ_KEX, CLASSIC_KEX):

            class Short(TestClient):
                kexAlgorithms = kex

                def ssh_KEXINIT(self, packet: bytes) -> None:
                    if self._receiveKexInit(packet) is not None:
                        self.sendPacket(30, NS(b"short"))

            disconnectedWith(self, connect(Short()), DISCONNECT_KEY_EXCHANGE_FAILED
                             if kex == PQ_KEX else DISCONNECT_PROTOCOL_ERROR, b"")

    def test_noVersionLine(self) -> None:
        """
        4 KiB without an SSH version line: refused.
        """
        server = EchoFactory().buildProtocol(None)
        transport = iosim.FakeTransport(server, isServer=True)
        server.makeConnection(transport)
        server.dataReceived(b"GET / HTTP/1.1\r\n" + b"x" * 5000)
        self.assertTrue(transport.disconnecting)
        self.assertIn(b"no SSH version line", b"".join(transport.stream))

    def test_oldVersion(self) -> None:
        """
        SSH 1 is refused; lines before the version line are skipped.
        """
        for line, refused in ((b"SSH-1.5-old\r\n", True), (b"hello\r\nSSH-2.0-x\r\n", False)):
            server = EchoFactory().buildProtocol(None)
            transport = iosim.FakeTransport(server, isServer=True)
            server.makeConnection(transport)
            server.dataReceived(line)
            self.assertEqual(bool(transport.disconnecting), refused)
            if refused:
                self.assertIn(struct.pack("!I", DISCONNECT_PROTOCOL_VERSION_NOT_SUPPORTED),
                              b"".join(transport.stream))

    def test_unimplementedNamesThePacket(self) -> None:
        """
        An unknown transport message gets UNIMPLEMENTED with its own sequence
        number.
        """
        pair = connect()
        c, _, pump = pair
        seq = c.outgoingPacketSequence
        c.sendPacket(8, b"")
        pump.flush()
        self.assertEqual(c.unimplemented, [seq])
        echo(self, pair, [b"still fine"])


# -- The real OpenSSH client -------------------------------------------------------------


class EchoChannel(channel.SSHChannel):
    """
    A session whose command (any) sends back what it reads.
    """

    name = b"session"

    def request_exec(self, data: bytes) -> int:
        return 1

    def dataReceived(self, data: bytes) -> None:
        self.write(data)

    def eofReceived(self) -> None:
        assert self.conn is not None
        self.conn.sendRequest(self, b"exit-status", struct.pack("!I", 0))
        self.loseConnection()


class EchoUser(ConchUser):
    def __init__(self) -> None:
        super().__init__()
        self.channelLookup[b"session"] = EchoChannel


@implementer(IRealm)
class EchoRealm:
    def requestAvatar(self, avatarId: Any, mind: Any, *interfaces: Any) -> Any:
        return IConchUser, EchoUser(), lambda: None


class SSHRun(protocol.ProcessProtocol):
    """
    One C{ssh} run: its input written and closed, its output and exit code
    collected.
    """

    def __init__(self, stdin: bytes) -> None:
        self.stdin = stdin
        self.out: list[bytes] = []
        self.err: list[bytes] = []
        self.ended: defer.Deferred[tuple[int, bytes, str]] = defer.Deferred()

    def connectionMade(self) -> None:
        assert self.transport is not None
        self.transport.write(self.stdin)
        self.transport.closeStdin()

    def outReceived(self, data: bytes) -> None:
        self.out.append(data)

    def errReceived(self, data: bytes) -> None:
        self.err.append(data)

    def processEnded(self, reason: Any) -> None:
        self.ended.callback((reason.value.exitCode, b"".join(self.out),
                             b"".join(self.err).decode("utf-8", "replace")))


class OpenSSHTests(TestCase):
    """
    The OpenSSH client against a test server on L{ServerTransport}.
    """

    timeout = 120

    def setUp(self) -> None:
        self.ssh = shutil.which("ssh")
        if self.ssh is None:
            raise SkipTest("the OpenSSH client is not installed (Debian: openssh-client)")
        from twisted.internet import reactor

        self.reactor: Any = reactor
        self.home = Path(self.mktemp()).absolute()
        self.home.mkdir(mode=0o700)
        user = ed25519.Ed25519PrivateKey.generate()
        self.identity = self.home / "id_ed25519"
        self.identity.write_bytes(keys.Key(user).toString("OPENSSH"))
        self.identity.chmod(0o600)
        checker = SSHPublicKeyChecker(InMemorySSHKeyDB({b"tester": [keys.Key(user).public()]}))
        self.checker = checker

    def listen(self, pqOnly: bool = False) -> int:
        """
        Start the test server; its port, with a known_hosts file naming it.
        """
        serverFactory = factory.SSHFactory()
        serverFactory.privateKeys = hostKeys()
        serverFactory.publicKeys = {kind: key.public() for kind, key in hostKeys().items()}
        serverFactory.primes = None
        serverFactory.portal = Portal(EchoRealm(), [self.checker])
        serverFactory.protocol = lambda: ServerTransport(pqOnly=pqOnly)
        tcp: IReactorTCP = self.reactor
        port = tcp.listenTCP(0, serverFactory, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        number: int = port.getHost().port
        (self.home / "known_hosts").write_text("".join(
            f"[127.0.0.1]:{number} {key.public().toString('openssh').decode()}\n"
            for key in hostKeys().values()))
        return number

    def runSSH(self, port: int, options: list[str], data: bytes,
               ) -> defer.Deferred[tuple[int, bytes, str]]:
        """
        Run C{ssh -vvv ... tester@127.0.0.1 echo} with C{data} on its input.
        """
        assert self.ssh is not None
        args = [self.ssh, "-vvv", "-F", "/dev/null", "-p", str(port), "-i", str(self.identity),
                "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                "-o", f"UserKnownHostsFile={self.home / 'known_hosts'}",
                "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes",
                "-o", "UpdateHostKeys=no", "-o", "ConnectTimeout=20", "-T", *options,
                "tester@127.0.0.1", "echo"]
        env = {"HOME": str(self.home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        run = SSHRun(data)
        processes: IReactorProcess = self.reactor
        processes.spawnProcess(run, self.ssh, args, env=env)
        return run.ended

    @defer.inlineCallbacks
    def carries(self, options: list[str], cipher: str, mac: str, hostKey: str = "ssh-ed25519",
                size: int = 256 * 1024) -> Any:
        """
        C{ssh} with C{options} negotiates C{cipher}, C{mac} and C{hostKey}
        with curve25519-sha256 and strict key exchange, and what it sends
        comes back whole.
        """
        data = os.urandom(size)
        code, out, err = yield self.runSSH(self.listen(), options, data)
        self.assertEqual(code, 0, err[-3000:])
        self.assertEqual(hashlib.sha256(out).hexdigest(), hashlib.sha256(data).hexdigest())
        self.assertIn("kex: algorithm: curve25519-sha256", err)
        self.assertIn(f"kex: host key algorithm: {hostKey}", err)
        for direction in ("server->client", "client->server"):
            self.assertIn(f"kex: {direction} cipher: {cipher} MAC: {mac} compression: none",
                          err)
        self.assertIn("will use strict KEX ordering", err)
        return err

    def test_aes256gcm(self) -> Any:
        """
        C{-c aes256-gcm@openssh.com}, Ed25519 host key.
        """
        return self.carries(["-c", "aes256-gcm@openssh.com"], "aes256-gcm@openssh.com",
                            "<implicit>")

    def test_aes128gcmRSA512(self) -> Any:
        """
        C{-c aes128-gcm@openssh.com} with an C{rsa-sha2-512} host key.
        """
        return self.carries(["-c", "aes128-gcm@openssh.com",
                             "-o", "HostKeyAlgorithms=rsa-sha2-512"],
                            "aes128-gcm@openssh.com", "<implicit>", "rsa-sha2-512")

    def test_aes128ctrEtm256RSA256(self) -> Any:
        """
        C{-c aes128-ctr -m hmac-sha2-256-etm@openssh.com} with an
        C{rsa-sha2-256} host key.
        """
        return self.carries(["-c", "aes128-ctr", "-m", "hmac-sha2-256-etm@openssh.com",
                             "-o", "HostKeyAlgorithms=rsa-sha2-256"],
                            "aes128-ctr", "hmac-sha2-256-etm@openssh.com", "rsa-sha2-256")

    def test_aes256ctrEtm512(self) -> Any:
        """
        C{-c aes256-ctr -m hmac-sha2-512-etm@openssh.com}.
        """
        return self.carries(["-c", "aes256-ctr", "-m", "hmac-sha2-512-etm@openssh.com"],
                            "aes256-ctr", "hmac-sha2-512-etm@openssh.com")

    def test_defaults(self) -> Any:
        """
        OpenSSH's own preferences: it picks aes128-ctr (its order puts CTR
        before GCM) with hmac-sha2-256-etm@openssh.com.
        """
        return self.carries([], "aes128-ctr", "hmac-sha2-256-etm@openssh.com")

    @defer.inlineCallbacks
    def rekeys(self, options: list[str], cipher: str, mac: str) -> Any:
        err = yield self.carries([*options, "-o", "RekeyLimit=64K"], cipher, mac,
                                 size=1024 * 1024)
        self.assertGreaterEqual(err.count("SSH2_MSG_NEWKEYS received"), 4)

    def test_rekeyGCM(self) -> Any:
        """
        Rekeying every 64 KiB (OpenSSH starts each), AES-GCM: 1 MiB comes
        back whole through several key exchanges.
        """
        return self.rekeys(["-c", "aes256-gcm@openssh.com"], "aes256-gcm@openssh.com",
                           "<implicit>")

    def test_rekeyEtM(self) -> Any:
        """
        Rekeying every 64 KiB with encrypt-then-MAC, whose MAC covers the
        sequence numbers that strict key exchange resets at each NEWKEYS.
        """
        return self.rekeys(["-c", "aes128-ctr", "-m", "hmac-sha2-256-etm@openssh.com"],
                           "aes128-ctr", "hmac-sha2-256-etm@openssh.com")

    @defer.inlineCallbacks
    def test_refusals(self) -> Any:
        """
        What OpenSSH is refused, with its own message naming what the server
        offers: SHA-1 and CBC algorithms, and any key exchange but ours (a
        post-quantum-only server has nothing for OpenSSH 9.2, which lacks
        mlkem768x25519-sha256).
        """
        port = self.listen()
        for options, words in (
            (["-o", "HostKeyAlgorithms=ssh-rsa"], "no matching host key type found"),
            (["-c", "aes128-cbc"], "no matching cipher found"),
            (["-c", "aes128-ctr", "-m", "hmac-sha1,hmac-sha2-256"], "no matching MAC found"),
            (["-o", "KexAlgorithms=diffie-hellman-group14-sha1,ecdh-sha2-nistp256"],
             "no matching key exchange method found"),
        ):
            code, _, err = yield self.runSSH(port, options, b"")
            self.assertEqual(code, 255)
            self.assertIn(words, err)
        code, _, err = yield self.runSSH(self.listen(pqOnly=True), [], b"")
        self.assertEqual(code, 255)
        self.assertIn("no matching key exchange method found. Their offer: "
                      "mlkem768x25519-sha256,ext-info-s,kex-strict-s-v00@openssh.com", err)
