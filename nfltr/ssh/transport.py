# -*- test-case-name: tests.ssh.test_transport -*-
"""
nfltr's SSH transport layer: conch's, held to algorithms that ssh-audit
accepts, with the packet framings conch lacks and OpenSSH's strict key
exchange.  See docs/ssh-security.md for the choices and the audit.

Offered, by preference:

  - key exchange: C{mlkem768x25519-sha256} (post-quantum hybrid, OpenSSH
    9.9 and later), then C{curve25519-sha256} for older clients, which
    L{ServerTransport.pqOnly} drops;
  - host keys: C{ssh-ed25519}, C{rsa-sha2-512}, C{rsa-sha2-256} (never the
    SHA-1 C{ssh-rsa}), as far as the factory holds the keys;
  - ciphers: C{aes256-gcm@openssh.com}, C{aes128-gcm@openssh.com}, then
    C{aes256-ctr} and C{aes128-ctr} with the encrypt-then-MAC MACs
    C{hmac-sha2-512-etm@openssh.com} and C{hmac-sha2-256-etm@openssh.com};
    no compression.

Packets are framed by L{nfltr.ssh._packets} and KEXINITs read and matched by
L{nfltr.ssh._kexinit}; conch keeps the key exchange methods, the key
derivation and everything above the transport.  Outgoing keys change when
our NEWKEYS is sent, incoming keys when the peer's arrives.

Strict key exchange (OpenSSH's PROTOCOL 1.9, the Terrapin countermeasure)
is offered and used when the peer offers it too: then the peer's KEXINIT
must be its first packet, any other message than the key exchange's own
before the first NEWKEYS arrives ends the connection (IGNORE, DEBUG and
UNIMPLEMENTED included), and each direction's sequence number restarts at 0
after each NEWKEYS.  Whether strict or not, a key exchange message out of
turn, or a service message before the first key exchange ends, ends the
connection with a protocol error the peer is told.

L{nfltr.ssh.client.ClientTransport} is conch's client with the same
algorithms and rules, for tests and tools: conch's own client can no longer
agree with the server.
"""

from __future__ import annotations

import os
import struct

from twisted.conch.ssh import _kex
from twisted.conch.ssh.common import NS
from twisted.conch.ssh.transport import (
    DISCONNECT_BY_APPLICATION,
    DISCONNECT_CONNECTION_LOST,
    DISCONNECT_KEY_EXCHANGE_FAILED,
    DISCONNECT_PROTOCOL_ERROR,
    DISCONNECT_PROTOCOL_VERSION_NOT_SUPPORTED,
    MSG_DISCONNECT,
    MSG_EXT_INFO,
    MSG_KEX_DH_GEX_REQUEST_OLD,
    MSG_KEXINIT,
    MSG_NEWKEYS,
    MSG_SERVICE_REQUEST,
    MSG_UNIMPLEMENTED,
    SSHCiphers,
    SSHServerTransport,
    SSHTransportBase,
    messages,
)
from twisted.logger import Logger

from nfltr import __version__
from nfltr.wire import format_address

from ._kexinit import (
    EXT_INFO_CLIENT,
    EXT_INFO_SERVER,
    STRICT_KEX_CLIENT,
    STRICT_KEX_SERVER,
    Algorithms,
    KexInit,
    KexInitError,
    NegotiationError,
    guessed_wrong,
    negotiate,
)
from ._packets import CIPHERS as _CIPHER_SPECS
from ._packets import (
    SEQUENCE_MASK,
    Opener,
    PacketError,
    PlainOpener,
    PlainSealer,
    Sealer,
    new_opener,
    new_sealer,
)

__all__ = [
    "CIPHERS", "CLASSIC_KEX", "HOST_KEY_ALGORITHMS", "MACS", "PQ_KEX", "SERVER_SIG_ALGS",
    "ServerTransport",
]

