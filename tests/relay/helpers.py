"""
Helpers for the relay's tests: an in-memory key store, and a relay whose
links are joined to real dialer L{LinkProtocol}s by L{twisted.test.iosim} on
one L{Clock}.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.test.iosim import FakeTransport, IOPump, connect
from zope.interface import implementer

from nfltr.link import DIALER, LISTENER, PREAMBLE, FrameType, LinkConfig
from nfltr.link.twisted import LinkProtocol
from nfltr.relay.link_handler import Relay, RelayLinkHandler
from nfltr.store import IStore, KeyInfo, SSHKeyInfo, StoreError, UnknownKey
from nfltr.wire.messages import AGENT_FEATURES, TcpShare, agent_hello, client_hello
from tests.link.twisted_helpers import RecordingHandler

_HEADER = struct.Struct("!BBII")


def key_text(keyid: str) -> str:
    """
    A well-formed API key with the given 12-hex-digit id.
    """
    return f"nfltr_{keyid}_" + "A" * 43


@implementer(IStore)
class FakeStore:
    """
    Keys in memory, behind the store's Deferred API (L{IStore}: what the
    relay does not use fails with L{StoreError}).

    @ivar hold: C{verify_key} returns unfired Deferreds, kept in C{held}.
    @ivar error: C{verify_key} and C{ssh_key_account} fail with it.
    """

    def __init__(self) -> None:
        self.keys: dict[str, KeyInfo] = {}
        #: The account of each SSH public key (its OpenSSH line).
        self.sshKeys: dict[str, str] = {}
        self.hold = False
        self.held: list[tuple[str, Deferred[KeyInfo | None]]] = []
        self.error: Exception | None = None
        self.rev = 0
        self.revocations: list[tuple[int, str]] = []
        self.revisionCalls = 0
        self.pendingRevision: Deferred[int] | None = None
        self.revisionError: Exception | None = None

    def addKey(self, keyid: str, account: str) -> str:
        """
        Store a key; return its text.
        """
        self.keys[key_text(keyid)] = KeyInfo(keyid, account, None, 0.0)
        return key_text(keyid)

    def revoke(self, keyid: str) -> None:
        """
        Revoke a key as another process would.
        """
        for text, info in self.keys.items():
            if info.keyid == keyid:
                self.keys[text] = replace(info, revoked_at=1.0)
        self.rev += 1
        self.revocations.append((self.rev, keyid))

    def verify_key(self, plaintext: str) -> Deferred[KeyInfo | None]:
        if self.hold:
            d: Deferred[KeyInfo | None] = Deferred()
            self.held.append((plaintext, d))
            return d
        if self.error is not None:
            return fail(self.error)
        return succeed(self.keys.get(plaintext))

    def release(self) -> None:
        """
        Fire the held verifications.
        """
        held, self.held = self.held, []
        for plaintext, d in held:
            d.callback(self.keys.get(plaintext))

    def revision(self) -> Deferred[int]:
        self.revisionCalls += 1
        if self.revisionError is not None:
            return fail(self.revisionError)
        if self.pendingRevision is not None:
            return self.pendingRevision
        return succeed(self.rev)

    def revoked_since(self, revision: int) -> Deferred[list[str]]:
        return succeed([k for rev, k in self.revocations if rev > revision])

    def list_keys(self, account: str | None = None) -> Deferred[list[KeyInfo]]:
        return succeed([k for k in self.keys.values() if account in (None, k.account)])

    def revoke_key(self, keyid: str) -> Deferred[KeyInfo]:
        if not any(k.keyid == keyid for k in self.keys.values()):
            return fail(UnknownKey(keyid))
        self.revoke(keyid)
        return succeed(next(k for k in self.keys.values() if k.keyid == keyid))

    def ssh_key_account(self, line: str) -> Deferred[str | None]:
        if self.error is not None:
            return fail(self.error)
        return succeed(self.sshKeys.get(line))

    def close(self) -> Deferred[None]:
        return succeed(None)

    def create_account(self, name: str) -> Deferred[Any]:
        return fail(StoreError("the test store keeps no accounts"))

    def list_accounts(self) -> Deferred[list[Any]]:
        return succeed([])

    def create_key(self, account: str, label: str | None = None) -> Deferred[Any]:
        return fail(StoreError("the test store's keys come from addKey"))

    def add_ssh_key(self, account: str, line: str, label: str | None = None
                    ) -> Deferred[SSHKeyInfo]:
        return fail(StoreError("the test store keeps no SSH keys"))

    def list_ssh_keys(self, account: str | None = None) -> Deferred[list[SSHKeyInfo]]:
        return succeed([])

    def remove_ssh_key(self, fingerprint: str) -> Deferred[SSHKeyInfo]:
        return fail(UnknownKey(fingerprint))


class RecordingTransport(FakeTransport):
    """
    An iosim transport that also keeps every byte written through it.
    """

    def __init__(self, protocol: Any, isServer: bool) -> None:
        super().__init__(protocol, isServer)
        self.written = bytearray()

    def write(self, data: bytes) -> None:
        if not self.disconnecting:
            self.written += data
        super().write(data)


def raw_frames(stream: bytes) -> list[bytes]:
    """
    Split what a listener wrote (its preamble, then frames; or frames from
    a frame boundary on) into the raw bytes of each frame.
    """
    frames, offset = [], len(PREAMBLE) if stream.startswith(PREAMBLE) else 0
    while offset < len(stream):
        _, _, _, length = _HEADER.unpack_from(stream, offset)
        end = offset + _HEADER.size + length
        frames.append(bytes(stream[offset:end]))
        offset = end
    return frames


def frames_of_type(stream: bytes, ftype: FrameType) -> list[bytes]:
    """
    The raw frames of one type in what a listener wrote.
    """
    return [f for f in raw_frames(stream) if f[0] == ftype]


@dataclass
class Dialer:
    """
    One dialer connected to the relay.

    @ivar link: the dialer's link.
    @ivar handler: records what the dialer received.
    @ivar relayLink: the relay's side of the link.
    @ivar relayIO: the relay side's transport, with everything it wrote.
    """

    link: LinkProtocol
    handler: RecordingHandler
    relayLink: LinkProtocol
    relayIO: RecordingTransport
    dialerIO: FakeTransport

    @property
    def controls(self) -> list[dict[str, Any]]:
        return self.handler.controls

    @property
    def closed(self) -> bool:
        return bool(self.handler.lost)

    def cut(self, reason: Exception) -> None:
        """
        Drop the connection under both ends without a goodbye.
        """
        for io in (self.dialerIO, self.relayIO):
            io.disconnectReason = reason
            io.disconnecting = io.disconnected = True
        self.link.connectionLost(Failure(reason))
        self.relayLink.connectionLost(Failure(reason))

    @property
    def relayHandler(self) -> RelayLinkHandler:
        handler = self.relayLink.handler
        assert isinstance(handler, RelayLinkHandler)
        return handler


class RelayHarness:
    """
    A L{Relay} with a L{FakeStore}; L{dial} connects real dialers to it.
    """

    def __init__(
        self, store: FakeStore | None = None, shares: Any = None, clock: Clock | None = None,
    ) -> None:
        self.clock = clock or Clock()
        self.store = store or FakeStore()
        self.relay = Relay(self.store, self.clock, shares)
        self.pumps: list[IOPump] = []
        self.logged: list[dict[str, Any]] = []
        self.logger = Logger(observer=self.logged.append)
        self.relay.log = self.logger

    def dial(
        self, app: dict[str, Any], handler: RecordingHandler | None = None,
        config: LinkConfig | None = None,
    ) -> Dialer:
        """
        Connect a dialer with hello C{app} (and link C{config}) and pump until
        quiet.
        """
        handler = handler or RecordingHandler()
        dialer = LinkProtocol(DIALER, handler, self.clock, config, app)
        relayHandler = RelayLinkHandler(self.relay)
        relayHandler.log = self.logger
        listener = LinkProtocol(LISTENER, relayHandler, self.clock)
        dialerIO = FakeTransport(dialer, isServer=False)
        listenerIO = RecordingTransport(listener, isServer=True)
        self.pumps.append(
            connect(listener, listenerIO, dialer, dialerIO, greet=False, clock=self.clock)
        )
        self.run()
        return Dialer(dialer, handler, listener, listenerIO, dialerIO)

    def agent(
        self, key: str, name: str = "web", ports: tuple[int, ...] = (3000,),
        handler: RecordingHandler | None = None, config: LinkConfig | None = None,
    ) -> Dialer:
        """
        Connect an agent.
        """
        return self.dial(agent_hello(key, name, [TcpShare(p) for p in ports]), handler, config)

    def client(self, key: str, handler: RecordingHandler | None = None) -> Dialer:
        """
        Connect a client.
        """
        return self.dial(client_hello(key), handler)

    def run(self, rounds: int = 100_000) -> None:
        """
        Pump every connection until nothing moves.
        """
        for _ in range(rounds):
            moved = [pump.pump() for pump in self.pumps]
            if not any(moved):
                return
        raise AssertionError("the links never went quiet")

    def messages(self) -> list[str]:
        """
        The text of every event the relay's handlers logged.
        """
        from twisted.logger import formatEvent

        return [formatEvent(e) for e in self.logged]


def lost_reason(failure: Failure | None) -> tuple[int, str] | None:
    """
    The code and reason of a session reset, from a protocol's
    C{connectionLost} failure.
    """
    if failure is None or not hasattr(failure.value, "code"):
        return None
    return failure.value.code, failure.value.reason


def without_token(controls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """
    The control messages an agent got, the data token of its welcome
    checked (32 hex digits) and left out, and so its features (C{update}).
    """
    result = []
    for received in controls:
        message = dict(received)
        token = message.pop("data_token", None)
        if message.get("type") == "welcome":
            assert isinstance(token, str) and len(token) == 32, token
            int(token, 16)
            assert message.pop("features") == list(AGENT_FEATURES), message
        result.append(message)
    return result


def share_relay(case: Any) -> tuple[Any, RelayHarness]:
    """
    A relay that publishes share URLs under C{localhost} (its registry
    made with a fresh PKI in C{case}'s temporary directory): the registry
    and the harness.
    """
    from pathlib import Path

    from nfltr.relay.leases import Leases
    from nfltr.relay.shares import ShareRegistry
    from nfltr.tls import ShareCA, ensure_relay_pki

    pki = ensure_relay_pki(Path(case.mktemp()), [], share_domain="localhost")
    clock = Clock()
    registry = ShareRegistry(ShareCA.load(pki, "localhost"), clock, (), Leases(60))
    return registry, RelayHarness(shares=registry, clock=clock)