PQ_KEX = (b"mlkem768x25519-sha256",)
CLASSIC_KEX = (b"curve25519-sha256",)
HOST_KEY_ALGORITHMS = (b"ssh-ed25519", b"rsa-sha2-512", b"rsa-sha2-256")
CIPHERS = (b"aes256-gcm@openssh.com", b"aes128-gcm@openssh.com", b"aes256-ctr", b"aes128-ctr")
MACS = (b"hmac-sha2-512-etm@openssh.com", b"hmac-sha2-256-etm@openssh.com")
#: The signature algorithms user authentication takes, announced to clients
#: in RFC 8308's C{server-sig-algs}: SHA-2 only.
SERVER_SIG_ALGS = (b"ssh-ed25519", b"ecdsa-sha2-nistp256", b"ecdsa-sha2-nistp384",
                   b"ecdsa-sha2-nistp521", b"rsa-sha2-512", b"rsa-sha2-256")

_AEAD = frozenset(name for name, spec in _CIPHER_SPECS.items() if spec.aead)
#: Where a name would be for a MAC that an AEAD cipher does without.
_IMPLICIT_MAC = b"<implicit>"
_KEX_METHOD_FIRST, _KEX_METHOD_LAST = 30, 49
_SERVICE_FIRST = 50
_KEX_FLOW = frozenset({MSG_KEXINIT, MSG_NEWKEYS})
_MAX_VERSION_EXCHANGE = 4096
_MAX_LOGGED_REASON = 200
_VERSION = b"SSH-2.0-nfltr_" + __version__.encode("ascii")


class SecureTransport(SSHTransportBase):
    """
    What L{ServerTransport} and L{ClientTransport} share.

    @ivar _sealer: makes our packets under the current outgoing keys.
    @ivar _opener: reads the peer's packets under the current incoming keys.
    @ivar _nextSealer: the outgoing keys of the exchange in progress, from our
        key setup until our NEWKEYS is sent.
    @ivar _nextOpener: the incoming keys of the exchange in progress, from our
        key setup until the peer's NEWKEYS arrives.
    @ivar _inbuf: received bytes not yet read as packets, from C{_inpos}.
    @ivar _strict: both sides offered strict key exchange (decided by the
        peer's first KEXINIT).
    @ivar _initialKexDone: the peer's first NEWKEYS arrived.
    @ivar _methodDone: the peer's key exchange method message (INIT or
        REPLY) of the exchange in progress arrived.
    @ivar _newKeysPending: the peer's NEWKEYS came before our keys were ready
        (a client still checking the host key): reading stops until they are.
    @ivar _receivedSeq: the sequence number of the packet being dispatched.
    @ivar _closing: we sent DISCONNECT: nothing more is read or sent.
    @ivar bytesReceived: bytes read from the peer, all of them.
    @ivar bytesSent: bytes written to the peer, all of them.
    """

    _log = Logger()

    ourVersionString = _VERSION
    supportedKeyExchanges = list(PQ_KEX + CLASSIC_KEX)
    supportedPublicKeys = list(HOST_KEY_ALGORITHMS)
    supportedCiphers = list(CIPHERS)
    supportedMACs = list(MACS)
    supportedCompressions = [b"none"]

    #: The message numbers of the key exchange method that the peer sends.
    _kexMethodMessages: frozenset[int] = frozenset()

    def __init__(self) -> None:
        self._sealer: Sealer = PlainSealer()
        self._opener: Opener = PlainOpener()
        self._nextSealer: Sealer | None = None
        self._nextOpener: Opener | None = None
        self._inbuf: bytes | bytearray = b""
        self._inpos = 0
        self._reading = False
        self._strict = False
        self._kexInitSeen = False
        self._initialKexDone = False
        self._methodDone = False
        self._newKeysPending = False
        self._receivedSeq = 0
        self._closing = False
        self.bytesReceived = 0
        self.bytesSent = 0
        self._algorithms: Algorithms | None = None
        self._ourKexInit: KexInit | None = None

    def _offeredKex(self) -> tuple[bytes, ...]:
        """
        The key exchange methods to offer.
        """
        return PQ_KEX + CLASSIC_KEX

    def _signals(self) -> tuple[bytes, ...]:
        """
        The pseudo-algorithms our first KEXINIT adds to its key exchange
        methods.
        """
        return (EXT_INFO_SERVER, STRICT_KEX_SERVER)

    def connectionMade(self) -> None:
        """
        Send our version and KEXINIT.  Host key algorithms are narrowed to
        ours, in our order, of those the factory set (from its keys).
        """
        offered = set(self.supportedPublicKeys)
        self.supportedPublicKeys = [a for a in HOST_KEY_ALGORITHMS if a in offered]
        self.supportedKeyExchanges = list(self._offeredKex())
        assert self.transport is not None
        self.transport.write(self.ourVersionString + b"\r\n")
        self.bytesSent += len(self.ourVersionString) + 2
        self.currentEncryptions = SSHCiphers(b"none", b"none", b"none", b"none")
        self.sendKexInit()

    def sendKexInit(self) -> None:
        """
        Send our KEXINIT; the first also signals extension negotiation and
        strict key exchange.
        """
        if self._keyExchangeState != self._KEY_EXCHANGE_NONE:
            raise RuntimeError(f"cannot send KEXINIT in state {self._keyExchangeState}")
        kex = tuple(self.supportedKeyExchanges)
        if self.sessionID is None:
            kex += self._signals()
        ciphers, macs = tuple(self.supportedCiphers), tuple(self.supportedMACs)
        ours = KexInit(kex, tuple(self.supportedPublicKeys), ciphers, ciphers, macs, macs,
                       cookie=os.urandom(16))
        self._ourKexInit = ours
        self.ourKexInitPayload = ours.encode()
        self._sendNow(MSG_KEXINIT, self.ourKexInitPayload[1:])
        self._keyExchangeState = self._KEY_EXCHANGE_REQUESTED
        self._blockedByKeyExchange = []

    def _receiveKexInit(self, packet: bytes) -> KexInit | None:
        """
        Read the peer's KEXINIT and agree on algorithms (answering with our
        KEXINIT if the peer started this exchange): the peer's KEXINIT, or
        L{None} after disconnecting.
        """
        try:
            theirs = KexInit.decode(packet)
        except KexInitError as e:
            self.sendDisconnect(DISCONNECT_PROTOCOL_ERROR, str(e).encode())
            return None
        if not self._kexInitSeen:
            self._kexInitSeen = True
            peer = (EXT_INFO_SERVER, STRICT_KEX_SERVER) if self.isClient else (
                EXT_INFO_CLIENT, STRICT_KEX_CLIENT)
            self._peerSupportsExtensions = peer[0] in theirs.kex
            self._strict = peer[1] in theirs.kex
            if self._strict and self._receivedSeq != 0:
                self.sendDisconnect(DISCONNECT_PROTOCOL_ERROR,
                                    b"strict KEX violation: KEXINIT was not the first packet")
                return None
        if self._keyExchangeState == self._KEY_EXCHANGE_NONE:
            self.sendKexInit()
        assert self._ourKexInit is not None
        self.otherKexInitPayload = bytes((MSG_KEXINIT,)) + packet
        client, server = ((self._ourKexInit, theirs) if self.isClient
                          else (theirs, self._ourKexInit))
        try:
            algorithms = negotiate(client, server, _AEAD)
        except NegotiationError as e:
            self.sendDisconnect(DISCONNECT_KEY_EXCHANGE_FAILED, e.describe())
            return None
        self._algorithms = algorithms
        self.kexAlg, self.keyAlg = algorithms.kex, algorithms.host_key
        self.outgoingCompressionType = self.incomingCompressionType = b"none"
        self._keyExchangeState = self._KEY_EXCHANGE_PROGRESSING
        self._methodDone = False
        self._log.debug(
            "SSH key exchange: {kex} {hostKey} {cipherCS} {macCS} {cipherSC} {macSC}"
            " (strict: {strict})",
            kex=algorithms.kex, hostKey=algorithms.host_key,
            cipherCS=algorithms.cipher_client_to_server, macCS=algorithms.mac_client_to_server,
            cipherSC=algorithms.cipher_server_to_client, macSC=algorithms.mac_server_to_client,
            strict=self._strict,
        )
        return theirs

    def _keySetup(self, sharedSecret: bytes, exchangeHash: bytes) -> None:
        """
        Derive the new keys, send NEWKEYS (our outgoing keys change with it),
        and after the first exchange a server's EXT_INFO.
        """
        first = self.sessionID is None
        if first:
            self.sessionID = exchangeHash
        a = self._algorithms
        assert a is not None

        def key(letter: bytes) -> bytes:
            return self._getKey(letter, sharedSecret, exchangeHash)

        cs = (a.cipher_client_to_server, a.mac_client_to_server, key(b"A"), key(b"C"), key(b"E"))
        sc = (a.cipher_server_to_client, a.mac_server_to_client, key(b"B"), key(b"D"), key(b"F"))
        out, into = (cs, sc) if self.isClient else (sc, cs)
        self._nextSealer = new_sealer(*out)
        self._nextOpener = new_opener(*into)
        self.sendPacket(MSG_NEWKEYS, b"")
        if first and not self.isClient and self._peerSupportsExtensions:
            self._sendNow(MSG_EXT_INFO, struct.pack("!I", 1) + NS(b"server-sig-algs")
                          + NS(b",".join(SERVER_SIG_ALGS)))
        if self._newKeysPending:
            self._newKeysPending = False
            self._switchIncoming()
            self._readPackets()

    def ssh_NEWKEYS(self, packet: bytes) -> None:
        """
        The peer's NEWKEYS: its next packet comes under the new keys.
        """
        if packet:
            self.sendDisconnect(DISCONNECT_PROTOCOL_ERROR, b"NEWKEYS takes no data")
        elif self._nextOpener is None:
            self._newKeysPending = True
        else:
            self._switchIncoming()

    def _switchIncoming(self) -> None:
        """
        Read under the new keys from now on, end the key exchange and send
        what waited for it.
        """
        assert self._nextOpener is not None
        self._opener, self._nextOpener = self._nextOpener, None
        if self._strict:
            self.incomingPacketSequence = 0
        first = not self._initialKexDone
        self._initialKexDone = True
        a = self._algorithms
        assert a is not None
        out, into = ((a.cipher_client_to_server, a.mac_client_to_server),
                     (a.cipher_server_to_client, a.mac_server_to_client))
        if not self.isClient:
            out, into = into, out
        self.currentEncryptions = SSHCiphers(out[0], into[0], out[1] or _IMPLICIT_MAC,
                                             into[1] or _IMPLICIT_MAC)
        self._keyExchangeState = self._KEY_EXCHANGE_NONE
        self._methodDone = False
        blocked, self._blockedByKeyExchange = self._blockedByKeyExchange or [], []
        for messageType, payload in blocked:
            self.sendPacket(messageType, payload)
        self._keysChanged(first)

    def _keysChanged(self, first: bool) -> None:
        """
        A key exchange ended (the C{first} one or a later one).
        """

    def sendPacket(self, messageType: int, payload: bytes) -> None:
        """
        Send a message, or hold it until the key exchange in progress ends if
        it may not be sent during one.
        """
        if (self._keyExchangeState != self._KEY_EXCHANGE_NONE
                and not self._allowedKeyExchangeMessageType(messageType)):
            assert self._blockedByKeyExchange is not None
            self._blockedByKeyExchange.append((messageType, payload))
            return
        self._sendNow(messageType, payload)

    def _sendNow(self, messageType: int, payload: bytes) -> None:
        """
        Seal and write one message; after NEWKEYS, change the outgoing keys.
        """
        if self._closing:
            return
        assert self.transport is not None
        seq = self.outgoingPacketSequence
        sealed = self._sealer.seal(seq, bytes((messageType,)), payload)
        self.bytesSent += len(sealed)
        self.transport.write(sealed)
        self.outgoingPacketSequence = (seq + 1) & SEQUENCE_MASK
        if messageType == MSG_NEWKEYS:
            assert self._nextSealer is not None
            self._sealer, self._nextSealer = self._nextSealer, None
            if self._strict:
                self.outgoingPacketSequence = 0

    def sendDisconnect(self, reason: int, desc: bytes | str) -> None:
        """
        Tell the peer why, and close.  (Conch passes a L{str} at times.)
        """
        if self._closing:
            return
        if isinstance(desc, str):
            desc = desc.encode("utf-8")
        self._sendNow(MSG_DISCONNECT, struct.pack("!I", reason) + NS(desc) + NS(b""))
        self._closing = True
        assert self.transport is not None
        self._log.info("SSH disconnect sent to {peer}: {code} {reason}", peer=self._peer(),
                       code=reason, reason=desc.decode("utf-8", "replace"))
        self.transport.loseConnection()

    def receiveError(self, reasonCode: int, description: bytes) -> None:
        """
        The peer disconnected: its ordinary goodbye (C{BY_APPLICATION}) is
        logged at debug level, other reasons at info (conch logs all as
        errors).
        """
        log = self._log.debug if reasonCode == DISCONNECT_BY_APPLICATION else self._log.info
        log("SSH disconnect from {peer}: {code} {reason}", peer=self._peer(), code=reasonCode,
            reason=description[:_MAX_LOGGED_REASON].decode("utf-8", "replace"))

    def sendUnimplemented(self) -> None:
        """
        Answer the packet being dispatched with UNIMPLEMENTED (its sequence
        number, not the next one as conch sends).
        """
        self.sendPacket(MSG_UNIMPLEMENTED, struct.pack("!I", self._receivedSeq))

    def _peer(self) -> str:
        try:
            peer = self.transport.getPeer()  # type: ignore[union-attr]
        except AttributeError:  # no transport, or one without addresses
            return "?"
        return format_address(peer)

    def dataReceived(self, data: bytes) -> None:
        """
        Read the peer's version line, then its packets.
        """
        self.bytesReceived += len(data)
        if self._closing:
            return
        if not self.gotVersion:
            rest = self._readVersion(data)
            if rest is None:
                return
            data = rest
        if self._inpos == len(self._inbuf):
            self._inbuf, self._inpos = data, 0
        else:
            if not isinstance(self._inbuf, bytearray):
                self._inbuf = bytearray(memoryview(self._inbuf)[self._inpos :])
                self._inpos = 0
            self._inbuf += data
        self._readPackets()

    def _readVersion(self, data: bytes) -> bytes | None:
        """
        Buffer until the peer's C{SSH-} line (other lines before it are
        skipped, up to 4 KiB in all): the bytes after it, or L{None}.
        """
        buf = bytes(self._inbuf) + data
        start = 0
        while True:
            end = buf.find(b"\n", start)
            if end < 0:
                break
            line = buf[start:end].rstrip(b"\r")
            start = end + 1
            if line.startswith(b"SSH-"):
                self._inbuf, self._inpos = b"", 0
                self.gotVersion = True
                self.otherVersionString = line
                remote = line.split(b"-")[1]
                if remote not in self.supportedVersions:
                    self.sendDisconnect(DISCONNECT_PROTOCOL_VERSION_NOT_SUPPORTED,
                                        b"bad version " + remote)
                    return None
                return buf[start:]
        if len(buf) > _MAX_VERSION_EXCHANGE:
            self.sendDisconnect(DISCONNECT_CONNECTION_LOST, b"no SSH version line in 4 KiB")
            return None
        self._inbuf = buf
        return None

    def _readPackets(self) -> None:
        """
        Read and dispatch every whole packet buffered, while nothing stops
        reading (a disconnect, or NEWKEYS before our keys).
        """
        if self._reading:
            return
        self._reading = True
        try:
            while not (self._closing or self._newKeysPending):
                try:
                    got = self._opener.open(self._inbuf, self._inpos, self.incomingPacketSequence)
                except PacketError as e:
                    self.sendDisconnect(e.code, e.description.encode())
                    return
                if got is None:
                    break
                payload, self._inpos = got
                self._receivedSeq = self.incomingPacketSequence
                self.incomingPacketSequence = (self._receivedSeq + 1) & SEQUENCE_MASK
                self.dispatchMessage(payload[0], payload[1:])
        finally:
            self._reading = False
            if isinstance(self._inbuf, bytearray) and self._inpos:
                del self._inbuf[: self._inpos]
                self._inpos = 0

    def _refusal(self, messageNum: int) -> bytes | None:
        """
        Why the peer may not send message C{messageNum} now, or L{None}.
        """
        progressing = self._keyExchangeState == self._KEY_EXCHANGE_PROGRESSING
        why: str | None = None
        if messageNum == MSG_DISCONNECT:
            pass
        elif (self._strict and not self._initialKexDone
              and messageNum not in self._kexMethodMessages | _KEX_FLOW):
            why = (f"strict KEX violation: unexpected message {messageNum}"
                   f" (seqnr {self._receivedSeq})")
        elif _KEX_METHOD_FIRST <= messageNum <= _KEX_METHOD_LAST:
            if messageNum not in self._kexMethodMessages or not progressing or self._methodDone:
                why = f"unexpected key exchange message {messageNum}"
        elif messageNum == MSG_NEWKEYS:
            if not (progressing and self._methodDone):
                why = "unexpected NEWKEYS"
        elif messageNum == MSG_KEXINIT:
            if progressing:
                why = "unexpected KEXINIT during a key exchange"
        elif messageNum >= MSG_SERVICE_REQUEST and not self._initialKexDone:
            why = f"message {messageNum} before the key exchange ended"
        return None if why is None else why.encode()

    def dispatchMessage(self, messageNum: int, payload: bytes) -> None:
        """
        Refuse a message out of turn; hand the rest to conch, ending the
        connection on a transport message that cannot be read.
        """
        refusal = self._refusal(messageNum)
        if refusal is not None:
            self.sendDisconnect(DISCONNECT_PROTOCOL_ERROR, refusal)
            return
        if messageNum >= _SERVICE_FIRST:
            if self.service is None:
                self._log.debug("SSH message {number} with no service", number=messageNum)
                self.sendUnimplemented()
                return
            self.service.packetReceived(messageNum, payload)
            return
        name = messages.get(messageNum)
        handler = getattr(self, f"ssh_{name[4:]}", None) if name else None
        if handler is None:
            self._log.debug("SSH message {number} not handled", number=messageNum)
            self.sendUnimplemented()
            return
        try:
            handler(payload)
        except (ValueError, IndexError, KeyError, struct.error) as e:
            self._log.info("SSH message {number} from {peer} unreadable: {error}",
                           number=messageNum, peer=self._peer(), error=type(e).__name__)
            self.sendDisconnect(DISCONNECT_PROTOCOL_ERROR, f"bad message {messageNum}".encode())


class ServerTransport(SecureTransport, SSHServerTransport):
    """
    nfltr's SSH server transport.  Use it as an C{SSHFactory}'s protocol (the
    factory's host keys decide which host key algorithms are offered).

    @cvar pqOnly: offer only the post-quantum hybrid key exchange (clients
        need OpenSSH 9.9 or later); a constructor argument overrides it.
    """

    pqOnly = False
    _kexMethodMessages = frozenset({MSG_KEX_DH_GEX_REQUEST_OLD})

    def __init__(self, pqOnly: bool | None = None) -> None:
        super().__init__()
        if pqOnly is not None:
            self.pqOnly = pqOnly

    def _offeredKex(self) -> tuple[bytes, ...]:
        return PQ_KEX if self.pqOnly else PQ_KEX + CLASSIC_KEX

    def ssh_KEXINIT(self, packet: bytes) -> None:
        """
        The client's KEXINIT; a guessed first key exchange packet that
        guessed wrong is to be ignored.
        """
        theirs = self._receiveKexInit(packet)
        if theirs is None:
            return
        assert self._ourKexInit is not None
        if theirs.first_kex_packet_follows and guessed_wrong(theirs, self._ourKexInit):
            self.ignoreNextPacket = True

    def ssh_KEX_DH_GEX_REQUEST_OLD(self, packet: bytes) -> None:
        """
        Message 30: the client's ECDH or hybrid INIT (the only methods
        offered).
        """
        if self.ignoreNextPacket:
            self.ignoreNextPacket = False
            return
        self._methodDone = True
        if _kex.isPQHybrid(self.kexAlg):
            self._ssh_KEX_HYBRID_INIT(packet)
        else:
            self._ssh_KEX_ECDH_INIT(packet)
